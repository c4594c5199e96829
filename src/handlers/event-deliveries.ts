import { actorOf, type HandlerMap } from '../http/contract.ts';
import { appendEvent } from '../db/events.ts';
import { conflict, notFound } from '../domain/errors.ts';
import { requireUnscopedAdmin } from './gates.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { withTx } from '../db/tx.ts';
import {
  EVENT_DELIVERY_LIST_SPEC,
  deadLetterDelivery,
  deliveryFigures,
  fanoutFigures,
  findEventDelivery,
  listEventDeliveryRows,
  lockEventDelivery,
  releaseDelivery,
  sinkFigures,
  subscriptionFigures,
} from '../db/event-deliveries.ts';
import { type EventDeliveryRow, eventDeliveryView } from '../domain/views/event-deliveries.ts';
import { deliveryWakeups, fanoutWakeups } from '../worker-stats.ts';

export const eventDeliveriesHandlers = {
  listEventDeliveries: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const parsed = parseListQuery(input.query, EVENT_DELIVERY_LIST_SPEC);
    const page = await listEventDeliveryRows(ctx.deps.sql, parsed);
    return listReply(page, page.rows.map(eventDeliveryView));
  },

  getEventDeliveryHealth: async (_input, ctx) => {
    requireUnscopedAdmin(ctx);
    const cfg = ctx.deps.config;
    const db = ctx.deps.sql;
    const [fanout, delivery, sinks, subscriptions] = await Promise.all([
      fanoutFigures(db),
      deliveryFigures(db),
      sinkFigures(db),
      subscriptionFigures(db),
    ]);
    return {
      status: 200,
      headers: { 'cache-control': 'no-store' },
      body: {
        fanout: {
          pending_events: fanout.pending_events,
          in_flight_claims: fanout.in_flight_claims,
          stale_claims: fanout.stale_claims,
          oldest_pending_age_seconds: fanout.oldest_pending_age_seconds,
          workers: cfg.SVC_EVENT_FANOUT_WORKERS,
          batch_size: cfg.SVC_EVENT_FANOUT_BATCH_SIZE,
          poll_interval_ms: cfg.SVC_EVENT_FANOUT_POLL_INTERVAL_MS,
          lock_timeout_ms: cfg.SVC_EVENT_FANOUT_LOCK_TIMEOUT_MS,
          wakeups: { ...fanoutWakeups },
        },
        delivery: {
          counts: delivery.counts,
          retryable_failed: delivery.retryable_failed,
          stale_claims: delivery.stale_claims,
          oldest_due_age_seconds: delivery.oldest_due_age_seconds,
          settings: {
            workers: cfg.SVC_EVENT_DELIVERY_WORKERS,
            batch_size: cfg.SVC_EVENT_DELIVERY_BATCH_SIZE,
            poll_interval_ms: cfg.SVC_EVENT_DELIVERY_POLL_INTERVAL_MS,
            lock_timeout_ms: cfg.SVC_EVENT_DELIVERY_LOCK_TIMEOUT_MS,
            transport_timeout_ms: cfg.SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS,
            retry_backoff_base_ms: cfg.SVC_EVENT_DELIVERY_RETRY_BACKOFF_BASE_MS,
            retry_backoff_max_ms: cfg.SVC_EVENT_DELIVERY_RETRY_BACKOFF_MAX_MS,
            max_attempts: cfg.SVC_EVENT_DELIVERY_MAX_ATTEMPTS,
          },
          wakeups: { ...deliveryWakeups },
        },
        sinks,
        subscriptions,
      },
    };
  },

  getEventDelivery: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const row = await findEventDelivery(ctx.deps.sql, input.params.delivery_id);
    if (!row) throw notFound('event delivery');
    return { status: 200, body: eventDeliveryView(row) };
  },

  retryEventDelivery: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const before = await lockEventDelivery(tx, input.params.delivery_id);
      if (!before) throw notFound('event delivery');
      if (before.status !== 'failed' && before.status !== 'dead') {
        throw conflict(`only failed or dead deliveries can be released (this one is ${before.status})`, 'invalid_delivery_status');
      }
      const after = await releaseDelivery(tx, before.id);
      await appendEvent(tx, actorOf(ctx), deliveryEvent('retried', before, after));
      return after;
    });
    return { status: 200, body: eventDeliveryView(row) };
  },

  markEventDeliveryDead: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const before = await lockEventDelivery(tx, input.params.delivery_id);
      if (!before) throw notFound('event delivery');
      if (before.status === 'dead') return before;
      const after = await deadLetterDelivery(tx, before.id);
      await appendEvent(tx, actorOf(ctx), deliveryEvent('dead', before, after));
      return after;
    });
    return { status: 200, body: eventDeliveryView(row) };
  },
} satisfies Partial<HandlerMap>;

/** The audit event of an administrator action on a delivery (collection-less: admins only read it). */
function deliveryEvent(action: 'retried' | 'dead', before: EventDeliveryRow, after: EventDeliveryRow) {
  return {
    entityType: 'event_delivery',
    entityId: after.id,
    action,
    summary: `event delivery ${after.id} ${action === 'retried' ? 'released for delivery' : 'marked dead'} by an administrator`,
    before: eventDeliveryView(before),
    after: eventDeliveryView(after),
    metadata: { event_id: after.event_id, subscription_id: after.subscription_id, sink_id: after.sink_id, purpose: after.purpose },
  };
}
