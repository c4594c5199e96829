// The shipped TypeScript SDK of the Inventory Data Service. Its types and operation table are generated
// from openapi.yaml (clients/typescript/generated/, `make codegen`); requests go through openapi-fetch.
// This file is the small hand-written layer on top: a bearer token that `login` sets, every non-2xx
// response thrown as an ApiRequestError carrying the typed error body, calls by operationId, and
// one async iterator over any paged list (X-Next-Cursor) or structured search (`next` in the body),
// and the typed events of the streamed searches (server-sent events).
import createFetchClient, { type Client, type FetchOptions, type HeadersOptions, type Middleware, type ParseAs } from 'openapi-fetch';
import type { components, operations, paths } from './generated/schema.ts';
import { OPERATIONS, PAGED_OPERATIONS, PERMISSION_NAMES, type OperationId } from './generated/operations.ts';

export type { components, operations, paths, OperationId };
export { OPERATIONS, PAGED_OPERATIONS, PERMISSION_NAMES };

/** The contract's named schemas (`Schemas['Collection']`, `Schemas['NewClass']`, ...). */
export type Schemas = components['schemas'];
/** The error body every 4xx/5xx response carries. */
export type ErrorBody = Schemas['ErrorResponse'];
export type ErrorDetail = NonNullable<ErrorBody['details']>[number];

type OkStatus = 200 | 201 | 202 | 203 | 204 | 206;
type Responses<K extends OperationId> = operations[K]['responses'];
type ContentOf<R> = R extends { content: infer C } ? (C extends Record<string, unknown> ? C[keyof C] : undefined) : undefined;

/** The success body of an operation (its 2xx responses' content; undefined when it has none). */
export type OkBody<K extends OperationId> = ContentOf<Responses<K>[Extract<keyof Responses<K>, OkStatus>]>;

/** What `call(operationId, init)` takes: path, query and header parameters (`params`) and the request `body`. */
export type CallInit<K extends OperationId> = FetchOptions<operations[K]>;
type RequiredKeys<T> = { [P in keyof T]-?: object extends Pick<T, P> ? never : P }[keyof T];
/** The init argument is optional exactly when the operation needs no parameter and no body. */
export type CallArgs<K extends OperationId> = [RequiredKeys<CallInit<K>>] extends [never] ? [init?: CallInit<K>] : [init: CallInit<K>];

/** Whether an operation takes the `cursor` query parameter (an operation without query parameters has `query?: never`). */
type TakesCursor<K extends OperationId> = operations[K]['parameters'] extends { query?: infer Q }
  ? [NonNullable<Q>] extends [never]
    ? false
    : 'cursor' extends keyof NonNullable<Q>
      ? true
      : false
  : false;

/** Operations that return one page of a list (a JSON array) and take the `cursor` of X-Next-Cursor. */
export type ListOperationId = {
  [K in OperationId]: (typeof OPERATIONS)[K]['method'] extends 'get'
    ? OkBody<K> extends readonly unknown[]
      ? TakesCursor<K> extends true
        ? K
        : never
      : never
    : never;
}[OperationId];

/** Everything `paginate` and `pages` walk through: every paged list, and both searches. */
export type PagedOperationId = ListOperationId | 'searchStructured' | 'searchPlainText';

type PlainResults = Schemas['PlainSearchResponse']['results'];
/** One hit of the plain-text search, tagged with its kind (as the structured search's results are). */
export type PlainSearchHit =
  | { kind: 'collection'; resource: PlainResults['collections'][number] }
  | { kind: 'class'; resource: PlainResults['classes'][number] }
  | { kind: 'object'; resource: PlainResults['objects'][number] };

/** The item type of a paged operation: a list's element, or a search result. */
export type PageItem<K extends PagedOperationId> = K extends 'searchStructured'
  ? Schemas['SearchResult']
  : K extends 'searchPlainText'
    ? PlainSearchHit
    : OkBody<K> extends readonly (infer T)[]
      ? T
      : never;

/** The cursor of a page: one string, or the plain-text search's cursor per kind. */
export type PageCursor<K extends PagedOperationId> = K extends 'searchPlainText' ? Schemas['PlainSearchResponse']['next'] : string;

/** One page of a paged operation. */
export interface Page<K extends PagedOperationId> {
  items: PageItem<K>[];
  /** The cursor of the next page; null on the last page. */
  next: PageCursor<K> | null;
  /** The total number of matches when the server counted them (X-Total-Count; a search's `total`), else null. */
  total: number | null;
  response: Response;
}

