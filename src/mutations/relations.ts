// Class relations and object relations: their one write path, for the API and the import worker
// alike. A relation is authorized on both of its ends; an object relation is created under a
// share lock of its class relation (so the maximum counts hold while it counts and inserts).
import { badRequest, conflict, notFound } from '../domain/errors.ts';
import type { Authority, Permission } from '../domain/authz.ts';
import { classRelationView, type ClassRelationRow, type ObjectRelationRow } from '../domain/relations.ts';
import type { Db } from '../db/sql.ts';
import { appendEvent, deleteRowWithEvents, reserveId } from '../db/events.ts';
import { requireClassPermission, requireObjectPermission } from '../db/authz.ts';
import {
  deleteClassRelationCascade,
  existingClassIds,
  findClassRelation,
  findObjectEnds,
  insertClassRelation,
  insertObjectRelationWithEvents,
  lockRelationEnds,
  readObjectRelationAs,
  relationRoom,
  requireRoomForRelation,
  updateClassRelationRow,
} from '../db/relations.ts';
import {
  CLASS_RELATION_KIND,
  OBJECT_RELATION_KIND,
  classRelationEvent,
  objectRelationEvent,
  type ClassRelationWithEnds,
} from '../domain/views/relations.ts';
import { maxRelationsInUse } from '../db/imports.ts';
import { inTx, requireMatch, skipWhenUnchanged, type Caller, type MutationContext, type Written } from './context.ts';

/** `perm` on both classes of a class relation (grants and token scope): 403 otherwise. */
export async function requireClassRelationPermission(db: Db, auth: Authority, r: ClassRelationWithEnds, perm: Permission): Promise<void> {
  await requireClassPermission(db, auth, r.from_class_id, perm);
  if (r.to_class_id !== r.from_class_id) await requireClassPermission(db, auth, r.to_class_id, perm);
}

// ---- class relations ----------------------------------------------------------------------------

/** The aliases and maximum counts of a class relation (null: none). */
export interface ClassRelationSettings {
  forward_alias?: string | null;
  reverse_alias?: string | null;
  from_max_relations?: number | null;
  to_max_relations?: number | null;
}

export interface NewClassRelation extends ClassRelationSettings {
  from_class_id: number;
  to_class_id: number;
}

const SETTINGS = ['forward_alias', 'reverse_alias', 'from_max_relations', 'to_max_relations'] as const;

export async function createClassRelation(m: MutationContext, v: NewClassRelation): Promise<ClassRelationRow> {
  const found = await existingClassIds(m.tx, [v.from_class_id, v.to_class_id]);
  if (!found.has(v.from_class_id)) throw notFound('class (from_class_id)');
  if (!found.has(v.to_class_id)) throw notFound('class (to_class_id)');
  const from = await requireClassPermission(m.tx, m.auth, v.from_class_id, 'CreateClassRelation');
  const to = await requireClassPermission(m.tx, m.auth, v.to_class_id, 'CreateClassRelation');
  const created = await insertClassRelation(m.tx, {
    from_class_id: v.from_class_id,
    to_class_id: v.to_class_id,
    forward_alias: v.forward_alias ?? null,
    reverse_alias: v.reverse_alias ?? null,
    from_max_relations: v.from_max_relations ?? null,
    to_max_relations: v.to_max_relations ?? null,
  });
  const ends = { from_collection_id: from.collection_id, to_collection_id: to.collection_id };
  await appendEvent(m.tx, m.actor, classRelationEvent(Object.assign({}, created, ends), 'created'), m.final);
  return created;
}

/**
 * Changes the aliases and maximum counts of a class relation (omitted members keep their values);
 * a maximum below what existing object relations already use is 409.
 */
