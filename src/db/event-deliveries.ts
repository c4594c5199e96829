// Event deliveries: SQL only. The API half (list, point reads, retry, dead, health) and the
// delivery worker's claim, pre-send check, pacing and fenced result recording. The worker rules
// are in src/workers/event-delivery.ts.
import { textPart, type Db, type TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import type { EventRow } from '../domain/audit.ts';
import type { SinkKind } from '../domain/event-subscriptions.ts';
import { DELIVERY_STATUSES, type EventDeliveryRow } from '../domain/views/event-deliveries.ts';
import { DELIVERIES_CHANNEL, markWake } from './wakeups.ts';

export const EVENT_DELIVERY_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'd.id', notNull: true },
    status: { type: 'text', column: 'd.status', values: DELIVERY_STATUSES, notNull: true },
    purpose: { type: 'text', column: 'd.purpose', values: ['event', 'test'], sortable: false },
    sink_id: { type: 'integer', column: 'd.sink_id', sortable: false },
    subscription_id: { type: 'integer', column: 'd.subscription_id', sortable: false },
    event_id: { type: 'text', column: 'd.event_id', sortable: false, expr: (db: Db) => db`d.event_id::text` },
    created_at: { type: 'timestamp', column: 'd.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'd.updated_at', notNull: true },
    next_attempt_at: { type: 'timestamp', column: 'd.next_attempt_at', notNull: true },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

const DELIVERY_COLUMN_LIST =
  'd.id, d.event_id::text as event_id, d.subscription_id, d.sink_id, d.purpose, d.status, d.attempts, d.last_error, d.deferred_reason, d.next_attempt_at, d.locked_until, d.created_at, d.updated_at';

function cols(db: Db): Fragment {
  return textPart(db, DELIVERY_COLUMN_LIST) as Fragment;
}

export function listEventDeliveryRows(db: Db, parsed: ParsedList): Promise<ListPage<EventDeliveryRow>> {
  return runList<EventDeliveryRow>(db, {
    from: db`event_deliveries d` as Fragment,
    select: cols(db),
    parsed,
    spec: EVENT_DELIVERY_LIST_SPEC,
  });
}

export async function findEventDelivery(db: Db, id: number): Promise<EventDeliveryRow | undefined> {
  const [row] = await db<EventDeliveryRow[]>`select ${cols(db)} from event_deliveries d where d.id = ${id}::int`;
  return row;
}

export async function lockEventDelivery(tx: TransactionSql, id: number): Promise<EventDeliveryRow | undefined> {
  const [row] = await tx<EventDeliveryRow[]>`select ${cols(tx)} from event_deliveries d where d.id = ${id}::int for update`;
  return row;
}

export async function insertTestDelivery(
  tx: TransactionSql,
  eventId: string,
  subscriptionId: number,
  sinkId: number,
): Promise<EventDeliveryRow> {
  const [row] = await tx<EventDeliveryRow[]>`
    insert into event_deliveries as d (event_id, subscription_id, sink_id, purpose)
    values (${eventId}::uuid, ${subscriptionId}::int, ${sinkId}::int, 'test')
    returning ${cols(tx)}`;
  markWake(tx, DELIVERIES_CHANNEL);
  return row!;
}

/** failed|dead → pending, due now, attempts reset; last_error kept until the next attempt. */
export async function releaseDelivery(tx: TransactionSql, id: number): Promise<EventDeliveryRow> {
  const [row] = await tx<EventDeliveryRow[]>`
    update event_deliveries d set status = 'pending', next_attempt_at = now(), attempts = 0, deferred_reason = null,
      locked_until = null, claim_token = null, updated_at = now()
    where d.id = ${id}::int
    returning ${cols(tx)}`;
  markWake(tx, DELIVERIES_CHANNEL);
  return row!;
}

/** any → dead; an in-flight claim is revoked so that its late acknowledgement is ignored. */
export async function deadLetterDelivery(tx: TransactionSql, id: number): Promise<EventDeliveryRow> {
  const [row] = await tx<EventDeliveryRow[]>`
    update event_deliveries d set status = 'dead', deferred_reason = null, locked_until = null, claim_token = null, updated_at = now()
    where d.id = ${id}::int
    returning ${cols(tx)}`;
  return row!;
}

/**
 * Unfinished fan-out deliveries follow their subscription to its new sink; the delivery workers are
 * woken after the commit (a disabled sink may have held them).
 */
export async function repointSubscriptionDeliveries(tx: TransactionSql, subscriptionId: number, sinkId: number): Promise<void> {
  await tx`
    update event_deliveries set sink_id = ${sinkId}::int, updated_at = now()
    where subscription_id = ${subscriptionId}::int and purpose = 'event' and status in ('pending', 'failed')`;
  markWake(tx, DELIVERIES_CHANNEL);
}

// ---- events ---------------------------------------------------------------------------------

const EVENT_COLS = (db: Db) =>
  db`e.id, e.event_id::text as event_id, e.occurred_at, e.entity_type, e.entity_id, e.entity_name, e.collection_id,
    e.related_collection_ids, e.action, e.actor_kind, e.actor_user_id, e.initiator_user_id, e.task_id, e.provenance,
    e.request_id, e.correlation_id, e.summary, e.before, e.after, e.before_revision, e.after_revision, e.metadata,
    e.schema_version` as Fragment;

export type StoredEvent = EventRow & { related_collection_ids: number[] };

export async function findEventByUuid(db: Db, eventId: string): Promise<StoredEvent | undefined> {
  const [row] = await db<StoredEvent[]>`select ${EVENT_COLS(db)} from events e where e.event_id = ${eventId}::uuid`;
  return row;
}

/** The events of `eventIds` (UUIDs) that exist (in no order). */
export async function findEventsByUuids(db: Db, eventIds: string[]): Promise<StoredEvent[]> {
  return await db<StoredEvent[]>`select ${EVENT_COLS(db)} from events e where e.event_id = any(${eventIds}::uuid[])`;
}

export async function findEventsByIds(db: Db, ids: number[]): Promise<StoredEvent[]> {
  return db<StoredEvent[]>`select ${EVENT_COLS(db)} from events e where e.id = any(${ids}::bigint[]) order by e.id`;
}

// ---- the delivery worker ----------------------------------------------------------------------

/** A delivery the worker claimed: the columns it works with and the token that fences its result. */
export type ClaimedDelivery = Pick<EventDeliveryRow, 'id' | 'event_id' | 'subscription_id' | 'sink_id' | 'purpose' | 'attempts'> & {
  [key: string]: unknown;
  claim_token: string;
};

export interface DeliveryClaimFilter {
  /** Only rows of these sinks (tests sharing a database). */
  sinkIds?: number[];
}

/**
 * Claims up to `limit` due rows (pending or failed with next_attempt_at reached, or in_flight with an
 * expired lock) under a fresh claim token per row. Fan-out rows wait while their sink or
 * subscription is disabled; test rows ignore the enabled flags.
 */
export async function claimDeliveries(
  tx: TransactionSql,
  limit: number,
  lockMs: number,
  f: DeliveryClaimFilter = {},
): Promise<ClaimedDelivery[]> {
  const only = f.sinkIds ? (tx`and d.sink_id = any(${f.sinkIds}::int[])` as Fragment) : (tx`` as Fragment);
  return tx<ClaimedDelivery[]>`
    with c as (
      select d.id from event_deliveries d
      join event_subscriptions s on s.id = d.subscription_id
      join event_sinks k on k.id = d.sink_id
      where ((d.status in ('pending', 'failed') and d.next_attempt_at <= now())
          or (d.status = 'in_flight' and d.locked_until < now()))
        and (d.purpose = 'test' or (s.enabled and k.enabled))
        ${only}
      order by d.next_attempt_at, d.id
      limit ${limit}
      for update of d skip locked
    )
    update event_deliveries d set status = 'in_flight', claim_token = gen_random_uuid(),
      locked_until = now() + make_interval(secs => ${lockMs / 1000}::float8), updated_at = now()
    from c where d.id = c.id
    returning d.id, d.event_id::text as event_id, d.subscription_id, d.sink_id, d.purpose, d.attempts, d.claim_token::text as claim_token`;
}

/** The claimed row, locked, when the claim is still this worker's and unexpired (checked right before transport). */
export async function lockLiveClaim(tx: TransactionSql, id: number, token: string): Promise<boolean> {
  const [row] = await tx<{ id: number }[]>`
    select id from event_deliveries
    where id = ${id}::int and claim_token = ${token}::uuid and status = 'in_flight' and locked_until > now()
    for update`;
  return row !== undefined;
}

/** The ids of `claims` still this worker's and unexpired (the same check, without a lock, in one read). */
export async function liveClaims(db: Db, claims: { id: number; token: string }[]): Promise<Set<number>> {
  const rows = await db<{ id: number }[]>`
    select d.id from event_deliveries d
    join unnest(${claims.map((c) => c.id)}::int[], ${claims.map((c) => c.token)}::uuid[]) as c(id, token)
      on d.id = c.id and d.claim_token = c.token
    where d.status = 'in_flight' and d.locked_until > now()`;
  return new Set(rows.map((r) => r.id));
}

/**
 * Takes the sink's send slot when min_interval_ms has passed since its last send (shared by all
 * workers through the pacing row lock). Returns null when taken, else the time the slot frees.
 */
export async function takeSendSlot(tx: TransactionSql, sinkId: number, minIntervalMs: number): Promise<Date | null> {
  const interval = tx`make_interval(secs => ${minIntervalMs / 1000}::float8)` as Fragment;
  const [taken] = await tx<{ sink_id: number }[]>`
    insert into event_sink_pacing as p (sink_id, last_send_at) values (${sinkId}::int, clock_timestamp())
    on conflict (sink_id) do update set last_send_at = clock_timestamp()
      where p.last_send_at + ${interval} <= clock_timestamp()
    returning p.sink_id`;
  if (taken) return null;
  const [row] = await tx<{ free_at: Date }[]>`
    select last_send_at + ${interval} as free_at from event_sink_pacing where sink_id = ${sinkId}::int`;
  return row?.free_at ?? new Date();
}

export type DeliveryResult =
  | { status: 'succeeded' }
  | { status: 'failed'; error: string; retryInMs: number }
  | { status: 'dead'; error: string; consumeAttempt: boolean }
  | { status: 'pending'; reason: 'configured_rate' | 'provider_rate'; at: Date | null; inMs?: number }
  /** Shutdown interrupted the attempt: due again at once, no attempt consumed. */
  | { status: 'released' };

/**
 * Records the result of a claim, fenced by the claim token: a replaced or revoked claim writes
 * nothing (returns false).
 */
export async function recordDeliveryResult(db: Db, id: number, token: string, r: DeliveryResult): Promise<boolean> {
  let rows: { id: number }[];
  const fence = db`id = ${id}::int and claim_token = ${token}::uuid and status = 'in_flight'` as Fragment;
  switch (r.status) {
    case 'succeeded':
      rows = await db<{ id: number }[]>`
        update event_deliveries set status = 'succeeded', deferred_reason = null, locked_until = null, claim_token = null,
          updated_at = now()
        where ${fence} returning id`;
      break;
    case 'failed':
      rows = await db<{ id: number }[]>`
        update event_deliveries set status = 'failed', attempts = attempts + 1, last_error = ${r.error},
          next_attempt_at = now() + make_interval(secs => ${r.retryInMs / 1000}::float8), deferred_reason = null,
          locked_until = null, claim_token = null, updated_at = now()
        where ${fence} returning id`;
      break;
    case 'dead':
      rows = await db<{ id: number }[]>`
        update event_deliveries set status = 'dead', attempts = attempts + ${r.consumeAttempt ? 1 : 0}::int, last_error = ${r.error},
          deferred_reason = null, locked_until = null, claim_token = null, updated_at = now()
        where ${fence} returning id`;
      break;
    case 'released':
      rows = await db<{ id: number }[]>`
        update event_deliveries set status = 'pending', deferred_reason = null, next_attempt_at = now(), locked_until = null,
          claim_token = null, updated_at = now()
        where ${fence} returning id`;
      break;
    case 'pending': {
      const at = r.at
        ? (db`${r.at.toISOString()}::text::timestamptz` as Fragment)
        : (db`now() + make_interval(secs => ${(r.inMs ?? 0) / 1000}::float8)` as Fragment);
      rows = await db<{ id: number }[]>`
        update event_deliveries set status = 'pending', deferred_reason = ${r.reason}, next_attempt_at = ${at},
          locked_until = null, claim_token = null, updated_at = now()
        where ${fence} returning id`;
      break;
    }
  }
  return rows.length > 0;
}

/** A succeeded result waiting for its write. */
interface Waiting {
  id: number;
  token: string;
  settle: (recorded: boolean) => void;
  fail: (err: unknown) => void;
}

/** At most this many succeeded results go in one statement. */
const MAX_SUCCEEDED_WRITE = 256;

/**
 * Succeeded results of one pool written together: a result that arrives while the previous write
 * is under way waits for it and goes with every other such result in the next statement (one
 * commit for all), so none waits when results are few and a busy process writes one statement
 * per round trip rather than one per delivery. Each row keeps its own fence (id, claim token,
 * in_flight).
 */
class SucceededWriter {
  private queue: Waiting[] = [];
  private writing = false;

  constructor(private readonly db: Db) {}

  record(id: number, token: string): Promise<boolean> {
    return new Promise((settle, fail) => {
      this.queue.push({ id, token, settle, fail });
      if (!this.writing) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.writing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_SUCCEEDED_WRITE);
        try {
          const rows = await this.db<{ id: number }[]>`
            update event_deliveries d set status = 'succeeded', deferred_reason = null, locked_until = null,
              claim_token = null, updated_at = now()
            from unnest(${batch.map((w) => w.id)}::int[], ${batch.map((w) => w.token)}::uuid[]) as r(id, token)
            where d.id = r.id and d.claim_token = r.token and d.status = 'in_flight'
            returning d.id`;
          const recorded = new Set(rows.map((r) => r.id));
          for (const w of batch) w.settle(recorded.has(w.id));
        } catch (err) {
          for (const w of batch) w.fail(err);
        }
      }
    } finally {
      this.writing = false;
    }
  }
}

