// Collection permissions of a group: the one write path of grants, for the API and the import
// worker alike. Changing a group's grants on a collection needs DelegateCollection on it; changes
// of one group on one collection are serialized; one event per grant added or removed.
import { notFound } from '../domain/errors.ts';
import type { Permission } from '../domain/authz.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import { findCollection } from '../db/collections.ts';
import { findGroup, grantPermissions, groupPermissions, lockGrants, revokePermissions } from '../db/permissions.ts';
import type { MutationContext } from './context.ts';

type GrantTarget = Parameters<typeof grantPermissions>[2];

/** One grant change: the group's permissions on the collection before and after, and the difference. */
export interface GrantChange {
  before: Permission[];
  added: Permission[];
  removed: Permission[];
  after: Permission[];
}

/**
 * DelegateCollection on the collection (404 when it or the group is missing), the grants locked,
 * then `change` given the grants held before.
 */
async function changeGrants(
  m: MutationContext,
  collectionId: number,
  groupId: number,
  change: (target: GrantTarget, before: Permission[]) => Promise<{ added?: Permission[]; removed?: Permission[] }>,
): Promise<GrantChange> {
  await requireCollectionPermission(m.tx, m.auth, collectionId, 'DelegateCollection');
  const group = await findGroup(m.tx, groupId);
  if (!group) throw notFound('group');
  const collection = await findCollection(m.tx, collectionId);
  if (!collection) throw notFound('collection');
  await lockGrants(m.tx, collectionId, groupId);
  const before = await groupPermissions(m.tx, collectionId, groupId);
  const { added = [], removed = [] } = await change({ collectionId, collectionName: collection.name, group }, before);
  const after = added.length || removed.length ? await groupPermissions(m.tx, collectionId, groupId) : before;
  return { before, added, removed, after };
}

/**
 * Grants `perms` (sorted, as the contract lists them) to the group on the collection; with
 * `replace`, the grants not in `perms` are revoked first.
 */
export function grantCollectionPermissions(
  m: MutationContext,
  collectionId: number,
  groupId: number,
  perms: readonly Permission[],
  opts: { replace?: boolean } = {},
): Promise<GrantChange> {
  return changeGrants(m, collectionId, groupId, async (target, before) => {
    const removed = opts.replace
      ? await revokePermissions(
          m.tx,
          m.actor,
          target,
          before.filter((p) => !perms.includes(p)),
        )
      : [];
    const added = await grantPermissions(m.tx, m.actor, target, perms);
    return { added, removed };
  });
}

/** Revokes `perms` from the group on the collection (every grant of the group there when null). */
export function revokeCollectionPermissions(
  m: MutationContext,
  collectionId: number,
  groupId: number,
  perms: readonly Permission[] | null,
): Promise<GrantChange> {
  return changeGrants(m, collectionId, groupId, async (target) => ({ removed: await revokePermissions(m.tx, m.actor, target, perms) }));
}
