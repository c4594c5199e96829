import type { Ctx, HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { notFound } from '../http/errors.ts';
import { requireUnscopedAdmin } from '../http/gates.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import type { Db } from '../db/sql.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import { findEventSink } from '../db/event-sinks.ts';
import {
  EVENT_SUBSCRIPTION_LIST_SPEC,
  deleteEventSubscriptionRow,
  eventSubscriptionEvent,
  eventSubscriptionView,
  findScopedEventSubscription,
  insertEventSubscription,
  listEventSubscriptionRows,
  lockEventSubscription,
  subscriptionFields,
  updateEventSubscriptionRow,
  type EventSubscriptionRow,
} from '../db/event-subscriptions.ts';
import { repointSubscriptionDeliveries } from '../db/event-deliveries.ts';
import { applySubscriptionPatch, sameJson, subscriptionFromNew, type SubscriptionPatch } from '../domain/event-subscriptions.ts';
import { validateSubscriptionForSink } from '../sinks/index.ts';

const KIND = 'event_subscription';

function ok(status: number, row: EventSubscriptionRow, extra: Record<string, string> = {}) {
  return { status, body: eventSubscriptionView(row), headers: { ...etagHeader(KIND, row.id, row.revision), ...extra } };
}

function location(row: EventSubscriptionRow): string {
  return row.collection_id === null
    ? `/api/v1/system-event-subscriptions/${row.id}`
    : `/api/v1/collections/${row.collection_id}/event-subscriptions/${row.id}`;
}

/** The scope of a route: a collection (ManageEventSubscription on it) or the system scope (unscoped admin). */
type Scope = number | null;

async function authorize(ctx: Ctx, db: Db, scope: Scope): Promise<void> {
  if (scope === null) requireUnscopedAdmin(ctx);
  else await requireCollectionPermission(db, authOf(ctx), scope, 'ManageEventSubscription');
}

async function list(ctx: Ctx, scope: Scope, query: Record<string, unknown>) {
  await authorize(ctx, ctx.deps.sql, scope);
  const parsed = parseListQuery(query, EVENT_SUBSCRIPTION_LIST_SPEC);
  const page = await listEventSubscriptionRows(ctx.deps.sql, scope, parsed);
  return listReply(page, page.rows.map(eventSubscriptionView));
}

async function create(ctx: Ctx, scope: Scope, body: Parameters<typeof subscriptionFromNew>[1]) {
  const fields = subscriptionFromNew(scope, body);
  const row = await withTx(ctx.deps.sql, async (tx) => {
    await authorize(ctx, tx, scope);
    validateSubscriptionForSink(fields, await findEventSink(tx, fields.sink_id));
    const created = await insertEventSubscription(tx, fields);
    await appendEvent(tx, actorOf(ctx), eventSubscriptionEvent(created, 'created', null));
    return created;
  });
  return ok(201, row, { location: location(row) });
}

async function get(ctx: Ctx, scope: Scope, id: number) {
  await authorize(ctx, ctx.deps.sql, scope);
  const row = await findScopedEventSubscription(ctx.deps.sql, id, scope);
  if (!row) throw notFound('event subscription');
  return ok(200, row);
}

async function update(ctx: Ctx, scope: Scope, id: number, headers: Record<string, string>, patch: SubscriptionPatch) {
  const row = await withTx(ctx.deps.sql, async (tx) => {
    await authorize(ctx, tx, scope);
    const before = await lockEventSubscription(tx, id, scope);
    if (!before) throw notFound('event subscription');
    checkIfMatch(headers, KIND, before.id, before.revision);
    const prev = subscriptionFields(before);
    const next = applySubscriptionPatch(prev, patch);
    if (sameJson(next, prev)) return before;
    validateSubscriptionForSink(next, await findEventSink(tx, next.sink_id));
    const after = await updateEventSubscriptionRow(tx, id, next);
    if (after.sink_id !== before.sink_id) await repointSubscriptionDeliveries(tx, id, after.sink_id);
    await appendEvent(tx, actorOf(ctx), eventSubscriptionEvent(after, 'updated', before));
    return after;
  });
  return ok(200, row);
}

async function remove(ctx: Ctx, scope: Scope, id: number, headers: Record<string, string>) {
  await withTx(ctx.deps.sql, async (tx) => {
    await authorize(ctx, tx, scope);
    const before = await lockEventSubscription(tx, id, scope);
    if (!before) throw notFound('event subscription');
    checkIfMatch(headers, KIND, before.id, before.revision);
    await deleteEventSubscriptionRow(tx, id);
    await appendEvent(tx, actorOf(ctx), eventSubscriptionEvent(before, 'deleted', before));
  });
  return { status: 204 };
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
