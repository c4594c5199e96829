// SQL of the event retention purge: batch claims (batch id + exact event documents), fenced
// completion that deletes exactly the claimed events, and the terminal-delivery purge.
import { randomUUID } from 'node:crypto';
import type { Db, Sql } from './sql.ts';
import { withTx } from './tx.ts';

/** Delivery statuses that keep their event from being purged. */
export const ACTIVE_DELIVERY_STATUSES = ['pending', 'failed', 'in_flight'];
// Serializes the creation of new claims across workers (open batches are claimed with row locks).
const CLAIM_LOCK_KEY = 727_120;

export interface RetentionBatch {
  batch_id: string;
  claim_token: string;
  event_count: number;
  attempts: number;
  created_at: Date;
}

export interface ClaimedEvent {
  event_id: number;
  document: Record<string, unknown>;
}

/**
 * Takes over the oldest unfinished batch whose lease is free (a failed or interrupted run's batch
 * goes to the next worker unchanged), or null when there is none.
 */
export async function claimOpenBatch(db: Db, leaseMs: number): Promise<RetentionBatch | null> {
  const [row] = await db<RetentionBatch[]>`
    update event_retention_batches b
    set claim_token = ${randomUUID()}, locked_until = now() + make_interval(secs => ${leaseMs / 1000}), attempts = b.attempts + 1
    where b.batch_id = (
      select batch_id from event_retention_batches
      where completed_at is null and (locked_until is null or locked_until < now())
      order by created_at, batch_id
      limit 1
      for update skip locked)
    returning b.batch_id, b.claim_token, b.event_count, b.attempts, b.created_at`;
  return row ?? null;
}

/**
 * Claims a new batch of up to `limit` events that occurred before `cutoff` and are purgeable: no
 * pending, failed or in-flight delivery, not waiting for fan-out, not in another batch. Stores the
 * exact event documents with the batch. Null when another batch is still unfinished or nothing is
 * eligible.
 */
export async function claimNewBatch(sql: Sql, cutoff: Date, limit: number, leaseMs: number): Promise<RetentionBatch | null> {
  return withTx(sql, async (tx) => {
    await tx`select pg_advisory_xact_lock(${CLAIM_LOCK_KEY})`;
    const [open] = await tx<{ n: number }[]>`select count(*)::int as n from event_retention_batches where completed_at is null`;
    if (open!.n > 0) return null;
    const candidates = await tx<{ id: number }[]>`
      select e.id from events e
      where e.occurred_at < ${cutoff.toISOString()}::text::timestamptz
        and not exists (
          select 1 from event_deliveries d where d.event_id = e.event_id and d.status = any(${ACTIVE_DELIVERY_STATUSES}::text[]))
        and not exists (select 1 from event_fanout_queue q where q.event_id = e.id)
        and not exists (select 1 from event_retention_batch_events c where c.event_id = e.id)
      order by e.occurred_at, e.id
      limit ${limit}`;
    if (candidates.length === 0) return null;
    const batchId = randomUUID();
    const [batch] = await tx<RetentionBatch[]>`
      insert into event_retention_batches (batch_id, cutoff, event_count, claim_token, locked_until, attempts)
      values (${batchId}, ${cutoff.toISOString()}::text::timestamptz, ${candidates.length}, ${randomUUID()},
        now() + make_interval(secs => ${leaseMs / 1000}), 1)
      returning batch_id, claim_token, event_count, attempts, created_at`;
    await tx`
      insert into event_retention_batch_events (batch_id, event_id, document)
      select ${batchId}, e.id, to_jsonb(e) from events e where e.id = any(${candidates.map((c) => c.id)}::bigint[])`;
    return batch!;
  });
}

/** The claimed event documents in id order. */
export async function batchDocuments(db: Db, batchId: string): Promise<ClaimedEvent[]> {
  return db<ClaimedEvent[]>`
    select event_id, document from event_retention_batch_events where batch_id = ${batchId} order by event_id`;
}

/** Records that the archive for the batch is in place (fenced by the claim token). */
export async function markArchived(db: Db, batch: RetentionBatch): Promise<boolean> {
  const rows = await db`
    update event_retention_batches set archived_at = coalesce(archived_at, now())
    where batch_id = ${batch.batch_id} and claim_token = ${batch.claim_token} and completed_at is null
    returning batch_id`;
  return rows.length === 1;
}

export class BatchNotOwned extends Error {}
export class BatchProtected extends Error {}

/**
 * Deletes exactly the claimed events (their remaining delivery rows cascade) and closes the batch,
 * in one transaction. Refuses (nothing deleted, claim kept) when the claim was taken over, or
 * when a claimed event gained a pending, failed or in-flight delivery since the claim.
 */
export async function completeBatch(sql: Sql, batch: RetentionBatch): Promise<number> {
  return withTx(sql, async (tx) => {
    const owned = await tx`
      select batch_id from event_retention_batches
      where batch_id = ${batch.batch_id} and claim_token = ${batch.claim_token} and completed_at is null
      for update`;
    if (owned.length !== 1) throw new BatchNotOwned('the retention batch was taken over by another worker');
    // Locking the event rows first holds back new deliveries (their foreign key needs a share lock
    // on the event) until this transaction ends, so the check below cannot go stale.
    const events = await tx<{ id: number; event_id: string }[]>`
      select e.id, e.event_id from events e
      where e.id in (select c.event_id from event_retention_batch_events c where c.batch_id = ${batch.batch_id})
      order by e.id
      for update`;
    const uuids = events.map((e) => e.event_id);
    const [busy] = await tx<{ n: number }[]>`
      select count(*)::int as n from event_deliveries
      where event_id = any(${uuids}::uuid[]) and status = any(${ACTIVE_DELIVERY_STATUSES}::text[])`;
    if (busy!.n > 0) throw new BatchProtected(`${busy!.n} claimed event deliveries are still pending, failed or in flight`);
    await tx`select set_config('svc.event_purge', 'on', true)`;
    const deleted = await tx`delete from events where id = any(${events.map((e) => e.id)}::bigint[]) returning id`;
    await tx`delete from event_retention_batch_events where batch_id = ${batch.batch_id}`;
    await tx`
      update event_retention_batches
      set completed_at = now(), claim_token = null, locked_until = null, last_error = null
      where batch_id = ${batch.batch_id}`;
    return deleted.length;
  });
}

/** Gives the batch back after a failure: the next run (any worker) takes it over at once. */
export async function releaseBatch(db: Db, batch: RetentionBatch, error: string): Promise<void> {
  await db`
    update event_retention_batches set claim_token = null, locked_until = null, last_error = ${error.slice(0, 1000)}
    where batch_id = ${batch.batch_id} and claim_token = ${batch.claim_token} and completed_at is null`;
}

/** Deletes up to `limit` succeeded or dead delivery rows last updated before `cutoff`. */
export async function purgeTerminalDeliveries(db: Db, cutoff: Date, limit: number): Promise<number> {
  const rows = await db`
    delete from event_deliveries where id in (
      select id from event_deliveries
      where status in ('succeeded', 'dead') and updated_at < ${cutoff.toISOString()}::text::timestamptz
      order by updated_at, id
      limit ${limit}
      for update skip locked)
    returning id`;
  return rows.length;
}
