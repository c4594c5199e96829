// Collections: the one write path of a collection, for the API and the import worker alike.
// Creating or moving a collection is delegation: DelegateCollection on the parent it goes below,
// or administrator authority for the top level.
import { badRequest, conflict, notFound } from '../domain/errors.ts';
import { PERMISSIONS, requireRootAuthority, type Authority } from '../domain/authz.ts';
import type { Db } from '../db/sql.ts';
import { appendEvent, deleteRowWithEvents, updateNameWithEvent, reserveId } from '../db/events.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import {
  collectionDependents,
  insertCollectionWithEvents,
  isSelfOrDescendant,
  lockCollection,
  lockCollectionTree,
  setCollectionParent,
  type LockedCollection,
} from '../db/collections.ts';
import { collectionEvent, type CollectionRow } from '../domain/views/collections.ts';
import { findGroup, grantEvents, grantRowsOf, revokedWithDelete } from '../db/permissions.ts';
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

/**
 * Locks a collection for a write, then checks `perm` on it and If-Match; a delete locks it `for
 * update`. The lock and the check go out together (one round trip, with whatever the caller sends
 * right after the call), the check behind the lock, so PostgreSQL runs it on the collection as
 * locked (one moved meanwhile is judged under its new parent). A missing collection is 404.
 */
async function lockForWrite(
  m: MutationContext,
  id: number,
  perm: 'UpdateCollection' | 'DeleteCollection',
  ifMatch: string | undefined,
): Promise<LockedCollection> {
  const locked = lockCollection(m.tx, id, perm === 'DeleteCollection' ? 'update' : 'no key update');
  const checked = requireCollectionPermission(m.tx, m.auth, id, perm);
  checked.catch(() => undefined); // awaited below, once the lock has said whether the collection exists
  const before = await locked;
  if (!before) throw notFound('collection');
  await checked;
  requireMatch(ifMatch, KIND, before.id, before.revision);
  return before;
}

/**
 * Two round trips: the delegation check, the group and the new id with now() go out together; then
 * the collection, the group's grants on it and their events in one statement (with COMMIT when the
 * transaction is this mutation's).
 */
export async function createCollection(m: MutationContext, v: NewCollection): Promise<CollectionRow> {
  const parentId = v.parent_collection_id ?? null;
  const groupId = v.group_id ?? null;
  if (parentId === null) requireRootAuthority(m.auth);
  const delegated = parentId === null ? undefined : requireCollectionPermission(m.tx, m.auth, parentId, 'DelegateCollection');
  const group = groupId === null ? undefined : findGroup(m.tx, groupId);
  const reserved = reserveId(m.tx, 'collections');
  for (const p of [group, reserved]) p?.catch(() => undefined); // awaited after the check
  await delegated;
  const g = await group;
  if (groupId !== null && !g) throw notFound('group');
  const { id, now } = await reserved;
  const created: CollectionRow = {
    id,
    name: v.name,
    description: v.description ?? '',
    parent_collection_id: parentId,
    created_at: now,
    updated_at: now,
    revision: 1,
  };
  const events = [collectionEvent(created, 'created', null, [parentId])];
  if (g) {
    const added = PERMISSIONS.map((permission) => ({ collection_id: id, group_id: g.id, permission, created_at: now }));
    events.push(...grantEvents({ collectionId: id, collectionName: created.name, group: g }, { removed: [], added }));
  }
  const grant = g ? { groupId: g.id, permissions: PERMISSIONS } : null;
  await insertCollectionWithEvents(m.tx, m.actor, created, grant, events, m.final);
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
    const after: CollectionRow = Object.assign({}, before, next, { updated_at: before.svc_now, revision: before.revision + 1 });
    await updateNameWithEvent(m.tx, m.actor, 'collections', after, collectionEvent(after, 'updated', before), m.final); // COMMIT goes with it
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
  // One round trip: the tree (no other move meanwhile), the collection, and the check on it as locked.
  const tree = lockCollectionTree(m.tx);
  const locked = lockCollection(m.tx, id);
  const checked = requireCollectionPermission(m.tx, m.auth, id, 'UpdateCollection');
  for (const p of [locked, checked]) p.catch(() => undefined); // awaited below, in the order they run
  await tree;
  const before = await locked;
  if (!before) throw notFound('collection');
  await checked;
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
    const event = collectionEvent(after, 'updated', before, [before.parent_collection_id, parentId]);
    event.summary = `collection ${after.name} moved`;
    event.metadata = { from_parent_collection_id: before.parent_collection_id, to_parent_collection_id: parentId };
    await appendEvent(m.tx, m.actor, event, m.final);
    return after;
  });
}

/**
 * Deletes an empty collection; its grants go with it, each recorded as revoked. Two round trips: the
 * check, the lock, what still lives in the collection and its grants (locked) go out together; then
 * the delete and every event in one statement.
 */
export async function deleteCollection(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  const locked = lockForWrite(m, id, 'DeleteCollection', ifMatch);
  // sent behind the check and the lock, so they read the collection as locked; awaited after them
  const dependents = collectionDependents(m.tx, id);
  const grants = grantRowsOf(m.tx, { collectionId: id });
  for (const p of [dependents, grants]) p.catch(() => undefined);
  const before = await locked;
  const dep = await dependents;
  const blocking = [
    dep.children && `${dep.children} child collection(s)`,
    dep.classes && `${dep.classes} class(es)`,
    dep.objects && `${dep.objects} object(s)`,
    dep.remote_targets && `${dep.remote_targets} remote target(s)`,
    dep.export_templates && `${dep.export_templates} export template(s)`,
    dep.event_subscriptions && `${dep.event_subscriptions} event subscription(s)`,
  ].filter(Boolean);
  if (blocking.length) throw conflict(`the collection still has ${blocking.join(', ')}; delete or move them first`, 'collection_not_empty');
  const events = revokedWithDelete(await grants);
  events.push(collectionEvent(before, 'deleted', before, [before.parent_collection_id]));
  await deleteRowWithEvents(m.tx, m.actor, 'collections', id, events, m.final);
}
