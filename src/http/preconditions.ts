import { etag, requireIfMatch } from '../domain/preconditions.ts';

/** `{ETag: ...}` header object for replies, with `extra` headers after it. */
export function etagHeader(kind: string, id: number | string, revision: number, extra?: Record<string, string>): Record<string, string> {
  // The spread last: members after a spread make V8 build a new hidden class per call (eslint.config.js).
  return { etag: etag(kind, id, revision), ...extra };
}

/** The request's If-Match header checked against the current state of a resource (row locked). */
export function checkIfMatch(headers: Record<string, string>, kind: string, id: number | string, revision: number): void {
  requireIfMatch(headers['if-match'], kind, id, revision);
}
