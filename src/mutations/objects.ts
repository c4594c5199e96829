// Objects: the one write path of an object, for the API and the import worker alike. The class is
// share-locked for every write (its schema and collection hold while the object is checked and
// written); an object write checks the class schema and records compliance flips.
import { ApiError, notFound } from '../domain/errors.ts';
import { assertFitsClass, compileClassSchema } from '../domain/class-schema.ts';
import { applyJsonPatch, jsonEqual, JsonPatchError } from '../domain/json-patch.ts';
import { readClassAs, readObjectAs } from '../db/authz.ts';
import { classIdByName, shareLockClass, type LockedClass } from '../db/classes.ts';
import { objectComplianceEvent } from '../domain/views/class-schema-events.ts';
import {
  deleteObjectIfClassUnchanged,
  insertObjectIfClassUnchanged,
  insertObjectWithEvents,
  lockObjectRelations,
  newObjectClassCols,
  objectCols,
  readObjectData,
  RELATION_APPEARED,
  updateObjectIfClassUnchanged,
  updateObjectWithEvents,
  type ClassVersion,
} from '../db/objects.ts';
import {
  objectCreatedEvent,
  objectDeletedEvent,
  objectDeletedEventDraft,
  objectUpdatedEvent,
  objectUpdatedEventDraft,
  type ObjectRow,
} from '../domain/views/objects.ts';
import { objectRelationDeletedWithObjectEvent } from '../domain/views/relations.ts';
import { decide } from '../domain/authz.ts';
import type { ClassRow } from '../domain/views/classes.ts';
import type { Db } from '../db/sql.ts';
import { isTx } from '../db/tx.ts';
import { deleteRowWithEvents } from '../db/events.ts';
import { inTx, requireMatch, skipWhenUnchanged, type Caller, type MutationContext, type Written } from './context.ts';
import { revisionsMatched } from '../domain/preconditions.ts';

const KIND = 'object';

/**
 * The object a write names: by id or by name within a class. A route by class name passes that
 * name too, so a class renamed meanwhile no longer answers to it (404).
 */
export interface ObjectTarget {
  classId: number;
  className?: string | null;
  objectId?: number | null;
  objectName?: string | null;
}

export interface NewObject {
  name: string;
  description?: string;
  json_data: unknown;
}

/** Members to change; an omitted member keeps its value. */
export interface ObjectChanges {
  name?: string;
  description?: string;
  json_data?: unknown;
}

/**
 * Locks an object for a write: its class (share; 404 unless it exists and, when the route names it,
 * still carries that name), then the object (update), checking `perm` on it and If-Match. The two
 * locking statements go out together (one round trip) and run in that order.
 */
async function lockForWrite(
  m: MutationContext,
  t: ObjectTarget,
  perm: 'UpdateObject' | 'DeleteObject',
  ifMatch: string | undefined,
  read?: (cls: KnownClass) => void,
): Promise<{ cls: LockedClass; obj: ObjectRow }> {
  const locking = shareLockClass(m.tx, t.classId);
  locking.catch(() => undefined); // awaited below
  const object = t.objectId ?? { name: t.objectName! };
  const reading = readObjectAs<ObjectRow>(m.tx, m.auth, object, perm, { classId: t.classId }, objectCols(m.tx), 'update');
  reading.catch(() => undefined); // awaited below, unless the class already answers 404
  const cls = await locking;
  if (!cls || (t.className != null && cls.name !== t.className)) throw notFound('class');
  read?.(cls);
  const obj = await reading; // by name, the statement matched the name
  requireMatch(ifMatch, KIND, obj.id, obj.revision);
  return { cls, obj };
}

