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
import { appendEvent } from '../db/events.ts';
import type { Actor } from '../domain/actor.ts';
import { classPermissionOf, requireClassPermission, requireCollectionPermission } from '../db/authz.ts';
import { deleteClassCascade, insertClass, lockClass, moveClassObjects, updateClassRow, type ClassValues } from '../db/classes.ts';
import { classCreatedEvent, classUpdatedEvent, type ClassRow } from '../domain/views/classes.ts';
import {
  SchemaChangeRefused,
  checkClassSchemaChange,
  recordClassSchemaChange,
  recordClassSchemaDeletedWithClass,
  recordRefusedSchemaChange,
} from '../db/class-schema-events.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

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

async function lockTarget(m: MutationContext, t: ClassTarget): Promise<ClassRow> {
  const cls = await lockClass(m.tx, t.classId);
  if (!cls || (t.className != null && cls.name !== t.className)) throw notFound('class');
  return cls;
}

/**
 * lockTarget, then the caller's `perm` on the locked class, decided as requireClassPermission decides
 * it. An administrator's needs no statement (classPermissionOf, on the locked row's collection); a
 * non-administrator's check goes out right behind the lock, in the same round trip, so PostgreSQL
 * runs it on the locked row (a class moved meanwhile is judged in its new collection). A missing
 * class is 404 before any 403.
 */
async function lockWithPermission(m: MutationContext, t: ClassTarget, perm: 'UpdateClass' | 'DeleteClass'): Promise<ClassRow> {
  const locking = lockTarget(m, t);
  const checked = m.auth.isAdmin ? undefined : requireClassPermission(m.tx, m.auth, t.classId, perm);
  checked?.catch(() => undefined); // awaited below, once the lock has said whether the class exists
  const cls = await locking;
  if (checked) await checked;
  else classPermissionOf(m.auth, cls.id, cls.collection_id, perm);
  return cls;
}

export async function createClass(m: MutationContext, v: NewClass): Promise<ClassRow> {
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
  await requireCollectionPermission(m.tx, m.auth, values.collection_id, 'CreateClass');
  const created = await insertClass(m.tx, values);
  await appendEvent(m.tx, m.actor, classCreatedEvent(created));
  await recordClassSchemaChange(m.tx, m.actor, null, created, NO_IMPACT);
  return created;
}

/**
 * Changes a class: moving it to another collection also needs CreateClass there and moves its
 * objects; a schema change is checked against the stored objects (SchemaChangeRefused, 409).
 */
export async function updateClass(m: MutationContext, t: ClassTarget, changes: ClassChanges, ifMatch?: string): Promise<Written<ClassRow>> {
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
  return skipWhenUnchanged(before, same, async () => {
    const impact = await checkClassSchemaChange(m.tx, before, next);
    const after = await updateClassRow(m.tx, before.id, next);
    const movedObjects = moved ? await moveClassObjects(m.tx, m.actor, before.id, next.collection_id) : null;
    await appendEvent(m.tx, m.actor, classUpdatedEvent(before, after, schemaChanged, movedObjects));
    await recordClassSchemaChange(m.tx, m.actor, before, after, impact);
    return after;
  });
}

/** Deletes a class with its objects, relations and computed fields; returns the deleted row. */
export async function deleteClass(m: MutationContext, t: ClassTarget, ifMatch?: string): Promise<ClassRow> {
  const cls = await lockWithPermission(m, t, 'DeleteClass');
  requireMatch(ifMatch, KIND, cls.id, cls.revision);
  await recordClassSchemaDeletedWithClass(m.tx, m.actor, cls);
  await deleteClassCascade(m.tx, m.actor, cls);
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
