// Headers every response carries, whatever answered it.
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/**
 * A page served by this service (the docs, the console) loads its scripts and makes its requests
 * only here, and is never framed, given a base or a plugin; `allowances` are its other directives.
 */
export function pageCsp(allowances: { style: string; img: string; font: string }): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    `style-src ${allowances.style}`,
    `img-src ${allowances.img}`,
    `font-src ${allowances.font}`,
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The API reference page (/docs) runs only its own assets (swagger-ui-dist, served from
 * /docs/assets; the page has no inline script) and talks only to this origin. Swagger UI sets
 * style attributes and uses data: images, hence those two allowances.
 */
export const DOCS_CSP = pageCsp({ style: "'self' 'unsafe-inline'", img: "'self' data: blob:", font: "'self' data:" });

/** Every API response: the JSON and text answers are never to be framed or run as a page. */
export const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/**
 * Sets the security headers on a response: nosniff and no-referrer always; the CSP of the docs
 * page on /docs and its assets, the API's elsewhere; `Cache-Control: no-store` when the request was
 * authenticated or carried credentials (unless the handler chose a Cache-Control itself).
 */
export function applySecurityHeaders(headers: Headers, path: string, credentialed: boolean): void {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) headers.set(k, v);
  if (!headers.has('content-security-policy')) {
    headers.set('content-security-policy', path === '/docs' || path.startsWith('/docs/') ? DOCS_CSP : API_CSP);
  }
  if (credentialed && !headers.has('cache-control')) headers.set('cache-control', 'no-store');
}

/** applySecurityHeaders on a record of lowercase header names. */
export function securityHeaders(headers: Record<string, string>, path: string, credentialed: boolean): void {
  for (const k in SECURITY_HEADERS) headers[k] = SECURITY_HEADERS[k]!;
  headers['content-security-policy'] ??= path === '/docs' || path.startsWith('/docs/') ? DOCS_CSP : API_CSP;
  if (credentialed) headers['cache-control'] ??= 'no-store';
}
