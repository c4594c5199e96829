// Event fan-out: SQL only. Events enter event_fanout_queue through an insert trigger on events
// (same transaction). Workers claim queue rows under a claim token and lock expiry (skip locked,
// so any number of processes share the queue; an expired claim is taken over), then finish them in
// one transaction fenced by the token: the queue rows are deleted and one delivery row per matching
// subscription is inserted, at most once per (event, subscription) by the unique index; the
// delivery workers are woken after its commit (db/wakeups.ts).
import type { TransactionSql, Db } from './sql.ts';
import type { SubscriptionFilter } from '../domain/event-subscriptions.ts';
import { DELIVERIES_CHANNEL, markWake } from './wakeups.ts';

export async function claimFanoutBatch(db: Db, limit: number, lockMs: number, token: string): Promise<number[]> {
  const rows = await db<{ event_id: number }[]>`
    with c as (
      select q.event_id from event_fanout_queue q
      where q.locked_until is null or q.locked_until < now()
      order by q.event_id
      limit ${limit}
      for update skip locked
    )
    update event_fanout_queue q set claim_token = ${token}::uuid,
      locked_until = now() + make_interval(secs => ${lockMs / 1000}::float8)
    from c where q.event_id = c.event_id
    returning q.event_id`;
  return rows.map((r) => r.event_id).sort((a, b) => a - b);
}

export interface CandidateSubscription {
  id: number;
  collection_id: number | null;
  sink_id: number;
  entity_types: string[];
  actions: string[];
  filter: SubscriptionFilter;
  created_at: Date;
}

/** Enabled subscriptions of enabled sinks that could match events of these types and collections. */
export async function candidateSubscriptions(db: Db, entityTypes: string[], collectionIds: number[]): Promise<CandidateSubscription[]> {
  return db<CandidateSubscription[]>`
    select s.id, s.collection_id, s.sink_id, s.entity_types, s.actions, s.filter, s.created_at
    from event_subscriptions s join event_sinks k on k.id = s.sink_id
    where s.enabled and k.enabled and s.entity_types && ${entityTypes}::text[]
      and (s.collection_id is null or s.collection_id = any(${collectionIds}::int[]))`;
}

/**
 * Finishes the claimed events still held under `token`: deletes their queue rows and inserts the
 * deliveries of `matches` (event id → subscription ids) for those events only, skipping
 * subscriptions or sinks disabled meanwhile. Returns the number of deliveries created.
 */
export async function finishFanout(
  tx: TransactionSql,
  eventIds: number[],
  token: string,
  matches: { eventId: number; subscriptionId: number }[],
): Promise<number> {
  const held = await tx<{ event_id: number }[]>`
    delete from event_fanout_queue where event_id = any(${eventIds}::bigint[]) and claim_token = ${token}::uuid
    returning event_id`;
  const heldIds = new Set(held.map((r) => r.event_id));
  const mine = matches.filter((m) => heldIds.has(m.eventId));
  if (mine.length === 0) return 0;
  const rows = await tx<{ id: number }[]>`
    insert into event_deliveries (event_id, subscription_id, sink_id, purpose)
    select e.event_id, s.id, s.sink_id, 'event'
    from unnest(${mine.map((m) => m.eventId)}::bigint[], ${mine.map((m) => m.subscriptionId)}::int[]) as v(event_id, subscription_id)
    join events e on e.id = v.event_id
    join event_subscriptions s on s.id = v.subscription_id
    join event_sinks k on k.id = s.sink_id
    where s.enabled and k.enabled
    order by v.event_id, s.id
    on conflict (event_id, subscription_id) where purpose = 'event' do nothing
    returning id`;
  if (rows.length) markWake(tx, DELIVERIES_CHANNEL);
  return rows.length;
}
