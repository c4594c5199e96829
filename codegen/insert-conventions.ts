// Inserts into openapi.yaml, as text at the places the parser reports (the rest of the file is left
// as it is written), what every operation can produce or take but had not declared:
//   - 405 (a method the path does not take: a client built from another version of the contract),
//   - 503 (`database_busy`, on every operation that reads the database),
//   - 415 (on every operation that takes a body),
//   - the `X-Correlation-ID` and `X-Request-Id` request headers,
//   - `X-Request-Id` and `X-Correlation-ID` on every inline response.
// Idempotent; test/spec-generators.test.ts fails when an operation lacks any of these, and running
// `npx tsx codegen/insert-conventions.ts` adds them.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML, { isMap, isSeq, isScalar, type Pair, type YAMLMap, type YAMLSeq } from 'yaml';

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];
/** Operations that never touch the database (no 503 `database_busy`). */
export const NO_DATABASE = new Set(['getHealth', 'getOpenApiDocument', 'getApiReference']);
/** The request headers every operation takes (components/parameters), in the order they are appended. */
export const REQUEST_HEADER_PARAMETERS = ['XCorrelationId', 'XRequestId'];

interface Insert {
  at: number;
  text: string;
}

const keyOf = (p: Pair) => (isScalar(p.key) ? String(p.key.value) : '');
const lineStart = (text: string, offset: number) => text.lastIndexOf('\n', offset - 1) + 1;
const column = (text: string, offset: number) => offset - lineStart(text, offset);

/** The offset right after the last line of a block node (and of comment lines closing it, such as a generated block's END marker). */
function afterNode(text: string, node: { range?: [number, number, number] | null }): number {
  const end = node.range![1];
  let at = text[end - 1] === '\n' ? end : text.indexOf('\n', end) + 1;
  while (at < text.length && text.slice(at, text.indexOf('\n', at)).trim().startsWith('#')) at = text.indexOf('\n', at) + 1;
  return at;
}

function lines(indent: number, body: string[]): string {
  return body.map((l) => ' '.repeat(indent) + l + '\n').join('');
}

export function insertConventions(text: string): string {
  const doc = YAML.parseDocument(text);
  const inserts: Insert[] = [];
  const paths = doc.get('paths') as YAMLMap;
  for (const pathPair of paths.items as Pair[]) {
    const item = pathPair.value as YAMLMap;
    for (const opPair of item.items as Pair[]) {
      if (!METHODS.includes(keyOf(opPair))) continue;
      const op = opPair.value as YAMLMap;
      const opId = String(op.get('operationId'));
      const opIndent = column(text, (op.items[0] as Pair<{ range: [number, number, number] }>).key.range[0]);
      const responses = op.get('responses') as YAMLMap;
      const responsesPair = (op.items as Pair[]).find((p) => keyOf(p) === 'responses')!;

      // X-Correlation-ID and X-Request-Id: appended to the operation's own parameters (positional
      // clients keep their order).
      const params = op.get('parameters') as YAMLSeq | undefined;
      const lacking = REQUEST_HEADER_PARAMETERS.filter(
        (c) => !params?.items.some((p) => isMap(p) && p.get('$ref') === `#/components/parameters/${c}`),
      ).map((c) => `- $ref: "#/components/parameters/${c}"`);
      if (params && isSeq(params) && lacking.length) {
        const first = params.items[0] as { range: [number, number, number] };
        inserts.push({ at: afterNode(text, params), text: lines(column(text, first.range[0]) - 2, lacking) });
      } else if (!params) {
        inserts.push({
          at: lineStart(text, (responsesPair.key as { range: [number, number, number] }).range[0]),
          text: lines(opIndent, ['parameters:', ...lacking.map((l) => `  ${l}`)]),
        });
      }

      // Responses every operation can produce.
      const codes = new Set((responses.items as Pair[]).map(keyOf));
      const first = (responses.items[0] as Pair<{ range: [number, number, number] }>).key.range[0];
      const rIndent = column(text, first);
      const defaultPair = (responses.items as Pair[]).find((p) => keyOf(p) === 'default');
      const before = defaultPair
        ? lineStart(text, (defaultPair.key as { range: [number, number, number] }).range[0])
        : afterNode(text, responses);
      const add: string[] = [];
      const want: [string, string, boolean][] = [
        ['405', 'MethodNotAllowed', true],
        ['415', 'UnsupportedMediaType', op.has('requestBody')],
        ['503', 'ServiceUnavailable', !NO_DATABASE.has(opId)],
      ];
      for (const [code, component, applies] of want) {
        if (applies && !codes.has(code)) add.push(`"${code}":`, `  $ref: "#/components/responses/${component}"`);
      }
      if (add.length) inserts.push({ at: before, text: lines(rIndent, add) });

      // X-Request-Id and X-Correlation-ID on every inline response.
      for (const rPair of responses.items as Pair[]) {
        const r = rPair.value;
        if (!isMap(r) || r.has('$ref')) continue;
        const headers = r.get('headers') as YAMLMap | undefined;
        const keyIndent = column(text, (r.items[0] as Pair<{ range: [number, number, number] }>).key.range[0]);
        const entries = (name: string, component: string) => [`${name}:`, `  $ref: "#/components/headers/${component}"`];
        if (headers && isMap(headers)) {
          const missing = [
            ...(headers.has('X-Request-Id') ? [] : entries('X-Request-Id', 'XRequestId')),
            ...(headers.has('X-Correlation-ID') ? [] : entries('X-Correlation-ID', 'XCorrelationId')),
          ];
          const h0 = (headers.items[0] as Pair<{ range: [number, number, number] }>).key.range[0];
          if (missing.length) inserts.push({ at: lineStart(text, h0), text: lines(column(text, h0), missing) });
        } else {
          const contentPair = (r.items as Pair[]).find((p) => keyOf(p) === 'content');
          const at = contentPair ? lineStart(text, (contentPair.key as { range: [number, number, number] }).range[0]) : afterNode(text, r);
          inserts.push({
            at,
            text: lines(keyIndent, [
              'headers:',
              ...[...entries('X-Request-Id', 'XRequestId'), ...entries('X-Correlation-ID', 'XCorrelationId')].map((l) => `  ${l}`),
            ]),
          });
        }
      }
    }
  }
  let out = text;
  for (const ins of inserts.sort((a, b) => b.at - a.at)) out = out.slice(0, ins.at) + ins.text + out.slice(ins.at);
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = join(dirname(fileURLToPath(import.meta.url)), '..', 'openapi.yaml');
  for (;;) {
    const current = readFileSync(file, 'utf8');
    const next = insertConventions(current);
    if (next === current) break;
    // Others edit openapi.yaml too: write only over the text this was computed from.
    if (readFileSync(file, 'utf8') !== current) continue;
    writeFileSync(file, next);
    break;
  }
}
