// A page of a list as the contract answers it: the JSON array body and the paging headers.

/** The paging headers of a list reply: X-Page-Limit, X-Next-Cursor (when more), X-Total-Count (when asked). */
export function pageHeaders(page: { nextCursor: string | null; total: number | null; limit: number }): Record<string, string> {
  const h: Record<string, string> = { 'x-page-limit': String(page.limit) };
  if (page.nextCursor) h['x-next-cursor'] = page.nextCursor;
  if (page.total !== null) h['x-total-count'] = String(page.total);
  return h;
}

/**
 * A 200 list reply with a bare JSON array body and the paging headers; `jsonTexts`, the JSON texts
 * the body's placeholders stand for (domain/json-text.ts), when it has them.
 */
export function listReply<T>(
  page: { nextCursor: string | null; total: number | null; limit: number },
  body: T[],
  jsonTexts?: string[],
): { status: 200; body: T[]; headers: Record<string, string>; jsonTexts?: string[] } {
  // One literal either way: members added after a spread of this reply would make V8 build a new
  // hidden class per call (eslint.config.js).
  return jsonTexts ? { status: 200, body, headers: pageHeaders(page), jsonTexts } : { status: 200, body, headers: pageHeaders(page) };
}