/** The operations that answer with server-sent events (text/event-stream). */
export type StreamOperationId = 'searchPlainTextStream' | 'searchStructuredStream';

type TargetKind = Schemas['SearchResult']['kind'];
/** The events of searchPlainTextStream: `started`, one `batch` per requested kind, then `done` or `error`. */
export type PlainSearchStreamEvent =
  | { event: 'started'; data: { query: string } }
  | {
      event: 'batch';
      data: {
        kind: 'collections' | 'classes' | 'objects';
        collections: PlainResults['collections'];
        classes: PlainResults['classes'];
        objects: PlainResults['objects'];
        /** The cursor to pass as `cursor_<kind>`; null when the kind has no more results. */
        next: string | null;
      };
    }
  | { event: 'done'; data: { query: string } }
  | { event: 'error'; data: { message: string } };
/** The events of searchStructuredStream (one page): `started`, a `result` per match in sort order, then `done` or `error`. */
export type StructuredSearchStreamEvent =
  | { event: 'started'; data: { version: 1; kind: TargetKind } }
  | { event: 'result'; data: Schemas['SearchResult'] }
  | { event: 'done'; data: { version: 1; kind: TargetKind; next: string | null; total: number | null; page_limit: number } }
  | { event: 'error'; data: { version: 1; kind: TargetKind; message: string } };
/** The typed events of a streamed operation. */
export type StreamEvent<K extends StreamOperationId> = K extends 'searchPlainTextStream'
  ? PlainSearchStreamEvent
  : StructuredSearchStreamEvent;

/**
 * The events of a text/event-stream body, as they arrive: `event:` names the event and its `data:`
 * lines (joined by newlines) hold one JSON document. Comments and events without data are skipped.
 */
export async function* readServerSentEvents(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<{ event: string; data: unknown }, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let event = 'message';
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // a CR at the end of a chunk may be the first half of a CRLF: wait for the next chunk
        if (!done && end === buffer.length - 1 && buffer.endsWith('\r')) break;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
        if (line === '') {
          if (data.length > 0) yield { event, data: JSON.parse(data.join('\n')) as unknown };
          event = 'message';
          data = [];
          continue;
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const raw = colon < 0 ? '' : line.slice(colon + 1);
        const text = raw.startsWith(' ') ? raw.slice(1) : raw;
        if (field === 'event') event = text;
        else if (field === 'data') data.push(text);
      }
      if (done) break;
    }
    if (data.length > 0) yield { event, data: JSON.parse(data.join('\n')) as unknown };
  } finally {
    // A consumer that stops early (break, return) closes the connection.
    await reader.cancel().catch(() => undefined);
  }
}

/** A non-2xx response: its status, the error body (reason, details) and the request it answered. */
export class ApiRequestError extends Error {
  override readonly name = 'ApiRequestError';
  constructor(
    readonly status: number,
    /** The error body, when the response carried one in the contract's error shape. */
    readonly body: ErrorBody | undefined,
    readonly method: string,
    readonly url: string,
    readonly headers: Headers,
  ) {
    super(`${method} ${url} → ${status}${body ? `: ${body.reason ? `${body.reason}: ` : ''}${body.message}` : ''}`);
  }

  /** The stable machine code (`stale_resource`, `name_taken`, ...), when the server gave one. */
  get reason(): string | undefined {
    return this.body?.reason;
  }

  /** Per-member problems of a rejected request (JSON pointer `path` and `message`). */
  get details(): ErrorDetail[] {
    return this.body?.details ?? [];
  }

  /** The server's X-Request-Id of this response, for support requests and logs. */
  get requestId(): string | null {
    return this.headers.get('x-request-id');
  }
}

/** Whether `e` is an ApiRequestError, optionally of one status. */
export function isApiRequestError(e: unknown, status?: number): e is ApiRequestError {
  return e instanceof ApiRequestError && (status === undefined || e.status === status);
}

function isErrorBody(v: unknown): v is ErrorBody {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return typeof o.error === 'string' && typeof o.message === 'string';
}

export interface ClientOptions {
  /** The service's root URL, e.g. `https://inventory.example.com` (operation paths start with /api/...). */
  baseUrl: string;
  /** A bearer token to start with (a service-account token, or one from an earlier login). */
  token?: string;
  /** Headers sent with every request (e.g. `X-Correlation-ID`). */
  headers?: HeadersOptions;
  /** A fetch to send requests with (defaults to the global fetch). */
  fetch?: (request: Request) => Promise<Response>;
}

