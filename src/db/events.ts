import { textPart, type Db } from './sql.ts';
import { actorBinding, bindActor } from './history.ts';
import { notFinal, type Final } from './tx.ts';
import type { Fragment } from './list.ts';
import type { Actor } from '../domain/actor.ts';
import { cacheDropsOf, markAuthChange } from './auth-changes.ts';
import { EVENTS_CHANNEL, markWake } from './wakeups.ts';
import type { NewEvent } from '../domain/new-event.ts';
import { mergeMembers } from '../domain/json-patch.ts';

/**
 * Appends one audit event inside the caller's transaction, so the event exists only if the change
 * commits. Snapshots must never hold secrets, raw tokens, token hashes or password hashes.
 */
export async function appendEvent(tx: Db, actor: Actor, e: NewEvent, final: Final = notFinal): Promise<{ id: number; event_id: string }> {
  const [row] = await final(tx<{ id: number; event_id: string }[]>`
    insert into events (${EVENT_COLUMNS(tx)}) values ${eventValues(tx, actor, e)}
    returning id, event_id`);
  return row!;
}

/**
 * At most this many audit events go into one statement: a statement takes at most 65,535
 * parameters, and an event about twenty.
 */
export const EVENTS_IN_STATEMENT = 200;

/** Appends events in order, EVENTS_IN_STATEMENT to a statement, one statement after another. */
export async function appendMany(tx: Db, actor: Actor, events: NewEvent[]): Promise<void> {
  for (let i = 0; i < events.length; i += EVENTS_IN_STATEMENT) {
    await tx`${insertEventsSql(tx, actor, events.slice(i, i + EVENTS_IN_STATEMENT))}`;
  }
}

/** The tables whose rows reserveId and deleteRowWithEvents write. */
export type RowTable =
  | 'objects'
  | 'object_relations'
  | 'collections'
  | 'classes'
  | 'groups'
  | 'principals'
  | 'computed_fields'
  | 'event_sinks'
  | 'event_subscriptions'
  | 'tasks'
  | 'tokens'
  | 'export_templates'
  | 'remote_targets';

/**
 * A new row's id, reserved from the identity of `table`, and the transaction's now() (its created_at
 * and updated_at): sent with the statements before the insert, so that the insert and its audit
 * events, which need both, are one statement. An id reserved and not used leaves a gap.
 */
export async function reserveId(tx: Db, table: RowTable): Promise<{ id: number; now: Date }> {
  const [row] = await tx<{ id: number; now: Date }[]>`select nextval(pg_get_serial_sequence(${table}, 'id'))::int as id, now() as now`;
  return row!;
}

/**
 * Deletes the row `id` of `table` (locked by the caller; what references it goes with it by its
 * foreign keys' on delete cascade) and appends `events` in one statement; with `bindsActor` the
 * statement also binds the actor (actorBinding). More events than a statement takes (an object
 * with thousands of relations) are appended first, all but the last, by appendMany.
 */
export async function deleteRowWithEvents(
  tx: Db,
  actor: Actor,
  table: RowTable,
  id: number,
  events: NewEvent[],
  final: Final = notFinal,
  bindsActor = false,
): Promise<void> {
  if (events.length > EVENTS_IN_STATEMENT) {
    // the actor is bound before anything is written (the history triggers read it)
    if (bindsActor) await bindActor(tx, actor);
    await appendMany(tx, actor, events.slice(0, -1));
    return deleteRowWithEvents(tx, actor, table, id, events.slice(-1), final);
  }
  const b = actorBinding(tx, actor, bindsActor);
  await final(tx`
    with ${b.cte}d as (delete from ${textPart(tx, table)} ${b.using} where id = ${id}::int returning id)${eventsCte(tx, actor, events)}
    select count(*) from d`);
}

/**
 * Sets the name and description of the row `after.id` of `table` (locked by the caller; updated_at
 * now(), the revision one up, as the caller built `after`) and appends `event`, in one statement.
 */
export async function updateNameWithEvent(
  tx: Db,
  actor: Actor,
  table: 'collections' | 'groups',
  after: { id: number; name: string; description: string },
  event: NewEvent,
  final: Final = notFinal,
): Promise<void> {
  await final(tx`
    with u as (
      update ${textPart(tx, table)} as r set name = ${after.name}, description = ${after.description}, updated_at = now(), revision = r.revision + 1
      where r.id = ${after.id}::int
      returning r.id
    )${eventsCte(tx, actor, [event])}
    select 1 from u`);
}

/**
 * The `insert into events` of `events` as a statement fragment, for a write that appends its events
 * in the same statement as its row (a data-modifying CTE): one round trip instead of two.
 */
export function insertEventsSql(tx: Db, actor: Actor, events: NewEvent[], more?: MoreEvents): Fragment {
  const values = [...events.map((e) => eventValues(tx, actor, e)), ...(more?.events.map((e) => eventValues(tx, more.actor, e)) ?? [])];
  return tx`insert into events (${EVENT_COLUMNS(tx)}) values ${values.slice(1).reduce((all, v) => tx`${all}, ${v}` as Fragment, values[0]!)}` as Fragment;
}

