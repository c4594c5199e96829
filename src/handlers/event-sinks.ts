import type { Ctx, HandlerMap } from '../http/contract.ts';
import { actorOf, callerOf } from '../http/contract.ts';
import { badRequest, notFound } from '../domain/errors.ts';
import { requireUnscopedAdmin } from './gates.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import type { Db } from '../db/sql.ts';
import { EVENT_SINK_LIST_SPEC, findEventSink, listEventSinkRows } from '../db/event-sinks.ts';
import { eventSinkView, sinkDefinition, type EventSinkRow } from '../domain/views/event-sinks.ts';
import { findEventSubscription } from '../db/event-subscriptions.ts';
import { type EventSubscriptionRow } from '../domain/views/event-subscriptions.ts';
import { findEventByUuid, insertTestDelivery, type StoredEvent } from '../db/event-deliveries.ts';
import { eventDeliveryView } from '../domain/views/event-deliveries.ts';
import { deliveryEnvelope, inSubscriptionScope, sinkFromNew, type SinkPatch } from '../domain/event-subscriptions.ts';
import { transportFor } from '../sinks/index.ts';
import { inTx } from '../mutations/context.ts';
import { createEventSink, deleteEventSink, updateEventSink } from '../mutations/event-sinks.ts';

const KIND = 'event_sink';

function ok<S extends number>(status: S, row: EventSinkRow, extra: Record<string, string> = {}) {
  return { status, body: eventSinkView(row), headers: etagHeader(KIND, row.id, row.revision, extra) };
}

interface PreviewTarget {
  sink: EventSinkRow;
  subscription: EventSubscriptionRow;
  event: StoredEvent;
}

/**
 * The checks shared by preview and test: sink, subscription and event exist and fit together. The
 * three are read together (one round trip; in a transaction, sent at once on its connection) and
 * checked in that order.
 */
async function previewTarget(db: Db, sinkId: number, body: { subscription_id: number; event_id: string }): Promise<PreviewTarget> {
  const [sink, subscription, event] = await Promise.all([
    findEventSink(db, sinkId),
    findEventSubscription(db, body.subscription_id),
    findEventByUuid(db, body.event_id),
  ]);
  if (!sink) throw notFound('event sink');
  if (!subscription) throw notFound('event subscription');
  if (!event) throw notFound('event');
  if (subscription.sink_id !== sink.id) {
    throw badRequest('the subscription does not use this sink', [{ path: 'body.subscription_id', message: 'uses another sink' }]);
  }
  if (!inSubscriptionScope(subscription, event)) {
    const why =
      subscription.collection_id === null
        ? 'a system subscription only covers collection-less events'
        : "the event is neither attached to nor references the subscription's collection";
    throw badRequest(`the event is outside the subscription's scope: ${why}`, [{ path: 'body.event_id', message: why }]);
  }
  if (!transportFor(sink.kind)) {
    throw badRequest(`transport not available in this deployment: ${sink.kind}`, [
      { path: 'kind', message: `the ${sink.kind} transport is not available in this deployment` },
    ]);
  }
  return { sink, subscription, event };
}

async function render(ctx: Ctx, t: PreviewTarget): Promise<unknown> {
  const transport = transportFor(t.sink.kind)!;
  return transport.render(
    sinkDefinition(t.sink),
    t.subscription.routing,
    deliveryEnvelope(t.event, t.subscription),
    'test',
    ctx.deps.config,
  );
}

export const eventSinksHandlers = {
  listEventSinks: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const parsed = parseListQuery(input.query, EVENT_SINK_LIST_SPEC);
    const page = await listEventSinkRows(ctx.deps.sql, parsed);
    return listReply(page, page.rows.map(eventSinkView));
  },

  createEventSink: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const fields = sinkFromNew(input.body as Parameters<typeof sinkFromNew>[0]);
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) => createEventSink(m, fields));
    return ok(201, row, { location: `/api/v1/event-sinks/${row.id}` });
  },

  getEventSink: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const row = await findEventSink(ctx.deps.sql, input.params.sink_id);
    if (!row) throw notFound('event sink');
    return ok(200, row);
  },

  updateEventSink: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const patch = input.body as SinkPatch;
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      updateEventSink(m, input.params.sink_id, patch, input.headers['if-match']),
    );
    return ok(200, row);
  },

  deleteEventSink: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteEventSink(m, input.params.sink_id, input.headers['if-match']));
    return { status: 204 };
  },

  previewEventSink: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const target = await previewTarget(ctx.deps.sql, input.params.sink_id, input.body);
    const payload = await render(ctx, target);
    return { status: 200, body: { sink_kind: target.sink.kind, payload } };
  },

  testEventSink: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const delivery = await withTx(ctx.deps.sql, async (tx) => {
      const target = await previewTarget(tx, input.params.sink_id, input.body);
      await render(ctx, target);
      const row = await insertTestDelivery(tx, target.event.event_id, target.subscription.id, target.sink.id);
      await appendEvent(tx, actorOf(ctx), {
        entityType: KIND,
        entityId: target.sink.id,
        entityName: target.sink.name,
        collectionId: null,
        action: 'invoked',
        summary: `event sink ${target.sink.name} test delivery ${row.id} queued`,
        metadata: {
          delivery_id: row.id,
          subscription_id: target.subscription.id,
          event_id: target.event.event_id,
          purpose: 'test',
        },
      });
      return row;
    });
    return { status: 202, body: eventDeliveryView(delivery), headers: { location: `/api/v1/event-deliveries/${delivery.id}` } };
  },
} satisfies Partial<HandlerMap>;