/** Writes a changed object with its event and compliance record; nothing when nothing changes. */
async function writeObject(
  m: MutationContext,
  cls: LockedClass,
  before: ObjectRow,
  next: { name: string; description: string; json_data: unknown },
  how: string,
): Promise<Written<ObjectRow>> {
  const dataChanged = !jsonEqual(next.json_data, before.json_data);
  const same = !dataChanged && next.name === before.name && next.description === before.description;
  return skipWhenUnchanged(before, same, async () => {
    if (dataChanged) assertFitsClass(cls, next.json_data);
    const after: ObjectRow = {
      id: before.id,
      collection_id: before.collection_id,
      class_id: before.class_id,
      created_at: before.created_at,
      name: next.name,
      description: next.description,
      json_data: next.json_data,
      updated_at: cls.svc_now,
      revision: before.revision + 1,
    };
    const events = [objectUpdatedEvent(before, after, cls.id, dataChanged, how)];
    const compliance = dataChanged ? objectComplianceEvent(cls, before, after) : null;
    if (compliance) events.push(compliance);
    return updateObjectWithEvents(m.tx, m.actor, after, events, m.final, m.actorUnbound);
  });
}

/**
 * A class as a create under it read it, with that row's version (newObjectClassCols' svc_version)
 * and, once needed, its compiled schema (which then costs no lookup by the schema's digest).
 */
type KnownClass = ClassRow & { svc_version: string; validate?: ReturnType<typeof compileClassSchema> };

/**
 * The classes that creates in this process read last, per database handle, by id and by name, for
 * createOwnObject's one-statement path. Only a hint: that statement writes nothing unless the class
 * row is still the version read (so also still of that name). At most KNOWN_CLASSES per handle, the
 * oldest read first out.
 */
const knownClasses = new WeakMap<Db, { byId: Map<number, KnownClass>; byName: Map<string, KnownClass> }>();
const KNOWN_CLASSES = 1000;

function knownIn(db: Db): { byId: Map<number, KnownClass>; byName: Map<string, KnownClass> } {
  let known = knownClasses.get(db);
  if (!known) knownClasses.set(db, (known = { byId: new Map(), byName: new Map() }));
  return known;
}

function remember(db: Db, cls: KnownClass): void {
  const known = knownIn(db);
  const forget = (old: KnownClass | undefined) => {
    if (!old) return;
    known.byId.delete(old.id);
    if (known.byName.get(old.name) === old) known.byName.delete(old.name);
  };
  forget(known.byId.get(cls.id));
  if (known.byId.size >= KNOWN_CLASSES) forget(known.byId.values().next().value);
  known.byId.set(cls.id, cls);
  known.byName.set(cls.name, cls);
}

/** The class a create names: by id, or by name (the route by class name). */
export type CreateTarget = { id: number } | { name: string };

/**
 * Creates an object in a transaction of its own (an API request's create). Under a class that an
 * earlier create in this process read, this is one statement (insertObjectIfClassUnchanged: class
 * check, permission, actor binding, insert and audit event; one round trip with BEGIN and COMMIT),
 * which writes only if the class row is still the version read and the caller may create
 * in it; by name, the class's id is then not looked up either. Whatever that cannot settle goes the
 * way of createObject, in a transaction of its own, which also decides every error: a class not
 * read yet or changed since (then nothing was written), a name no class has, a scoped-out token,
 * data the known schema refuses, a compliance record to write.
 */
export async function createOwnObject(db: Db, caller: Caller, target: CreateTarget, v: NewObject): Promise<ObjectRow> {
  const known = 'id' in target ? knownIn(db).byId.get(target.id) : knownIn(db).byName.get(target.name);
  if (known) {
    const draft = { name: v.name, description: v.description ?? '', json_data: v.json_data };
    // id 0 and no times: the statement puts the object's own into its event
    const unsaved: ObjectRow = {
      name: draft.name,
      description: draft.description,
      json_data: draft.json_data,
      id: 0,
      collection_id: known.collection_id,
      class_id: known.id,
      created_at: '',
      updated_at: '',
      revision: 1,
    };
    if (settlesAlone(caller, known, unsaved)) {
      const cls = { id: known.id, revision: known.revision, version: known.svc_version };
      const event = objectCreatedEvent(unsaved, known);
      const row = await inTx(db, caller, (m) => insertObjectIfClassUnchanged(m.tx, m.actor, m.auth, cls, draft, event, m.final), {
        actorInStatement: true,
      });
      if (row) return row;
      // Nothing written. The entry stays: a caller without the permission must not evict it for
      // the others; a class changed since is read again below, and a successful create replaces it.
    }
  }
  const classId = 'id' in target ? target.id : await classIdByName(db, target.name);
  if (classId === undefined) throw notFound('class');
  // The class is remembered as soon as it is read, so a create that is then refused (a name taken,
  // data the schema refuses) still leaves the next one under it the one-statement path.
  return inTx(db, caller, (m) => createObject(m, classId, 'id' in target ? null : target.name, v, (cls) => remember(db, cls)));
}

