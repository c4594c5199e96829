// What the app records of every request: its ids (an incoming valid X-Request-Id is kept), the
// security headers of its response, the HTTP metrics, and one INFO log line:
//   request_id, correlation_id, method, route (the OpenAPI path template, never the path: paths
//   hold names), status, duration_ms, principal_id, bytes of the body sent (null for a streamed
//   body, 0 for a HEAD).
// Never a header value other than the two ids, a query string or a body: nothing that could hold
// a token, password or secret.
import { randomUUID } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import type { Deps } from '../deps.ts';
import { HTTP_METHODS, httpInFlight, recordRequest } from '../metrics.ts';
import { applySecurityHeaders, securityHeaders } from './security-headers.ts';
import { writeInfoLine } from '../log.ts';

/** X-Request-Id and X-Correlation-ID: 1 to 128 of `A-Z a-z 0-9 . _ : -`. */
const HEADER_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const METHODS: ReadonlySet<string> = new Set(HTTP_METHODS);
export const UNMATCHED_ROUTE = 'unmatched';

export function validHeaderId(value: string | undefined): string | null {
  return value !== undefined && HEADER_ID.test(value) ? value : null;
}

/** What the layers below the middleware learn about a request and the log line reports. */
export interface RequestFacts {
  requestId: string;
  correlationId: string | null;
  /** The OpenAPI path template of the matched operation, or "unmatched". */
  route: string;
  principalId: number | null;
  /** The request sent credentials (an Authorization header): its response is not to be stored. */
  credentialed: boolean;
  /** Bytes of the response body when known before it is sent (null for streams). */
  bytes: number | null;
  /**
   * A HEAD request (answered by its GET operation without the body): the app's renderer states the
   * body's length in Content-Length, as the GET would send it (RFC 9110 9.3.2, 8.6).
   */
  head?: boolean;
  /**
   * The response's headers as finishHeaders completed them (the app's own renderer): the
   * middleware then leaves the response alone. Undefined for other responses (docs, console).
   */
  finished?: Record<string, string>;
}

const KEY = 'requestFacts' as never;

export function requestFacts(c: Context): RequestFacts {
  return c.get(KEY) as unknown as RequestFacts;
}

/** A request begins: its ids and what the log line will say of it (from its headers). */
export function beginRequest(headers: Pick<Headers, 'get'>): RequestFacts {
  return {
    requestId: validHeaderId(headers.get('x-request-id') ?? undefined) ?? randomUUID(),
    correlationId: validHeaderId(headers.get('x-correlation-id') ?? undefined),
    route: UNMATCHED_ROUTE,
    principalId: null,
    credentialed: headers.get('authorization') !== null,
    bytes: null,
  };
}

/**
 * A request ends with `res`: the ids and security headers (unless the app's renderer completed
 * them, finishHeaders), the HTTP metrics and the INFO log line. `path` is the request path the
 * security headers go by (Hono's c.req.path).
 */
export function endRequest(
  deps: Pick<Deps, 'log'>,
  facts: RequestFacts,
  res: Response,
  method: string,
  path: string,
  started: number,
): void {
  const finished = facts.finished;
  if (!finished) {
    res.headers.set('x-request-id', facts.requestId);
    if (facts.correlationId) res.headers.set('x-correlation-id', facts.correlationId);
    applySecurityHeaders(res.headers, path, facts.credentialed);
  }
  const ms = performance.now() - started;
  const m = METHODS.has(method) ? method : 'other';
  recordRequest(m, facts.route, res.status, ms / 1000);
  if (!deps.log.isLevelEnabled('info')) return;
  const length = finished ? (finished['content-length'] ?? null) : res.headers.get('content-length');
  // a HEAD sends none of the body its Content-Length states
  const bytes = method === 'HEAD' ? 0 : length !== null ? Number(length) : facts.bytes;
  // Its fields, below, are all it says: nothing to redact. Written as pino would write them (the
  // line's cost through pino: src/log.ts writeInfoLine). JSON.stringify of a number that is not
  // finite gives null, as pino's.
  writeInfoLine(
    deps.log,
    `"request_id":${JSON.stringify(facts.requestId)},"correlation_id":${JSON.stringify(facts.correlationId)},` +
      `"method":${JSON.stringify(m)},"route":${JSON.stringify(facts.route)},"status":${res.status},` +
      `"duration_ms":${JSON.stringify(Math.round(ms * 10) / 10)},"principal_id":${JSON.stringify(facts.principalId)},` +
      `"bytes":${JSON.stringify(bytes)}`,
    'request',
  );
}

/** The first middleware of the Hono app: beginRequest, the app, endRequest. */
export function observeRequests(deps: Pick<Deps, 'log'>): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    const facts = beginRequest(c.req.raw.headers);
    c.set(KEY, facts as never);
    httpInFlight.inc();
    try {
      await next();
    } finally {
      httpInFlight.dec();
    }
    endRequest(deps, facts, c.res, c.req.method, c.req.path, started);
  };
}

/**
 * Completes the lowercase header record of a response the app renders itself, as the middleware
 * would complete its Headers: the request's ids and the security headers (applySecurityHeaders).
 * The middleware then leaves that response alone.
 */
export function finishHeaders(facts: RequestFacts, path: string, headers: Record<string, string>): void {
  headers['x-request-id'] = facts.requestId;
  if (facts.correlationId) headers['x-correlation-id'] = facts.correlationId;
  securityHeaders(headers, path, facts.credentialed);
  facts.finished = headers;
}
