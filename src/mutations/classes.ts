// Classes: the one write path of a class and its schema, for the API and the import worker alike.
// A schema change is checked against every stored object of the class inside the change's
// transaction; its lifecycle (staged, activated, deleted) and the compliance flips it causes are
// recorded with it. A change refused because stored objects fail it is recorded on its own
// (recordingRefusal), after or beside the transaction that rolls back.
import type { Logger } from 'pino';
import { badRequest, notFound } from '../domain/errors.ts';
import { NO_IMPACT, compileClassSchema } from '../domain/class-schema.ts';
import { jsonEqual } from '../domain/json-patch.ts';
import type { Sql } from '../db/sql.ts';
import { EVENTS_IN_STATEMENT, appendEvent, appendMany, deleteRowWithEvents, reserveId } from '../db/events.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';
import { classPermissionOf, requireClassPermission, requireCollectionPermission } from '../db/authz.ts';
import {
  classDeletedEvent,
  deleteClassDependents,
  insertClassWithEvents,
  isEmptyCascade,
  lockClass,
  moveClassObjects,
  readClassCascade,
  updateClassWithEvents,
  type ClassValues,
  findClassExpanded,
  type LockedClass,
} from '../db/classes.ts';
import { classCreatedEvent, classUpdatedEvent, type ClassExpandedRow, type ClassRow } from '../domain/views/classes.ts';
import { classSchemaChangeEvents, classSchemaDeletedWithClassEvent } from '../domain/views/class-schema-events.ts';
import { SchemaChangeRefused, checkClassSchemaChange, recordRefusedSchemaChange } from '../db/class-schema-events.ts';
import { requireMatch, type MutationContext, type Written } from './context.ts';

const KIND = 'class';

/** The class a write names; a route by class name passes that name, so a renamed class is 404. */
export interface ClassTarget {
  classId: number;
  className?: string | null;
}

export interface NewClass {
  name: string;
  description?: string;
  collection_id: number;
  json_schema?: unknown;
  validate_schema?: boolean;
}

/** Members to change; an omitted member keeps its value (json_schema null removes the schema). */
export interface ClassChanges {
  name?: string;
  description?: string;
  collection_id?: number;
  json_schema?: unknown;
  validate_schema?: boolean;
}

async function lockTarget(m: MutationContext, t: ClassTarget): Promise<LockedClass> {
  const cls = await lockClass(m.tx, t.classId);
  if (!cls || (t.className != null && cls.name !== t.className)) throw notFound('class');
  return cls;
}

/**
 * lockTarget, then the caller's `perm` on the locked class, decided as requireClassPermission decides
 * it. An administrator's needs no statement (classPermissionOf, on the locked row's collection); a
 * non-administrator's check goes out right behind the lock, in the same round trip, so PostgreSQL
 * runs it on the locked row (a class moved meanwhile is judged in its new collection). A missing
 * class is 404 before any 403. Both go out when it is called: what the caller sends right after
 * the call goes behind them.
 */
async function lockWithPermission(m: MutationContext, t: ClassTarget, perm: 'UpdateClass' | 'DeleteClass'): Promise<LockedClass> {
  const locking = lockTarget(m, t);
  const checked = m.auth.isAdmin ? undefined : requireClassPermission(m.tx, m.auth, t.classId, perm);
  checked?.catch(() => undefined); // awaited below, once the lock has said whether the class exists
  const cls = await locking;
  if (checked) await checked;
  else classPermissionOf(m.auth, cls.id, cls.collection_id, perm);
  return cls;
}

/**
 * The events of a class write, and whether they fit in its one writing statement: a schema change
 * that flips the compliance of many objects appends those events on its own, after it.
 */
function writeEvents(first: NewEvent[], flips: NewEvent[]): { inStatement: NewEvent[]; after: NewEvent[] } {
  return first.length + flips.length > EVENTS_IN_STATEMENT
    ? { inStatement: first, after: flips }
    : { inStatement: [...first, ...flips], after: [] };
}

/**
 * Two round trips: the permission check on the collection and the new id with now() go out
 * together; then the class with its audit events (and COMMIT when the transaction is this one's),
 * answering with the class and its collection.
 */
export async function createClass(m: MutationContext, v: NewClass): Promise<ClassExpandedRow> {
  const values: ClassValues = {
    name: v.name,
    description: v.description ?? '',
    collection_id: v.collection_id,
    json_schema: v.json_schema ?? null,
    validate_schema: v.validate_schema ?? false,
  };
  if (values.validate_schema && values.json_schema === null) {
    throw badRequest('validate_schema: true needs a json_schema', [{ path: 'body.validate_schema', message: 'no json_schema given' }]);
  }
  if (values.json_schema !== null) compileClassSchema(values.json_schema);
  const checked = requireCollectionPermission(m.tx, m.auth, values.collection_id, 'CreateClass');
  const reserved = reserveId(m.tx, 'classes');
  reserved.catch(() => undefined); // awaited below, after the check
  await checked;
  const { id, now } = await reserved;
  const created: ClassRow = {
    id,
    name: values.name,
    description: values.description,
    collection_id: values.collection_id,
    json_schema: values.json_schema,
    validate_schema: values.validate_schema,
    created_at: now,
    updated_at: now,
    revision: 1,
  };
  const { lifecycle } = classSchemaChangeEvents(null, created, NO_IMPACT);
  return insertClassWithEvents(m.tx, m.actor, id, values, [classCreatedEvent(created), ...lifecycle], m.final);
}

