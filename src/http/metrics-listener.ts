// The metrics-only listener of SVC_METRICS_BIND: worker processes serve no API, so this is how they
// are scraped (any process may have one). GET /metrics under the same rules as the API's
// (http/metrics.ts); everything else 404 or 405.
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { Hono } from 'hono';
import type { Deps } from '../deps.ts';
import { ApiError, reasonPhrase, type ErrorBody } from '../domain/errors.ts';
import { METRICS_CONTENT_TYPE, renderMetrics } from '../metrics.ts';
import { codedDynamicBody } from './compression.ts';
import { clientIp } from './client-ip.ts';
import { checkMetricsAccess } from './metrics.ts';
import { serveApp, serveOptionsOf } from './server.ts';
import { SECURITY_HEADERS } from './security-headers.ts';

function errorResponse(err: ApiError, requestId: string): Response {
  return new Response(JSON.stringify(err.body()), {
    status: err.status,
    headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...SECURITY_HEADERS },
  });
}

/** The app of the SVC_METRICS_BIND listener: GET /metrics, nothing else. */
export function metricsOnlyApp(deps: Pick<Deps, 'config' | 'sql'>): Hono {
  const hono = new Hono();
  hono.get('/metrics', async (c) => {
    const requestId = randomUUID();
    try {
      checkMetricsAccess(deps.config, c.req.header('authorization'), clientIp(c, deps.config.SVC_TRUSTED_PROXIES));
    } catch (err) {
      return errorResponse(err as ApiError, requestId);
    }
    // gzipped for a scraper that accepts it, as Prometheus does (http/compression.ts)
    const coded = await codedDynamicBody(await renderMetrics(deps.sql), c.req.header('accept-encoding'));
    const headers: Record<string, string> = {
      'content-type': METRICS_CONTENT_TYPE,
      'x-request-id': requestId,
      'cache-control': 'no-store',
    };
    return new Response(coded.body, { headers: Object.assign(headers, coded.headers, SECURITY_HEADERS) });
  });
  hono.all('*', (c) => {
    const known = c.req.path === '/metrics';
    const body: ErrorBody = {
      error: reasonPhrase(known ? 405 : 404),
      message: known ? 'this method is not allowed on this path' : 'this listener serves GET /metrics only',
    };
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': randomUUID() };
    if (known) headers.allow = 'GET, HEAD';
    return new Response(JSON.stringify(body), { status: known ? 405 : 404, headers: Object.assign(headers, SECURITY_HEADERS) });
  });
  return hono;
}

/** Starts the SVC_METRICS_BIND listener; resolves once it listens. */
export async function serveMetrics(deps: Pick<Deps, 'config' | 'sql'>, host: string, port: number): Promise<Server> {
  const hono = metricsOnlyApp(deps);
  const server = serveApp({ fetch: (req, env) => hono.fetch(req, env as never), hono }, host, port, serveOptionsOf(deps.config)) as Server;
  await new Promise<void>((ok, fail) => {
    server.once('listening', () => ok());
    server.once('error', fail);
  });
  return server;
}
