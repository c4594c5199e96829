// SQL of provider-managed identities: the users and groups an identity provider (LDAP) owns in
// its identity scope, their memberships, and the group sync's claims and timestamps.
import type { Db, TransactionSql } from './sql.ts';
import type { GroupRow, MemberRow } from '../domain/views/groups.ts';
import type { UserRow } from '../domain/views/users.ts';

const GROUP_COLUMNS = (db: Db) =>
  db`id, name, description, identity_scope, managed_by, external_key, last_sync_attempted_at, last_sync_success_at, created_at,
    updated_at, revision`;

/**
 * The principal named `name` in `scope`, with whether a provider manages it; locked for no key
 * update, which membership writes (a key share on the principal) do not wait for: a sign-in and
 * a group sync touching the same user and group cannot deadlock.
 */
export async function lockScopedPrincipal(
  tx: TransactionSql,
  scope: string,
  name: string,
): Promise<(UserRow & { kind: string; external_subject: string | null }) | undefined> {
  const [row] = await tx<(UserRow & { kind: string; external_subject: string | null })[]>`
    select p.id, p.kind, p.name, p.identity_scope, u.proper_name, u.email, p.created_at, p.updated_at, p.revision,
      p.provider_managed, p.external_subject
    from principals p left join users u on u.principal_id = p.id
    where p.identity_scope = ${scope} and p.name = ${name}
    for no key update of p`;
  return row;
}

/** Inserts a provider-managed human (no password); undefined when the name was taken meanwhile. */
export async function insertProviderUser(
  tx: TransactionSql,
  u: { scope: string; name: string; subject: string; email: string | null; properName: string | null },
): Promise<UserRow | undefined> {
  const [p] = await tx<{ id: number; name: string; identity_scope: string; created_at: Date; updated_at: Date; revision: number }[]>`
    insert into principals (kind, name, identity_scope, provider_managed, external_subject, last_synced_at)
    values ('human', ${u.name}, ${u.scope}, true, ${u.subject}, now())
    on conflict (identity_scope, name) do nothing
    returning id, name, identity_scope, created_at, updated_at, revision`;
  if (!p) return undefined;
  await tx`insert into users (principal_id, password_hash, email, proper_name) values (${p.id}, null, ${u.email}, ${u.properName})`;
  return Object.assign({}, p, { email: u.email, proper_name: u.properName, provider_managed: true });
}

/** Records a sign-in's directory data; advances revision only when `changed`. */
export async function updateProviderUser(
  tx: TransactionSql,
  id: number,
  u: { subject: string; email: string | null; properName: string | null; changed: boolean },
): Promise<{ updated_at: Date; revision: number }> {
  const [p] = await tx<{ updated_at: Date; revision: number }[]>`
    update principals set external_subject = ${u.subject}, last_synced_at = now(),
      updated_at = case when ${u.changed} then now() else updated_at end,
      revision = case when ${u.changed} then revision + 1 else revision end
    where id = ${id}
    returning updated_at, revision`;
  if (u.changed) await tx`update users set email = ${u.email}, proper_name = ${u.properName} where principal_id = ${id}`;
  return p!;
}

/** The group `name` of `scope`, locked for no key update; undefined when there is none. */
export async function lockScopedGroup(tx: TransactionSql, scope: string, name: string): Promise<GroupRow | undefined> {
  const [row] = await tx<GroupRow[]>`
    select ${GROUP_COLUMNS(tx)} from groups where identity_scope = ${scope} and name = ${name} for no key update`;
  return row;
}

/** Inserts a provider-managed group; undefined when the name was taken meanwhile. */
export async function insertManagedGroup(
  tx: TransactionSql,
  g: { scope: string; name: string; managedBy: string; externalKey: string; description: string },
): Promise<GroupRow | undefined> {
  const [row] = await tx<GroupRow[]>`
    insert into groups (name, description, identity_scope, managed_by, external_key)
    values (${g.name}, ${g.description}, ${g.scope}, ${g.managedBy}, ${g.externalKey})
    on conflict (identity_scope, name) do nothing
    returning ${GROUP_COLUMNS(tx)}`;
  return row;
}