export async function updateClassRelation(
  m: MutationContext,
  id: number,
  changes: ClassRelationSettings,
  ifMatch?: string,
): Promise<Written<ClassRelationRow>> {
  const before = await findClassRelation(m.tx, id, 'update');
  if (!before) throw notFound('class relation');
  await requireClassPermission(m.tx, m.auth, before.from_class_id, 'UpdateClassRelation');
  await requireClassPermission(m.tx, m.auth, before.to_class_id, 'UpdateClassRelation');
  requireMatch(ifMatch, CLASS_RELATION_KIND, before.id, before.revision);
  const next = Object.fromEntries(SETTINGS.map((k) => [k, changes[k] === undefined ? before[k] : changes[k]])) as Required<
    Pick<ClassRelationRow, (typeof SETTINGS)[number]>
  >;
  return skipWhenUnchanged(
    before,
    SETTINGS.every((k) => next[k] === before[k]),
    async () => {
      const inUse = await maxRelationsInUse(m.tx, before.id);
      if (
        (next.from_max_relations !== null && inUse.from > next.from_max_relations) ||
        (next.to_max_relations !== null && inUse.to > next.to_max_relations)
      ) {
        throw conflict('existing object relations exceed the new maximum counts of the class relation', 'max_relations_exceeded');
      }
      const after = await updateClassRelationRow(m.tx, before.id, next);
      await appendEvent(
        m.tx,
        m.actor,
        {
          entityType: CLASS_RELATION_KIND,
          entityId: after.id,
          entityName: null,
          collectionId: before.from_collection_id,
          relatedCollectionIds: [before.to_collection_id],
          action: 'updated',
          summary: `class relation ${after.id} (class ${after.from_class_id} to class ${after.to_class_id}) updated`,
          before: classRelationView(before),
          after: classRelationView(after),
          beforeRevision: before.revision,
          afterRevision: after.revision,
          metadata: { from_class_id: after.from_class_id, to_class_id: after.to_class_id },
        },
        m.final,
      );
      return after;
    },
  );
}

/** Deletes a class relation and every object relation under it. */
export async function deleteClassRelation(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  const row = await findClassRelation(m.tx, id, 'update');
  if (!row) throw notFound('class relation');
  await requireClassRelationPermission(m.tx, m.auth, row, 'DeleteClassRelation');
  requireMatch(ifMatch, CLASS_RELATION_KIND, row.id, row.revision);
  await deleteClassRelationCascade(m.tx, m.actor, row);
}

// ---- object relations ---------------------------------------------------------------------------

export interface NewObjectRelation {
  class_relation_id: number;
  from_object_id: number;
  to_object_id: number;
}

/**
 * createObjectRelation and deleteObjectRelation in a transaction of their own (an API request's):
 * their one writing statement binds the actor (m.actorUnbound), so the transaction needs no
 * statement of its own for that.
 */
export function createOwnObjectRelation(db: Db, caller: Caller, v: NewObjectRelation): Promise<ObjectRelationRow> {
  return inTx(db, caller, (m) => createObjectRelation(m, v), { actorInStatement: true });
}

export function deleteOwnObjectRelation(db: Db, caller: Caller, id: number, ifMatch?: string): Promise<void> {
  return inTx(db, caller, (m) => deleteObjectRelation(m, id, ifMatch), { actorInStatement: true });
}

/** Relates two objects under a class relation; the same relation existing already is 409. */
export async function createObjectRelation(m: MutationContext, v: NewObjectRelation): Promise<ObjectRelationRow> {
  return (await relateObjects(m, v, 'conflict'))!;
}

/** Relates two objects unless they already are (then null): the importer's idempotent create. */
export function ensureObjectRelation(m: MutationContext, v: NewObjectRelation): Promise<ObjectRelationRow | null> {
  return relateObjects(m, v, 'keep');
}