export interface InventoryClient {
  /**
   * The openapi-fetch client: every operation typed by path and method
   * (`api.GET('/api/v1/collections/{collection_id}', { params: { path: { collection_id } } })`).
   * It sends the bearer token too, and throws ApiRequestError for every non-2xx response.
   */
  readonly api: Client<paths>;
  /** The bearer token requests are sent with, if any. */
  readonly token: string | undefined;
  setToken(token: string | undefined): void;
  /** Logs in with a name and password (identity scope `local` unless given) and sends the token from then on. */
  login(name: string, password: string, identityScope?: string): Promise<Schemas['TokenResponse']>;
  /** Revokes the current token and forgets it. */
  logout(): Promise<void>;
  /** Calls one operation by its operationId and returns its success body; a non-2xx response throws ApiRequestError. */
  call<K extends OperationId>(operationId: K, ...init: CallArgs<K>): Promise<OkBody<K>>;
  /** Like `call`, with the Response too (for headers: ETag, X-Total-Count, Location, ...). */
  callWithResponse<K extends OperationId>(operationId: K, ...init: CallArgs<K>): Promise<{ data: OkBody<K>; response: Response }>;
  /**
   * Every item of a paged list or a search, page after page, following X-Next-Cursor (lists),
   * `next` (structured search) or `next.<kind>` (plain-text search, whose hits are tagged with their
   * kind) until the last page. Filters, sort and `limit` (page size) go in `params.query` (lists,
   * plain-text search) or the search body, as for `call`.
   */
  paginate<K extends PagedOperationId>(operationId: K, ...init: CallArgs<K>): AsyncGenerator<PageItem<K>, void, undefined>;
  /** The pages of a paged list or search (items, next cursor, total, response). */
  pages<K extends PagedOperationId>(operationId: K, ...init: CallArgs<K>): AsyncGenerator<Page<K>, void, undefined>;
  /**
   * The typed server-sent events of a streamed search (searchPlainTextStream, searchStructuredStream),
   * each as soon as it arrives. A refused request (400, 401, 403, ...) throws ApiRequestError before
   * the first event. Stopping the loop closes the connection; so does aborting `init.signal`, which
   * also ends a wait for the next event (the iterator then throws the abort reason).
   */
  stream<K extends StreamOperationId>(operationId: K, ...init: CallArgs<K>): AsyncGenerator<StreamEvent<K>, void, undefined>;
}

/** What the layer sends through openapi-fetch when the operation is only known at run time. */
interface LooseInit {
  params?: { path?: Record<string, unknown>; query?: Record<string, unknown>; header?: Record<string, unknown> };
  body?: unknown;
  headers?: HeadersOptions;
  parseAs?: ParseAs;
}
type LooseRequest = (method: string, path: string, init?: LooseInit) => Promise<{ data?: unknown; response: Response }>;

