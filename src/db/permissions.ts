// Collection permission grants: SQL only. Every change appends its permission.granted /
// permission.revoked event in the caller's transaction; unchanged grants append nothing.
import type { Db, TransactionSql } from './sql.ts';
import { eventsCte } from './events.ts';
import { notFinal, type Final } from './tx.ts';
import type { NewEvent } from '../domain/new-event.ts';
import type { Actor } from '../domain/actor.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { PERMISSIONS, sortPermissions, type Permission } from '../domain/authz.ts';

export interface PermissionRow {
  [key: string]: unknown;
  collection_id: number;
  group_id: number;
  permission: Permission;
  created_at: Date;
}

export interface EffectivePermissionRow {
  [key: string]: unknown;
  target_collection_id: number;
  source_collection_id: number;
  group_id: number;
  permission: Permission;
  depth: number;
  inherited: boolean;
}

// `permission` sorts in PermissionName enum order (its position, not its text). The pair
// (group_id, permission) is unique on one collection, so `__pk` = group_id * 64 + position is a
// unique integer tie-breaker; on the effective list (depth, group_id, permission) is unique and
// depth is bounded by the tree walk, so depth * 2^37 stays below 2^53.
export const PERMISSION_ROW_LIST_SPEC: ListSpec = {
  fields: {
    group_id: { type: 'integer', column: 'r.group_id', filterable: false },
    permission: { type: 'integer', column: 'r.permission_pos', filterable: false },
    created_at: { type: 'timestamp', column: 'r.created_at', filterable: false },
    __pk: { type: 'integer', column: 'r.pk', filterable: false },
  },
  defaultSort: [
    { field: 'group_id', desc: false },
    { field: 'permission', desc: false },
  ],
  idField: '__pk',
};

export const EFFECTIVE_ROW_LIST_SPEC: ListSpec = {
  fields: {
    depth: { type: 'integer', column: 'r.depth', filterable: false },
    source_collection_id: { type: 'integer', column: 'r.source_collection_id', filterable: false },
    group_id: { type: 'integer', column: 'r.group_id', filterable: false },
    permission: { type: 'integer', column: 'r.permission_pos', filterable: false },
    __pk: { type: 'integer', column: 'r.pk', filterable: false },
  },
  defaultSort: [
    { field: 'depth', desc: false },
    { field: 'group_id', desc: false },
    { field: 'permission', desc: false },
  ],
  idField: '__pk',
};

const PERMS = [...PERMISSIONS] as string[];

/** Direct grants on one collection, optionally only those of the given principal's groups. */
export async function listPermissionRows(
  db: Db,
  collectionId: number,
  parsed: ParsedList,
  opts: { principalId?: number } = {},
): Promise<ListPage<PermissionRow>> {
  const memberOnly =
    opts.principalId === undefined
      ? (db`true` as Fragment)
      : (db`cp.group_id in (select gm.group_id from group_members gm where gm.principal_id = ${opts.principalId}::int)` as Fragment);
  const from = db`(
    select cp.collection_id, cp.group_id, cp.permission, cp.created_at,
      array_position(${PERMS}::text[], cp.permission) as permission_pos,
      cp.group_id::bigint * 64 + array_position(${PERMS}::text[], cp.permission) as pk
    from collection_permissions cp
    where cp.collection_id = ${collectionId}::int and ${memberOnly}
  ) r` as Fragment;
  return runList<PermissionRow>(db, {
    from,
    select: db`r.collection_id, r.group_id, r.permission, r.created_at` as Fragment,
    parsed,
    spec: PERMISSION_ROW_LIST_SPEC,
  });
}

/** Grants that apply to a collection through the principal's groups: on it (depth 0) and on each ancestor. */
export async function listEffectivePermissionRows(
  db: Db,
  collectionId: number,
  principalId: number,
  parsed: ParsedList,
): Promise<ListPage<EffectivePermissionRow>> {
  const from = db`(
    select ${collectionId}::int as target_collection_id, a.ancestor_id as source_collection_id, cp.group_id,
      cp.permission, a.depth, a.depth > 0 as inherited,
      array_position(${PERMS}::text[], cp.permission) as permission_pos,
      a.depth::bigint * 137438953472 + cp.group_id::bigint * 64 + array_position(${PERMS}::text[], cp.permission) as pk
    from collection_ancestors(${collectionId}::int) a
    join collection_permissions cp on cp.collection_id = a.ancestor_id
    where cp.group_id in (select gm.group_id from group_members gm where gm.principal_id = ${principalId}::int)
  ) r` as Fragment;
  return runList<EffectivePermissionRow>(db, {
    from,
    select: db`r.target_collection_id, r.source_collection_id, r.group_id, r.permission, r.depth, r.inherited` as Fragment,
    parsed,
    spec: EFFECTIVE_ROW_LIST_SPEC,
  });
}

/** The group's direct permission names on the collection, in enum order. */
export async function groupPermissions(db: Db, collectionId: number, groupId: number): Promise<Permission[]> {
  const rows = await db<{ permission: string }[]>`
    select permission from collection_permissions where collection_id = ${collectionId}::int and group_id = ${groupId}::int`;
  return sortPermissions(rows.map((r) => r.permission));
}

export async function findGroup(db: Db, id: number): Promise<{ id: number; name: string } | undefined> {
  const [row] = await db<{ id: number; name: string }[]>`select id, name from groups where id = ${id}::int`;
  return row;
}

