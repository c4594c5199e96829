// Groups and their memberships: the one write path, for the API and the import worker alike. A
// group an identity provider manages (and its membership) is read-only here; a group that owns
// service accounts cannot be deleted.
import { ApiError, forbidden, notFound } from '../domain/errors.ts';
import { appendEvent, deleteRowWithEvents, updateNameWithEvent } from '../db/events.ts';
import {
  findPrincipalForMembership,
  groupMemberIds,
  insertGroup,
  lockGroup,
  ownedServiceAccounts,
  shareLockGroup,
  writeMembership,
  type LockedGroup,
} from '../db/groups.ts';
import { groupEvent, groupView, membershipEvent, type GroupRow, type MemberRow } from '../domain/views/groups.ts';
import { grantRowsOf, revokedWithDelete } from '../db/permissions.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

const KIND = 'group';

const providerManaged = () => forbidden('this group is managed by an identity provider and is read-only here');

export interface NewGroup {
  name: string;
  description?: string | null;
  identity_scope: string;
}

/** Members to change; an omitted member keeps its value, a null description clears it. */
export interface GroupChanges {
  name?: string;
  description?: string | null;
}

async function lockForWrite(m: MutationContext, id: number, ifMatch: string | undefined): Promise<LockedGroup> {
  const before = await lockGroup(m.tx, id);
  if (!before) throw notFound('group');
  if (before.managed_by !== null) throw providerManaged();
  requireMatch(ifMatch, KIND, id, before.revision);
  return before;
}

export async function createGroup(m: MutationContext, v: NewGroup): Promise<GroupRow> {
  const g = await insertGroup(m.tx, { name: v.name, description: v.description ?? '', identityScope: v.identity_scope });
  await appendEvent(m.tx, m.actor, groupEvent('created', g, null), m.final); // COMMIT goes with it
  return g;
}

/**
 * Changes a group's name or description. A new name is recorded with the group's members
 * (`member_ids`): a group's name decides who is an administrator, so the rename concerns each of
 * them, and the token caches drop theirs (db/auth-changes.ts cacheDropsOf). They are read behind the
 * lock, in its round trip, only when the name is given.
 */
export async function updateGroup(m: MutationContext, id: number, changes: GroupChanges, ifMatch?: string): Promise<Written<GroupRow>> {
  const locked = lockForWrite(m, id, ifMatch);
  const listing = changes.name === undefined ? undefined : groupMemberIds(m.tx, id);
  listing?.catch(() => undefined); // awaited below, unless the group answers 404, 403 or 412
  const before = await locked;
  const name = changes.name ?? before.name;
  const description = changes.description === undefined ? before.description : (changes.description ?? '');
  return skipWhenUnchanged(before, name === before.name && description === before.description, async () => {
    const after: GroupRow = Object.assign({}, before, { name, description, updated_at: before.svc_now, revision: before.revision + 1 });
    const event = groupEvent('updated', after, before);
    if (name !== before.name) event.metadata = { member_ids: await listing! };
    await updateNameWithEvent(m.tx, m.actor, 'groups', after, event, m.final); // COMMIT goes with it
    return after;
  });
}

/**
 * Deletes a group that owns no service account; its memberships and grants go with it, each grant
 * recorded as revoked (in its collection's audit). Two round trips: the lock, with the owned service
 * accounts, the members and the grants read behind it; then the delete with its events and COMMIT.
 */
export async function deleteGroup(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  const locked = lockForWrite(m, id, ifMatch);
  const owning = ownedServiceAccounts(m.tx, id);
  const listing = groupMemberIds(m.tx, id);
  const granted = grantRowsOf(m.tx, { groupId: id });
  for (const p of [owning, listing, granted]) p.catch(() => undefined); // awaited below, unless the group answers 404 or 403
  const before = await locked;
  const owned = await owning;
  if (owned.length > 0) {
    throw new ApiError('conflict', `group ${before.name} owns service accounts: ${owned.map((s) => s.name).join(', ')}`, {
      reason: 'group_owns_service_accounts',
      guidance: 'move the service accounts to another owner group or delete them first',
      details: owned.map((s) => ({ path: `service_accounts/${s.id}`, message: s.name })),
    });
  }
  const members = await listing;
  const revoked = revokedWithDelete(await granted);
  await deleteRowWithEvents(
    m.tx,
    m.actor,
    'groups',
    id,
    [
      ...revoked,
      {
        entityType: KIND,
        entityId: id,
        entityName: before.name,
        action: 'deleted',
        summary: `group ${before.name} deleted`,
        before: groupView(before),
        beforeRevision: before.revision,
        metadata: { removed_member_ids: members },
      },
    ],
    m.final,
  );
}

/** The group (share-locked against deletion) and the principal of a membership change. */
async function lockMembership(
  m: MutationContext,
  groupId: number,
  principalId: number,
): Promise<{ group: GroupRow; principal: MemberRow }> {
  // one round trip: the group, then the principal (behind it)
  const locking = shareLockGroup(m.tx, groupId);
  const finding = findPrincipalForMembership(m.tx, principalId);
  finding.catch(() => undefined); // awaited below, unless the group answers 404 or 403
  const group = await locking;
  if (!group) throw notFound('group');
  if (group.managed_by !== null) throw providerManaged();
  const principal = await finding;
  if (!principal) throw notFound('principal');
  return { group, principal };
}

/** Adds a principal to a group; unchanged when it already was a member. */
export async function addGroupMember(m: MutationContext, groupId: number, principalId: number): Promise<Written<MemberRow>> {
  const { group, principal } = await lockMembership(m, groupId, principalId);
  const event = membershipEvent('added', group, principal);
  const changed = await writeMembership(m.tx, m.actor, 'added', groupId, principalId, event, m.final); // COMMIT goes with it
  return { row: principal, changed };
}

/** Removes a principal from a group; nothing happens when it was not a member. */
export async function removeGroupMember(m: MutationContext, groupId: number, principalId: number): Promise<boolean> {
  const { group, principal } = await lockMembership(m, groupId, principalId);
  const event = membershipEvent('removed', group, principal);
  return writeMembership(m.tx, m.actor, 'removed', groupId, principalId, event, m.final); // COMMIT goes with it
}