/**
 * `, e as (insert into events … select … from <rows>)`: `event` appended once for each row that the
 * statement's CTE named `rows` returns, for a write that may turn out to change nothing (an insert …
 * on conflict do nothing, a delete of what is not there): no row, no event. `fromRow.afterPatch`, a
 * jsonb expression over the row, is merged into the `after` snapshot (a value only the write knows,
 * as a revocation's time); `fromRow.entityId`, an expression over the row, is the event's entity_id
 * (a row whose id the insert gives). It leaves marking the transaction for the token cache to the caller,
 * who knows after the statement whether it wrote (markWritten).
 */
export function eventPerRowCte(
  tx: Db,
  actor: Actor,
  rows: string,
  event: NewEvent,
  fromRow: { afterPatch?: Fragment; entityId?: Fragment } = {},
): Fragment {
  return tx`, e as (insert into events (${EVENT_COLUMNS(tx)}) select ${eventValueList(tx, actor, event, false, fromRow)} from ${tx(rows)})` as Fragment;
}

/**
 * For an event appended in `tx` (by eventPerRowCte: once the statement shows it wrote): notes in the
 * transaction what its change makes stale in the token cache, and that the fan-out workers are to
 * be woken after its COMMIT.
 */
export function markWritten(tx: Db, event: NewEvent): void {
  markAuthChange(tx, cacheDropsOf(event));
  markWake(tx, EVENTS_CHANNEL);
}

/**
 * A timestamp column (SQL text, e.g. `r.issued`) as the ISO 8601 UTC text cut to milliseconds that
 * isoTime writes, for a snapshot the database completes (afterPatch, rowEventInsertText).
 */
