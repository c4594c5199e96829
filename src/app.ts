import { Hono } from 'hono';
import type { Deps } from './deps.ts';
import { ApiError, reasonPhrase } from './domain/errors.ts';
import { ContractRouter, type Operation, type RawRequest } from './http/adapter.ts';
import { authenticate, type AuthInfo, type TokenLookup } from './http/auth.ts';
import type { App, Ctx, Reply } from './http/contract.ts';
import { handlers } from './handlers/index.ts';
import { serveDocsAsset } from './http/docs.ts';
import { serveConsole } from './http/console.ts';
import { clientIpOf } from './http/client-ip.ts';
import { translatePgError } from './db/pg-errors.ts';
import { learnTextOrder } from './db/text-order.ts';
import { tokenCache } from './services/token-cache.ts';
import { decodeUtf8Body, parseJsonBody, readRequestBody, refuseDeclaredTooLarge } from './http/input.ts';
import { beginRequest, endRequest, finishHeaders, observeRequests, requestFacts, type RequestFacts } from './http/request-log.ts';
import { httpInFlight } from './metrics.ts';
import { HandlerInput, RequestContext, queryRecord, urlParts, type UrlParts } from './http/request.ts';
import { spliceJsonTexts } from './domain/json-text.ts';

const JSON_TYPES = /^application\/(.+\+)?json$/;
/** The methods app.fetch serves without Hono (serveDirect). */
const DIRECT_METHODS: ReadonlySet<string> = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

