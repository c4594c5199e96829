// The parts of an incoming request the app reads, without the per-request copies a URL object or
// a materialized Headers object would cost.
import type { OperationId } from '../../generated/operations.ts';
import type { Deps } from '../deps.ts';
import type { AuthInfo } from './auth.ts';
import type { Ctx } from './contract.ts';
import type { RequestFacts } from './request-log.ts';
import { ApiError } from '../domain/errors.ts';
import { defineMember } from '../domain/json-patch.ts';

/** A request URL's path and query string (without `?`). */
export interface UrlParts {
  path: string;
  query: string;
}

/**
 * The path and the query string (without `?`) of a request URL, exactly as `new URL(url)` gives
 * them as `pathname` and `search`. A request's URL is either serialized by the URL parser (a
 * Request built from a string, or @hono/node-server for any request target it does not pass
 * through as is) or `scheme://host` + a request target of plain characters without dot segments
 * (@hono/node-server's fast path: no `%`, no `\`, no `..`), whose path and query the parser would
 * not change in any way the query's decoding could see; anything else goes through the parser.
 */
export function urlParts(url: string): UrlParts {
  const scheme = url.indexOf('://');
  const start = scheme < 0 ? -1 : url.indexOf('/', scheme + 3);
  const hash = url.indexOf('#');
  const end = hash < 0 ? url.length : hash;
  if (start < 0 || start > end || url.includes('\\')) return viaUrlParser(url);
  const q = url.indexOf('?', start);
  const pathEnd = q >= 0 && q < end ? q : end;
  const path = url.slice(start, pathEnd);
  // Dot segments (also percent-encoded) are resolved by the parser.
  if (path.includes('/.') || /%2e/i.test(path)) return viaUrlParser(url);
  return { path, query: q >= 0 && q < end ? url.slice(q + 1, end) : '' };
}

function viaUrlParser(url: string): UrlParts {
  const u = new URL(url);
  return { path: u.pathname, query: u.search.slice(1) };
}

/** The most query parameters a request may carry. */
export const MAX_QUERY_PARAMETERS = 128;

/** A query string's characters that URLSearchParams would decode (`%`, `+`) or re-encode (beyond ASCII). */
const DECODED = /[%+\u0080-\uffff]/;

/**
 * The parameters of a query string (without `?`) by name, a repeated name as an array in order:
 * what `new URLSearchParams(query)` gives. A query of plain ASCII without `%` and `+` (nearly every
 * one) is split as is, which is all URLSearchParams would do with it, without its iterator and
 * entry arrays; anything else (and a leading `?`, which URLSearchParams drops) goes through it.
 * More than MAX_QUERY_PARAMETERS → 400.
 */
export function queryRecord(query: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  if (!query) return out;
  let count = 0;
  if (query.charCodeAt(0) === 63 /* ? */ || DECODED.test(query)) {
    for (const [k, v] of new URLSearchParams(query)) addParameter(out, ++count, k, v);
    return out;
  }
  for (let i = 0; i <= query.length;) {
    let end = query.indexOf('&', i);
    if (end < 0) end = query.length;
    if (end > i) {
      const eq = query.indexOf('=', i);
      if (eq < 0 || eq > end) addParameter(out, ++count, query.slice(i, end), '');
      else addParameter(out, ++count, query.slice(i, eq), query.slice(eq + 1, end));
    }
    i = end + 1;
  }
  return out;
}

/** The `count`th parameter of a query record (queryRecord). */
function addParameter(out: Record<string, string | string[]>, count: number, k: string, v: string): void {
  if (count > MAX_QUERY_PARAMETERS) throw new ApiError('bad_request', `too many query parameters (at most ${MAX_QUERY_PARAMETERS})`);
  appendParameter(out, k, v);
}

