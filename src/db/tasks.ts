// Tasks: SQL only. The rules (visibility, cancel outcomes, links, Idempotency-Key) are in
// src/domain/tasks.ts.
//
// For task producers (imports, exports, remote calls, backups, restores):
//   const { task, created } = await withTx(sql, (tx) => insertTask(tx, actorOf(ctx), {
//     kind: 'export', auth, request: { ...body, /* path ids that make the submission */ },
//     idempotencyKey: input.headers['idempotency-key'],            // raw header; validated here
//     collectionId /* optional: the audit event's collection */ }));
//   return { status: 202, body: toTaskWire(task) /* domain/views/tasks.ts */, headers: { location: `/api/v1/tasks/${task.id}` } };
// `created` is false when the same key and the same submission returned an earlier task (no new
// row, no event); the same key with a different submission is 409; an empty or over-long key 400.
import type { Db, TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import { eventsCte, reserveId, type MoreEvents } from './events.ts';
import { notFinal, type Final } from './tx.ts';
import { TASKS_CHANNEL, markWake } from './wakeups.ts';
import type { NewEvent } from '../domain/new-event.ts';
import type { Actor } from '../domain/actor.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { conflict } from '../domain/errors.ts';
import { mergeMembers } from '../domain/json-patch.ts';
import {
  TASK_KINDS,
  TASK_STATUSES,
  parseIdempotencyKey,
  seesAllTasks,
  submissionHash,
  type TaskKind,
  type TaskStatus,
} from '../domain/tasks.ts';
import type { Authority } from '../domain/authz.ts';
import { type TaskEventRow } from '../domain/views/task-events.ts';
import { type TaskProgress, type TaskRow, progressCount, taskSnapshot } from '../domain/views/tasks.ts';

function taskColumns(db: Db): Fragment {
  return db`t.id, t.kind, t.status, t.submitted_by, t.cancel_requested, t.progress, t.summary, t.details,
    t.created_at, t.started_at, t.finished_at` as Fragment;
}

export const TASK_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 't.id', notNull: true },
    kind: { type: 'text', column: 't.kind', sortable: false, values: TASK_KINDS },
    status: { type: 'text', column: 't.status', sortable: false, values: TASK_STATUSES },
    submitted_by: { type: 'integer', column: 't.submitted_by', sortable: false },
    created_at: { type: 'timestamp', column: 't.created_at', notNull: true },
    started_at: { type: 'timestamp', column: 't.started_at' },
    finished_at: { type: 'timestamp', column: 't.finished_at' },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

export const TASK_EVENT_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'te.id', filterable: false, notNull: true },
    created_at: { type: 'timestamp', column: 'te.created_at', filterable: false, notNull: true },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

/** Boolean fragment over `tasks t`: the tasks the caller may see (own tasks; unscoped admins all). */
export function taskVisibleWhere(db: Db, auth: Authority): Fragment {
  if (seesAllTasks(auth)) return db`true` as Fragment;
  return db`t.submitted_by = ${auth.principal.id}::int` as Fragment;
}

export function listTaskRows(db: Db, auth: Authority, parsed: ParsedList): Promise<ListPage<TaskRow>> {
  return runList<TaskRow>(db, {
    from: db`tasks t` as Fragment,
    select: taskColumns(db),
    where: [taskVisibleWhere(db, auth)],
    parsed,
    spec: TASK_LIST_SPEC,
  });
}

export async function findTask(db: Db, id: number): Promise<TaskRow | undefined> {
  const [row] = await db<TaskRow[]>`select ${taskColumns(db)} from tasks t where t.id = ${id}::int`;
  return row;
}

/** The task, locked for the rest of the transaction. */
export async function lockTask(tx: TransactionSql, id: number): Promise<TaskRow | undefined> {
  const [row] = await tx<TaskRow[]>`select ${taskColumns(tx)} from tasks t where t.id = ${id}::int for update`;
  return row;
}

export function listTaskEventRows(db: Db, taskId: number, parsed: ParsedList): Promise<ListPage<TaskEventRow>> {
  return runList<TaskEventRow>(db, {
    from: db`task_events te` as Fragment,
    select: db`te.id, te.task_id, te.event_type, te.message, te.data, te.created_at` as Fragment,
    where: [db`te.task_id = ${taskId}::int` as Fragment],
    parsed,
    spec: TASK_EVENT_LIST_SPEC,
  });
}

/** Appends one row of task history (GET /tasks/{id}/events). */
export async function insertTaskEvent(
  db: Db,
  taskId: number,
  eventType: string,
  message: string,
  data: unknown = null,
): Promise<TaskEventRow> {
  const [row] = await db<TaskEventRow[]>`
    insert into task_events (task_id, event_type, message, data)
    values (${taskId}::int, ${eventType}, ${message}, ${data === null || data === undefined ? null : db.json(data as never)})
    returning id, task_id, event_type, message, data, created_at`;
  return row!;
}

/** queued → cancelled (the caller holds the row lock and has checked the status). */
export async function setTaskCancelled(tx: TransactionSql, id: number): Promise<TaskRow> {
  const [row] = await tx<TaskRow[]>`
    update tasks t set status = 'cancelled', cancel_requested = true, finished_at = now(), updated_at = now(),
      claim_token = null, locked_until = null
    where t.id = ${id}::int
    returning ${taskColumns(tx)}`;
  return row!;
}

/** validating/running: raise the cancel request the worker checks at its next checkpoint. */
export async function setTaskCancelRequested(tx: TransactionSql, id: number): Promise<TaskRow> {
  const [row] = await tx<TaskRow[]>`
    update tasks t set cancel_requested = true, updated_at = now()
    where t.id = ${id}::int
    returning ${taskColumns(tx)}`;
  return row!;
}