export async function principalExists(db: Db, id: number): Promise<boolean> {
  const [row] = await db<{ id: number }[]>`select id from principals where id = ${id}::int`;
  return row !== undefined;
}

export interface GrantTarget {
  collectionId: number;
  collectionName: string;
  group: { id: number; name: string };
}

function grantSnapshot(r: PermissionRow): Record<string, unknown> {
  return { collection_id: r.collection_id, group_id: r.group_id, permission: r.permission, created_at: r.created_at };
}

/** The permission.granted or permission.revoked event of one grant row. */
function grantEvent(g: GrantTarget, r: PermissionRow, action: 'granted' | 'revoked'): NewEvent {
  return {
    entityType: 'permission',
    entityId: g.group.id,
    entityName: r.permission,
    collectionId: g.collectionId,
    action,
    summary: `${r.permission} ${action} ${action === 'granted' ? 'to' : 'from'} group ${g.group.name} on collection ${g.collectionName}`,
    before: action === 'revoked' ? grantSnapshot(r) : null,
    after: action === 'granted' ? grantSnapshot(r) : null,
    metadata: { group_id: g.group.id, group_name: g.group.name, permission: r.permission },
  };
}

/** A change of one group's grants on one collection: the rows it removes and the rows it adds. */
export interface GrantRowChange {
  /** Grant rows as read (locked: grantRows), each recorded as revoked. */
  removed: PermissionRow[];
  /** New grant rows, created_at the transaction's now() (the column's default), each recorded as granted. */
  added: PermissionRow[];
}

/** The revoked events of `removed`, in the order given, then the granted events of `added`. */
export function grantEvents(g: GrantTarget, change: GrantRowChange): NewEvent[] {
  return [...change.removed.map((r) => grantEvent(g, r, 'revoked')), ...change.added.map((r) => grantEvent(g, r, 'granted'))];
}

/**
 * Writes a change of one group's grants on one collection with its events, in one statement (none
 * when nothing changes); `final` marks it as the transaction's last (COMMIT goes with it). The
 * caller holds the grants (lockGrants, grantRows; a new collection's are nobody else's), so the
 * statement removes and adds exactly the rows given.
 */
export async function writeGrants(
  tx: TransactionSql,
  actor: Actor,
  g: GrantTarget,
  change: GrantRowChange,
  final: Final = notFinal,
): Promise<void> {
  if (!change.removed.length && !change.added.length) return;
  await final(tx`
    with r as (
      delete from collection_permissions
      where collection_id = ${g.collectionId}::int and group_id = ${g.group.id}::int
        and permission = any(${change.removed.map((p) => p.permission)}::text[])
    ), a as (
      insert into collection_permissions (collection_id, group_id, permission)
      select ${g.collectionId}::int, ${g.group.id}::int, p from unnest(${change.added.map((p) => p.permission)}::text[]) as p
    )${eventsCte(tx, actor, grantEvents(g, change))}
    select 1`);
}

/**
 * The group's grant rows on the collection in enum order, locked against a concurrent delete of the
 * collection. Async like lockGrants, which it is pipelined behind (tx.ts, "Pipelines").
 */
export async function grantRows(tx: TransactionSql, collectionId: number, groupId: number): Promise<PermissionRow[]> {
  return await tx<PermissionRow[]>`
    select collection_id, group_id, permission, created_at from collection_permissions
    where collection_id = ${collectionId}::int and group_id = ${groupId}::int
    order by array_position(${PERMS}::text[], permission)
    for update`;
}

/** A grant row with the names of its collection and its group (what its event names). */
export type NamedGrantRow = PermissionRow & { collection_name: string; group_name: string };

/**
 * Every grant on a collection, or of a group, locked: what a delete of the (locked) collection or
 * group takes with it. By collection, group, then enum order. Async like the lock it is pipelined
 * behind (tx.ts, "Pipelines").
 */
export async function grantRowsOf(tx: TransactionSql, of: { collectionId: number } | { groupId: number }): Promise<NamedGrantRow[]> {
  const where = 'collectionId' in of ? tx`cp.collection_id = ${of.collectionId}::int` : tx`cp.group_id = ${of.groupId}::int`;
  return await tx<NamedGrantRow[]>`
    select cp.collection_id, cp.group_id, cp.permission, cp.created_at, c.name as collection_name, g.name as group_name
    from collection_permissions cp join collections c on c.id = cp.collection_id join groups g on g.id = cp.group_id
    where ${where}
    order by cp.collection_id, cp.group_id, array_position(${PERMS}::text[], cp.permission)
    for update of cp`;
}

/** The revoked events of grants that go with a deleted collection or group, in grantRowsOf's order. */
export function revokedWithDelete(rows: NamedGrantRow[]): NewEvent[] {
  return rows.map((r) =>
    grantEvent(
      { collectionId: r.collection_id, collectionName: r.collection_name, group: { id: r.group_id, name: r.group_name } },
      r,
      'revoked',
    ),
  );
}

/**
 * Serializes grant changes of one group on one collection (replace reads, then writes); returns the
 * transaction's now(), the created_at of the grants it adds.
 */
export async function lockGrants(tx: TransactionSql, collectionId: number, groupId: number): Promise<Date> {
  const [row] = await tx<
    { now: Date }[]
  >`select pg_advisory_xact_lock(${727011}::int, hashtext(${`${collectionId}:${groupId}`})), now() as now`;
  return row!.now;
}
