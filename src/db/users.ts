import type { Db, TransactionSql } from './sql.ts';
import type { ListSpec } from '../domain/list-query.ts';
import { runList, type ListPage } from './list.ts';
import type { ParsedList } from '../domain/list-query.ts';
import { type UserRow } from '../domain/views/users.ts';
import { writePrincipalWithEvents } from './principals.ts';
import type { Final } from './tx.ts';
import type { Fragment } from './list.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';

export const USER_LIST: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'p.id', notNull: true },
    name: { type: 'text', column: 'p.name', notNull: true },
    identity_scope: { type: 'text', column: 'p.identity_scope', notNull: true },
    proper_name: { type: 'text', column: 'u.proper_name' },
    email: { type: 'text', column: 'u.email' },
    created_at: { type: 'timestamp', column: 'p.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'p.updated_at', notNull: true },
    revision: { type: 'integer', column: 'p.revision', notNull: true },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

export function listUsers(db: Db, parsed: ParsedList): Promise<ListPage<UserRow>> {
  return runList<UserRow & Record<string, unknown>>(db, {
    from: db`principals p join users u on u.principal_id = p.id`,
    select: db`p.id, p.name, p.identity_scope, u.proper_name, u.email, p.created_at, p.updated_at, p.revision, p.provider_managed`,
    where: [db`p.kind = 'human'`],
    parsed,
    spec: USER_LIST,
  });
}

export async function findUser(db: Db, id: number): Promise<UserRow | undefined> {
  const [row] = await db<UserRow[]>`
    select p.id, p.name, p.identity_scope, u.proper_name, u.email, p.created_at, p.updated_at, p.revision, p.provider_managed
    from principals p join users u on u.principal_id = p.id
    where p.id = ${id} and p.kind = 'human'`;
  return row;
}

/** The user with its principal row locked for the rest of the transaction, and the transaction's now() (svc_now). */
export async function lockUser(tx: TransactionSql, id: number): Promise<(UserRow & { svc_now: Date }) | undefined> {
  const [row] = await tx<(UserRow & { svc_now: Date })[]>`
    select p.id, p.name, p.identity_scope, u.proper_name, u.email, p.created_at, p.updated_at, p.revision, p.provider_managed,
      now() as svc_now
    from principals p join users u on u.principal_id = p.id
    where p.id = ${id} and p.kind = 'human'
    for update of p, u`;
  return row;
}

/** Inserts the user `u` (its id and times reserved: reserveId) with `events`, in one statement. */
export function insertUser(
  tx: TransactionSql,
  actor: Actor,
  u: UserRow,
  passwordHash: string | null,
  events: NewEvent[],
  final?: Final,
): Promise<void> {
  const profile = tx`insert into users (principal_id, password_hash, email, proper_name)
    select p.id, ${passwordHash}::text, ${u.email}::text, ${u.proper_name}::text from p` as Fragment;
  return writePrincipalWithEvents(tx, actor, Object.assign({}, u, { kind: 'human' as const }), profile, events, final);
}

/**
 * Writes a change of the locked user `after` (the caller decided something changes; updated_at
 * now(), the revision one up, as the caller built `after`) with `events`, in one statement; a null
 * `passwordHash` keeps the password.
 */
export function updateUser(
  tx: TransactionSql,
  actor: Actor,
  after: UserRow,
  passwordHash: string | null,
  events: NewEvent[],
  final?: Final,
): Promise<void> {
  const profile = tx`update users set email = ${after.email}::text, proper_name = ${after.proper_name}::text,
      password_hash = coalesce(${passwordHash}::text, password_hash)
    where principal_id = ${after.id}::int` as Fragment;
  return writePrincipalWithEvents(tx, actor, after.id, profile, events, final);
}

/** Ids of the groups a principal belongs to directly (recorded when it is deleted; kept by the token cache with its grants). */
export async function principalGroupIds(db: Db, id: number): Promise<number[]> {
  const rows = await db<{ group_id: number }[]>`select group_id from group_members where principal_id = ${id} order by group_id`;
  return rows.map((r) => r.group_id);
}
