import type { Db, TransactionSql } from './sql.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { runList, type ListPage } from './list.ts';
import { type GroupRow, type MemberRow } from '../domain/views/groups.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';
import { eventPerRowCte, markWritten } from './events.ts';
import { notFinal, type Final } from './tx.ts';

const GROUP_FIELDS = {
  id: { type: 'integer', column: 'g.id', notNull: true },
  name: { type: 'text', column: 'g.name', notNull: true },
  description: { type: 'text', column: 'g.description', notNull: true },
  identity_scope: { type: 'text', column: 'g.identity_scope', sortable: false },
  managed_by: { type: 'text', column: 'g.managed_by', sortable: false },
  external_key: { type: 'text', column: 'g.external_key', sortable: false },
  created_at: { type: 'timestamp', column: 'g.created_at', notNull: true },
  updated_at: { type: 'timestamp', column: 'g.updated_at', notNull: true },
  revision: { type: 'integer', column: 'g.revision', notNull: true },
} as const satisfies ListSpec['fields'];

export const GROUP_LIST: ListSpec = { fields: GROUP_FIELDS, defaultSort: [{ field: 'id', desc: false }] };

/** The groups of one principal: sortable like groups, no filters (the contract declares none). */
export const PRINCIPAL_GROUP_LIST: ListSpec = {
  fields: {
    id: Object.assign({}, GROUP_FIELDS.id, { filterable: false }),
    name: Object.assign({}, GROUP_FIELDS.name, { filterable: false }),
    description: Object.assign({}, GROUP_FIELDS.description, { filterable: false }),
    created_at: Object.assign({}, GROUP_FIELDS.created_at, { filterable: false }),
    updated_at: Object.assign({}, GROUP_FIELDS.updated_at, { filterable: false }),
    revision: Object.assign({}, GROUP_FIELDS.revision, { filterable: false }),
  },
  defaultSort: [{ field: 'id', desc: false }],
};

const SELECT = (db: Db) =>
  db`g.id, g.name, g.description, g.identity_scope, g.managed_by, g.external_key, g.last_sync_attempted_at,
    g.last_sync_success_at, g.created_at, g.updated_at, g.revision`;

export function listGroups(db: Db, parsed: ParsedList): Promise<ListPage<GroupRow>> {
  return runList<GroupRow & Record<string, unknown>>(db, { from: db`groups g`, select: SELECT(db), parsed, spec: GROUP_LIST });
}

export function listPrincipalGroups(db: Db, principalId: number, parsed: ParsedList): Promise<ListPage<GroupRow>> {
  return runList<GroupRow & Record<string, unknown>>(db, {
    from: db`groups g join group_members gm on gm.group_id = g.id`,
    select: SELECT(db),
    where: [db`gm.principal_id = ${principalId}`],
    parsed,
    spec: PRINCIPAL_GROUP_LIST,
  });
}

export async function findGroup(db: Db, id: number): Promise<GroupRow | undefined> {
  const [row] = await db<GroupRow[]>`select ${SELECT(db)} from groups g where g.id = ${id}`;
  return row;
}

/** A group as a write locks it: the row and the transaction's now() (the updated_at of the write). */
export type LockedGroup = GroupRow & { svc_now: Date };

export async function lockGroup(tx: TransactionSql, id: number): Promise<LockedGroup | undefined> {
  const [row] = await tx<LockedGroup[]>`select ${SELECT(tx)}, now() as svc_now from groups g where g.id = ${id} for update`;
  return row;
}

/** Locks the group against deletion while a membership or ownership is written (key share). */
export async function shareLockGroup(tx: TransactionSql, id: number): Promise<GroupRow | undefined> {
  const [row] = await tx<GroupRow[]>`select ${SELECT(tx)} from groups g where g.id = ${id} for key share`;
  return row;
}

export async function insertGroup(tx: TransactionSql, g: { name: string; description: string; identityScope: string }): Promise<GroupRow> {
  const [row] = await tx<GroupRow[]>`
    insert into groups (name, description, identity_scope)
    values (${g.name}, ${g.description}, ${g.identityScope})
    returning id, name, description, identity_scope, managed_by, external_key, last_sync_attempted_at,
      last_sync_success_at, created_at, updated_at, revision`;
  return row!;
}

/** Service accounts owned by a group (they block its deletion); sent behind the group's lock (tx.ts, "Pipelines"). */
export async function ownedServiceAccounts(db: Db, groupId: number): Promise<{ id: number; name: string }[]> {
  return await db<{ id: number; name: string }[]>`
    select p.id, p.name from service_accounts sa join principals p on p.id = sa.principal_id
    where sa.owner_group_id = ${groupId} order by p.id`;
}

/** Ids of a group's direct members (recorded when the group is deleted). */
export async function groupMemberIds(db: Db, groupId: number): Promise<number[]> {
  const rows = await db<
    { principal_id: number }[]
  >`select principal_id from group_members where group_id = ${groupId} order by principal_id`;
  return rows.map((r) => r.principal_id);
}

export async function isMember(db: Db, groupId: number, principalId: number): Promise<boolean> {
  const rows = await db`select 1 from group_members where group_id = ${groupId} and principal_id = ${principalId}`;
  return rows.length > 0;
}

// ---- memberships ----

export const MEMBER_LIST: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'p.id', filterable: false, notNull: true },
    name: { type: 'text', column: 'p.name', filterable: false, notNull: true },
    created_at: { type: 'timestamp', column: 'p.created_at', filterable: false, notNull: true },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

export function listMembers(db: Db, groupId: number, parsed: ParsedList): Promise<ListPage<MemberRow>> {
  return runList<MemberRow & Record<string, unknown>>(db, {
    from: db`principals p join group_members gm on gm.principal_id = p.id`,
    select: db`p.id, p.kind, p.name, p.identity_scope, p.created_at, p.updated_at, p.revision`,
    where: [db`gm.group_id = ${groupId}`],
    parsed,
    spec: MEMBER_LIST,
  });
}

export async function findPrincipalForMembership(db: Db, id: number): Promise<MemberRow | undefined> {
  const [row] = await db<MemberRow[]>`
    select id, kind, name, identity_scope, created_at, updated_at, revision from principals where id = ${id} for key share`;
  return row;
}

/**
 * Adds (`added`) or removes (`removed`) a membership and appends `event`, its audit event, in one
 * statement; the event only when the membership changed. False when it did not (the principal
 * already was, or was not, a member): a no-op.
 */
export async function writeMembership(
  tx: TransactionSql,
  actor: Actor,
  action: 'added' | 'removed',
  groupId: number,
  principalId: number,
  event: NewEvent,
  final: Final = notFinal,
): Promise<boolean> {
  const write =
    action === 'added'
      ? tx`insert into group_members (group_id, principal_id) values (${groupId}::int, ${principalId}::int)
        on conflict do nothing returning group_id`
      : tx`delete from group_members where group_id = ${groupId}::int and principal_id = ${principalId}::int returning group_id`;
  const [row] = await final(tx<{ n: number }[]>`
    with w as (${write})${eventPerRowCte(tx, actor, 'w', event)}
    select count(*)::int as n from w`);
  const changed = row!.n > 0;
  if (changed) markWritten(tx, event);
  return changed;
}
