// The generated part of the shipped TypeScript SDK (clients/typescript/generated/): the openapi-typescript
// types of openapi.yaml as the SDK's openapi-fetch client uses them, and the operationId → method and
// path table its `call` and `paginate` look operations up in. Written by codegen/generate.ts, so
// `make check` fails when the SDK lags the contract.
import { join } from 'node:path';
import YAML from 'yaml';
import openapiTS, { astToString } from 'openapi-typescript';

const HEADER = '// DO NOT EDIT: written by codegen/generate.ts from openapi.yaml (make codegen).\n';
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;

interface Response {
  $ref?: string;
  headers?: Record<string, unknown>;
}
interface Op {
  operationId?: string;
  responses?: Record<string, Response>;
}
interface Doc {
  paths: Record<string, Record<string, unknown>>;
  components?: { responses?: Record<string, Response>; schemas?: Record<string, { enum?: string[] }> };
}

/** The contract's PermissionName enum as a runtime list, in its order (the types only give a union). */
export function permissionNamesSource(doc: Doc): string {
  const names = doc.components?.schemas?.PermissionName?.enum;
  if (!names?.length) throw new Error('openapi.yaml has no components.schemas.PermissionName enum');
  return (
    "/** Every collection permission (components.schemas.PermissionName), in the contract's order. */\n" +
    `export const PERMISSION_NAMES = [\n${names.map((n) => `  '${n}',`).join('\n')}\n] as const;\n`
  );
}

/**
 * openapi-typescript's options for the SDK. `defaultNonNullable: false`: a request member that has a
 * `default` (identity_scope, description, include_total, ...) stays optional, as the contract means
 * it; with the generator's default (true) every such member would have to be passed.
 */
export const SDK_TYPE_OPTIONS = { alphabetize: true, defaultNonNullable: false } as const;

/** The SDK's generated files: [path, content] pairs under clients/typescript/generated/. */
export async function sdkFiles(root: string, specText: string): Promise<[string, string][]> {
  // Parsed here: openapi-typescript annotates the document it is given (discriminator descriptions),
  // so a document another run has seen would give other output.
  const ast = await openapiTS(YAML.parse(specText) as never, SDK_TYPE_OPTIONS);
  const schema = HEADER + '/* eslint-disable */\n' + astToString(ast);

  const doc = YAML.parse(specText) as Doc;
  const rows: string[] = [];
  const paged: string[] = [];
  for (const [path, item] of Object.entries(doc.paths).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    for (const method of METHODS) {
      const op = item[method] as Op | undefined;
      if (!op?.operationId) continue;
      rows.push(`  ${op.operationId}: { method: '${method}', path: '${path}' },`);
      const ok = op.responses?.['200'];
      const resolved = ok?.$ref ? doc.components?.responses?.[ok.$ref.split('/').pop()!] : ok;
      if (resolved?.headers?.['X-Next-Cursor']) paged.push(`  '${op.operationId}',`);
    }
  }
  const operations =
    HEADER +
    '/** Every operation of openapi.yaml by operationId: its HTTP method and path template. */\n' +
    `export const OPERATIONS = {\n${rows.join('\n')}\n} as const;\n\n` +
    'export type OperationId = keyof typeof OPERATIONS;\n\n' +
    '/** The operations whose success response carries X-Next-Cursor (what `paginate` walks through). */\n' +
    `export const PAGED_OPERATIONS = [\n${paged.join('\n')}\n] as const;\n\n` +
    permissionNamesSource(doc);

  const dir = join(root, 'clients', 'typescript', 'generated');
  return [
    [join(dir, 'schema.ts'), schema],
    [join(dir, 'operations.ts'), operations],
  ];
}
