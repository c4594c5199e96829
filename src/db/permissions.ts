// Collection permission grants: SQL only. Every change appends its permission.granted /
// permission.revoked event in the caller's transaction; unchanged grants append nothing.
import type { Db, TransactionSql } from './sql.ts';
import { appendEvent } from './events.ts';
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

interface GrantTarget {
  collectionId: number;
  collectionName: string;
  group: { id: number; name: string };
}

function grantSnapshot(r: PermissionRow): Record<string, unknown> {
  return { collection_id: r.collection_id, group_id: r.group_id, permission: r.permission, created_at: r.created_at };
}

async function recordChange(
  tx: TransactionSql,
  actor: Actor,
  g: GrantTarget,
  r: PermissionRow,
  action: 'granted' | 'revoked',
): Promise<void> {
  await appendEvent(tx, actor, {
    entityType: 'permission',
    entityId: g.group.id,
    entityName: r.permission,
    collectionId: g.collectionId,
    action,
    summary: `${r.permission} ${action} ${action === 'granted' ? 'to' : 'from'} group ${g.group.name} on collection ${g.collectionName}`,
    before: action === 'revoked' ? grantSnapshot(r) : null,
    after: action === 'granted' ? grantSnapshot(r) : null,
    metadata: { group_id: g.group.id, group_name: g.group.name, permission: r.permission },
  });
}

/** Grants the permissions the group does not hold yet; one event per new grant. Returns the new grants. */
export async function grantPermissions(
  tx: TransactionSql,
  actor: Actor,
  g: GrantTarget,
  perms: readonly Permission[],
): Promise<Permission[]> {
  if (perms.length === 0) return [];
  const rows = await tx<PermissionRow[]>`
    insert into collection_permissions (collection_id, group_id, permission)
    select ${g.collectionId}::int, ${g.group.id}::int, p from unnest(${[...perms]}::text[]) as p
    on conflict do nothing
    returning collection_id, group_id, permission, created_at`;
  const added = sortPermissions(rows.map((r) => r.permission));
  for (const p of added)
    await recordChange(
      tx,
      actor,
      g,
      rows.find((r) => r.permission === p)!,
      'granted',
    );
  return added;
}

/** Revokes the given permissions (all of the group's grants here when `perms` is null); one event per removed grant. */
export async function revokePermissions(
  tx: TransactionSql,
  actor: Actor,
  g: GrantTarget,
  perms: readonly Permission[] | null,
): Promise<Permission[]> {
  const rows = await tx<PermissionRow[]>`
    delete from collection_permissions
    where collection_id = ${g.collectionId}::int and group_id = ${g.group.id}::int
      and (${perms === null}::boolean or permission = any(${perms === null ? [] : [...perms]}::text[]))
    returning collection_id, group_id, permission, created_at`;
  const removed = sortPermissions(rows.map((r) => r.permission));
  for (const p of removed)
    await recordChange(
      tx,
      actor,
      g,
      rows.find((r) => r.permission === p)!,
      'revoked',
    );
  return removed;
}

/** Every group with grants on the collection (used to revoke them all, with events, before a delete). */
export async function groupsWithGrants(db: Db, collectionId: number): Promise<{ id: number; name: string }[]> {
  return db<{ id: number; name: string }[]>`
    select distinct g.id, g.name from collection_permissions cp join groups g on g.id = cp.group_id
    where cp.collection_id = ${collectionId}::int order by g.id`;
}

/** Serializes grant changes of one group on one collection (replace reads, then writes). */
export async function lockGrants(tx: TransactionSql, collectionId: number, groupId: number): Promise<void> {
  await tx`select pg_advisory_xact_lock(${727011}::int, hashtext(${`${collectionId}:${groupId}`}))`;
}