/** The HTTP application: testable with app.fetch(new Request(...)) or served by @hono/node-server. */
export async function createApp(deps: Deps): Promise<App> {
  const router = new ContractRouter();
  const lookupToken = tokenLookup(deps);
  await tokenCache(deps).start();
  // Not awaited: until it answers (or if it fails), startswith filters keep their plain form.
  learnTextOrder(deps.sql).catch(() => undefined);
  const bodyLimit = deps.config.SVC_BODY_LIMIT_BYTES;
  const hono = new Hono();

  // request ids, security headers, HTTP metrics and the request log line
  hono.use('*', observeRequests(deps));

  hono.get('/docs/assets/:file', (c) => {
    requestFacts(c).route = '/docs/assets/{file}';
    return serveDocsAsset(c.req.param('file'), c.req.header('accept-encoding'), c.req.header('if-none-match'));
  });

  // The web console (README "Console"): its built files and, for its own routes, index.html.
  hono.get('/console', (c) => c.redirect('/console/', 301));
  hono.get('/console/*', (c) => {
    requestFacts(c).route = '/console/*';
    return serveConsole(c.req.path, c.req.header('accept-encoding'), c.req.header('if-none-match'));
  });

  hono.all('*', (c) => serveApi(c.req.raw, c.env, requestFacts(c), c.req.path, urlParts(c.req.url)));

  /**
   * An operation of the contract: dispatch, then the reply or the error rendered. Synchronous as
   * far as the request allows: an operation without a bearer token or a body to read whose
   * handler answers at once (`/healthz`) is answered in the same turn, without a promise, and
   * @hono/node-server then writes it at once as well. `path` is the one the security headers go by.
   */
  function serveApi(req: Request, env: unknown, facts: RequestFacts, path: string, url: UrlParts): Response | Promise<Response> {
    let reply: Reply | Promise<Reply>;
    if (req.method === 'HEAD') facts.head = true;
    try {
      reply = dispatch(req, env, facts, url);
    } catch (err) {
      reply = errorReply(err, deps, facts.requestId);
    }
    if (reply instanceof Promise) {
      return reply.then(
        (r) => renderOrError(facts, path, r),
        (err: unknown) => render(facts, path, errorReply(err, deps, facts.requestId)),
      );
    }
    return renderOrError(facts, path, reply);
  }

  function renderOrError(facts: RequestFacts, path: string, reply: Reply): Response {
    try {
      return render(facts, path, reply);
    } catch (err) {
      return render(facts, path, errorReply(err, deps, facts.requestId));
    }
  }

  /** Routes the request and runs its handler: a promise only where something is awaited. */
  function dispatch(req: Request, env: unknown, facts: RequestFacts, url: UrlParts): Reply | Promise<Reply> {
    const headers = req.headers;
    const method = req.method;
    // A declared body over the limit is refused before routing (a chunked one when it is read).
    if (method !== 'GET' && method !== 'HEAD') refuseDeclaredTooLarge(headers, env, bodyLimit);
    const contentType = (headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    const query = queryRecord(url.query);
    const raw: RawRequest = { method: method.toLowerCase(), path: url.path, query, headers, body: undefined, contentType };
    const op = router.match(raw);
    facts.route = op.path;
    const ctx = new RequestContext(deps, facts, op.operationId, req, clientIpOf(env, headers, deps.config.SVC_TRUSTED_PROXIES));
    const readsBody = op.hasBody && raw.method !== 'get' && raw.method !== 'head' && raw.method !== 'delete';
    if (readsBody) return authenticateAndRead(req, env, facts, op, raw, ctx);
    if (op.needsAuth) {
      const signingIn = signIn(op, raw, facts, ctx);
      if (signingIn) return signingIn.then(() => handle(op, raw, ctx));
    }
    return handle(op, raw, ctx);
  }

  /**
   * Authenticates the request's bearer token into ctx: at once when the token cache keeps the token
   * (and a non-administrator's grants, below), else a promise.
   */
  function signIn(op: Operation, raw: RawRequest, facts: RequestFacts, ctx: RequestContext): Promise<void> | undefined {
    const auth = authenticate(raw.headers.get('authorization') ?? undefined, lookupToken);
    if (auth instanceof Promise) return auth.then((a) => signedIn(op, raw, facts, ctx, a));
    return signedIn(op, raw, facts, ctx, auth);
  }

  function signedIn(op: Operation, raw: RawRequest, facts: RequestFacts, ctx: RequestContext, auth: AuthInfo): Promise<void> | undefined {
    ctx.auth = auth;
    facts.principalId = auth.principal.id;
    // A non-administrator's read tests collections against its grants as values (Authority.grants)
    // when this process has them in its token cache. Only reads (GET, HEAD and the structured
    // search, a POST that writes nothing): a write may change the tree its own later checks look
    // at, and stays with the grants its statements read.
    if (auth.isAdmin || !(raw.method === 'get' || raw.method === 'head' || READ_ONLY_POSTS.has(op.operationId))) return undefined;
    const grants = tokenCache(deps).grantSets(auth.principal.id);
    if (!(grants instanceof Promise)) {
      auth.grants = grants;
      return undefined;
    }
    return grants.then((g) => {
      auth.grants = g;
    });
  }

  /** A request with a body: its bearer token, then its body. */
  async function authenticateAndRead(
    req: Request,
    env: unknown,
    facts: RequestFacts,
    op: Operation,
    raw: RawRequest,
    ctx: RequestContext,
  ): Promise<Reply> {
    if (op.needsAuth) await signIn(op, raw, facts, ctx);
    const bytes = await readRequestBody(req, env, bodyLimit);
    if (bytes.length > 0) {
      const text = decodeUtf8Body(bytes);
      raw.body = raw.contentType === '' || JSON_TYPES.test(raw.contentType) ? parseJsonBody(text) : text;
    }
    return handle(op, raw, ctx);
  }

  function handle(op: Operation, raw: RawRequest, ctx: RequestContext): Reply | Promise<Reply> {
    const routed = router.validate(op, raw);
    const handler = handlers[routed.operationId] as (input: unknown, ctx: Ctx) => Reply | Promise<Reply>;
    return handler(new HandlerInput(routed.params, routed.query, raw.body, raw.headers, raw.contentType), ctx);
  }

  // Errors outside the catch-all route (middleware) get the same JSON error body.
  hono.onError((err, c) => {
    const facts = requestFacts(c) as RequestFacts | undefined;
    return render(facts, c.req.path, errorReply(err, deps, facts?.requestId));
  });

  /**
   * A request for an operation served without Hono: the same beginRequest / serveApi / endRequest
   * the Hono app runs for it (observeRequests, the catch-all route), without its Context and
   * middleware chain. Only for requests Hono would certainly hand to its catch-all route: GET (HEAD
   * is answered by Hono from the GET route, without the body) and the methods with a body, a path
   * that is not the console's or a docs asset, and a URL without `#` whose path has no `%` or `/.`
   * (Hono routes by the decoded path, and its c.req.path, which the security headers go by, is the
   * URL's as it is; a `%` in the query, as in an encoded filter value, changes neither).
   * A body is read by readRequestBody, straight from the connection when its length is declared.
   */
  function serveDirect(req: Request, env: unknown, url: UrlParts): Response | Promise<Response> {
    const started = performance.now();
    const facts = beginRequest(req.headers);
    httpInFlight.inc();
    let res: Response | Promise<Response>;
    try {
      res = serveApi(req, env, facts, url.path, url);
    } catch (err) {
      res = render(facts, url.path, errorReply(err, deps, facts.requestId));
    }
    if (res instanceof Promise) {
      return res.then(
        (r) => endDirect(req, facts, r, url.path, started),
        (err: unknown) => endDirect(req, facts, render(facts, url.path, errorReply(err, deps, facts.requestId)), url.path, started),
      );
    }
    return endDirect(req, facts, res, url.path, started);
  }

  function endDirect(req: Request, facts: RequestFacts, res: Response, path: string, started: number): Response {
    httpInFlight.dec();
    endRequest(deps, facts, res, req.method, path, started);
    return res;
  }

  const fetch = (req: Request, env?: unknown): Response | Promise<Response> => {
    if (DIRECT_METHODS.has(req.method)) {
      const url = req.url;
      // The path before the query: what Hono routes by (a `%` in the query changes nothing there).
      const q = url.indexOf('?');
      const beforeQuery = q < 0 ? url : url.slice(0, q);
      if (!beforeQuery.includes('%') && !url.includes('#') && !beforeQuery.includes('/.')) {
        const parts = urlParts(url);
        if (!parts.path.startsWith('/console') && !parts.path.startsWith('/docs/assets/')) return serveDirect(req, env, parts);
      }
    }
    return hono.fetch(req, env as never);
  };
  return { fetch, hono };
}

/** Operations that are POSTs only to carry a query body, and write nothing. */
const READ_ONLY_POSTS: ReadonlySet<string> = new Set(['searchStructured', 'searchStructuredStream']);

/**
 * How http/auth.ts finds a bearer token: this process's token cache (services/token-cache.ts, the
 * one deps holds at the time of the request), which reads db/tokens.ts validateTokenHash on a miss.
 */
function tokenLookup(deps: Deps): TokenLookup {
  return (raw) => tokenCache(deps).lookup(raw);
}

function errorReply(thrown: unknown, deps?: Deps, requestId?: string): Reply {
  const err = translatePgError(thrown);
  if (err instanceof ApiError) {
    const headers: Record<string, string> = {};
    if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(err.retryAfterSeconds);
    if (err.etag !== undefined) headers.etag = err.etag;
    if (err.allow !== undefined) headers.allow = err.allow;
    return { status: err.status, body: err.body(), headers };
  }
  deps?.log.error({ err, request_id: requestId }, 'unhandled error');
  return { status: 500, body: { error: reasonPhrase(500), message: 'internal server error' } };
}

/**
 * The Response of a reply. Its headers are a plain record, complete here (the request's ids and
 * the security headers included, http/request-log.ts finishHeaders, by the request `path`):
 * @hono/node-server writes such a response without building a Headers object.
 */
function render(facts: RequestFacts | undefined, path: string, reply: Reply): Response {
  const headers: Record<string, string> = {};
  if (reply.headers) {
    // Header names are case-insensitive: lowercase, repeated names joined (as Headers would).
    for (const [k, v] of Object.entries(reply.headers)) {
      const name = k.toLowerCase();
      headers[name] = headers[name] === undefined ? String(v) : `${headers[name]}, ${String(v)}`;
    }
  }
  let bytes: number;
  let body: BodyInit | null;
  if (reply.raw !== undefined) {
    headers['content-type'] = reply.contentType ?? 'application/octet-stream';
    const raw = reply.raw as unknown;
    bytes =
      typeof raw === 'string' ? Buffer.byteLength(raw) : raw instanceof Uint8Array || raw instanceof ArrayBuffer ? raw.byteLength : NaN;
    body = reply.raw as BodyInit;
    // A HEAD sends no body: a stream (server-sent events) is cancelled, so its producer stops.
    if (facts?.head && body instanceof ReadableStream) {
      void body.cancel();
      body = null;
    }
  } else if (reply.body === undefined || reply.status === 204 || reply.status === 304) {
    bytes = 0;
    body = null;
  } else {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(reply.body);
    if (reply.jsonTexts?.length) body = spliceJsonTexts(body, reply.jsonTexts);
    bytes = Buffer.byteLength(body);
  }
  if (facts) {
    if (!Number.isNaN(bytes)) {
      facts.bytes = bytes;
      // A HEAD's reply has no body to measure: the length its GET would send (not for 204 or 304).
      if (facts.head && body !== null) headers['content-length'] = String(bytes);
    }
    finishHeaders(facts, path, headers);
  }
  return new Response(body, { status: reply.status, headers });
}