/**
 * Changes a class: moving it to another collection also needs CreateClass there and moves its
 * objects; a schema change is checked against the stored objects (SchemaChangeRefused, 409).
 * Answers with the class and its collection. Two round trips when neither happens: the lock with
 * the check; then the change with its audit events (and COMMIT).
 */
export async function updateClass(
  m: MutationContext,
  t: ClassTarget,
  changes: ClassChanges,
  ifMatch?: string,
): Promise<Written<ClassExpandedRow>> {
  const before = await lockWithPermission(m, t, 'UpdateClass');
  requireMatch(ifMatch, KIND, before.id, before.revision);
  const next: ClassValues = {
    name: changes.name ?? before.name,
    description: changes.description ?? before.description,
    collection_id: changes.collection_id ?? before.collection_id,
    json_schema: changes.json_schema === undefined ? (before.json_schema ?? null) : changes.json_schema,
    validate_schema: changes.validate_schema ?? before.validate_schema,
  };
  if (next.validate_schema && next.json_schema === null) {
    throw badRequest('validate_schema needs a json_schema', [{ path: 'body.validate_schema', message: 'the class has no json_schema' }]);
  }
  if (changes.json_schema !== undefined && changes.json_schema !== null) compileClassSchema(changes.json_schema);
  const schemaChanged = !jsonEqual(next.json_schema, before.json_schema ?? null);
  const moved = next.collection_id !== before.collection_id;
  if (moved) await requireCollectionPermission(m.tx, m.auth, next.collection_id, 'CreateClass');
  const same =
    !schemaChanged &&
    !moved &&
    next.name === before.name &&
    next.description === before.description &&
    next.validate_schema === before.validate_schema;
  // nothing to write: the answer is the class as it is
  if (same) return { row: (await findClassExpanded(m.tx, before.id))!, changed: false };
  const impact = await checkClassSchemaChange(m.tx, before, next);
  // its objects follow it first (their events come before the class's)
  const movedObjects = moved ? await moveClassObjects(m.tx, m.actor, before.id, next.collection_id) : null;
  const after: ClassRow = {
    id: before.id,
    name: next.name,
    description: next.description,
    collection_id: next.collection_id,
    json_schema: next.json_schema,
    validate_schema: next.validate_schema,
    created_at: before.created_at,
    updated_at: before.svc_now,
    revision: before.revision + 1,
  };
  const { lifecycle, flips } = classSchemaChangeEvents(before, after, impact);
  const events = writeEvents([classUpdatedEvent(before, after, schemaChanged, movedObjects), ...lifecycle], flips);
  const final = events.after.length ? undefined : m.final;
  const row = await updateClassWithEvents(m.tx, m.actor, before.id, next, events.inStatement, final);
  await appendMany(m.tx, m.actor, events.after);
  return { row, changed: true };
}

/**
 * Deletes a class with its objects, relations and computed fields; returns the deleted row. Two
 * round trips for a class with nothing under it: the lock with the check and the reads of what
 * depends on it; then the delete with its audit events (and COMMIT).
 */
export async function deleteClass(m: MutationContext, t: ClassTarget, ifMatch?: string): Promise<ClassRow> {
  const locked = lockWithPermission(m, t, 'DeleteClass');
  // sent behind the lock and the check; awaited unless the class answers 404 or 403
  const reading = readClassCascade(m.tx, t.classId);
  reading.catch(() => undefined);
  const cls = await locked;
  requireMatch(ifMatch, KIND, cls.id, cls.revision);
  const cascade = await reading;
  const events = [classDeletedEvent(cls, cascade)];
  const schemaDeleted = classSchemaDeletedWithClassEvent(cls);
  if (isEmptyCascade(cascade)) {
    if (schemaDeleted) events.unshift(schemaDeleted);
  } else {
    // the schema's event first, then what goes with the class, then the class's own
    if (schemaDeleted) await appendEvent(m.tx, m.actor, schemaDeleted);
    await deleteClassDependents(m.tx, m.actor, cls, cascade);
  }
  await deleteRowWithEvents(m.tx, m.actor, 'classes', cls.id, events, m.final);
  return cls;
}

/**
 * A catch handler for an updateClass that rethrows every error and first records a refused schema
 * change in its own transaction, so the rollback of the change cannot take the record with it.
 */
export function recordingRefusal(sql: Sql, log: Logger, actor: Actor): (err: unknown) => Promise<never> {
  return async (err) => {
    if (err instanceof SchemaChangeRefused) await recordRefusedSchemaChange(sql, log, actor, err);
    throw err;
  };
}