async function relateObjects(m: MutationContext, v: NewObjectRelation, ifExists: 'conflict' | 'keep'): Promise<ObjectRelationRow | null> {
  // Everything the create decides on goes out together (one round trip), run in this order and read
  // in the order that decides which error a request gets: the class relation, share-locked (it
  // keeps its max counts while we count and insert; deleting it waits for us and then also deletes
  // what we created), both ends and both permission checks, the ends locked, the duplicate check
  // and the counts, and the new relation's id and times. Then the insert with its event (and
  // COMMIT, when final): one more. The importer's create ('keep') reserves the id only once the
  // relation is known to be new: a re-run import of relations that exist would otherwise use up an
  // id for each.
  const fromId = v.from_object_id;
  const toId = v.to_object_id;
  const finding = findClassRelation(m.tx, v.class_relation_id, 'share');
  const reading = findObjectEnds(m.tx, [fromId, toId]);
  const fromAllowed = requireObjectPermission(m.tx, m.auth, fromId, 'CreateObjectRelation');
  const toAllowed = requireObjectPermission(m.tx, m.auth, toId, 'CreateObjectRelation');
  const locking = lockRelationEnds(m.tx, [fromId, toId]);
  const measuring = relationRoom(m.tx, v.class_relation_id, fromId, toId);
  let reserving = ifExists === 'conflict' ? reserveId(m.tx, 'object_relations') : undefined;
  for (const q of [finding, reading, fromAllowed, toAllowed, locking, measuring, reserving]) q?.catch(() => undefined); // awaited below
  const cr = await finding;
  if (!cr) throw notFound('class relation');
  const ends = await reading;
  if (!ends.has(fromId)) throw notFound('object (from_object_id)');
  if (!ends.has(toId)) throw notFound('object (to_object_id)');
  const from = await fromAllowed;
  const to = await toAllowed;
  if (from.id === to.id) {
    throw badRequest('an object cannot be related to itself', [{ path: 'body.to_object_id', message: 'equals from_object_id' }]);
  }
  const details = [];
  if (from.class_id !== cr.from_class_id) {
    details.push({
      path: 'body.from_object_id',
      message: `must be an object of class ${cr.from_class_id} (it is of class ${from.class_id})`,
    });
  }
  if (to.class_id !== cr.to_class_id) {
    details.push({ path: 'body.to_object_id', message: `must be an object of class ${cr.to_class_id} (it is of class ${to.class_id})` });
  }
  if (details.length) {
    throw badRequest(
      `the objects' classes do not match class relation ${cr.id} (class ${cr.from_class_id} to class ${cr.to_class_id})`,
      details,
    );
  }
  const locked = await locking;
  // an end deleted after it was read (its delete waited for nothing of ours): 404, as if read then
  if (!locked.has(from.id)) throw notFound('object (from_object_id)');
  if (!locked.has(to.id)) throw notFound('object (to_object_id)');
  const room = await measuring;
  if (room.found) {
    if (ifExists === 'keep') return null;
    throw conflict('this object relation already exists', 'duplicate_relation');
  }
  requireRoomForRelation(cr, room, from.id, to.id);
  reserving ??= reserveId(m.tx, 'object_relations');
  const { id, now } = await reserving;
  const row: ObjectRelationRow = {
    id,
    class_relation_id: cr.id,
    from_object_id: from.id,
    to_object_id: to.id,
    created_at: now,
    updated_at: now,
    revision: 1,
  };
  const event = objectRelationEvent(row, { from_collection_id: from.collection_id, to_collection_id: to.collection_id }, 'created');
  return insertObjectRelationWithEvents(m.tx, m.actor, row, [event], m.final, m.actorUnbound);
}

/** Two round trips: the relation locked with both checks, in one statement; then the delete with its event (and COMMIT). */
export async function deleteObjectRelation(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  const row = await readObjectRelationAs(m.tx, m.auth, id, 'DeleteObjectRelation', true);
  requireMatch(ifMatch, OBJECT_RELATION_KIND, row.id, row.revision);
  await deleteRowWithEvents(m.tx, m.actor, 'object_relations', row.id, [objectRelationEvent(row, row, 'deleted')], m.final, m.actorUnbound);
}