const succeededWriters = new WeakMap<Db, SucceededWriter>();

/**
 * Records a succeeded delivery, fenced by its claim token like recordDeliveryResult, together with
 * the other succeeded results of `db` (a pool, not a transaction) that are ready at the same time.
 * True when recorded; false when the claim was replaced or revoked.
 */
export function recordSucceeded(db: Db, id: number, token: string): Promise<boolean> {
  let writer = succeededWriters.get(db);
  if (!writer) {
    writer = new SucceededWriter(db);
    succeededWriters.set(db, writer);
  }
  return writer.record(id, token);
}

/** The earliest future next_attempt_at (an idle worker sleeps until then at most). */
export async function nextDueAt(db: Db): Promise<Date | null> {
  const [row] = await db<{ at: Date | null }[]>`
    select min(next_attempt_at) as at from event_deliveries where status in ('pending', 'failed') and next_attempt_at > now()`;
  return row?.at ?? null;
}

// ---- health ---------------------------------------------------------------------------------

export interface StatusCounts {
  pending: number;
  in_flight: number;
  succeeded: number;
  failed: number;
  dead: number;
}

export interface BacklogFigures {
  counts: StatusCounts;
  retryable_failed: number;
  stale_claims: number;
  oldest_due_age_seconds: number | null;
}

