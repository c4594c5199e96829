// A page of a list as the contract answers it: the JSON array body and the paging headers.

/** The paging headers of a list reply: X-Page-Limit, X-Next-Cursor (when more), X-Total-Count (when asked). */
export function pageHeaders(page: { nextCursor: string | null; total: number | null; limit: number }): Record<string, string> {
  const h: Record<string, string> = { 'x-page-limit': String(page.limit) };
  if (page.nextCursor) h['x-next-cursor'] = page.nextCursor;
  if (page.total !== null) h['x-total-count'] = String(page.total);
  return h;
}

/** A 200 list reply with a bare JSON array body and the paging headers. */
export function listReply<T>(
  page: { nextCursor: string | null; total: number | null; limit: number },
  body: T[],
): { status: 200; body: T[]; headers: Record<string, string> } {
  return { status: 200, body, headers: pageHeaders(page) };
}
