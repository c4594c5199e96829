// Provider-managed identities: the one write path of the users and groups an LDAP provider owns in
// its identity scope. A sign-in creates or updates the user and sets its memberships of the
// provider's groups; the group sync sets a group's members to what the directory lists. Every
// change is recorded with its audit event in the caller's transaction.
import { ApiError } from '../domain/errors.ts';
import { appendEvent } from '../db/events.ts';
import type { TransactionSql } from '../db/sql.ts';
import { lockGroup, writeMembership } from '../db/groups.ts';
import { groupEvent, membershipEvent, type GroupRow } from '../domain/views/groups.ts';
import { userCreatedEvent, userUpdatedEvent, type UserRow } from '../domain/views/users.ts';
import { lockUnrevokedTokens } from '../db/tokens.ts';
import { revokeTokenAs } from './tokens.ts';
import {
  claimGroupForProvider,
  groupMembersWithSubjects,
  insertManagedGroup,
  insertProviderUser,
  lockProviderPrincipal,
  lockScopedGroup,
  lockScopedPrincipal,
  managedGroupIdsOf,
  markGroupSynced,
  providerUsersMatching,
  updateProviderUser,
} from '../db/directory.ts';
import {
  managedBy,
  normalizeDn,
  type DirectoryGroupMembers,
  type DirectoryUser,
  type LdapGroupMapping,
  type LdapProvider,
} from '../domain/ldap.ts';

/** Who a change is recorded as (the audit actor appendEvent takes). */
type Actor = Parameters<typeof appendEvent>[1];

/** The provider-managed group a mapping names, created (or taken over in the provider's scope) when needed. */
export async function ensureProviderGroup(tx: TransactionSql, actor: Actor, p: LdapProvider, g: LdapGroupMapping): Promise<GroupRow> {
  const owner = managedBy(p);
  for (;;) {
    const existing = await lockScopedGroup(tx, p.scope, g.group);
    if (existing) {
      if (existing.managed_by === owner && existing.external_key === g.dn) return existing;
      const after = await claimGroupForProvider(tx, existing.id, owner, g.dn);
      await appendEvent(tx, actor, groupEvent('updated', after, existing));
      return after;
    }
    const created = await insertManagedGroup(tx, {
      scope: p.scope,
      name: g.group,
      managedBy: owner,
      externalKey: g.dn,
      description: `members of ${g.dn} in the directory of identity scope ${p.scope}`,
    });
    if (created) {
      await appendEvent(tx, actor, groupEvent('created', created, null));
      return created;
    }
  }
}

/**
 * Records a directory sign-in: creates or updates the provider-managed user and makes its
 * memberships of the provider's groups those of `user.groups`. A principal of the same name in the
 * scope that no provider manages is never taken over (401, as any failed login).
 */
