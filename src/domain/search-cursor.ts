// Search cursors: the last row's sort values, signed with an HMAC (key derived from the token
// hash key) over the values and a binding: the canonical request, the principal, the token id
// and the token revision. A cursor therefore cannot be forged, and reusing it with a changed
// expression, sort, limit, target, class or token fails verification (400).
//   cursor = base64url(JSON [values]) "." base64url(HMAC-SHA-256(key, payload "\n" binding))
import { createHmac, timingSafeEqual } from 'node:crypto';
import { badRequest } from './errors.ts';

/** Longest cursor handed out; a sort value that does not fit is a 400 (spec: too large for a reusable cursor). */
export const MAX_CURSOR_LENGTH = 4096;

export interface CursorBinding {
  canonical: string;
  principalId: number;
  tokenId: number;
  tokenRevision: number;
}

function cursorKey(tokenKey: Buffer): Buffer {
  return createHmac('sha256', tokenKey).update('svc-search-cursor-v1').digest();
}

function mac(tokenKey: Buffer, payload: string, b: CursorBinding): Buffer {
  return createHmac('sha256', cursorKey(tokenKey))
    .update(payload)
    .update('\n')
    .update(JSON.stringify([b.canonical, b.principalId, b.tokenId, b.tokenRevision]))
    .digest();
}

/** Signs the sort values of the last row; 400 when the cursor would be too large to reuse. */
export function signCursor(tokenKey: Buffer, values: unknown[], binding: CursorBinding): string {
  const payload = Buffer.from(JSON.stringify(values)).toString('base64url');
  const cursor = `${payload}.${mac(tokenKey, payload, binding).toString('base64url')}`;
  if (cursor.length > MAX_CURSOR_LENGTH)
    throw badRequest('a sort value of this page is too large to form a reusable cursor; sort by another field or narrow the query', [
      { path: 'body.sort', message: 'sort value too large for a cursor' },
    ]);
  return cursor;
}

/** Verifies a cursor against the current request and token; returns the sort values or throws 400. */
export function verifyCursor(tokenKey: Buffer, cursor: string, binding: CursorBinding, keys: number, param = 'body.cursor'): unknown[] {
  const invalid = () =>
    badRequest('invalid cursor: pass back the next cursor unchanged, with the identical request and the same token', [
      { path: param, message: 'invalid cursor' },
    ]);
  if (cursor.length > MAX_CURSOR_LENGTH) throw invalid();
  const m = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(cursor);
  if (!m) throw invalid();
  const expected = mac(tokenKey, m[1]!, binding);
  const given = Buffer.from(m[2]!, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(m[1]!, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(values) || values.length !== keys) throw invalid();
  for (const v of values) if (v !== null && typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') throw invalid();
  return values;
}
