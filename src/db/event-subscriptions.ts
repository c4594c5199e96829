// Event subscriptions (collection and system): SQL only. Rules are in src/domain/event-subscriptions.ts.
import { textPart, type Db, type TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import type { SubscriptionFields } from '../domain/event-subscriptions.ts';
import { type EventSubscriptionRow } from '../domain/views/event-subscriptions.ts';

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

/** The subscription when it belongs to the scope (a collection, or null for system), locked. */
export function lockEventSubscription(
  tx: TransactionSql,
  id: number,
  collectionId: number | null,
): Promise<EventSubscriptionRow | undefined> {
  return findScopedEventSubscription(tx, id, collectionId, { lock: true });
}

/** The subscription when it belongs to the scope (a collection, or null for system). */
export async function findScopedEventSubscription(
  db: Db,
  id: number,
  collectionId: number | null,
  opts: { lock?: boolean } = {},
): Promise<EventSubscriptionRow | undefined> {
  const [row] = await db<EventSubscriptionRow[]>`
    select ${cols(db)} from event_subscriptions s where s.id = ${id}::int and ${scopeWhere(db, collectionId)}
    ${opts.lock ? db`for update` : db``}`;
  return row;
}

/** Inserts a subscription; `routingApproved` only when an unscoped administrator wrote it. */
export async function insertEventSubscription(
  tx: TransactionSql,
  f: SubscriptionFields,
  routingApproved = false,
): Promise<EventSubscriptionRow> {
  const [row] = await tx<EventSubscriptionRow[]>`
    insert into event_subscriptions as s (collection_id, sink_id, name, description, entity_types, actions, filter, routing, enabled,
      routing_admin_approved)
    values (${f.collection_id}::int, ${f.sink_id}::int, ${f.name}, ${f.description}, ${f.entity_types}::text[], ${f.actions}::text[],
      ${tx.json(f.filter as never)}, ${tx.json(f.routing as never)}, ${f.enabled}::boolean, ${routingApproved}::boolean)
    returning ${cols(tx)}`;
  return row!;
}

/**
 * Updates a subscription. `approveRouting` true records an unscoped administrator's approval of
 * the routing for the sink; otherwise an existing approval survives only while routing and sink
 * stay the same.
 */
export async function updateEventSubscriptionRow(
  tx: TransactionSql,
  id: number,
  f: SubscriptionFields,
  approveRouting = false,
): Promise<EventSubscriptionRow> {
  const routing = tx.json(f.routing as never);
  const [row] = await tx<EventSubscriptionRow[]>`
    update event_subscriptions s set sink_id = ${f.sink_id}::int, name = ${f.name}, description = ${f.description},
      entity_types = ${f.entity_types}::text[], actions = ${f.actions}::text[], filter = ${tx.json(f.filter as never)},
      routing = ${routing}, enabled = ${f.enabled}::boolean,
      routing_admin_approved = ${approveRouting}::boolean
        or (s.routing_admin_approved and s.sink_id = ${f.sink_id}::int and s.routing = ${routing}::jsonb),
      updated_at = now(), revision = s.revision + 1
    where s.id = ${id}::int
    returning ${cols(tx)}`;
  return row!;
}

export async function deleteEventSubscriptionRow(tx: TransactionSql, id: number): Promise<void> {
  await tx`delete from event_subscriptions where id = ${id}::int`;
}

export async function countSubscriptionsOfSink(db: Db, sinkId: number): Promise<number> {
  const [row] = await db<{ n: number }[]>`select count(*)::int as n from event_subscriptions where sink_id = ${sinkId}::int`;
  return row?.n ?? 0;
}