export interface NewTask {
  kind: TaskKind;
  /** The submitter: its principal id, token id and token scope are snapshotted on the row. */
  auth: { principal: { id: number }; token: { id: number | null; scope: unknown } };
  /**
   * The submission as a JSON document: the request body plus anything else that identifies it
   * (path ids). Stored on the row for the worker; its canonical hash decides "same submission".
   */
  request: Record<string, unknown>;
  /** The raw Idempotency-Key header (undefined when absent); validated here (400). */
  idempotencyKey?: string | null;
  /** Initial status (default queued). */
  status?: TaskStatus;
  progress?: Partial<TaskProgress>;
  summary?: unknown;
  details?: unknown;
  /** Collection the task.queued audit event is attached to (default: collection-less). */
  collectionId?: number | null;
  relatedCollectionIds?: number[];
  /** Extra audit metadata for the task.queued event (task_kind is always set). */
  metadata?: Record<string, unknown>;
}

/**
 * Creates a task row inside the caller's transaction, with its first task event and the
 * `task.queued` audit event (and `opts.more`, the events of the submission itself, after it), in one
 * statement (`opts.final`: COMMIT goes with it). Its id and
 * created_at are reserved first (`opts.reserved`: a reservation the caller sent beside its own
 * checks, so that it costs no round trip of its own). With an Idempotency-Key: the same key and the
 * same submission (kind + canonical request) returns the earlier task with created = false; the same
 * key with another submission is 409; an empty key or one over 255 bytes is 400. Keys are per
 * submitter and serialized with an advisory lock, so concurrent retries yield one task (the lock
 * and the look-up of the key go out together).
 */
export async function insertTask(
  tx: TransactionSql,
  actor: Actor,
  t: NewTask,
  opts: { reserved?: Promise<{ id: number; now: Date }>; final?: Final; more?: (task: TaskRow) => MoreEvents } = {},
): Promise<{ task: TaskRow; created: boolean }> {
  const key = parseIdempotencyKey(t.idempotencyKey);
  const hash = submissionHash(t.kind, t.request);
  const submittedBy = t.auth.principal.id;
  if (key !== null) {
    const locking = lockIdempotencyKey(tx, submittedBy, key);
    const finding = taskOfIdempotencyKey(tx, submittedBy, key); // behind the lock: what an earlier holder committed
    finding.catch(() => undefined); // awaited below
    await locking;
    const existing = await finding;
    if (existing) {
      if (existing.kind !== t.kind || existing.request_hash !== hash) {
        throw conflict('this Idempotency-Key was already used for a different submission', 'idempotency_key_reused');
      }
      const { request_hash: _omit, ...task } = existing;
      return { task: task as TaskRow, created: false };
    }
  }
  const progress = {
    total_items: progressCount(t.progress?.total_items),
    processed_items: progressCount(t.progress?.processed_items),
    success_items: progressCount(t.progress?.success_items),
    failed_items: progressCount(t.progress?.failed_items),
  };
  const { id, now } = await (opts.reserved ?? reserveId(tx, 'tasks'));
  const task: TaskRow = {
    id,
    kind: t.kind,
    status: t.status ?? 'queued',
    submitted_by: submittedBy,
    cancel_requested: false,
    progress,
    summary: t.summary ?? null,
    details: t.details ?? null,
    created_at: now,
    started_at: null,
    finished_at: null,
  };
  const event: NewEvent = {
    entityType: 'task',
    entityId: task.id,
    entityName: null,
    collectionId: t.collectionId ?? null,
    relatedCollectionIds: t.relatedCollectionIds,
    action: task.status,
    summary: `${task.kind} task ${task.id} ${task.status}`,
    after: taskSnapshot(task),
    metadata: mergeMembers(t.metadata, { task_kind: task.kind }),
  };
  const scope = t.auth.token.scope ?? null;
  const json = (v: unknown) => (v === undefined || v === null ? null : tx.json(v as never));
  await (opts.final ?? notFinal)(tx`
    with t as (
      insert into tasks (id, kind, status, submitted_by, submitted_token_id, token_scope, token_scoped, idempotency_key,
        request_hash, request, progress, summary, details)
      values (${task.id}::int, ${task.kind}, ${task.status}, ${submittedBy}::int, ${t.auth.token.id}::int, ${json(scope)},
        ${scope !== null}::boolean, ${key}::text, ${hash}, ${tx.json(t.request as never)}, ${tx.json(progress as never)},
        ${json(task.summary)}, ${json(task.details)})
      returning id
    ), te as (
      insert into task_events (task_id, event_type, message) select t.id, ${task.status}, ${`${task.kind} task ${task.status}`} from t
    )${eventsCte(tx, actor, [event], opts.more?.(task))}
    select 1 from t`);
  markWake(tx, TASKS_CHANNEL);
  return { task, created: true };
}

async function lockIdempotencyKey(tx: TransactionSql, submittedBy: number, key: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(727050, hashtext(${`${submittedBy}:${key}`}::text))`;
}

async function taskOfIdempotencyKey(
  tx: TransactionSql,
  submittedBy: number,
  key: string,
): Promise<(TaskRow & { request_hash: string | null }) | undefined> {
  const [row] = await tx<(TaskRow & { request_hash: string | null })[]>`
    select ${taskColumns(tx)}, t.request_hash from tasks t
    where t.submitted_by = ${submittedBy}::int and t.idempotency_key = ${key}::text
    order by t.id limit 1`;
  return row;
}