/** Adds a value of parameter `k` to a query record: after its values there are, as an array. */
export function appendParameter(out: Record<string, string | string[]>, k: string, v: string): void {
  // Own members only: `constructor` or `__proto__` are parameters like any other. A parameter is a
  // string or an array; what Object.prototype has under a name is neither.
  const found = out[k];
  const prev = typeof found === 'string' || Array.isArray(found) ? found : undefined;
  const value = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  if (k === '__proto__') defineMember(out, k, value);
  else out[k] = value;
}

/** What a header record reads: the request's Headers, and the copy once one was made. */
class HeaderSource {
  copy: Record<string, string> | undefined = undefined;
  constructor(readonly headers: Pick<Headers, 'get' | 'forEach'>) {}

  all(): Record<string, string> {
    if (!this.copy) {
      const copy: Record<string, string> = {};
      this.headers.forEach((v, k) => {
        copy[k] = v;
      });
      this.copy = copy;
    }
    return this.copy;
  }

  lookup(name: string): string | undefined {
    if (this.copy) return Object.hasOwn(this.copy, name) ? this.copy[name] : undefined;
    // A copy holds lowercase names only; Headers.get would find any case, and refuses names that are not tokens.
    if (name !== name.toLowerCase()) return undefined;
    try {
      return this.headers.get(name) ?? undefined;
    } catch {
      return undefined;
    }
  }
}

// One handler for every record (its functions are made once, not per request).
const HEADER_RECORD: ProxyHandler<HeaderSource> = {
  get: (s, name) => (typeof name === 'string' ? (s.lookup(name) ?? (Object.prototype as Record<string, unknown>)[name]) : undefined),
  has: (s, name) => (typeof name === 'string' && s.lookup(name) !== undefined) || name in Object.prototype,
  ownKeys: (s) => Reflect.ownKeys(s.all()),
  getOwnPropertyDescriptor: (s, name) => {
    const d = Reflect.getOwnPropertyDescriptor(s.all(), name);
    return d && Object.assign({}, d, { configurable: true });
  },
  set: (s, name, value) => Reflect.set(s.all(), name, value),
  defineProperty: (s, name, d) => Reflect.defineProperty(s.all(), name, d),
  deleteProperty: (s, name) => Reflect.deleteProperty(s.all(), name),
};

/**
 * The request headers as a record of lowercase names (what a handler's input.headers is), read
 * from the Headers object when a handler asks for a header: a lookup does not copy every header,
 * and the record holds the same values a copy would (Headers.get joins repeated fields as
 * iterating does). Enumerating it, or writing to it, makes the copy.
 */
export function requestHeaders(source: Pick<Headers, 'get' | 'forEach'>): Record<string, string> {
  return new Proxy(new HeaderSource(source), HEADER_RECORD) as unknown as Record<string, string>;
}

/**
 * A request's Ctx. A class, not an object literal: its `signal` getter is the prototype's, not a
 * function made per request; the request's AbortSignal is made only when a handler reads it.
 */
export class RequestContext implements Ctx {
  auth: AuthInfo | null = null;
  readonly requestId: string;
  readonly correlationId: string | null;

  constructor(
    readonly deps: Deps,
    facts: RequestFacts,
    readonly operationId: OperationId,
    private readonly req: Pick<Request, 'signal'>,
    readonly clientIp: string,
  ) {
    this.requestId = facts.requestId;
    this.correlationId = facts.correlationId;
  }

  get signal(): AbortSignal {
    return this.req.signal;
  }
}

/**
 * A handler's input (contract.ts Input): the validated parts, and the request headers as the
 * record requestHeaders makes, made when a handler first reads them.
 */
export class HandlerInput {
  #headers: Record<string, string> | undefined = undefined;

  constructor(
    readonly params: Record<string, unknown>,
    readonly query: Record<string, unknown>,
    readonly body: unknown,
    private readonly source: Pick<Headers, 'get' | 'forEach'>,
    readonly contentType: string,
  ) {}

  get headers(): Record<string, string> {
    return (this.#headers ??= requestHeaders(this.source));
  }
}
