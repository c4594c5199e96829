import type { Db, TransactionSql } from './sql.ts';
import type { Fragment } from './list.ts';
import type { PrincipalKind } from '../domain/principals.ts';
import type { Permission } from '../domain/authz.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';
import { eventsCte } from './events.ts';
import { notFinal, type Final } from './tx.ts';

/**
 * A principal's row and its profile (its users or service_accounts row) written with `events` in
 * one statement (`final`: COMMIT goes with it). `principal`: the row to insert (its id reserved:
 * reserveId), or the id of an existing (locked) one, stamped (updated_at now(), the revision one
 * up). `profile`: the profile's insert or update, which reads the principal's id as `p.id` from `p`.
 */
export async function writePrincipalWithEvents(
  tx: TransactionSql,
  actor: Actor,
  principal: { id: number; kind: PrincipalKind; name: string; identity_scope: string } | number,
  profile: Fragment,
  events: NewEvent[],
  final: Final = notFinal,
): Promise<void> {
  const p =
    typeof principal === 'number'
      ? tx`update principals set updated_at = now(), revision = revision + 1 where id = ${principal}::int returning id`
      : tx`insert into principals (id, kind, name, identity_scope)
          values (${principal.id}::int, ${principal.kind}, ${principal.name}, ${principal.identity_scope}) returning id`;
  await final(tx`with p as (${p}), profile as (${profile})${eventsCte(tx, actor, events)} select 1 from p`);
}

export interface LoginCandidate {
  id: number;
  kind: PrincipalKind;
  name: string;
  password_hash: string | null;
}

/** The principal a login names, with its password hash (null for service accounts). */
export async function findLoginCandidate(db: Db, identityScope: string, name: string): Promise<LoginCandidate | undefined> {
  const [row] = await db<LoginCandidate[]>`
    select p.id, p.kind, p.name, u.password_hash
    from principals p left join users u on u.principal_id = p.id
    where p.identity_scope = ${identityScope} and p.name = ${name}`;
  return row;
}

export interface PrincipalAccess {
  id: number;
  kind: PrincipalKind;
  name: string;
  /** For service accounts: whether the caller is a member of the owner group. */
  caller_in_owner_group: boolean;
}

/** A principal and whether `callerId` belongs to its owner group (service accounts only). */
export async function findPrincipalAccess(db: Db, id: number, callerId: number): Promise<PrincipalAccess | undefined> {
  const [row] = await db<PrincipalAccess[]>`
    select p.id, p.kind, p.name,
      exists (select 1 from service_accounts sa join group_members gm on gm.group_id = sa.owner_group_id
              where sa.principal_id = p.id and gm.principal_id = ${callerId}) as caller_in_owner_group
    from principals p where p.id = ${id}`;
  return row;
}

export interface PrincipalPermissionRow {
  group_id: number;
  group_name: string;
  group_identity_scope: string;
  collection_id: number;
  permission: Permission;
}

/** Direct collection permission rows the principal holds through its groups, by group, collection, permission. */
export async function principalPermissionRows(db: Db, principalId: number): Promise<PrincipalPermissionRow[]> {
  return db<PrincipalPermissionRow[]>`
    select g.id as group_id, g.name as group_name, g.identity_scope as group_identity_scope, cp.collection_id, cp.permission
    from group_members gm
    join groups g on g.id = gm.group_id
    join collection_permissions cp on cp.group_id = g.id
    where gm.principal_id = ${principalId}
    order by g.id, cp.collection_id, cp.permission collate "C"`;
}
