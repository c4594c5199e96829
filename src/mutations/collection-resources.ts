// The write path shared by resources that live in one collection and may move to another (remote
// targets, export templates): the lock with the permission on the collection, If-Match, the
// resource's rules, the write with its event in one statement. A move also needs the create
// permission on the new collection, and its event names both collections.
import type { Authority, Permission } from '../domain/authz.ts';
import { deleteRowWithEvents, reserveId, type RowTable } from '../db/events.ts';
import { type NewEvent } from '../domain/new-event.ts';
import type { Actor } from '../domain/actor.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import type { TransactionSql } from '../db/sql.ts';
import type { Final } from '../db/tx.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

/** A resource's row: its fields, its id and times. */
type Row<F> = F & { id: number; created_at: Date; updated_at: Date; revision: number };

/** Every rule of a saved resource (400/404); the caller's settings decide some of them. */
export type Validate<F> = (tx: TransactionSql, f: F) => Promise<void>;

export interface CollectionResource<R extends Row<F>, F extends { collection_id: number }> {
  /** The ETag kind. */
  kind: string;
  table: RowTable;
  perms: { create: Permission; update: Permission; delete: Permission };
  /** The row locked for update, with now() as svc_now, and the check of `perm` on its collection: 404 or 403 otherwise. */
  lockAs(tx: TransactionSql, auth: Authority, id: number, perm: Permission): Promise<R & { svc_now: Date }>;
  fields(row: R): F;
  applyPatch(fields: F, body: unknown): F;
  same(a: F, b: F): boolean;
  /** Inserts the row (its id and times given) with `events`, in one statement. */
  insert(tx: TransactionSql, actor: Actor, row: R, events: NewEvent[], final?: Final): Promise<R>;
  /** Writes the row over the locked one of its id (updated_at now(), the revision one up) with `events`, in one statement. */
  update(tx: TransactionSql, actor: Actor, row: R, events: NewEvent[], final?: Final): Promise<R>;
  event(row: R, action: string, before: R | null, related?: number[]): NewEvent;
}

/**
 * Two round trips unless the rules read the database (a template's includes, a target's class): the
 * permission check with the new id and now(); then the row with its audit event (and COMMIT).
 */
export async function createInCollection<R extends Row<F>, F extends { collection_id: number }>(
  m: MutationContext,
  r: CollectionResource<R, F>,
  fields: F,
  validate: Validate<F>,
): Promise<R> {
  const checked = requireCollectionPermission(m.tx, m.auth, fields.collection_id, r.perms.create);
  const reserved = reserveId(m.tx, r.table);
  reserved.catch(() => undefined); // awaited below, after the check
  await checked;
  await validate(m.tx, fields);
  const { id, now } = await reserved;
  const created = Object.assign({}, fields, { id, created_at: now, updated_at: now, revision: 1 }) as R;
  return r.insert(m.tx, m.actor, created, [r.event(created, 'created', null)], m.final);
}

/** Locks the resource for a write, with the check of `perm` on its collection as locked; then If-Match. */
async function lockForWrite<R extends Row<F>, F extends { collection_id: number }>(
  m: MutationContext,
  r: CollectionResource<R, F>,
  id: number,
  perm: Permission,
  ifMatch: string | undefined,
): Promise<{ before: R; now: Date }> {
  const { svc_now: now, ...before } = await r.lockAs(m.tx, m.auth, id, perm);
  requireMatch(ifMatch, r.kind, before.id, before.revision);
  return { before: before as unknown as R, now };
}

/**
 * Applies a patch (members it omits keep their values); nothing is written when nothing changes.
 * Two round trips unless it moves the resource (the create permission in the new collection) or the
 * rules read the database: the lock with the check; then the write with its audit event (and COMMIT).
 */
export async function updateInCollection<R extends Row<F>, F extends { collection_id: number }>(
  m: MutationContext,
  r: CollectionResource<R, F>,
  id: number,
  patch: unknown,
  validate: Validate<F>,
  ifMatch?: string,
): Promise<Written<R>> {
  const { before, now } = await lockForWrite(m, r, id, r.perms.update, ifMatch);
  const next = r.applyPatch(r.fields(before), patch);
  return skipWhenUnchanged(before, r.same(next, r.fields(before)), async () => {
    if (next.collection_id !== before.collection_id) {
      await requireCollectionPermission(m.tx, m.auth, next.collection_id, r.perms.create);
    }
    await validate(m.tx, next);
    const after = Object.assign({}, before, next, { updated_at: now, revision: before.revision + 1 }) as R;
    const moved = after.collection_id !== before.collection_id;
    const event = r.event(after, 'updated', before, moved ? [before.collection_id] : []);
    if (moved) event.metadata = { from_collection_id: before.collection_id, to_collection_id: after.collection_id };
    return r.update(m.tx, m.actor, after, [event], m.final);
  });
}

/** Two round trips: the lock with the check; then the delete with its audit event (and COMMIT). */
export async function deleteInCollection<R extends Row<F>, F extends { collection_id: number }>(
  m: MutationContext,
  r: CollectionResource<R, F>,
  id: number,
  ifMatch?: string,
): Promise<void> {
  const { before } = await lockForWrite(m, r, id, r.perms.delete, ifMatch);
  await deleteRowWithEvents(m.tx, m.actor, r.table, id, [r.event(before, 'deleted', before)], m.final);
}