const FIGURES = (db: Db) =>
  db`count(*) filter (where d.status = 'pending')::int as pending,
    count(*) filter (where d.status = 'in_flight')::int as in_flight,
    count(*) filter (where d.status = 'succeeded')::int as succeeded,
    count(*) filter (where d.status = 'failed')::int as failed,
    count(*) filter (where d.status = 'dead')::int as dead,
    count(*) filter (where d.status = 'failed' and (d.purpose = 'test' or (s.enabled and k.enabled)))::int as retryable_failed,
    count(*) filter (where d.status = 'in_flight' and d.locked_until < now())::int as stale_claims,
    floor(extract(epoch from now() - min(d.next_attempt_at) filter (
      where d.status in ('pending', 'failed') and d.next_attempt_at <= now())))::int as oldest_due_age_seconds` as Fragment;

interface FigureRow {
  pending: number;
  in_flight: number;
  succeeded: number;
  failed: number;
  dead: number;
  retryable_failed: number;
  stale_claims: number;
  oldest_due_age_seconds: number | null;
}

function figures(r: FigureRow | undefined): BacklogFigures {
  return {
    counts: {
      pending: r?.pending ?? 0,
      in_flight: r?.in_flight ?? 0,
      succeeded: r?.succeeded ?? 0,
      failed: r?.failed ?? 0,
      dead: r?.dead ?? 0,
    },
    retryable_failed: r?.retryable_failed ?? 0,
    stale_claims: r?.stale_claims ?? 0,
    oldest_due_age_seconds: r?.oldest_due_age_seconds ?? null,
  };
}

