// The write path shared by resources that live in one collection and may move to another (remote
// targets, export templates): the permission on the collection, the lock, If-Match, the resource's
// rules, the write and its event. A move also needs the create permission on the new collection,
// and its event names both collections.
import { notFound } from '../domain/errors.ts';
import type { Permission } from '../domain/authz.ts';
import { appendEvent } from '../db/events.ts';
import { type NewEvent } from '../domain/new-event.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import type { Db, TransactionSql } from '../db/sql.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

interface Row {
  id: number;
  collection_id: number;
  revision: number;
}

/** Every rule of a saved resource (400/404); the caller's settings decide some of them. */
export type Validate<F> = (tx: TransactionSql, f: F) => Promise<void>;

export interface CollectionResource<R extends Row, F extends { collection_id: number }> {
  /** The ETag kind. */
  kind: string;
  /** The name in 404 messages. */
  label: string;
  perms: { create: Permission; update: Permission; delete: Permission };
  find(db: Db, id: number): Promise<R | undefined>;
  lock(tx: TransactionSql, id: number): Promise<R | undefined>;
  fields(row: R): F;
  applyPatch(fields: F, body: unknown): F;
  same(a: F, b: F): boolean;
  insert(tx: TransactionSql, f: F): Promise<R>;
  update(tx: TransactionSql, id: number, f: F): Promise<R>;
  remove(tx: TransactionSql, id: number): Promise<void>;
  event(row: R, action: string, before: R | null, related?: number[]): NewEvent;
}

export async function createInCollection<R extends Row, F extends { collection_id: number }>(
  m: MutationContext,
  r: CollectionResource<R, F>,
  fields: F,
  validate: Validate<F>,
): Promise<R> {
  await requireCollectionPermission(m.tx, m.auth, fields.collection_id, r.perms.create);
  await validate(m.tx, fields);
  const created = await r.insert(m.tx, fields);
  await appendEvent(m.tx, m.actor, r.event(created, 'created', null), m.final);
  return created;
}

/**
 * Locks the resource for a write: `perm` on its collection is checked before the lock and again
 * when the collection changed meanwhile; then If-Match.
 */
async function lockForWrite<R extends Row, F extends { collection_id: number }>(
  m: MutationContext,
  r: CollectionResource<R, F>,
  id: number,
  perm: Permission,
  ifMatch: string | undefined,
): Promise<R> {
  const current = await r.find(m.tx, id);
  if (!current) throw notFound(r.label);
  await requireCollectionPermission(m.tx, m.auth, current.collection_id, perm);
  const before = await r.lock(m.tx, id);
  if (!before) throw notFound(r.label);
  if (before.collection_id !== current.collection_id) await requireCollectionPermission(m.tx, m.auth, before.collection_id, perm);
  requireMatch(ifMatch, r.kind, before.id, before.revision);
  return before;
}

/** Applies a patch (members it omits keep their values); nothing is written when nothing changes. */
export async function updateInCollection<R extends Row, F extends { collection_id: number }>(
  m: MutationContext,
  r: CollectionResource<R, F>,
  id: number,
  patch: unknown,
  validate: Validate<F>,
  ifMatch?: string,
): Promise<Written<R>> {
  const before = await lockForWrite(m, r, id, r.perms.update, ifMatch);
  const next = r.applyPatch(r.fields(before), patch);
  return skipWhenUnchanged(before, r.same(next, r.fields(before)), async () => {
    if (next.collection_id !== before.collection_id) {
      await requireCollectionPermission(m.tx, m.auth, next.collection_id, r.perms.create);
    }
    await validate(m.tx, next);
    const after = await r.update(m.tx, id, next);
    const moved = after.collection_id !== before.collection_id;
    await appendEvent(
      m.tx,
      m.actor,
      {
        ...r.event(after, 'updated', before, moved ? [before.collection_id] : []),
        ...(moved ? { metadata: { from_collection_id: before.collection_id, to_collection_id: after.collection_id } } : {}),
      },
      m.final,
    );
    return after;
  });
}

export async function deleteInCollection<R extends Row, F extends { collection_id: number }>(
  m: MutationContext,
  r: CollectionResource<R, F>,
  id: number,
  ifMatch?: string,
): Promise<void> {
  const before = await lockForWrite(m, r, id, r.perms.delete, ifMatch);
  await r.remove(m.tx, id);
  await appendEvent(m.tx, m.actor, r.event(before, 'deleted', before), m.final);
}
