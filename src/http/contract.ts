import type { operations as Ops } from '../../generated/openapi.ts';
import type { OperationId } from '../../generated/operations.ts';
import type { Deps } from '../deps.ts';
import type { Actor } from '../domain/actor.ts';
import type { AuthInfo } from './auth.ts';

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

/** What a handler returns; the adapter renders it. */
export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Non-JSON payload (text, bytes or a stream); contentType then names it. */
  raw?: string | Uint8Array | ReadableStream<Uint8Array>;
  contentType?: string;
}

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

export type Handler<K extends OperationId> = (input: Input<K>, ctx: Ctx) => Promise<Reply>;
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