export async function signInDirectoryUser(tx: TransactionSql, actor: Actor, p: LdapProvider, user: DirectoryUser): Promise<UserRow> {
  let row: UserRow | undefined;
  for (let attempt = 0; !row; attempt++) {
    const existing = await lockScopedPrincipal(tx, p.scope, user.name);
    if (existing) {
      if (existing.kind !== 'human' || !existing.provider_managed) {
        throw new ApiError('unauthorized', 'login failed: invalid credentials');
      }
      const changed = existing.email !== user.email || existing.proper_name !== user.properName;
      const r = await updateProviderUser(tx, existing.id, { subject: user.dn, email: user.email, properName: user.properName, changed });
      const after: UserRow = Object.assign({}, existing, { email: user.email, proper_name: user.properName }, r);
      if (changed)
        await appendEvent(
          tx,
          Object.assign({}, actor, { principalId: existing.id, principalName: existing.name }),
          userUpdatedEvent(existing, after, false),
        );
      row = after;
    } else {
      const created = await insertProviderUser(tx, {
        scope: p.scope,
        name: user.name,
        subject: user.dn,
        email: user.email,
        properName: user.properName,
      });
      if (created) {
        await appendEvent(
          tx,
          Object.assign({}, actor, { principalId: created.id, principalName: created.name }),
          userCreatedEvent(created, { password_set: false, managed_by: managedBy(p), external_subject: user.dn }),
        );
        row = created;
      } else if (attempt > 2) {
        throw new ApiError('unavailable', 'the user is being created by another sign-in; try again', { retryAfterSeconds: 1 });
      }
    }
  }
  const self = Object.assign({}, actor, { principalId: row.id, principalName: row.name });
  const member = Object.assign({}, row, { kind: 'human' as const });
  const wanted = new Set<number>();
  for (const g of user.groups) {
    const group = await ensureProviderGroup(tx, self, p, g);
    wanted.add(group.id);
    await writeMembership(tx, self, 'added', group.id, row.id, membershipEvent('added', group, member));
  }
  for (const id of await managedGroupIdsOf(tx, row.id, managedBy(p))) {
    if (wanted.has(id)) continue;
    const group = await lockGroup(tx, id);
    if (group) await writeMembership(tx, self, 'removed', id, row.id, membershipEvent('removed', group, member));
  }
  return row;
}

/**
 * Makes a provider group's members the local users the directory lists now: removes the others
 * (whoever added them), adds listed users that have signed in before, and sets
 * last_sync_success_at. Returns how many memberships were added and removed.
 */
export async function applyGroupSync(
  tx: TransactionSql,
  actor: Actor,
  p: LdapProvider,
  groupId: number,
  members: DirectoryGroupMembers,
): Promise<{ added: number; removed: number }> {
  const group = await lockGroup(tx, groupId);
  if (!group || group.managed_by !== managedBy(p)) return { added: 0, removed: 0 };
  const listed = (m: { external_subject: string | null; name: string; provider_managed: boolean; identity_scope: string }) =>
    m.provider_managed &&
    m.identity_scope === p.scope &&
    ((m.external_subject !== null && members.dns.has(normalizeDn(m.external_subject))) || members.names.has(m.name));
  let removed = 0;
  const current = await groupMembersWithSubjects(tx, groupId);
  for (const m of current) {
    if (listed(m)) continue;
    if (await writeMembership(tx, actor, 'removed', groupId, m.id, membershipEvent('removed', group, m))) removed++;
  }
  let added = 0;
  const have = new Set(current.map((m) => m.id));
  for (const u of await providerUsersMatching(tx, p.scope, [...members.dns], [...members.names])) {
    if (have.has(u.id) || !listed(u)) continue;
    if (await writeMembership(tx, actor, 'added', groupId, u.id, membershipEvent('added', group, u))) added++;
  }
  await markGroupSynced(tx, groupId);
  return { added, removed };
}

/**
 * A provider-managed user the directory no longer has (deleted, or no longer meeting the user
 * filter, e.g. a disabled account): loses its memberships of the provider's groups and every
 * token it holds, each with its audit event. The principal stays (its history and settings); a
 * later sign-in, should the directory accept it again, brings it back.
 */
export async function retireDirectoryUser(
  tx: TransactionSql,
  actor: Actor,
  p: LdapProvider,
  userId: number,
): Promise<{ removed: number; revoked: number }> {
  const user = await lockProviderPrincipal(tx, userId, p.scope);
  if (!user) return { removed: 0, revoked: 0 };
  let removed = 0;
  for (const id of await managedGroupIdsOf(tx, user.id, managedBy(p))) {
    const group = await lockGroup(tx, id);
    if (group && (await writeMembership(tx, actor, 'removed', id, user.id, membershipEvent('removed', group, user)))) removed++;
  }
  let revoked = 0;
  for (const row of await lockUnrevokedTokens(tx, user.id)) if (await revokeTokenAs(tx, actor, row, 'directory_sync')) revoked++;
  return { removed, revoked };
}
