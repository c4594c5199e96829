// Event sinks: SQL only. Rules are in src/domain/event-subscriptions.ts and src/sinks/.
import { textPart, type Db, type TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import type { SinkFields } from '../domain/event-subscriptions.ts';
import { type EventSinkRow } from '../domain/views/event-sinks.ts';
import { writeWithEvents } from './events.ts';
import type { Final } from './tx.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';

export const EVENT_SINK_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'k.id', notNull: true },
    name: { type: 'text', column: 'k.name', notNull: true },
    kind: { type: 'text', column: 'k.kind', values: ['webhook', 'amqp', 'redis_stream', 'email'], notNull: true },
    enabled: { type: 'boolean', column: 'k.enabled', sortable: false },
    created_at: { type: 'timestamp', column: 'k.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'k.updated_at', notNull: true },
    revision: { type: 'integer', column: 'k.revision', sortable: false },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

const SINK_COLUMN_LIST =
  'k.id, k.name, k.kind, k.config, k.secret_ref, k.enabled, k.min_interval_ms, k.created_at, k.updated_at, k.revision';

/** A sink's columns, over alias `k`. */
export function sinkCols(db: Db): Fragment {
  return textPart(db, SINK_COLUMN_LIST) as Fragment;
}

export function listEventSinkRows(db: Db, parsed: ParsedList): Promise<ListPage<EventSinkRow>> {
  return runList<EventSinkRow>(db, { from: db`event_sinks k` as Fragment, select: sinkCols(db), parsed, spec: EVENT_SINK_LIST_SPEC });
}

export async function findEventSink(db: Db, id: number): Promise<EventSinkRow | undefined> {
  const [row] = await db<EventSinkRow[]>`select ${sinkCols(db)} from event_sinks k where k.id = ${id}::int`;
  return row;
}

/** The sinks of `ids` that exist (in no order). */
export async function findEventSinks(db: Db, ids: number[]): Promise<EventSinkRow[]> {
  return await db<EventSinkRow[]>`select ${sinkCols(db)} from event_sinks k where k.id = any(${ids}::int[])`;
}

/** The sink locked for a write, with the transaction's now() (the updated_at of the write). */
export async function lockEventSink(tx: TransactionSql, id: number): Promise<(EventSinkRow & { svc_now: Date }) | undefined> {
  const [row] = await tx<(EventSinkRow & { svc_now: Date })[]>`
    select ${sinkCols(tx)}, now() as svc_now from event_sinks k where k.id = ${id}::int for update`;
  return row;
}

export async function insertEventSink(tx: TransactionSql, f: SinkFields): Promise<EventSinkRow> {
  const [row] = await tx<EventSinkRow[]>`
    insert into event_sinks as k (name, kind, config, secret_ref, enabled, min_interval_ms)
    values (${f.name}, ${f.kind}, ${tx.json(f.config as never)}, ${f.secret_ref}::text, ${f.enabled}::boolean,
      ${f.delivery_policy.min_interval_ms}::int)
    returning ${sinkCols(tx)}`;
  return row!;
}

/** Writes `k` over its locked sink (updated_at now(), the revision one up) with `events`, in one statement. */
export function updateEventSink(
  tx: TransactionSql,
  actor: Actor,
  k: EventSinkRow,
  events: NewEvent[],
  final?: Final,
): Promise<EventSinkRow> {
  const write = tx`
    update event_sinks k set name = ${k.name}, kind = ${k.kind}, config = ${tx.json(k.config as never)},
      secret_ref = ${k.secret_ref}::text, enabled = ${k.enabled}::boolean, min_interval_ms = ${k.min_interval_ms}::int,
      updated_at = now(), revision = k.revision + 1
    where k.id = ${k.id}::int
    returning ${sinkCols(tx)}` as Fragment;
  return writeWithEvents(tx, actor, write, events, final);
}

/** The routing objects of the subscriptions that use a sink (for re-validation on sink changes). */
export async function subscriptionRoutingsOfSink(db: Db, sinkId: number): Promise<{ id: number; routing: Record<string, unknown> }[]> {
  return db<{ id: number; routing: Record<string, unknown> }[]>`
    select id, routing from event_subscriptions where sink_id = ${sinkId}::int order by id`;
}