export function createClient(options: ClientOptions): InventoryClient {
  let token = options.token;
  const api = createFetchClient<paths>({
    baseUrl: options.baseUrl,
    headers: options.headers,
    ...(options.fetch ? { fetch: options.fetch } : {}),
    // The free-form `filters` object of the lists goes on the query string member by member
    // (`?computed.shared.cpu__gt=4`), as the contract declares it (style form, explode).
    querySerializer: { object: { style: 'form', explode: true } },
  });
  const auth: Middleware = {
    onRequest({ request }) {
      if (token && !request.headers.has('authorization')) request.headers.set('authorization', `Bearer ${token}`);
      return request;
    },
    async onResponse({ request, response }) {
      if (response.ok) return undefined;
      const text = await response.clone().text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      throw new ApiRequestError(response.status, isErrorBody(body) ? body : undefined, request.method, request.url, response.headers);
    },
  };
  api.use(auth);
  const send = api.request as unknown as LooseRequest;

  async function callWithResponse<K extends OperationId>(operationId: K, ...[init]: CallArgs<K>) {
    const op = OPERATIONS[operationId];
    // Read as text and decode JSON only when the response says it is JSON (exports answer text/csv, ...).
    const { data, response } = await send(op.method, op.path, { ...(init as LooseInit | undefined), parseAs: 'text' });
    const text = typeof data === 'string' ? data : '';
    const json = (response.headers.get('content-type') ?? '').includes('json');
    const body = text === '' ? undefined : json ? (JSON.parse(text) as unknown) : text;
    return { data: body as OkBody<K>, response };
  }

  async function* pages<K extends PagedOperationId>(operationId: K, ...[init]: CallArgs<K>): AsyncGenerator<Page<K>, void, undefined> {
    const loose = (init ?? {}) as LooseInit;
    if (operationId === 'searchPlainText') {
      yield* plainPages(loose) as AsyncGenerator<Page<K>, void, undefined>;
      return;
    }
    let cursor: string | null = null;
    do {
      if (operationId === 'searchStructured') {
        const body: Schemas['StructuredSearchRequest'] = {
          ...(loose.body as Schemas['StructuredSearchRequest']),
          ...(cursor ? { cursor } : {}),
        };
        const res: { data: Schemas['StructuredSearchResponse']; response: Response } = await callWithResponse('searchStructured', {
          ...(loose as CallInit<'searchStructured'>),
          body,
        });
        const { data, response } = res;
        cursor = data.next;
        yield { items: data.results as PageItem<K>[], next: data.next as PageCursor<K> | null, total: data.total, response };
      } else {
        const params: LooseInit['params'] = { ...loose.params, query: { ...loose.params?.query, ...(cursor ? { cursor } : {}) } };
        const res: { data: unknown; response: Response } = await callWithResponse(
          operationId as OperationId,
          { ...loose, params } as never,
        );
        const { data, response } = res;
        cursor = response.headers.get('x-next-cursor');
        const total = response.headers.get('x-total-count');
        yield {
          items: data as PageItem<K>[],
          next: cursor as PageCursor<K> | null,
          total: total === null ? null : Number(total),
          response,
        };
      }
    } while (cursor);
  }

  /**
   * The plain-text search pages each kind on its own (`next.<kind>` → `cursor_<kind>`): every next
   * request asks only for the kinds that still have a cursor, with the same q, limit and flags.
   */
  async function* plainPages(loose: LooseInit): AsyncGenerator<Page<'searchPlainText'>, void, undefined> {
    type Query = NonNullable<CallInit<'searchPlainText'>['params']>['query'];
    const query = (loose.params?.query ?? {}) as Query;
    const KINDS = { collection: 'collections', class: 'classes', object: 'objects' } as const;
    const asked = query.kinds ?? ['collection', 'class', 'object'];
    let next: Schemas['PlainSearchResponse']['next'] | null = null;
    do {
      const prev = next;
      const kinds = prev ? asked.filter((k) => prev[KINDS[k]] !== null) : asked;
      const cursors = Object.fromEntries(prev ? kinds.map((k) => [`cursor_${KINDS[k]}`, prev[KINDS[k]]]) : []);
      const res: { data: Schemas['PlainSearchResponse']; response: Response } = await callWithResponse('searchPlainText', {
        ...loose,
        params: { ...loose.params, query: { ...query, ...cursors, kinds } },
      } as never);
      const { data, response } = res;
      const items: PlainSearchHit[] = [
        ...data.results.collections.map((resource) => ({ kind: 'collection' as const, resource })),
        ...data.results.classes.map((resource) => ({ kind: 'class' as const, resource })),
        ...data.results.objects.map((resource) => ({ kind: 'object' as const, resource })),
      ];
      const more = Object.values(data.next).some((c) => c !== null);
      next = more ? data.next : null;
      yield { items, next, total: null, response };
    } while (next);
  }

  async function* stream<K extends StreamOperationId>(
    operationId: K,
    ...[init]: CallArgs<K>
  ): AsyncGenerator<StreamEvent<K>, void, undefined> {
    const op = OPERATIONS[operationId];
    const loose = (init ?? {}) as LooseInit;
    const { data, response } = await send(op.method, op.path, { ...loose, parseAs: 'stream' });
    const body = data as ReadableStream<Uint8Array> | null | undefined;
    if (!body) throw new Error(`${op.method.toUpperCase()} ${response.url} answered ${response.status} without a body`);
    for await (const e of readServerSentEvents(body)) yield e as StreamEvent<K>;
  }

  async function* paginate<K extends PagedOperationId>(operationId: K, ...init: CallArgs<K>): AsyncGenerator<PageItem<K>, void, undefined> {
    for await (const page of pages(operationId, ...init)) yield* page.items;
  }

  return {
    api,
    get token() {
      return token;
    },
    setToken(t) {
      token = t;
    },
    async login(name, password, identityScope) {
      const { data } = await api.POST('/api/v0/auth/login', {
        body: { name, password, ...(identityScope === undefined ? {} : { identity_scope: identityScope }) },
      });
      if (!data) throw new Error('login answered without a body');
      token = data.token;
      return data;
    },
    async logout() {
      if (token) await api.POST('/api/v0/auth/logout');
      token = undefined;
    },
    async call(operationId, ...init) {
      return (await callWithResponse(operationId, ...init)).data;
    },
    callWithResponse,
    paginate,
    pages,
    stream,
  };
}
