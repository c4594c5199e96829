import type { Ctx, HandlerMap } from '../http/contract.ts';
import { authOf, callerOf } from '../http/contract.ts';
import { notFound } from '../domain/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { EVENT_SUBSCRIPTION_LIST_SPEC, findScopedEventSubscription, listEventSubscriptionRows } from '../db/event-subscriptions.ts';
import { eventSubscriptionView, type EventSubscriptionRow } from '../domain/views/event-subscriptions.ts';
import { subscriptionFromNew, type SubscriptionPatch } from '../domain/event-subscriptions.ts';
import { inTx } from '../mutations/context.ts';
import {
  createEventSubscription,
  deleteEventSubscription,
  requireSubscriptionScope,
  updateEventSubscription,
  type SubscriptionScope,
} from '../mutations/event-subscriptions.ts';

const KIND = 'event_subscription';

function ok<S extends number>(status: S, row: EventSubscriptionRow, extra: Record<string, string> = {}) {
  return { status, body: eventSubscriptionView(row), headers: etagHeader(KIND, row.id, row.revision, extra) };
}

function location(row: EventSubscriptionRow): string {
  return row.collection_id === null
    ? `/api/v1/system-event-subscriptions/${row.id}`
    : `/api/v1/collections/${row.collection_id}/event-subscriptions/${row.id}`;
}

// The scope of a route is a collection (ManageEventSubscription on it) or the system scope
// (unscoped administrators): checked here for reads, by the write path for writes.

async function list(ctx: Ctx, scope: SubscriptionScope, query: Record<string, unknown>) {
  await requireSubscriptionScope(ctx.deps.sql, authOf(ctx), scope);
  const parsed = parseListQuery(query, EVENT_SUBSCRIPTION_LIST_SPEC);
  const page = await listEventSubscriptionRows(ctx.deps.sql, scope, parsed);
  return listReply(page, page.rows.map(eventSubscriptionView));
}

async function create(ctx: Ctx, scope: SubscriptionScope, body: Parameters<typeof subscriptionFromNew>[1]) {
  const fields = subscriptionFromNew(scope, body);
  const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) => createEventSubscription(m, fields));
  return ok(201, row, { location: location(row) });
}

async function get(ctx: Ctx, scope: SubscriptionScope, id: number) {
  await requireSubscriptionScope(ctx.deps.sql, authOf(ctx), scope);
  const row = await findScopedEventSubscription(ctx.deps.sql, id, scope);
  if (!row) throw notFound('event subscription');
  return ok(200, row);
}

async function update(ctx: Ctx, scope: SubscriptionScope, id: number, headers: Record<string, string>, patch: SubscriptionPatch) {
  const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) => updateEventSubscription(m, scope, id, patch, headers['if-match']));
  return ok(200, row);
}

async function remove(ctx: Ctx, scope: SubscriptionScope, id: number, headers: Record<string, string>) {
  await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteEventSubscription(m, scope, id, headers['if-match']));
  return { status: 204 as const };
}

type NewBody = Parameters<typeof subscriptionFromNew>[1];

export const eventSubscriptionsHandlers = {
  listCollectionEventSubscriptions: (input, ctx) => list(ctx, input.params.collection_id, input.query),
  createCollectionEventSubscription: (input, ctx) => create(ctx, input.params.collection_id, input.body as NewBody),
  getCollectionEventSubscription: (input, ctx) => get(ctx, input.params.collection_id, input.params.subscription_id),
  updateCollectionEventSubscription: (input, ctx) =>
    update(ctx, input.params.collection_id, input.params.subscription_id, input.headers, input.body as SubscriptionPatch),
  deleteCollectionEventSubscription: (input, ctx) => remove(ctx, input.params.collection_id, input.params.subscription_id, input.headers),
  listSystemEventSubscriptions: (input, ctx) => list(ctx, null, input.query),
  createSystemEventSubscription: (input, ctx) => create(ctx, null, input.body as NewBody),
  getSystemEventSubscription: (input, ctx) => get(ctx, null, input.params.subscription_id),
  updateSystemEventSubscription: (input, ctx) =>
    update(ctx, null, input.params.subscription_id, input.headers, input.body as SubscriptionPatch),
  deleteSystemEventSubscription: (input, ctx) => remove(ctx, null, input.params.subscription_id, input.headers),
} satisfies Partial<HandlerMap>;
