// Entity tags and the If-Match precondition of a write: pure rules, shared by the handlers (which
// read the header) and the write paths (which check it with the row locked).
import { ApiError, badRequest } from './errors.ts';

/** Strong, opaque entity tag: "svc-v1.<kind>.<base64url(id)>.<revision>". */
export function etag(kind: string, id: number | string, revision: number): string {
  return `"svc-v1.${kind}.${Buffer.from(String(id)).toString('base64url')}.${revision}"`;
}

const STRONG = /^"[\x21\x23-\x7e]*"$/;

/**
 * Parses If-Match: `*`, or a comma-separated list of up to 8 strong ETags. Weak or malformed
 * validators are 400. Returns null when the header is absent.
 */
export function parseIfMatch(header: string | undefined): '*' | string[] | null {
  if (header === undefined) return null;
  const value = header.trim();
  if (value === '*') return '*';
  const tags = value.split(',').map((s) => s.trim());
  if (tags.length === 0 || tags.length > 8) throw badRequest('If-Match takes *, or 1 to 8 strong entity tags');
  for (const t of tags) {
    if (t.startsWith('W/')) throw badRequest('If-Match takes strong entity tags only (weak validator given)');
    if (!STRONG.test(t)) throw badRequest('If-Match has a malformed entity tag');
  }
  return tags;
}

/**
 * The revisions of the resource `kind` `id` that an If-Match value (undefined: none given) accepts:
 * null for any (none given, or `*`), else the revisions its tags name for that resource (empty: none,
 * a 412 once the resource is found). Undefined for a malformed value, which requireIfMatch refuses
 * (400) once everything it answers first is decided.
 */
export function revisionsMatched(ifMatch: string | undefined, kind: string, id: number | string): number[] | null | undefined {
  let parsed: ReturnType<typeof parseIfMatch>;
  try {
    parsed = parseIfMatch(ifMatch);
  } catch {
    return undefined;
  }
  if (parsed === null || parsed === '*') return null;
  const prefix = etag(kind, id, 0).slice(0, -2); // the tag without its revision and closing quote
  const revisions: number[] = [];
  for (const tag of parsed) {
    const revision = tag.slice(prefix.length, -1);
    if (!tag.startsWith(prefix) || !/^[1-9]\d{0,9}$/.test(revision) || Number(revision) > 2 ** 31 - 1) continue;
    revisions.push(Number(revision));
  }
  return revisions;
}

/**
 * Checks an If-Match value (undefined: none given) against the current state of a resource (call
 * it with the row locked). A stale validator is 412 with reason stale_resource and the current ETag.
 */
export function requireIfMatch(ifMatch: string | undefined, kind: string, id: number | string, revision: number): void {
  const parsed = parseIfMatch(ifMatch);
  if (parsed === null || parsed === '*') return;
  const current = etag(kind, id, revision);
  if (!parsed.includes(current)) {
    throw new ApiError('precondition_failed', 'the resource has changed since the given entity tag', {
      reason: 'stale_resource',
      guidance: 'GET the resource again, reapply your change and retry with the new ETag',
      etag: current,
    });
  }
}
