// Collections: SQL only. Authorization is src/db/authz.ts; rules for moves are in the handler.
import { textPart, type Db, type TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import type { CollectionRow } from '../domain/views/collections.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';
import { eventsCte } from './events.ts';
import { notFinal, type Final } from './tx.ts';

/** The advisory lock every tree move holds (the cycle-check trigger of migration 0010 takes the same one). */
const TREE_LOCK = 727010;

export const COLLECTION_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'c.id', notNull: true },
    name: { type: 'text', column: 'c.name', notNull: true },
    description: { type: 'text', column: 'c.description', notNull: true },
    parent_collection_id: { type: 'integer', column: 'c.parent_collection_id' },
    created_at: { type: 'timestamp', column: 'c.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'c.updated_at', notNull: true },
    revision: { type: 'integer', column: 'c.revision', notNull: true },
  },
  defaultSort: [{ field: 'id', desc: false }],
  extraParams: ['permissions'],
};

/** Ancestors are ordered nearest first; no filters, no client sort. */
export const ANCESTOR_LIST_SPEC: ListSpec = {
  fields: {
    depth: { type: 'integer', column: 'a.depth', filterable: false, notNull: true },
    id: { type: 'integer', column: 'c.id', filterable: false, notNull: true },
  },
  defaultSort: [{ field: 'depth', desc: false }],
};

const COLLECTION_COLUMN_LIST = 'c.id, c.name, c.description, c.parent_collection_id, c.created_at, c.updated_at, c.revision';

/** The columns of a CollectionRow, over alias `c`. */
export function collectionCols(db: Db): Fragment {
  return textPart(db, COLLECTION_COLUMN_LIST) as Fragment;
}

/** Condition over alias `c`: the collection is a direct child of `parentId`. */
export function childOfWhere(db: Db, parentId: number): Fragment {
  return db`c.parent_collection_id = ${parentId}::int` as Fragment;
}

export async function findCollection(db: Db, id: number): Promise<CollectionRow | undefined> {
  const [row] = await db<CollectionRow[]>`select ${collectionCols(db)} from collections c where c.id = ${id}::int`;
  return row;
}

/** A collection as a write locks it: the row and the transaction's now() (the updated_at of what it writes). */
export type LockedCollection = CollectionRow & { svc_now: Date };

/**
 * Locks the row: by default for a change of its own columns (no key update: inserts below it are
 * not blocked); `for update` for its delete, which no new row below it may then reference.
 */
export async function lockCollection(
  tx: TransactionSql,
  id: number,
  strength: 'no key update' | 'update' = 'no key update',
): Promise<LockedCollection | undefined> {
  const [row] = await tx<LockedCollection[]>`
    select ${collectionCols(tx)}, now() as svc_now from collections c where c.id = ${id}::int
    ${strength === 'update' ? tx`for update` : tx`for no key update`}`;
  return row;
}

/**
 * Reads the row locked against its delete (key share), as a write that adds rows referencing it
 * would lock it anyway, only later: taking that lock first keeps the order of locks the same as a
 * delete's (the collection, then what references it).
 */
export async function shareLockCollection(tx: TransactionSql, id: number): Promise<CollectionRow | undefined> {
  const [row] = await tx<CollectionRow[]>`select ${collectionCols(tx)} from collections c where c.id = ${id}::int for key share`;
  return row;
}

/** Serializes tree moves, so that a cycle check cannot race another move. */
export async function lockCollectionTree(tx: TransactionSql): Promise<void> {
  await tx`select pg_advisory_xact_lock(${TREE_LOCK})`;
}

/**
 * Inserts the collection (with the id reserveId reserved; its times are now()), the grants
 * of `grant` on it, and `events`, in one statement; `final` marks it as the transaction's last.
 */
export async function insertCollectionWithEvents(
  tx: TransactionSql,
  actor: Actor,
  c: CollectionRow,
  grant: { groupId: number; permissions: readonly string[] } | null,
  events: NewEvent[],
  final: Final = notFinal,
): Promise<void> {
  await final(tx`
    with c as (
      insert into collections (id, name, description, parent_collection_id)
      values (${c.id}::int, ${c.name}, ${c.description}, ${c.parent_collection_id}::int)
      returning id
    )${
      grant
        ? tx`, a as (
      insert into collection_permissions (collection_id, group_id, permission)
      select c.id, ${grant.groupId}::int, p from c, unnest(${[...grant.permissions]}::text[]) as p
    )`
        : tx``
    }${eventsCte(tx, actor, events)}
    select 1 from c`);
}

export async function setCollectionParent(tx: TransactionSql, id: number, parentId: number | null): Promise<CollectionRow> {
  const [row] = await tx<CollectionRow[]>`
    update collections c set parent_collection_id = ${parentId}::int, updated_at = now(), revision = c.revision + 1
    where c.id = ${id}::int
    returning ${collectionCols(tx)}`;
  return row!;
}

/** True when `candidate` is `id` itself or one of its descendants (moving `id` under it would close a cycle). */
export async function isSelfOrDescendant(db: Db, id: number, candidate: number): Promise<boolean> {
  const [row] = await db<{ hit: boolean }[]>`
    select exists (select 1 from collection_ancestors(${candidate}::int) a where a.ancestor_id = ${id}::int) as hit`;
  return row?.hit ?? false;
}

/** What still lives in a collection and blocks its deletion. */
export interface CollectionDependents {
  children: number;
  classes: number;
  objects: number;
  remote_targets: number;
  export_templates: number;
  event_subscriptions: number;
}

export async function collectionDependents(db: Db, id: number): Promise<CollectionDependents> {
  const [row] = await db<CollectionDependents[]>`
    select
      (select count(*) from collections where parent_collection_id = ${id}::int)::int as children,
      (select count(*) from classes where collection_id = ${id}::int)::int as classes,
      (select count(*) from objects where collection_id = ${id}::int)::int as objects,
      (select count(*) from remote_targets where collection_id = ${id}::int)::int as remote_targets,
      (select count(*) from export_templates where collection_id = ${id}::int)::int as export_templates,
      (select count(*) from event_subscriptions where collection_id = ${id}::int)::int as event_subscriptions`;
  return row!;
}

/** One page of collections matching the parsed query and the caller's visibility fragments. */
export async function listCollectionRows(db: Db, parsed: ParsedList, where: Fragment[]): Promise<ListPage<CollectionRow>> {
  return runList<CollectionRow>(db, {
    from: db`collections c` as Fragment,
    select: collectionCols(db),
    where,
    parsed,
    spec: COLLECTION_LIST_SPEC,
  });
}

/** One page of the ancestors of a collection (not itself), nearest first. */
export async function listAncestorRows(db: Db, id: number, parsed: ParsedList, where: Fragment[]): Promise<ListPage<CollectionRow>> {
  return runList<CollectionRow>(db, {
    from: db`collection_ancestors(${id}::int) a join collections c on c.id = a.ancestor_id` as Fragment,
    select: collectionCols(db),
    where: [db`a.depth > 0` as Fragment, ...where],
    parsed,
    spec: ANCESTOR_LIST_SPEC,
  });
}
