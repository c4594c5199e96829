// Validates every response a test receives against openapi.yaml: the status must be declared
// (or covered by `default`), the body must match the schema of its media type, and every
// declared required header must be present and valid.
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { OpenAPIRouter } from 'openapi-backend';
import { openapiDocument } from '../src/http/openapi.ts';
import { SchemaRegistry, escapePointer } from '../src/http/schemas.ts';

const registry = new SchemaRegistry();
const router = new OpenAPIRouter({ definition: openapiDocument() });

export class ContractViolation extends Error {}

/** Bytes as sent in a Content-Encoding (br or gzip, src/http/compression.ts), decoded. */
export function decodeBody(bytes: Buffer, coding: string | null | undefined): Buffer {
  if (!coding || !bytes.length) return bytes;
  if (coding === 'br') return brotliDecompressSync(bytes);
  if (coding === 'gzip') return gunzipSync(bytes);
  throw new ContractViolation(`a content coding the service does not send: ${coding}`);
}

/**
 * A response's body as text, decoded from its Content-Encoding: what a client that asked for the
 * coding reads. app.fetch hands the coded bytes over as they are.
 */
export async function decodedText(res: Response): Promise<string> {
  return decodeBody(Buffer.from(await res.arrayBuffer()), res.headers.get('content-encoding')).toString('utf8');
}

export interface CheckedResponse {
  status: number;
  headers: Headers;
  text: string;
  body: unknown;
  operationId: string;
}

export function checkResponse(method: string, path: string, status: number, headers: Headers, text: string): CheckedResponse {
  const op = router.matchOperation({ method: method.toLowerCase(), path, headers: {} });
  if (!op) {
    if (status === 404 || status === 405) return { status, headers, text, body: safeJson(text), operationId: '' };
    throw new ContractViolation(`${method} ${path}: no operation in openapi.yaml matches`);
  }
  const opPtr = `/paths/${escapePointer(op.path)}/${op.method}`;
  const responses = registry.at(`${opPtr}/responses`) as Record<string, unknown> | undefined;
  const key = responses?.[String(status)]
    ? String(status)
    : responses?.[`${String(status)[0]}XX`]
      ? `${String(status)[0]}XX`
      : responses?.default
        ? 'default'
        : undefined;
  const where = `${op.operationId} (${method} ${path}) → ${status}`;
  if (!key) throw new ContractViolation(`${where}: status not declared in openapi.yaml; body: ${text.slice(0, 300)}`);
  const [resp, respPtr] = registry.resolve(responses![key], `${opPtr}/responses/${escapePointer(key)}`);
  const content = resp.content as Record<string, { schema?: unknown }> | undefined;
  const contentType = (headers.get('content-type') ?? '').split(';')[0]!.trim();
  let body: unknown = undefined;
  if (content && Object.keys(content).length) {
    if (!text && status !== 204) throw new ContractViolation(`${where}: declared content but the body is empty`);
    const type = Object.keys(content).find((t) => t === contentType);
    if (!type) throw new ContractViolation(`${where}: content-type "${contentType}" not declared (${Object.keys(content).join(', ')})`);
    if (type.includes('json')) {
      body = safeJson(text);
      if (content[type]?.schema) {
        const v = registry.validatorAt(`${respPtr}/content/${escapePointer(type)}/schema`);
        if (!v(body))
          throw new ContractViolation(
            `${where}: body does not match the schema: ${JSON.stringify(v.errors?.slice(0, 5))}\nbody: ${text.slice(0, 500)}`,
          );
      }
    } else {
      body = text;
    }
  } else if (text) {
    throw new ContractViolation(`${where}: a body was sent but none is declared: ${text.slice(0, 200)}`);
  }
  const declared = (resp.headers ?? {}) as Record<string, unknown>;
  for (const [name, h] of Object.entries(declared)) {
    const [header, hPtr] = registry.resolve(h, `${respPtr}/headers/${escapePointer(name)}`);
    const value = headers.get(name);
    if (value === null) {
      if (header.required) throw new ContractViolation(`${where}: required header ${name} is missing`);
      continue;
    }
    const schema = header.schema as { type?: string } | undefined;
    if (schema) {
      const v = registry.validatorAt(`${hPtr}/schema`);
      const typed =
        schema.type === 'integer' || schema.type === 'number' ? Number(value) : schema.type === 'boolean' ? value === 'true' : value;
      if (!v(typed)) throw new ContractViolation(`${where}: header ${name}="${value}" does not match its schema`);
    }
  }
  if (!headers.get('x-request-id')) throw new ContractViolation(`${where}: x-request-id header is missing`);
  return { status, headers, text, body, operationId: op.operationId ?? '' };
}

function safeJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return text;
  }
}