export interface FanoutFigures {
  pending_events: number;
  in_flight_claims: number;
  stale_claims: number;
  oldest_pending_age_seconds: number | null;
}

export async function fanoutFigures(db: Db): Promise<FanoutFigures> {
  const [row] = await db<FanoutFigures[]>`
    select count(*)::int as pending_events,
      count(*) filter (where q.locked_until >= now())::int as in_flight_claims,
      count(*) filter (where q.locked_until < now())::int as stale_claims,
      floor(extract(epoch from now() - min(e.occurred_at)))::int as oldest_pending_age_seconds
    from event_fanout_queue q join events e on e.id = q.event_id`;
  return {
    pending_events: row?.pending_events ?? 0,
    in_flight_claims: row?.in_flight_claims ?? 0,
    stale_claims: row?.stale_claims ?? 0,
    oldest_pending_age_seconds:
      row?.oldest_pending_age_seconds === null || row?.oldest_pending_age_seconds === undefined
        ? null
        : Math.max(0, row.oldest_pending_age_seconds),
  };
}

export async function deliveryFigures(db: Db): Promise<BacklogFigures> {
  const [row] = await db<FigureRow[]>`
    select ${FIGURES(db)} from event_deliveries d
    join event_subscriptions s on s.id = d.subscription_id
    join event_sinks k on k.id = d.sink_id`;
  return figures(row);
}

