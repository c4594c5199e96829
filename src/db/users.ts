import type { Db, TransactionSql } from './sql.ts';
import type { ListSpec } from '../domain/list-query.ts';
import { runList, type ListPage } from './list.ts';
import type { ParsedList } from '../domain/list-query.ts';
import { type UserRow } from '../domain/views/users.ts';

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

/** The user with its principal row locked for the rest of the transaction. */
export async function lockUser(tx: TransactionSql, id: number): Promise<UserRow | undefined> {
  const [row] = await tx<UserRow[]>`
    select p.id, p.name, p.identity_scope, u.proper_name, u.email, p.created_at, p.updated_at, p.revision, p.provider_managed
    from principals p join users u on u.principal_id = p.id
    where p.id = ${id} and p.kind = 'human'
    for update of p, u`;
  return row;
}

export async function insertUser(
  tx: TransactionSql,
  u: { name: string; identityScope: string; passwordHash: string | null; email: string | null; properName: string | null },
): Promise<UserRow> {
  const [p] = await tx<{ id: number; name: string; identity_scope: string; created_at: Date; updated_at: Date; revision: number }[]>`
    insert into principals (kind, name, identity_scope)
    values ('human', ${u.name}, ${u.identityScope})
    returning id, name, identity_scope, created_at, updated_at, revision`;
  const [profile] = await tx<{ email: string | null; proper_name: string | null }[]>`
    insert into users (principal_id, password_hash, email, proper_name)
    values (${p!.id}, ${u.passwordHash}, ${u.email}, ${u.properName})
    returning email, proper_name`;
  return { ...p!, ...profile!, provider_managed: false };
}

/** Writes a change (the caller decided something changes); advances revision and updated_at. */
export async function updateUserRow(
  tx: TransactionSql,
  id: number,
  change: { email: string | null; properName: string | null; passwordHash: string | null },
): Promise<UserRow> {
  const [p] = await tx<{ updated_at: Date; revision: number }[]>`
    update principals set updated_at = now(), revision = revision + 1
    where id = ${id}
    returning updated_at, revision`;
  await tx`
    update users set email = ${change.email}, proper_name = ${change.properName},
      password_hash = coalesce(${change.passwordHash}::text, password_hash)
    where principal_id = ${id}`;
  const row = await lockUser(tx, id);
  return { ...row!, updated_at: p!.updated_at, revision: p!.revision };
}

/** Ids of the groups a principal belongs to directly (recorded when it is deleted). */
export async function principalGroupIds(db: Db, id: number): Promise<number[]> {
  const rows = await db<{ group_id: number }[]>`select group_id from group_members where principal_id = ${id} order by group_id`;
  return rows.map((r) => r.group_id);
}
