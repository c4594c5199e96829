import { randomUUID } from 'node:crypto';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Deps } from './deps.ts';
import { ApiError, reasonPhrase } from './domain/errors.ts';
import { ContractRouter, type RawRequest } from './http/adapter.ts';
import { authenticate } from './http/auth.ts';
import type { Ctx, Reply } from './http/contract.ts';
import { handlers } from './handlers/index.ts';
import { serveDocsAsset } from './http/docs.ts';
import { clientIp } from './http/client-ip.ts';
import { translatePgError } from './db/pg-errors.ts';
import { decodeUtf8Body, parseJsonBody } from './http/input.ts';

const CORRELATION_ID = /^[A-Za-z0-9._:\-]{1,128}$/;
const JSON_TYPES = /^application\/(.+\+)?json$/;

export interface App {
  fetch: (req: Request, env?: unknown) => Response | Promise<Response>;
  hono: Hono;
}

/** The HTTP application: testable with app.fetch(new Request(...)) or served by @hono/node-server. */
export async function createApp(deps: Deps): Promise<App> {
  const router = new ContractRouter();
  await router.init();
  const hono = new Hono();

  hono.use('*', async (c, next) => {
    const requestId = randomUUID();
    c.set('requestId' as never, requestId as never);
    const started = performance.now();
    await next();
    c.res.headers.set('x-request-id', requestId);
    const correlationId = validCorrelationId(c.req.header('x-correlation-id'));
    if (correlationId) c.res.headers.set('x-correlation-id', correlationId);
    deps.log.debug(
      { request_id: requestId, method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(performance.now() - started) },
      'request',
    );
  });

  hono.use(
    '*',
    bodyLimit({
      maxSize: deps.config.SVC_BODY_LIMIT_BYTES,
      onError: (c) => render(c, errorReply(new ApiError('payload_too_large', 'the request body is too large'))),
    }),
  );

  hono.get('/docs/assets/:file', (c) => serveDocsAsset(c.req.param('file')));

  hono.all('*', async (c) => {
    const requestId = c.get('requestId' as never) as string;
    try {
      return render(c, await dispatch(c, requestId));
    } catch (err) {
      return render(c, errorReply(err, deps, requestId));
    }
  });

  async function dispatch(c: Context, requestId: string): Promise<Reply> {
    const url = new URL(c.req.url);
    const headers: Record<string, string> = {};
    c.req.raw.headers.forEach((v, k) => {
      headers[k] = v;
    });
    const contentType = (headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    const query: Record<string, string | string[]> = {};
    let count = 0;
    for (const [k, v] of url.searchParams) {
      if (++count > 128) throw new ApiError('bad_request', 'too many query parameters (at most 128)');
      const prev = query[k];
      query[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
    }
    const raw: RawRequest = { method: c.req.method.toLowerCase(), path: url.pathname, query, headers, body: undefined, contentType };
    const op = router.match(raw);
    const ctx: Ctx = {
      deps,
      auth: null,
      requestId,
      correlationId: validCorrelationId(headers['x-correlation-id']),
      clientIp: clientIp(c, deps.config.SVC_TRUSTED_PROXIES),
      operationId: op.operationId as Ctx['operationId'],
      signal: c.req.raw.signal,
    };
    if (router.needsAuth(op)) ctx.auth = await authenticate(deps, headers.authorization);

    if (op.requestBody && !['get', 'head', 'delete'].includes(raw.method)) {
      const bytes = await c.req.arrayBuffer().then(
        (b) => new Uint8Array(b),
        () => {
          throw new ApiError('bad_request', 'the request body could not be read to its end');
        },
      );
      if (bytes.length > 0) {
        const text = decodeUtf8Body(bytes);
        raw.body = contentType === '' || JSON_TYPES.test(contentType) ? parseJsonBody(text) : text;
      }
    }
    const routed = router.validate(op, raw);
    const handler = handlers[routed.operationId] as (input: unknown, ctx: Ctx) => Promise<Reply>;
    return handler({ params: routed.params, query: routed.query, body: raw.body, headers, contentType }, ctx);
  }

  // Errors outside the catch-all route (middleware) get the same JSON error body.
  hono.onError((err, c) => render(c, errorReply(err, deps, c.get('requestId' as never) as string | undefined)));

  return { fetch: (req, env) => hono.fetch(req, env as never), hono };
}

function validCorrelationId(value: string | undefined): string | null {
  return value !== undefined && CORRELATION_ID.test(value) ? value : null;
}

function errorReply(thrown: unknown, deps?: Deps, requestId?: string): Reply {
  const err = translatePgError(thrown);
  if (err instanceof ApiError) {
    const headers: Record<string, string> = {};
    if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(err.retryAfterSeconds);
    if (err.etag !== undefined) headers.etag = err.etag;
    return { status: err.status, body: err.body(), headers };
  }
  deps?.log.error({ err, request_id: requestId }, 'unhandled error');
  return { status: 500, body: { error: reasonPhrase(500), message: 'internal server error' } };
}

function render(c: Context, reply: Reply): Response {
  const headers = new Headers(reply.headers);
  if (reply.raw !== undefined) {
    headers.set('content-type', reply.contentType ?? 'application/octet-stream');
    return new Response(reply.raw as BodyInit, { status: reply.status, headers });
  }
  if (reply.body === undefined || reply.status === 204 || reply.status === 304) {
    return new Response(null, { status: reply.status, headers });
  }
  headers.set('content-type', 'application/json');
  return new Response(JSON.stringify(reply.body), { status: reply.status, headers });
}