export interface SinkFigures extends BacklogFigures {
  sink_id: number;
  name: string;
  kind: SinkKind;
  enabled: boolean;
  subscriptions: number;
}

export async function sinkFigures(db: Db): Promise<SinkFigures[]> {
  const rows = await db<(FigureRow & { sink_id: number; name: string; kind: SinkKind; enabled: boolean; subscriptions: number })[]>`
    select k.id as sink_id, k.name, k.kind, k.enabled,
      (select count(*)::int from event_subscriptions x where x.sink_id = k.id) as subscriptions,
      f.*
    from event_sinks k
    cross join lateral (
      select ${FIGURES(db)} from event_deliveries d
      join event_subscriptions s on s.id = d.subscription_id
      where d.sink_id = k.id
    ) f
    order by k.id`;
  return rows.map((r) => ({
    sink_id: r.sink_id,
    name: r.name,
    kind: r.kind,
    enabled: r.enabled,
    subscriptions: r.subscriptions,
    ...figures(r),
  }));
}

export interface SubscriptionFigures extends BacklogFigures {
  subscription_id: number;
  name: string;
  collection_id: number | null;
  sink_id: number;
  enabled: boolean;
  sink_enabled: boolean;
}

export async function subscriptionFigures(db: Db): Promise<SubscriptionFigures[]> {
  const rows = await db<(FigureRow & Omit<SubscriptionFigures, keyof BacklogFigures>)[]>`
    select s.id as subscription_id, s.name, s.collection_id, s.sink_id, s.enabled, sk.enabled as sink_enabled, f.*
    from event_subscriptions s
    join event_sinks sk on sk.id = s.sink_id
    cross join lateral (
      select ${FIGURES(db)} from event_deliveries d
      join event_sinks k on k.id = d.sink_id
      where d.subscription_id = s.id
    ) f
    order by s.id`;
  return rows.map((r) => ({
    subscription_id: r.subscription_id,
    name: r.name,
    collection_id: r.collection_id,
    sink_id: r.sink_id,
    enabled: r.enabled,
    sink_enabled: r.sink_enabled,
    ...figures(r),
  }));
}