/** Whether the one-statement create may go ahead: nothing it would leave undecided. */
function settlesAlone(caller: Caller, known: KnownClass, unsaved: ObjectRow): boolean {
  const scope = decide(caller.auth, 'CreateObject', { kind: 'class', id: known.id, collectionId: known.collection_id }, true);
  if (scope !== 'allow') return false;
  if (known.json_schema === null || known.json_schema === undefined) return true;
  // Data the schema refuses: a 400 where it is enforced, else a compliance record to write (a new
  // object is non-compliant exactly when the validator refuses it: complianceOf).
  known.validate ??= compileClassSchema(known.json_schema);
  return known.validate(unsaved.json_data);
}

/** Creates an object in `m`; `read` gets the class once it is read, locked and found to be the one named. */
export async function createObject(
  m: MutationContext,
  classId: number,
  className: string | null,
  v: NewObject,
  read?: (cls: KnownClass) => void,
): Promise<ObjectRow> {
  // Two statements, two round trips: the class (share-locked, with the permission check, the new id
  // and now(); BEGIN and the actor binding go out with it), then the object and its events together
  // (with COMMIT when the transaction is this mutation's).
  const cls = await readClassAs<LockedClass & { svc_next_id: number; svc_version: string }>(
    m.tx,
    m.auth,
    classId,
    'CreateObject',
    newObjectClassCols(m.tx),
    { lock: 'share' },
  );
  if (className != null && cls.name !== className) throw notFound('class');
  read?.(cls);
  assertFitsClass(cls, v.json_data);
  const row: ObjectRow = {
    id: cls.svc_next_id,
    name: v.name,
    description: v.description ?? '',
    collection_id: cls.collection_id,
    class_id: cls.id,
    json_data: v.json_data,
    created_at: cls.svc_now,
    updated_at: cls.svc_now,
    revision: 1,
  };
  const compliance = objectComplianceEvent(cls, null, row);
  const events = compliance ? [objectCreatedEvent(row, cls), compliance] : [objectCreatedEvent(row, cls)];
  return insertObjectWithEvents(m.tx, m.actor, row, events, m.final);
}

/**
 * Where a write by object id under a class this process read can go the one-statement way: the
 * class as read, its version for the statement, the object's id and the revisions If-Match accepts
 * (null: any); undefined for a route by name, a class not read yet, or an If-Match that names no
 * revision of the object (the general way answers it).
 */
function knownTarget(
  db: Db,
  t: ObjectTarget,
  ifMatch: string | undefined,
): { known: KnownClass; cls: ClassVersion; objectId: number; revisions: number[] | null } | undefined {
  const objectId = t.objectId;
  if (objectId == null || t.className != null) return undefined;
  const known = knownIn(db).byId.get(t.classId);
  if (!known) return undefined;
  const revisions = revisionsMatched(ifMatch, KIND, objectId);
  if (revisions === undefined || revisions?.length === 0) return undefined;
  return { known, cls: { id: known.id, revision: known.revision, version: known.svc_version }, objectId, revisions };
}

/**
 * updateObject, patchObjectData and deleteObject in a transaction of their own (an API request's):
 * their one writing statement binds the actor (m.actorUnbound), so the transaction needs no
 * statement of its own for that.
 */
