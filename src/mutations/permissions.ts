// Collection permissions of a group: the one write path of grants, for the API and the import
// worker alike. Changing a group's grants on a collection needs DelegateCollection on it; changes
// of one group on one collection are serialized; one event per grant added or removed.
import { notFound } from '../domain/errors.ts';
import { sortPermissions, type Permission } from '../domain/authz.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import { shareLockCollection } from '../db/collections.ts';
import { shareLockGroup } from '../db/groups.ts';
import { grantRows, lockGrants, writeGrants, type PermissionRow } from '../db/permissions.ts';
import type { MutationContext } from './context.ts';

/** One grant change: the group's permissions on the collection before and after, and the difference. */
export interface GrantChange {
  before: Permission[];
  added: Permission[];
  removed: Permission[];
  after: Permission[];
}

/**
 * DelegateCollection on the collection (404 when it or the group is missing), the grants locked,
 * then the change `plan` makes of the grants held before, written with its events in one statement.
 * Two round trips: the check, the group, the collection, the lock and the grants go out together
 * (the check's verdict first); then the write, with COMMIT when the transaction is this change's.
 * The group and the collection are locked against their delete before the grants (a delete locks
 * the group or collection, then the grants): a grant change beside a delete waits, never deadlocks.
 */
async function changeGrants(
  m: MutationContext,
  collectionId: number,
  groupId: number,
  plan: (before: Permission[]) => { add: readonly Permission[]; remove: readonly Permission[] },
): Promise<GrantChange> {
  const checked = requireCollectionPermission(m.tx, m.auth, collectionId, 'DelegateCollection');
  const group = shareLockGroup(m.tx, groupId);
  const collection = shareLockCollection(m.tx, collectionId);
  const now = lockGrants(m.tx, collectionId, groupId);
  const held = grantRows(m.tx, collectionId, groupId);
  for (const p of [group, collection, now, held]) p.catch(() => undefined); // awaited below, after the check
  await checked;
  const g = await group;
  if (!g) throw notFound('group');
  const c = await collection;
  if (!c) throw notFound('collection');
  const createdAt = await now;
  const rows = await held;
  const before = rows.map((r) => r.permission);
  const { add, remove } = plan(before);
  const removed = rows.filter((r) => remove.includes(r.permission));
  const added: PermissionRow[] = sortPermissions(add.filter((p) => !before.includes(p))).map((permission) => ({
    collection_id: collectionId,
    group_id: groupId,
    permission,
    created_at: createdAt,
  }));
  await writeGrants(m.tx, m.actor, { collectionId, collectionName: c.name, group: g }, { removed, added }, m.final);
  const names = (list: PermissionRow[]) => list.map((r) => r.permission);
  return {
    before,
    added: names(added),
    removed: names(removed),
    after: sortPermissions([...before.filter((p) => !remove.includes(p)), ...names(added)]),
  };
}

/**
 * Grants `perms` (sorted, as the contract lists them) to the group on the collection; with
 * `replace`, the grants not in `perms` are revoked.
 */
export function grantCollectionPermissions(
  m: MutationContext,
  collectionId: number,
  groupId: number,
  perms: readonly Permission[],
  opts: { replace?: boolean } = {},
): Promise<GrantChange> {
  return changeGrants(m, collectionId, groupId, (before) => ({
    add: perms,
    remove: opts.replace ? before.filter((p) => !perms.includes(p)) : [],
  }));
}

/** Revokes `perms` from the group on the collection (every grant of the group there when null). */
export function revokeCollectionPermissions(
  m: MutationContext,
  collectionId: number,
  groupId: number,
  perms: readonly Permission[] | null,
): Promise<GrantChange> {
  return changeGrants(m, collectionId, groupId, (before) => ({ add: [], remove: perms ?? before }));
}