/** Makes an existing group of the scope provider-managed with the given key (a new revision). */
export async function claimGroupForProvider(tx: TransactionSql, id: number, managedBy: string, externalKey: string): Promise<GroupRow> {
  const [row] = await tx<GroupRow[]>`
    update groups set managed_by = ${managedBy}, external_key = ${externalKey}, updated_at = now(), revision = revision + 1
    where id = ${id}
    returning ${GROUP_COLUMNS(tx)}`;
  return row!;
}

/** Ids of the groups managed by `managedBy` that the principal belongs to. */
export async function managedGroupIdsOf(db: Db, principalId: number, managedBy: string): Promise<number[]> {
  const rows = await db<{ id: number }[]>`
    select g.id from groups g join group_members gm on gm.group_id = g.id
    where gm.principal_id = ${principalId} and g.managed_by = ${managedBy}
    order by g.id`;
  return rows.map((r) => r.id);
}

/** A member of a provider-managed group with its directory identity. */
export type ManagedMember = MemberRow & { external_subject: string | null; provider_managed: boolean };

export async function groupMembersWithSubjects(db: Db, groupId: number): Promise<ManagedMember[]> {
  return db<ManagedMember[]>`
    select p.id, p.kind, p.name, p.identity_scope, p.created_at, p.updated_at, p.revision, p.external_subject, p.provider_managed
    from principals p join group_members gm on gm.principal_id = p.id
    where gm.group_id = ${groupId}
    order by p.id`;
}

/**
 * Provider-managed principals of `scope` whose lower-cased DN is in `dns` or whose name is in
 * `names`: the local users a directory group lists.
 */
export async function providerUsersMatching(db: Db, scope: string, dns: string[], names: string[]): Promise<ManagedMember[]> {
  if (dns.length === 0 && names.length === 0) return [];
  return db<ManagedMember[]>`
    select p.id, p.kind, p.name, p.identity_scope, p.created_at, p.updated_at, p.revision, p.external_subject, p.provider_managed
    from principals p
    where p.identity_scope = ${scope} and p.provider_managed
      and (lower(p.external_subject) = any(${dns}::text[]) or p.name = any(${names}::text[]))
    order by p.id`;
}

/**
 * Claims the groups of a provider whose last sync attempt is older than the interval (or never
 * happened): their last_sync_attempted_at becomes now, so another worker does not take them too.
 * `force` claims every group of the provider.
 */
export async function claimGroupsDueForSync(
  db: Db,
  scope: string,
  managedBy: string,
  intervalSeconds: number,
  force = false,
): Promise<GroupRow[]> {
  return db<GroupRow[]>`
    update groups set last_sync_attempted_at = now()
    where identity_scope = ${scope} and managed_by = ${managedBy}
      and (${force} or last_sync_attempted_at is null
           or last_sync_attempted_at < now() - make_interval(secs => ${intervalSeconds}))
    returning ${GROUP_COLUMNS(db)}`;
}

export async function markGroupSynced(tx: TransactionSql, id: number): Promise<void> {
  await tx`update groups set last_sync_success_at = now() where id = ${id}`;
}

/** A provider-managed principal the user pass checks against the directory. */
export interface ProviderUserClaim {
  id: number;
  name: string;
  external_subject: string | null;
}

/**
 * Claims up to `batch` provider-managed users of the scope the directory has not confirmed within
 * the interval (last_synced_at, also set by each sign-in): their last_synced_at becomes now, so
 * another worker does not check them too. `force` claims them whatever their last check.
 */
export async function claimProviderUsersDue(
  db: Db,
  scope: string,
  intervalSeconds: number,
  batch: number,
  force = false,
): Promise<ProviderUserClaim[]> {
  return db<ProviderUserClaim[]>`
    update principals set last_synced_at = now()
    where id in (
      select id from principals
      where identity_scope = ${scope} and provider_managed
        and (${force} or last_synced_at is null or last_synced_at < now() - make_interval(secs => ${intervalSeconds}))
      order by last_synced_at nulls first, id
      limit ${batch}
      for no key update skip locked)
    returning id, name, external_subject`;
}

/** The provider-managed principal, locked for no key update (as a member it is key-shared). */
export async function lockProviderPrincipal(tx: TransactionSql, id: number, scope: string): Promise<MemberRow | undefined> {
  const [row] = await tx<MemberRow[]>`
    select id, kind, name, identity_scope, created_at, updated_at, revision from principals
    where id = ${id} and identity_scope = ${scope} and provider_managed
    for no key update`;
  return row;
}