export async function updateOwnObject(
  db: Db,
  caller: Caller,
  t: ObjectTarget,
  changes: ObjectChanges,
  ifMatch?: string,
): Promise<Written<ObjectRow>> {
  // By id under a class a write in this process read: one statement (class check, If-Match,
  // permission, actor binding, update and audit event; one round trip with BEGIN and COMMIT), which
  // writes only if the class row is still the version read, the object is of it and at a revision
  // If-Match names, the caller may update it and something changes. Whatever it leaves (nothing
  // written) goes the general way, which decides every error (a stale or malformed If-Match too)
  // and answers an update that changes nothing.
  const k = knownTarget(db, t, ifMatch);
  if (k && updateSettlesAlone(caller, k.known, k.objectId, changes)) {
    const { known, objectId, revisions, cls } = k;
    const event = objectUpdatedEventDraft(objectId, known);
    const write = (m: MutationContext) =>
      updateObjectIfClassUnchanged(m.tx, m.actor, m.auth, cls, objectId, revisions, changes, event, m.final);
    const row = await inTx(db, caller, write, { actorInStatement: true });
    if (row) return { row, changed: true };
  }
  return inTx(db, caller, (m) => updateObject(m, t, changes, ifMatch, (cls) => remember(db, cls)), { actorInStatement: true });
}

/** Whether the one-statement update may go ahead: nothing it would leave undecided. */
function updateSettlesAlone(caller: Caller, known: KnownClass, objectId: number, changes: ObjectChanges): boolean {
  const object = { kind: 'object', id: objectId, classId: known.id, collectionId: known.collection_id } as const;
  if (decide(caller.auth, 'UpdateObject', object, true) !== 'allow') return false;
  if (changes.json_data === undefined || known.json_schema === null || known.json_schema === undefined) return true;
  // A schema not enforced: whether the object's compliance flips depends on its data before (a
  // record to write), which the general way reads. An enforced one: data it refuses is a 400.
  if (!known.validate_schema) return false;
  known.validate ??= compileClassSchema(known.json_schema);
  return known.validate(changes.json_data);
}

export async function patchOwnObjectData(
  db: Db,
  caller: Caller,
  t: ObjectTarget,
  patch: unknown,
  ifMatch?: string,
): Promise<Written<ObjectRow>> {
  // By id under a class a write in this process read: the object's data read (no lock), the patch
  // applied and the result checked here, then the one-statement update (updateOwnObject's) at the
  // revision read. Two round trips, as the general way's, but no lock held between them and no
  // statement built per call. An object changed in between (the update writes nothing), a patch
  // that fails or changes nothing, data the schema refuses or whose compliance needs a record: the
  // general way, under the locks, which decides every answer.
  const k = knownTarget(db, t, ifMatch);
  if (k) {
    const { known, objectId, revisions, cls } = k;
    const current = await readObjectData(db, known.id, objectId);
    if (current && (revisions === null || revisions.includes(current.revision))) {
      const data = patchedOrUndefined(current.json_data, patch);
      if (data !== undefined && !jsonEqual(data, current.json_data) && updateSettlesAlone(caller, known, objectId, { json_data: data })) {
        const event = objectUpdatedEventDraft(objectId, known, JSON_PATCH_HOW);
        const write = (m: MutationContext) =>
          updateObjectIfClassUnchanged(m.tx, m.actor, m.auth, cls, objectId, [current.revision], { json_data: data }, event, m.final);
        const row = await inTx(db, caller, write, { actorInStatement: true });
        if (row) return { row, changed: true };
      }
    }
  }
  return inTx(db, caller, (m) => patchObjectData(m, t, patch, ifMatch, (cls) => remember(db, cls)), { actorInStatement: true });
}

/** How a JSON Patch's update event's summary says it was made. */
const JSON_PATCH_HOW = ' (JSON Patch)';

/** `patch` applied to `data`; undefined when it cannot be (the general way then answers why). */
function patchedOrUndefined(data: unknown, patch: unknown): unknown {
  try {
    return applyJsonPatch(data, patch, { requireObjectRoot: true });
  } catch (err) {
    if (err instanceof JsonPatchError) return undefined;
    throw err;
  }
}

