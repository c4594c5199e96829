// Collections: the one write path of a collection, for the API and the import worker alike.
// Creating or moving a collection is delegation: DelegateCollection on the parent it goes below,
// or administrator authority for the top level.
import { badRequest, conflict, notFound } from '../domain/errors.ts';
import { PERMISSIONS, requireRootAuthority, type Authority } from '../domain/authz.ts';
import type { Db } from '../db/sql.ts';
import { appendEvent } from '../db/events.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import {
  collectionDependents,
  deleteCollectionRow,
  insertCollection,
  isSelfOrDescendant,
  lockCollection,
  lockCollectionTree,
  setCollectionParent,
  updateCollectionRow,
} from '../db/collections.ts';
import { collectionEvent, type CollectionRow } from '../domain/views/collections.ts';
import { findGroup, grantPermissions, groupsWithGrants, revokePermissions } from '../db/permissions.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

const KIND = 'collection';

export interface NewCollection {
  name: string;
  description?: string;
  parent_collection_id?: number | null;
  /** A group that receives every permission on the new collection. */
  group_id?: number | null;
}

/** Members to change; an omitted member keeps its value. */
export interface CollectionChanges {
  name?: string;
  description?: string;
}

/** DelegateCollection on a parent, or administrator authority for the top level (null). */
async function requireDelegation(db: Db, auth: Authority, parentId: number | null): Promise<void> {
  if (parentId === null) requireRootAuthority(auth);
  else await requireCollectionPermission(db, auth, parentId, 'DelegateCollection');
}

/** Locks a collection for a write after checking `perm` on it, then If-Match. */
async function lockForWrite(
  m: MutationContext,
  id: number,
  perm: 'UpdateCollection' | 'DeleteCollection',
  ifMatch: string | undefined,
): Promise<CollectionRow> {
  // The check and the lock go out together (one round trip); the check's verdict (404, 403) comes first.
  const checked = requireCollectionPermission(m.tx, m.auth, id, perm);
  const locked = lockCollection(m.tx, id);
  locked.catch(() => undefined); // awaited below, after the check
  await checked;
  const before = await locked;
  if (!before) throw notFound('collection');
  requireMatch(ifMatch, KIND, before.id, before.revision);
  return before;
}

export async function createCollection(m: MutationContext, v: NewCollection): Promise<CollectionRow> {
  const parentId = v.parent_collection_id ?? null;
  const groupId = v.group_id ?? null;
  await requireDelegation(m.tx, m.auth, parentId);
  const group = groupId === null ? null : await findGroup(m.tx, groupId);
  if (groupId !== null && !group) throw notFound('group');
  const created = await insertCollection(m.tx, { name: v.name, description: v.description ?? '', parentId });
  await appendEvent(m.tx, m.actor, collectionEvent(created, 'created', null, [parentId]));
  if (group) {
    await grantPermissions(m.tx, m.actor, { collectionId: created.id, collectionName: created.name, group }, PERMISSIONS);
  }
  return created;
}

export async function updateCollection(
  m: MutationContext,
  id: number,
  changes: CollectionChanges,
  ifMatch?: string,
): Promise<Written<CollectionRow>> {
  const before = await lockForWrite(m, id, 'UpdateCollection', ifMatch);
  const next = { name: changes.name ?? before.name, description: changes.description ?? before.description };
  return skipWhenUnchanged(before, next.name === before.name && next.description === before.description, async () => {
    const after = await updateCollectionRow(m.tx, id, next);
    await appendEvent(m.tx, m.actor, collectionEvent(after, 'updated', before), m.final); // COMMIT goes with it
    return after;
  });
}

/** Moves a collection below another (null: to the top level); never below itself. */
export async function moveCollection(
  m: MutationContext,
  id: number,
  parentId: number | null,
  ifMatch?: string,
): Promise<Written<CollectionRow>> {
  await requireCollectionPermission(m.tx, m.auth, id, 'UpdateCollection');
  await lockCollectionTree(m.tx);
  const before = await lockCollection(m.tx, id);
  if (!before) throw notFound('collection');
  requireMatch(ifMatch, KIND, before.id, before.revision);
  return skipWhenUnchanged(before, before.parent_collection_id === parentId, async () => {
    await requireDelegation(m.tx, m.auth, before.parent_collection_id);
    await requireDelegation(m.tx, m.auth, parentId);
    if (parentId !== null && (await isSelfOrDescendant(m.tx, id, parentId))) {
      throw badRequest('a collection cannot be moved below itself or one of its descendants', [
        { path: 'body.parent_collection_id', message: 'would create a cycle' },
      ]);
    }
    const after = await setCollectionParent(m.tx, id, parentId);
    await appendEvent(m.tx, m.actor, {
      ...collectionEvent(after, 'updated', before, [before.parent_collection_id, parentId]),
      summary: `collection ${after.name} moved`,
      metadata: { from_parent_collection_id: before.parent_collection_id, to_parent_collection_id: parentId },
    });
    return after;
  });
}

/** Deletes an empty collection; its grants go with it, each recorded as revoked. */
export async function deleteCollection(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  const before = await lockForWrite(m, id, 'DeleteCollection', ifMatch);
  const dep = await collectionDependents(m.tx, id);
  const blocking = [
    dep.children && `${dep.children} child collection(s)`,
    dep.classes && `${dep.classes} class(es)`,
    dep.objects && `${dep.objects} object(s)`,
    dep.remote_targets && `${dep.remote_targets} remote target(s)`,
    dep.export_templates && `${dep.export_templates} export template(s)`,
  ].filter(Boolean);
  if (blocking.length) throw conflict(`the collection still has ${blocking.join(', ')}; delete or move them first`, 'collection_not_empty');
  for (const group of await groupsWithGrants(m.tx, id)) {
    await revokePermissions(m.tx, m.actor, { collectionId: id, collectionName: before.name, group }, null);
  }
  await deleteCollectionRow(m.tx, id);
  await appendEvent(m.tx, m.actor, collectionEvent(before, 'deleted', before, [before.parent_collection_id]));
}
