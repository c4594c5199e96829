// Request input that is hostile but ordinary: bytes that are not UTF-8, JSON nested deep enough to
// exhaust the stack of every recursive consumer, percent-encoding that decodeURIComponent refuses,
// NUL characters, which PostgreSQL text and jsonb refuse (SQLSTATE 22021), and unpaired surrogates.
// Each is turned into a 400 here, once, before any handler runs.
import { MAX_JSON_DEPTH } from '../domain/json-patch.ts';
import { ApiError, type ErrorDetail } from '../domain/errors.ts';

/**
 * Arrays and objects a JSON request body may nest. A stored value nests at most MAX_JSON_DEPTH;
 * the rest is room for the containers a body wraps around it (JSON Patch operations, import
 * graphs, backup documents).
 */
export const MAX_BODY_DEPTH = MAX_JSON_DEPTH + 16;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The body as text; 400 when it is not UTF-8 (rather than storing U+FFFD in its place). */
export function decodeUtf8Body(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw new ApiError('bad_request', 'the request body is not valid UTF-8', { reason: 'invalid_encoding' });
  }
}

/** JSON.parse after a scan of the raw text for nesting deeper than MAX_BODY_DEPTH. */
export function parseJsonBody(text: string): unknown {
  if (jsonDepthExceeds(text, MAX_BODY_DEPTH)) {
    throw new ApiError('bad_request', `the request body nests more than ${MAX_BODY_DEPTH} arrays and objects`, {
      reason: 'limit_exceeded',
      details: [{ path: 'body', message: `nests more than ${MAX_BODY_DEPTH} arrays and objects` }],
    });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ApiError('bad_request', 'the request body is not valid JSON', { reason: 'malformed_json' });
  }
}

/**
 * Whether brackets outside strings nest deeper than `max`. Linear and without recursion; text
 * that is not JSON is left to JSON.parse.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++;
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) {
      inString = true;
    } else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max) return true;
    } else if (ch === 0x5d || ch === 0x7d) {
      depth--;
    }
  }
  return false;
}

const NUL_MESSAGE = 'must not contain the NUL character (U+0000)';
// A JSON escape such as "\ud800" decodes to half a surrogate pair, which UTF-8 cannot encode:
// text columns would store U+FFFD in its place and jsonb refuses it.
const LONE_SURROGATE = /[\ud800-\udfff]/u;
const SURROGATE_MESSAGE = 'must not contain an unpaired surrogate (\\ud800-\\udfff escape)';

function stringProblem(s: string): string | undefined {
  if (s.includes('\u0000')) return NUL_MESSAGE;
  if (LONE_SURROGATE.test(s)) return SURROGATE_MESSAGE;
  return undefined;
}

/**
 * Where a JSON value holds a string or member name PostgreSQL cannot store (NUL, an unpaired
 * surrogate), as `body.a.b.0` paths (at most 20). Nearly every body holds none: it is scanned once
 * without making any path, and the paths are made only when there is something to report.
 */
export function stringDetails(value: unknown, path: string): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  if (holdsUnstorable(value)) collectStringDetails(value, path, out, 20);
  return out;
}

function holdsUnstorable(value: unknown): boolean {
  if (typeof value === 'string') return stringProblem(value) !== undefined;
  if (Array.isArray(value)) return value.some(holdsUnstorable);
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) if (stringProblem(k) !== undefined || holdsUnstorable(v)) return true;
  }
  return false;
}

function collectStringDetails(value: unknown, path: string, out: ErrorDetail[], limit: number): void {
  if (out.length >= limit) return;
  if (typeof value === 'string') {
    const problem = stringProblem(value);
    if (problem) out.push({ path, message: problem });
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => collectStringDetails(v, `${path}.${i}`, out, limit));
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const at = `${path}.${printable(k)}`;
      const problem = stringProblem(k);
      if (problem) {
        out.push({ path: at, message: `member name ${problem}` });
        if (out.length >= limit) return;
      }
      collectStringDetails(v, at, out, limit);
    }
  }
}