export async function deleteOwnObject(db: Db, caller: Caller, t: ObjectTarget, ifMatch?: string): Promise<void> {
  // By id under a class a write in this process read, an object without relations: one statement
  // (class check, If-Match, permission, actor binding, delete and audit event; one round trip with
  // BEGIN and COMMIT), as updateOwnObject's. Whatever it leaves (nothing deleted: an object with
  // relations among them) goes the general way, which decides every error; so does a delete whose
  // statement found a relation it had not seen (RELATION_APPEARED: nothing was written). Only in a
  // transaction of its own: the statement's mark on its transaction lasts until that ends.
  const k = isTx(db) ? undefined : knownTarget(db, t, ifMatch);
  const object = k && ({ kind: 'object', id: k.objectId, classId: k.known.id, collectionId: k.known.collection_id } as const);
  if (k && object && decide(caller.auth, 'DeleteObject', object, true) === 'allow') {
    const { known, revisions, cls } = k;
    const event = objectDeletedEventDraft(object.id, known);
    const write = (m: MutationContext) => deleteObjectIfClassUnchanged(m.tx, m.actor, m.auth, cls, object.id, revisions, event, m.final);
    try {
      if (await inTx(db, caller, write, { actorInStatement: true })) return;
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code !== RELATION_APPEARED) throw err;
    }
  }
  return inTx(db, caller, (m) => deleteObject(m, t, ifMatch, (cls) => remember(db, cls)), { actorInStatement: true });
}

/** Updates an object in `m`; `read` gets the class once it is read, locked and found to be the one named. */
export async function updateObject(
  m: MutationContext,
  t: ObjectTarget,
  changes: ObjectChanges,
  ifMatch?: string,
  read?: (cls: KnownClass) => void,
): Promise<Written<ObjectRow>> {
  const { cls, obj } = await lockForWrite(m, t, 'UpdateObject', ifMatch, read);
  const next = {
    name: changes.name ?? obj.name,
    description: changes.description ?? obj.description,
    json_data: changes.json_data === undefined ? obj.json_data : changes.json_data,
  };
  return writeObject(m, cls, obj, next, '');
}

/** Applies an RFC 6902 JSON Patch to the object's json_data. */
export async function patchObjectData(
  m: MutationContext,
  t: ObjectTarget,
  patch: unknown,
  ifMatch?: string,
  read?: (cls: KnownClass) => void,
): Promise<Written<ObjectRow>> {
  const { cls, obj } = await lockForWrite(m, t, 'UpdateObject', ifMatch, read);
  let data: unknown;
  try {
    data = applyJsonPatch(obj.json_data, patch, { requireObjectRoot: true });
  } catch (err) {
    if (err instanceof JsonPatchError)
      throw new ApiError(err.errorKind, `the JSON Patch cannot be applied: ${err.message}`, { reason: err.kind });
    throw err;
  }
  return writeObject(m, cls, obj, { name: obj.name, description: obj.description, json_data: data }, JSON_PATCH_HOW);
}

/**
 * Deletes an object with its relations (each recorded as deleted). The relations are read and locked
 * in the same round trip as the class and the object (after them: no relation can be added to a
 * locked object); the delete and every event are then one statement.
 */
export async function deleteObject(m: MutationContext, t: ObjectTarget, ifMatch?: string, read?: (cls: KnownClass) => void): Promise<void> {
  const locked = lockForWrite(m, t, 'DeleteObject', ifMatch, read);
  const early = lockObjectRelations(m.tx, t.objectId ?? { classId: t.classId, name: t.objectName! });
  early.catch(() => undefined); // awaited below, unless the object answers 404 or 403
  const { cls, obj } = await locked;
  const relations = await early;
  const events = relations.map(({ from_collection_id, to_collection_id, ...r }) =>
    objectRelationDeletedWithObjectEvent(r, { from_collection_id, to_collection_id }, obj.id, obj.name),
  );
  events.push(objectDeletedEvent(obj, cls, relations.length));
  // its relations go with it (on delete cascade), locked above
  await deleteRowWithEvents(m.tx, m.actor, 'objects', obj.id, events, m.final, m.actorUnbound);
}
