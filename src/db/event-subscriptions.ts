// Event subscriptions (collection and system): SQL only. Rules are in src/domain/event-subscriptions.ts.
import { textPart, type Db, type TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { type EventSubscriptionRow } from '../domain/views/event-subscriptions.ts';
import type { EventSinkRow } from '../domain/views/event-sinks.ts';
import { sinkCols } from './event-sinks.ts';
import { eventPerRowCte, markWritten, writeWithEvents } from './events.ts';
import { notFinal, type Final } from './tx.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';

export const EVENT_SUBSCRIPTION_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 's.id', notNull: true },
    name: { type: 'text', column: 's.name', notNull: true },
    sink_id: { type: 'integer', column: 's.sink_id', sortable: false },
    enabled: { type: 'boolean', column: 's.enabled', sortable: false },
    created_at: { type: 'timestamp', column: 's.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 's.updated_at', notNull: true },
    revision: { type: 'integer', column: 's.revision', sortable: false },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

const SUBSCRIPTION_COLUMN_LIST =
  's.id, s.collection_id, s.sink_id, s.name, s.description, s.entity_types, s.actions, s.filter, s.routing, s.enabled, s.routing_admin_approved, s.created_at, s.updated_at, s.revision';

function cols(db: Db): Fragment {
  return textPart(db, SUBSCRIPTION_COLUMN_LIST) as Fragment;
}

/** Where the subscriptions of one scope live: a collection, or the system scope (null). */
function scopeWhere(db: Db, collectionId: number | null): Fragment {
  return (collectionId === null ? db`s.collection_id is null` : db`s.collection_id = ${collectionId}::int`) as Fragment;
}

export function listEventSubscriptionRows(
  db: Db,
  collectionId: number | null,
  parsed: ParsedList,
): Promise<ListPage<EventSubscriptionRow>> {
  return runList<EventSubscriptionRow>(db, {
    from: db`event_subscriptions s` as Fragment,
    select: cols(db),
    where: [scopeWhere(db, collectionId)],
    parsed,
    spec: EVENT_SUBSCRIPTION_LIST_SPEC,
  });
}

export async function findEventSubscription(db: Db, id: number): Promise<EventSubscriptionRow | undefined> {
  const [row] = await db<EventSubscriptionRow[]>`select ${cols(db)} from event_subscriptions s where s.id = ${id}::int`;
  return row;
}

/** The subscriptions of `ids` that exist (in no order). */
export async function findEventSubscriptions(db: Db, ids: number[]): Promise<EventSubscriptionRow[]> {
  return await db<EventSubscriptionRow[]>`select ${cols(db)} from event_subscriptions s where s.id = any(${ids}::int[])`;
}

/**
 * The subscription when it belongs to the scope (a collection, or null for system), locked, with the
 * transaction's now() (the updated_at of the write).
 */
export async function lockEventSubscription(
  tx: TransactionSql,
  id: number,
  collectionId: number | null,
): Promise<(EventSubscriptionRow & { svc_now: Date }) | undefined> {
  const [row] = await tx<(EventSubscriptionRow & { svc_now: Date })[]>`
    select ${cols(tx)}, now() as svc_now from event_subscriptions s where s.id = ${id}::int and ${scopeWhere(tx, collectionId)}
    for update`;
  return row;
}

/** The subscription when it belongs to the scope (a collection, or null for system). */
export async function findScopedEventSubscription(
  db: Db,
  id: number,
  collectionId: number | null,
): Promise<EventSubscriptionRow | undefined> {
  const [row] = await db<EventSubscriptionRow[]>`
    select ${cols(db)} from event_subscriptions s where s.id = ${id}::int and ${scopeWhere(db, collectionId)}`;
  return row;
}

/** Inserts the subscription `s` (its id and times reserved: reserveId) with `events`, in one statement. */
export function insertEventSubscription(
  tx: TransactionSql,
  actor: Actor,
  s: EventSubscriptionRow,
  events: NewEvent[],
  final?: Final,
): Promise<EventSubscriptionRow> {
  const write = tx`
    insert into event_subscriptions as s (id, collection_id, sink_id, name, description, entity_types, actions, filter, routing,
      enabled, routing_admin_approved)
    values (${s.id}::int, ${s.collection_id}::int, ${s.sink_id}::int, ${s.name}, ${s.description}, ${s.entity_types}::text[],
      ${s.actions}::text[], ${tx.json(s.filter as never)}, ${tx.json(s.routing as never)}, ${s.enabled}::boolean,
      ${s.routing_admin_approved}::boolean)
    returning ${cols(tx)}` as Fragment;
  return writeWithEvents(tx, actor, write, events, final);
}

/**
 * Writes the fields of `s` over its locked subscription (updated_at now(), the revision one up) with
 * `event`, in one statement. `approveRouting` true records an unscoped administrator's approval of
 * the routing for the sink; otherwise an existing approval survives only while routing and sink stay
 * the same: the statement decides, and writes its decision into the event's `after` snapshot.
 */
export async function updateEventSubscription(
  tx: TransactionSql,
  actor: Actor,
  s: EventSubscriptionRow,
  approveRouting: boolean,
  event: NewEvent,
  final: Final = notFinal,
): Promise<EventSubscriptionRow> {
  const routing = tx.json(s.routing as never);
  const [row] = await final(tx<EventSubscriptionRow[]>`
    with u as (
      update event_subscriptions s set sink_id = ${s.sink_id}::int, name = ${s.name}, description = ${s.description},
        entity_types = ${s.entity_types}::text[], actions = ${s.actions}::text[], filter = ${tx.json(s.filter as never)},
        routing = ${routing}, enabled = ${s.enabled}::boolean,
        routing_admin_approved = ${approveRouting}::boolean
          or (s.routing_admin_approved and s.sink_id = ${s.sink_id}::int and s.routing = ${routing}::jsonb),
        updated_at = now(), revision = s.revision + 1
      where s.id = ${s.id}::int
      returning ${cols(tx)}
    )${eventPerRowCte(tx, actor, 'u', event, {
      afterPatch: tx`jsonb_build_object('routing_admin_approved', u.routing_admin_approved)` as Fragment,
    })}
    select * from u`);
  markWritten(tx, event);
  return row!;
}

/** The sink `sinkId`, or when null the sink of the subscription `subscriptionId` (as locked, when sent behind its lock). */
export async function findSinkOfSubscription(db: Db, subscriptionId: number, sinkId: number | null): Promise<EventSinkRow | undefined> {
  const [row] = await db<EventSinkRow[]>`
    select ${sinkCols(db)} from event_sinks k
    where k.id = coalesce(${sinkId}::int, (select s.sink_id from event_subscriptions s where s.id = ${subscriptionId}::int))`;
  return row;
}

export async function countSubscriptionsOfSink(db: Db, sinkId: number): Promise<number> {
  const [row] = await db<{ n: number }[]>`select count(*)::int as n from event_subscriptions where sink_id = ${sinkId}::int`;
  return row?.n ?? 0;
}