/** Query parameter names and values holding NUL. */
export function queryNulDetails(query: Record<string, string | string[]>): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  for (const [k, v] of Object.entries(query)) {
    if (k.includes('\u0000')) out.push({ path: `query.${printable(k)}`, message: `parameter name ${NUL_MESSAGE}` });
    if (Array.isArray(v) ? v.some((item) => item.includes('\u0000')) : v.includes('\u0000'))
      out.push({ path: `query.${printable(k)}`, message: NUL_MESSAGE });
  }
  return out;
}

/**
 * Decodes the templated segments of `path` (matched against `template`, e.g.
 * `/api/v1/classes/by-name/{name}`): malformed percent-encoding or a decoded NUL is a detail of
 * `path.<name>`. Literal segments matched the route as they are.
 */
export function pathDetails(template: string, path: string): ErrorDetail[] {
  const tpl = template.split('/');
  const segs = path.split('/');
  const out: ErrorDetail[] = [];
  for (let i = 0; i < tpl.length; i++) {
    const m = /^\{(.+)\}$/.exec(tpl[i]!);
    if (!m) continue;
    const at = `path.${m[1]}`;
    let decoded: string;
    try {
      decoded = decodeURIComponent(segs[i] ?? '');
    } catch {
      out.push({ path: at, message: 'is not valid percent-encoded UTF-8' });
      continue;
    }
    if (decoded.includes('\u0000')) out.push({ path: at, message: NUL_MESSAGE });
  }
  return out;
}

/** A name as it can appear in an error path: control characters and lone surrogates escaped, at most 64 characters. */
function printable(s: string): string {
  const escaped = s.replace(/[\u0000-\u001f\u007f]|[\ud800-\udfff]/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return escaped.length > 64 ? `${escaped.slice(0, 64)}…` : escaped;
}

/**
 * The request body's bytes, at most `max` of them (SVC_BODY_LIMIT_BYTES): a declared
 * Content-Length over the limit is a 413 before anything is read (refuseDeclaredTooLarge), a body sent
 * in chunks is read up to the limit and refused (413) as soon as it passes it. A body that ends
 * early (the client went away) is a 400. With Content-Length the bytes are read straight from the
 * connection (@hono/node-server's direct read: no web stream, no Request copy); on a 413 the
 * connection is closed after the response (`env.outgoing`), since the rest of the body is not read.
 */
export async function readRequestBody(req: Request, env: unknown, max: number): Promise<Uint8Array> {
  refuseDeclaredTooLarge(req.headers, env, max);
  if (req.headers.get('transfer-encoding') === null) {
    const bytes = new Uint8Array(await req.arrayBuffer().catch(unreadableBody));
    // Only a Request made in process (app.fetch) has a body of undeclared length here.
    if (bytes.byteLength > max) throw tooLarge(env);
    return bytes;
  }
  const body = req.body;
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read().catch(unreadableBody);
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      void reader.cancel().catch(() => undefined);
      throw tooLarge(env);
    }
    chunks.push(value);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/** 413 for a Content-Length over `max` (without Transfer-Encoding, which would override it). */
export function refuseDeclaredTooLarge(headers: Pick<Headers, 'get'>, env: unknown, max: number): void {
  const declared = headers.get('content-length');
  if (declared !== null && headers.get('transfer-encoding') === null && Number.parseInt(declared, 10) > max) throw tooLarge(env);
}

function tooLarge(env: unknown): ApiError {
  (env as { outgoing?: { setHeader?(name: string, value: string): void } } | undefined)?.outgoing?.setHeader?.('connection', 'close');
  return new ApiError('payload_too_large', 'the request body is too large');
}

function unreadableBody(): never {
  throw new ApiError('bad_request', 'the request body could not be read to its end');
}
