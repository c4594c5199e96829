import { readFile } from 'node:fs/promises';
import { extname, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pageCsp } from './security-headers.ts';
import { staticFile, staticReply, type StaticReply } from './compression.ts';

// The web console (README "Console"): a single-page app built by `make console` (Vite, console/)
// into console/dist and served from there at /console by this process. Everything it loads comes
// from this origin: the CSP allows only 'self'. Paths that are not a built file get index.html, so
// the console's own routes (/console/classes/7, ...) survive a reload.
const DIST = fileURLToPath(new URL('../../console/dist/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.map': 'application/json',
  '.woff2': 'font/woff2',
};

export const CONSOLE_CSP = pageCsp({ style: "'self'", img: "'self' data:", font: "'self'" });

async function readIfFile(path: string) {
  try {
    return await readFile(path);
  } catch {
    return null;
  }
}

/**
 * The response for GET /console and everything under it (`path` is the request path); the hashed
 * assets in the content coding `acceptEncoding` prefers, or 304 when `ifNoneMatch` names them
 * (http/compression.ts).
 */
export async function serveConsole(path: string, acceptEncoding?: string, ifNoneMatch?: string): Promise<Response> {
  const headers = new Headers({ 'content-security-policy': CONSOLE_CSP });
  const rel = decodeURIComponent(path.replace(/^\/console\/?/, ''));
  const file = resolve(DIST, rel);
  // A built asset (never outside console/dist); the hashed names under assets/ never change.
  if (rel !== '' && file.startsWith(DIST.endsWith(sep) ? DIST : DIST + sep) && TYPES[extname(file)]) {
    const hashed = rel.startsWith('assets/');
    let reply: StaticReply | null;
    if (hashed) {
      // read once and kept with its compressed forms: a build never changes a file of a given name
      // (a rebuild while the process runs adds new names, and index.html, read at every request, names them)
      const asset = await staticFile(file);
      reply = asset && (await staticReply(asset, acceptEncoding, ifNoneMatch));
    } else {
      const bytes = await readIfFile(file);
      reply = bytes && { status: 200, body: bytes, headers: { 'content-length': String(bytes.byteLength) } };
    }
    if (reply) {
      headers.set('content-type', TYPES[extname(file)]!);
      headers.set('cache-control', hashed ? 'public, max-age=31536000, immutable' : 'no-cache');
      // (with the length, so that the request log line and a HEAD reply have it)
      for (const [name, value] of Object.entries(reply.headers)) headers.set(name, value);
      return new Response(reply.body, { status: reply.status, headers });
    }
    if (rel.startsWith('assets/')) {
      headers.set('content-type', 'application/json');
      return new Response(JSON.stringify({ error: 'Not Found', message: 'no such console asset' }), { status: 404, headers });
    }
  }
  const index = await readIfFile(resolve(DIST, 'index.html'));
  if (!index) {
    headers.set('content-type', 'application/json');
    const message = 'the console is not built: run `make console` (or `make run`, which builds it)';
    return new Response(JSON.stringify({ error: 'Service Unavailable', message }), { status: 503, headers });
  }
  headers.set('content-type', 'text/html; charset=utf-8');
  headers.set('cache-control', 'no-cache');
  return new Response(index, { headers });
}
