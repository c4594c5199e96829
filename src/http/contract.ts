import type { Hono } from 'hono';
import type { operations as Ops } from '../../generated/openapi.ts';
import type { OperationId } from '../../generated/operations.ts';
import type { Deps } from '../deps.ts';
import type { Actor } from '../domain/actor.ts';
import type { AuthInfo } from './auth.ts';
import type { Wire } from '../domain/wire.ts';

type Get<T, K extends PropertyKey> = T extends Record<K, infer V> ? V : never;
type JsonBody<T> = T extends { content: infer C } ? C[keyof C] : undefined;

export type PathParams<K extends OperationId> = NonNullable<Get<Get<Ops[K], 'parameters'>, 'path'>>;
export type QueryParams<K extends OperationId> = NonNullable<Get<Get<Ops[K], 'parameters'>, 'query'>>;
export type RequestBody<K extends OperationId> = JsonBody<NonNullable<Get<Ops[K], 'requestBody'>>>;

/** What a handler receives: validated, coerced request parts. */
export interface Input<K extends OperationId> {
  params: PathParams<K>;
  /** Coerced query: declared parameters typed; list filters appear as extra string members. */
  query: QueryParams<K> & Record<string, unknown>;
  body: RequestBody<K>;
  headers: Record<string, string>;
  /** Media type of the request body, lowercased, without parameters. */
  contentType: string;
}

/** A non-JSON payload: text, bytes or a stream. */
export type RawBody = string | Uint8Array | ReadableStream<Uint8Array>;

/** Any reply as the adapter renders it (app.ts, the error renderer): status, JSON body or raw payload; handlers return Reply<K>. */
export interface WireReply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Non-JSON payload (text, bytes or a stream); contentType then names it. */
  raw?: RawBody;
  contentType?: string;
  /** JSON texts whose placeholders the body holds (src/domain/json-text.ts). */
  jsonTexts?: readonly string[];
}

type Responses<K extends OperationId> = Ops[K]['responses'];
/** The statuses an operation declares (its `default` error response is rendered from thrown ApiErrors). */
export type Status<K extends OperationId> = Extract<keyof Responses<K>, number>;
type ContentOf<R> = R extends { content: infer C } ? C : never;
/** The JSON body an operation declares for a status (generated/openapi.ts). */
export type Body<K extends OperationId, S extends Status<K>> = Wire<Get<ContentOf<Responses<K>[S]>, 'application/json'>>;

type ReplyHeaders = Record<string, string>;
type JsonReply<S, C> = 'application/json' extends keyof C
  ? { status: S; body: Wire<C['application/json']>; headers?: ReplyHeaders; jsonTexts?: readonly string[] }
  : never;
type RawReply<S, C> = [Exclude<keyof C, 'application/json'>] extends [never]
  ? never
  : { status: S; raw: RawBody; contentType: string; headers?: ReplyHeaders };
type ReplyFor<S, R> = [ContentOf<R>] extends [never]
  ? { status: S; body?: undefined; headers?: ReplyHeaders }
  : JsonReply<S, ContentOf<R>> | RawReply<S, ContentOf<R>>;

/**
 * What a handler of operation K returns, as in oapi-codegen's strict servers: one of the statuses
 * the contract declares for K, with the body the contract declares for that status (JSON), or a
 * raw payload for text/event-stream, text/plain and other non-JSON media types. A wrong body is a
 * compile error. `Reply` without an operation is the untyped shape the adapter renders.
 */
export type Reply<K extends OperationId = never> = [K] extends [never]
  ? WireReply
  : { [S in Status<K>]: ReplyFor<S, Responses<K>[S]> }[Status<K>];

export interface Ctx {
  deps: Deps;
  /** null only on operations without security. */
  auth: AuthInfo | null;
  requestId: string;
  correlationId: string | null;
  clientIp: string;
  operationId: OperationId;
  signal: AbortSignal;
}

/**
 * A 200 whose JSON body was encoded earlier and stored (backup and export outputs): the bytes are
 * sent as they are. Bytes cannot be checked against the body type the contract declares, so this
 * is the one narrow cast of a reply; use it only for outputs the service itself encoded.
 */
export function storedOutput<K extends OperationId>(raw: Uint8Array, contentType: string, headers: Record<string, string>): Reply<K> {
  return { status: 200, raw, contentType, headers } as unknown as Reply<K>;
}

/**
 * A handler of operation K: validated input in, a reply the contract declares for K out. Most are
 * async; one with nothing to wait for may answer at once (the app then answers in the same turn).
 */
export type Handler<K extends OperationId> = (input: Input<K>, ctx: Ctx) => Reply<K> | Promise<Reply<K>>;
/**
 * The handler table the adapter dispatches: every operation's handler, typed per operation, so a
 * missing operation or a body its contract does not declare is a compile error (a tag file checks
 * itself with `satisfies Partial<HandlerMap>`, src/handlers/index.ts the whole table).
 */
export type HandlerMap = { [K in OperationId]: Handler<K> };

/** The audit actor of a request. */
export function actorOf(ctx: Ctx): Actor {
  return {
    kind: 'user',
    principalId: ctx.auth?.principal.id ?? null,
    principalName: ctx.auth?.principal.name ?? null,
    requestId: ctx.requestId,
    correlationId: ctx.correlationId,
  };
}

/** Who a request's mutations run as (src/mutations): its audit actor and its authority. */
export function callerOf(ctx: Ctx): { actor: Actor; auth: AuthInfo } {
  return { actor: actorOf(ctx), auth: authOf(ctx) };
}

/** ctx.auth for operations that require a bearer token. */
export function authOf(ctx: Ctx): AuthInfo {
  if (!ctx.auth) throw new Error(`operation ${ctx.operationId} ran without authentication`);
  return ctx.auth;
}

/** The HTTP application src/app.ts builds: testable with app.fetch(new Request(...)) or served by src/http/server.ts. */
export interface App {
  fetch: (req: Request, env?: unknown) => Response | Promise<Response>;
  hono: Hono;
}