export function isoTimeText(column: string): string {
  return `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

/**
 * `write` (an insert or update of one table returning the written row's columns) and its `events`
 * in one statement; returns the row as written. `final`: COMMIT goes with it.
 */
export async function writeWithEvents<R extends object>(
  tx: Db,
  actor: Actor,
  write: Fragment,
  events: NewEvent[],
  final: Final = notFinal,
): Promise<R> {
  const [row] = await final(tx<R[]>`with w as (${write})${eventsCte(tx, actor, events)} select * from w`);
  return row!;
}

/** `, e as (insert into events …)`: the events as one more CTE of a write's statement; nothing when there are none. */
export function eventsCte(tx: Db, actor: Actor, events: NewEvent[], more?: MoreEvents): Fragment {
  return (events.length || more?.events.length ? tx`, e as (${insertEventsSql(tx, actor, events, more)})` : tx``) as Fragment;
}

/** Events of another actor appended after a write's own, in the same insert (so in that order). */
export interface MoreEvents {
  actor: Actor;
  events: NewEvent[];
}

const EVENT_COLUMN_LIST = `entity_type, entity_id, entity_name, collection_id, related_collection_ids, action,
      actor_kind, actor_user_id, initiator_user_id, task_id, provenance, request_id, correlation_id,
      summary, before, after, before_revision, after_revision, metadata, schema_version`;

function EVENT_COLUMNS(tx: Db): Fragment {
  return tx.unsafe(EVENT_COLUMN_LIST) as unknown as Fragment;
}

/** One parenthesised row of event values (columns as EVENT_COLUMNS). */
function eventValues(tx: Db, actor: Actor, e: NewEvent): Fragment {
  return tx`(${eventValueList(tx, actor, e)})` as Fragment;
}

/**
 * The values of one event (columns as EVENT_COLUMNS); `mark`: marks the transaction (markWritten)
 * now; `afterPatch`: a jsonb expression merged into the `after` snapshot; `entityId`: an expression
 * for entity_id.
 */
function eventValueList(
  tx: Db,
  actor: Actor,
  e: NewEvent,
  mark = true,
  { afterPatch, entityId }: { afterPatch?: Fragment; entityId?: Fragment } = {},
): Fragment {
  if (mark) markWritten(tx, e);
  const v = eventFields(actor, e);
  const after = e.after === undefined || e.after === null ? null : tx.json(e.after as never);
  return tx`${e.entityType}, ${entityId ?? e.entityId}, ${e.entityName ?? null}, ${e.collectionId ?? null}, ${v.related}::int[],
      ${e.action}, ${actor.kind}, ${v.actorUserId}, ${v.initiatorId},
      ${actor.taskId ?? null}, ${tx.json(v.provenance as never)}, ${actor.requestId ?? null}, ${actor.correlationId ?? null},
      ${e.summary ?? null}, ${e.before === undefined || e.before === null ? null : tx.json(e.before as never)},
      ${afterPatch && after !== null ? tx`${after}::jsonb || ${afterPatch}` : after},
      ${e.beforeRevision ?? null}, ${e.afterRevision ?? null}, ${tx.json(v.metadata as never)}, 2` as Fragment;
}

/** What an event row holds beyond the event itself: its actor's columns and provenance, the related collections, the metadata. */
function eventFields(actor: Actor, e: NewEvent) {
  const initiatorId = actor.initiatorId ?? (actor.kind === 'user' ? actor.principalId : null);
  const initiatorName = actor.initiatorName ?? (actor.kind === 'user' ? actor.principalName : null);
  const provenance = {
    actor: {
      kind: actor.kind,
      principal: actor.principalId === null ? null : { id: actor.principalId, name: actor.principalName },
    },
    initiator: initiatorId === null ? null : { principal_id: initiatorId, name: initiatorName },
    task_id: actor.taskId ?? null,
  };
  const related = [...new Set(e.relatedCollectionIds ?? [])].filter((c) => c !== e.collectionId);
  const metadata: Record<string, unknown> = mergeMembers(e.metadata);
  if (related.length) metadata.related_collection_ids = related;
  return { actorUserId: actor.kind === 'user' ? actor.principalId : null, initiatorId, provenance, related, metadata };
}

/**
 * Columns of rowEventInsertText that a statement writes from its own rows: each gets its parameter's
 * placeholder (e.g. `$21`) and returns the column's SQL expression, which must use it (every
 * parameter of a statement needs a use that gives it a type).
 */
export type RowEventColumns = Partial<
  Record<'entity_name' | 'summary' | 'before' | 'after' | 'before_revision' | 'after_revision' | 'metadata', (param: string) => string>
>;

/**
 * The event of the row that a statement's `o` CTE inserts, for a write that does not know that row's
 * id and times before the statement runs, as statement text (such a statement is kept as constant
 * text, so the driver neither builds it nor looks up its prepared statement anew per write):
 * `insert into events (…) select … from o`, nothing when `o` inserts nothing. Its entity_id is
 * `o.id`, and its `after` snapshot is the event's with `id`, `created_at` and `updated_at` taken
 * from `o` (the times as ISO 8601 UTC text cut to milliseconds, as isoTime writes them). The event's
 * own values are the parameters from `$first` on, in the order rowEventParams gives them. `columns`
 * replaces some columns' expressions (a write that reads the row it changes in the same statement,
 * whose event's snapshots and revisions are that row's), and `from` the rows they read.
 */
export function rowEventInsertText(first: number, columns: RowEventColumns = {}, from = 'o'): string {
  const p = (i: number) => `$${first + i}`;
  const col = (name: keyof RowEventColumns, i: number, plain: string) => {
    const expr = columns[name]?.(p(i));
    if (expr === undefined) return plain;
    if (!new RegExp(`\\${p(i)}(?!\\d)`).test(expr)) throw new Error(`rowEventInsertText: ${name} does not use ${p(i)}`);
    return expr;
  };
  return `insert into events (${EVENT_COLUMN_LIST})
    select ${p(0)}::text, o.id, ${col('entity_name', 1, `${p(1)}::text`)}, ${p(2)}::int, ${p(3)}::int[], ${p(4)}::text, ${p(5)}::text, ${p(6)}::int,
      ${p(7)}::int, ${p(8)}::int, ${p(9)}::text::jsonb, ${p(10)}::text, ${p(11)}::text, ${col('summary', 12, `${p(12)}::text`)},
      ${col('before', 13, `${p(13)}::text::jsonb`)},
      ${col('after', 14, `${p(14)}::text::jsonb || jsonb_build_object('id', o.id, 'created_at', ${isoTimeText('o.created_at')}, 'updated_at', ${isoTimeText('o.updated_at')})`)},
      ${col('before_revision', 15, `${p(15)}::int`)}, ${col('after_revision', 16, `${p(16)}::int`)}, ${col('metadata', 17, `${p(17)}::text::jsonb`)}, 2
    from ${from}`;
}

/** How many parameters rowEventInsertText takes (rowEventParams' length), read off its text. */
export const ROW_EVENT_PARAMS = new Set(rowEventInsertText(1).match(/\$\d+/g)).size;

/**
 * The parameters of rowEventInsertText, in its order. The statement may write no row: its caller
 * marks the transaction (markWritten) once it returns one.
 */
export function rowEventParams(actor: Actor, e: NewEvent): unknown[] {
  const v = eventFields(actor, e);
  const json = (x: unknown) => (x === undefined || x === null ? null : JSON.stringify(x));
  return [
    e.entityType,
    e.entityName ?? null,
    e.collectionId ?? null,
    v.related,
    e.action,
    actor.kind,
    v.actorUserId,
    v.initiatorId,
    actor.taskId ?? null,
    JSON.stringify(v.provenance),
    actor.requestId ?? null,
    actor.correlationId ?? null,
    e.summary ?? null,
    json(e.before),
    json(e.after),
    e.beforeRevision ?? null,
    e.afterRevision ?? null,
    JSON.stringify(v.metadata),
  ];
}
