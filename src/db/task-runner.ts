// The task runner's SQL (src/workers/tasks.ts): claiming with `for update skip locked` and a
// fenced claim token, lease renewal, the pre-dispatch submitter check, fenced finalization, and
// the recovery of tasks whose worker vanished. Every status change writes its task_events row and
// its task lifecycle audit event (actor_kind worker, initiator = submitter) in the same transaction.
import type { Db, TransactionSql } from './sql.ts';
import { appendEvent } from './events.ts';
import type { Actor } from '../domain/actor.ts';
import { insertTaskEvent } from './tasks.ts';
import { taskSnapshot, type TaskRow } from '../domain/views/tasks.ts';
import type { ScopeValue } from '../domain/authz.ts';
import type { PrincipalKind } from '../domain/principals.ts';

export interface ClaimedTask extends TaskRow {
  submitted_token_id: number | null;
  token_scoped: boolean;
  token_scope: ScopeValue | null;
  request: Record<string, unknown>;
  claim_token: string | null;
  locked_until: Date | null;
  attempts: number;
}

export interface Submitter {
  id: number;
  kind: PrincipalKind;
  name: string;
  disabled: boolean;
  is_admin: boolean;
}

function columns(db: Db) {
  return db`t.id, t.kind, t.status, t.submitted_by, t.cancel_requested, t.progress, t.summary, t.details, t.created_at,
    t.started_at, t.finished_at, t.submitted_token_id, t.token_scoped, t.token_scope, t.request, t.claim_token,
    t.locked_until, t.attempts`;
}

/** The submitting principal now: existence, kind, disabled flag and live admin membership. */
export async function findSubmitter(db: Db, principalId: number, admin: { group: string; scope: string }): Promise<Submitter | undefined> {
  const [row] = await db<Submitter[]>`
    select p.id, p.kind, p.name, (sa.disabled_at is not null) as disabled,
      exists (select 1 from group_members gm join groups g on g.id = gm.group_id
              where gm.principal_id = p.id and g.name = ${admin.group} and g.identity_scope = ${admin.scope}) as is_admin
    from principals p left join service_accounts sa on sa.principal_id = p.id
    where p.id = ${principalId}::int`;
  return row;
}

/** The oldest queued task of the given kinds (optionally narrowed), locked; skips rows other workers hold. */
export async function lockNextQueuedTask(
  tx: TransactionSql,
  kinds: string[],
  only: { taskIds?: number[]; submittedBy?: number[] } = {},
): Promise<ClaimedTask | undefined> {
  const [row] = await tx<ClaimedTask[]>`
    select ${columns(tx)} from tasks t
    where t.status = 'queued' and t.kind = any(${kinds}::text[])
      ${only.taskIds ? tx`and t.id = any(${only.taskIds}::int[])` : tx``}
      ${only.submittedBy ? tx`and t.submitted_by = any(${only.submittedBy}::int[])` : tx``}
    order by t.id
    limit 1
    for update skip locked`;
  return row;
}

/** queued → running with a fresh claim token and lease. */
export async function markClaimed(tx: TransactionSql, id: number, leaseMs: number): Promise<ClaimedTask> {
  const [row] = await tx<ClaimedTask[]>`
    update tasks t set status = 'running', claim_token = gen_random_uuid(),
      locked_until = now() + make_interval(secs => ${leaseMs / 1000}::float8),
      started_at = coalesce(t.started_at, now()), attempts = t.attempts + 1, updated_at = now()
    where t.id = ${id}::int
    returning ${columns(tx)}`;
  return row!;
}

/**
 * Extends the lease while the claim is still ours. Returns cancel_requested, or null when the
 * claim was lost (another worker recovered the task, or it was finalized elsewhere).
 */
export async function renewClaim(db: Db, id: number, claimToken: string, leaseMs: number): Promise<boolean | null> {
  const [row] = await db<{ cancel_requested: boolean }[]>`
    update tasks set locked_until = now() + make_interval(secs => ${leaseMs / 1000}::float8)
    where id = ${id}::int and claim_token = ${claimToken}::uuid and status in ('validating', 'running')
    returning cancel_requested`;
  return row ? row.cancel_requested : null;
}

/** The task locked for finalization, only while the claim is still ours. */
export async function lockClaimedTask(tx: TransactionSql, id: number, claimToken: string): Promise<ClaimedTask | undefined> {
  const [row] = await tx<ClaimedTask[]>`
    select ${columns(tx)} from tasks t
    where t.id = ${id}::int and t.claim_token = ${claimToken}::uuid and t.status in ('validating', 'running')
    for update`;
  return row;
}

export type FinalStatus = 'succeeded' | 'failed' | 'partially_succeeded' | 'cancelled';

export interface Finish {
  status: FinalStatus;
  summary?: unknown;
  details?: unknown;
  progress?: Partial<Record<'total_items' | 'processed_items' | 'success_items' | 'failed_items', number>>;
}

/** Sets the final status (the caller holds the row lock) and clears the claim. */
export async function markFinished(tx: TransactionSql, id: number, f: Finish): Promise<ClaimedTask> {
  const json = (v: unknown) => (v === undefined || v === null ? null : tx.json(v as never));
  const [row] = await tx<ClaimedTask[]>`
    update tasks t set status = ${f.status}, finished_at = now(), updated_at = now(), claim_token = null, locked_until = null,
      summary = coalesce(${json(f.summary)}::jsonb, t.summary),
      details = coalesce(${json(f.details)}::jsonb, t.details),
      progress = t.progress || coalesce(${json(f.progress)}::jsonb, '{}'::jsonb)
    where t.id = ${id}::int
    returning ${columns(tx)}`;
  return row!;
}

/** Running tasks whose lease ran out (their worker stopped), locked for recovery. */
export async function lockExpiredClaims(tx: TransactionSql, limit: number): Promise<ClaimedTask[]> {
  return tx<ClaimedTask[]>`
    select ${columns(tx)} from tasks t
    where t.status in ('validating', 'running') and t.locked_until is not null and t.locked_until < now()
    order by t.id
    limit ${limit}
    for update skip locked`;
}

/** The collection (and related collections) the task's queued event was attached to, so its later events match. */
export async function taskAuditCollections(db: Db, taskId: number): Promise<{ collectionId: number | null; related: number[] }> {
  const [row] = await db<{ collection_id: number | null; related_collection_ids: number[] }[]>`
    select collection_id, related_collection_ids from events
    where entity_type = 'task' and entity_id = ${taskId}::int and action = 'queued'
    order by id limit 1`;
  return { collectionId: row?.collection_id ?? null, related: row?.related_collection_ids ?? [] };
}

/** One lifecycle step of a task: its task_events row and its audit event. */
export async function recordTaskTransition(
  tx: TransactionSql,
  actor: Actor,
  before: ClaimedTask,
  after: ClaimedTask,
  message: string,
  data: unknown = null,
): Promise<void> {
  await insertTaskEvent(tx, after.id, after.status, message, data);
  const where = await taskAuditCollections(tx, after.id);
  await appendEvent(tx, actor, {
    entityType: 'task',
    entityId: after.id,
    entityName: null,
    collectionId: where.collectionId,
    relatedCollectionIds: where.related,
    action: after.status,
    summary: `${after.kind} task ${after.id} ${after.status}`,
    before: taskSnapshot(before),
    after: taskSnapshot(after),
    metadata: { task_kind: after.kind },
  });
}
