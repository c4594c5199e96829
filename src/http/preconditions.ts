import { etag, requireIfMatch } from '../domain/preconditions.ts';

/** `{ETag: ...}` header object for replies. */
export function etagHeader(kind: string, id: number | string, revision: number): Record<string, string> {
  return { etag: etag(kind, id, revision) };
}

/** The request's If-Match header checked against the current state of a resource (row locked). */
export function checkIfMatch(headers: Record<string, string>, kind: string, id: number | string, revision: number): void {
  requireIfMatch(headers['if-match'], kind, id, revision);
}
