// Update and delete of a resource that lives in one collection and may move to another (remote
// targets, export templates): both follow the same locking, authorization and event rules.
import type { Ctx } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { notFound } from '../http/errors.ts';
import { checkIfMatch } from '../http/preconditions.ts';
import { appendEvent, type NewEvent } from '../db/events.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import type { Db, TransactionSql } from '../db/sql.ts';
import type { Permission } from '../domain/authz.ts';

interface Row {
  id: number;
  collection_id: number;
  revision: number;
}

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
  /** Every rule of a saved resource (400/404). */
  validate(tx: TransactionSql, f: F, ctx: Ctx): Promise<void>;
  insert(tx: TransactionSql, f: F): Promise<R>;
  update(tx: TransactionSql, id: number, f: F): Promise<R>;
  remove(tx: TransactionSql, id: number): Promise<void>;
  event(row: R, action: string, before: R | null, related?: number[]): NewEvent;
}

export async function createInCollection<R extends Row, F extends { collection_id: number }>(
  tx: TransactionSql,
  ctx: Ctx,
  r: CollectionResource<R, F>,
  fields: F,
): Promise<R> {
  await requireCollectionPermission(tx, authOf(ctx), fields.collection_id, r.perms.create);
  await r.validate(tx, fields, ctx);
  const created = await r.insert(tx, fields);
  await appendEvent(tx, actorOf(ctx), r.event(created, 'created', null));
  return created;
}

/**
 * Locks the resource for a write: `perm` on its collection is checked before the lock and again
 * when the collection changed meanwhile; then If-Match.
 */
async function lockForWrite<R extends Row, F extends { collection_id: number }>(
  tx: TransactionSql,
  ctx: Ctx,
  r: CollectionResource<R, F>,
  id: number,
  perm: Permission,
  headers: Record<string, string>,
): Promise<R> {
  const auth = authOf(ctx);
  const current = await r.find(tx, id);
  if (!current) throw notFound(r.label);
  await requireCollectionPermission(tx, auth, current.collection_id, perm);
  const before = await r.lock(tx, id);
  if (!before) throw notFound(r.label);
  if (before.collection_id !== current.collection_id) await requireCollectionPermission(tx, auth, before.collection_id, perm);
  checkIfMatch(headers, r.kind, before.id, before.revision);
  return before;
}

/**
 * Applies a patch: nothing is written when nothing changes; a move also needs the create permission
 * on the new collection, and its event names both collections.
 */
export async function updateInCollection<R extends Row, F extends { collection_id: number }>(
  tx: TransactionSql,
  ctx: Ctx,
  r: CollectionResource<R, F>,
  id: number,
  headers: Record<string, string>,
  body: unknown,
): Promise<R> {
  const before = await lockForWrite(tx, ctx, r, id, r.perms.update, headers);
  const next = r.applyPatch(r.fields(before), body);
  if (r.same(next, r.fields(before))) return before;
  if (next.collection_id !== before.collection_id) {
    await requireCollectionPermission(tx, authOf(ctx), next.collection_id, r.perms.create);
  }
  await r.validate(tx, next, ctx);
  const after = await r.update(tx, id, next);
  const moved = after.collection_id !== before.collection_id;
  await appendEvent(tx, actorOf(ctx), {
    ...r.event(after, 'updated', before, moved ? [before.collection_id] : []),
    ...(moved ? { metadata: { from_collection_id: before.collection_id, to_collection_id: after.collection_id } } : {}),
  });
  return after;
}

export async function deleteInCollection<R extends Row, F extends { collection_id: number }>(
  tx: TransactionSql,
  ctx: Ctx,
  r: CollectionResource<R, F>,
  id: number,
  headers: Record<string, string>,
): Promise<void> {
  const before = await lockForWrite(tx, ctx, r, id, r.perms.delete, headers);
  await r.remove(tx, id);
  await appendEvent(tx, actorOf(ctx), r.event(before, 'deleted', before));
}
