// Classes: SQL only. Authorization is src/db/authz.ts; schema rules are src/domain/class-schema.ts.
import { textPart, type Db, type TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { appendMany, eventsCte } from './events.ts';
import { notFinal, type Final } from './tx.ts';
import type { NewEvent } from '../domain/new-event.ts';
import type { Actor } from '../domain/actor.ts';
import { objectView, type ObjectRow } from '../domain/views/objects.ts';
import { lockClassFieldRows } from './computed-fields.ts';
import { computedFieldView, type ComputedFieldRow } from '../domain/views/computed-fields.ts';
import type { ClassRelationRow, ObjectRelationRow, RelationEnds } from '../domain/relations.ts';
import { type ClassRow, type ClassExpandedRow, classView } from '../domain/views/classes.ts';
import type { Authority, Permission } from '../domain/authz.ts';
import { readClassAs } from './authz.ts';

const CLASS_COLUMN_LIST =
  'k.id, k.name, k.description, k.collection_id, k.json_schema, k.validate_schema, k.created_at, k.updated_at, k.revision';

/** The columns of a ClassRow over alias `k`. */
export function classCols(db: Db): Fragment {
  return textPart(db, CLASS_COLUMN_LIST) as Fragment;
}

function expandedCols(db: Db): Fragment {
  return db`${classCols(db)}, c.name as c_name, c.description as c_description, c.parent_collection_id as c_parent_collection_id,
    c.created_at as c_created_at, c.updated_at as c_updated_at, c.revision as c_revision` as Fragment;
}

export const CLASS_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'k.id', notNull: true },
    name: { type: 'text', column: 'k.name', notNull: true },
    description: { type: 'text', column: 'k.description', notNull: true },
    collection_id: { type: 'integer', column: 'k.collection_id', notNull: true },
    validate_schema: { type: 'boolean', column: 'k.validate_schema', sortable: false },
    json_schema: { type: 'json', column: 'k.json_schema' },
    created_at: { type: 'timestamp', column: 'k.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'k.updated_at', notNull: true },
    revision: { type: 'integer', column: 'k.revision', notNull: true },
  },
  aliases: { collections: 'collection_id' },
  defaultSort: [{ field: 'id', desc: false }],
  extraParams: ['permissions'],
};

export function listClasses(db: Db, parsed: ParsedList, where: Fragment[]): Promise<ListPage<ClassExpandedRow>> {
  return runList<ClassExpandedRow>(db, {
    from: db`classes k join collections c on c.id = k.collection_id` as Fragment,
    select: expandedCols(db),
    where,
    parsed,
    spec: CLASS_LIST_SPEC,
  });
}

/**
 * The class with its collection's columns (findClassExpanded) and the check of `perm` on it, in one
 * statement: 404 or 403 otherwise. The class is named by id or by name.
 */
export function readClassExpandedAs(db: Db, auth: Authority, cls: number | { name: string }, perm: Permission): Promise<ClassExpandedRow> {
  return readClassAs<ClassExpandedRow>(db, auth, cls, perm, expandedCols(db), {
    join: db`join collections c on c.id = k.collection_id` as Fragment,
  });
}

export async function findClassExpanded(db: Db, id: number): Promise<ClassExpandedRow | undefined> {
  const [row] = await db<ClassExpandedRow[]>`
    select ${expandedCols(db)} from classes k join collections c on c.id = k.collection_id where k.id = ${id}::int`;
  return row;
}

/** The id of the class with exactly this name (names are globally unique). */
export async function classIdByName(db: Db, name: string): Promise<number | undefined> {
  const [row] = await db<{ id: number }[]>`select id from classes where name = ${name}::text`;
  return row?.id;
}

/**
 * Locks the class for a change of its own row (blocks object writes, which share-lock it), with the
 * transaction's now() (the updated_at of the write). The row alone: a join would lose a class whose
 * row changed while the lock waited (PostgreSQL rechecks the join against the collection row it
 * read before the wait).
 */
export async function lockClass(tx: TransactionSql, id: number): Promise<LockedClass | undefined> {
  const [row] = await tx<LockedClass[]>`select ${classCols(tx)}, now() as svc_now from classes k where k.id = ${id}::int for update`;
  return row;
}

/** A class as a write under it reads it: the row and the transaction's now() (the updated_at of what it writes). */
export type LockedClass = ClassRow & { svc_now: Date };

/** A LockedClass with its row's version (`xmin`), which a later statement can check it against. */
export type VersionedClass = LockedClass & { svc_version: string };

/**
 * Share-locks the class for an object write (its schema and collection cannot change meanwhile), with
 * now() and the row's version (svc_version, as newObjectClassCols reads it).
 */
export async function shareLockClass(tx: TransactionSql, id: number): Promise<VersionedClass | undefined> {
  const [row] = await tx<VersionedClass[]>`
    select ${classCols(tx)}, now() as svc_now, k.xmin::text as svc_version from classes k where k.id = ${id}::int for share`;
  return row;
}

export interface ClassValues {
  name: string;
  description: string;
  collection_id: number;
  json_schema: unknown;
  validate_schema: boolean;
}

function schemaParam(v: unknown): string | null {
  return v === null || v === undefined ? null : JSON.stringify(v);
}

/**
 * Inserts the class (with the id reserveId reserved; its times are now()) and appends `events`,
 * in one statement; returns the class with its collection's columns. `final` marks it as the
 * transaction's last (COMMIT goes with it).
 */
export function insertClassWithEvents(
  tx: TransactionSql,
  actor: Actor,
  id: number,
  v: ClassValues,
  events: NewEvent[],
  final: Final = notFinal,
): Promise<ClassExpandedRow> {
  const write = tx`insert into classes as k (id, name, description, collection_id, json_schema, validate_schema)
    values (${id}::int, ${v.name}, ${v.description}, ${v.collection_id}::int, ${schemaParam(v.json_schema)}::text::jsonb,
      ${v.validate_schema}::boolean)` as Fragment;
  return classWriteWithEvents(tx, actor, write, events, final);
}

/**
 * Changes the class (locked by the caller) to `v` (updated_at now(), the revision one up) and
 * appends `events`, in one statement; returns the class with its (new) collection's columns.
 */
export function updateClassWithEvents(
  tx: TransactionSql,
  actor: Actor,
  id: number,
  v: ClassValues,
  events: NewEvent[],
  final: Final = notFinal,
): Promise<ClassExpandedRow> {
  const write = tx`update classes as k set name = ${v.name}, description = ${v.description}, collection_id = ${v.collection_id}::int,
      json_schema = ${schemaParam(v.json_schema)}::text::jsonb, validate_schema = ${v.validate_schema}::boolean,
      updated_at = now(), revision = k.revision + 1
    where k.id = ${id}::int` as Fragment;
  return classWriteWithEvents(tx, actor, write, events, final);
}

/** `write` (an insert or update of one class, alias `k`) with `events`, answering the class with its collection. */
async function classWriteWithEvents(
  tx: TransactionSql,
  actor: Actor,
  write: Fragment,
  events: NewEvent[],
  final: Final,
): Promise<ClassExpandedRow> {
  const [row] = await final(tx<ClassExpandedRow[]>`
    with k as (${write} returning ${classCols(tx)})${eventsCte(tx, actor, events)}
    select ${expandedCols(tx)} from k join collections c on c.id = k.collection_id`);
  return row!;
}

/** The objects of a class in id order, a batch at a time (for whole-class schema checks). */
export function classObjectsCursor(tx: TransactionSql, classId: number) {
  return tx<{ id: number; name: string; json_data: unknown }[]>`
    select id, name, json_data from objects where class_id = ${classId}::int order by id`.cursor(200);
}

/**
 * Moves every object of the class to the class's new collection (objects live in their class's
 * collection), with an `updated` event per object.
 */
export async function moveClassObjects(tx: TransactionSql, actor: Actor, classId: number, collectionId: number): Promise<number> {
  const before = await tx<ObjectRow[]>`
    select o.id, o.name, o.description, o.collection_id, o.class_id, o.json_data, o.created_at, o.updated_at, o.revision
    from objects o where o.class_id = ${classId}::int and o.collection_id <> ${collectionId}::int order by o.id for update`;
  if (before.length === 0) return 0;
  const after = await tx<ObjectRow[]>`
    update objects o set collection_id = ${collectionId}::int, updated_at = now(), revision = o.revision + 1
    where o.class_id = ${classId}::int and o.collection_id <> ${collectionId}::int
    returning o.id, o.name, o.description, o.collection_id, o.class_id, o.json_data, o.created_at, o.updated_at, o.revision`;
  const byId = new Map(before.map((b) => [b.id, b]));
  await appendMany(
    tx,
    actor,
    after.map((a) => {
      const b = byId.get(a.id)!;
      return {
        entityType: 'object',
        entityId: a.id,
        entityName: a.name,
        collectionId: a.collection_id,
        relatedCollectionIds: [b.collection_id],
        action: 'updated',
        summary: `object ${a.name} moved with its class`,
        before: objectView(b),
        after: objectView(a),
        beforeRevision: b.revision,
        afterRevision: a.revision,
        metadata: { class_id: classId, cause: 'class_moved' },
      };
    }),
  );
  return after.length;
}

/** What a class's delete takes with it, read and locked behind the class's lock. */
export interface ClassCascade {
  objects: ObjectRow[];
  objectRelations: (ObjectRelationRow & RelationEnds)[];
  classRelations: (ClassRelationRow & RelationEnds)[];
  fields: ComputedFieldRow[];
}

/**
 * The rows that depend on a class, locked: its objects, the object relations touching them or its
 * class relations, its class relations, its computed fields. Four statements, sent together (the
 * caller sends them right behind the class's lock: tx.ts, "Pipelines").
 */
export async function readClassCascade(tx: TransactionSql, classId: number): Promise<ClassCascade> {
  const objects = lockClassObjects(tx, classId);
  const objectRelations = lockClassObjectRelations(tx, classId);
  const classRelations = lockClassRelations(tx, classId);
  const fields = lockClassFieldRows(tx, classId);
  for (const p of [objectRelations, classRelations, fields]) p.catch(() => undefined); // awaited below
  return { objects: await objects, objectRelations: await objectRelations, classRelations: await classRelations, fields: await fields };
}

async function lockClassObjects(tx: TransactionSql, classId: number): Promise<ObjectRow[]> {
  return await tx<ObjectRow[]>`
    select o.id, o.name, o.description, o.collection_id, o.class_id, o.json_data, o.created_at, o.updated_at, o.revision
    from objects o where o.class_id = ${classId}::int order by o.id for update`;
}

/**
 * The object relations a class's delete takes with it: those of its objects, at either end. That is
 * also every relation under its class relations: an object relation is created only between objects
 * of its class relation's two classes (createObjectRelation), an object never changes class, and a
 * class relation never changes its classes. Each end is found through its own index: conditions ORed
 * over the joins made PostgreSQL join every relation in the database to both its objects
 * (bench/FINDINGS.md, 2026-12-06, second session).
 */
async function lockClassObjectRelations(tx: TransactionSql, classId: number): Promise<(ObjectRelationRow & RelationEnds)[]> {
  return await tx<(ObjectRelationRow & RelationEnds)[]>`
    select r.id, r.class_relation_id, r.from_object_id, r.to_object_id, r.created_at, r.updated_at, r.revision,
      fo.collection_id as from_collection_id, t.collection_id as to_collection_id
    from object_relations r
    join objects fo on fo.id = r.from_object_id
    join objects t on t.id = r.to_object_id
    where r.id in (
      select f.id from objects o join object_relations f on f.from_object_id = o.id where o.class_id = ${classId}::int
      union
      select b.id from objects o join object_relations b on b.to_object_id = o.id where o.class_id = ${classId}::int
    )
    order by r.id for update of r`;
}

async function lockClassRelations(tx: TransactionSql, classId: number): Promise<(ClassRelationRow & RelationEnds)[]> {
  return await tx<(ClassRelationRow & RelationEnds)[]>`
    select cr.id, cr.from_class_id, cr.to_class_id, cr.forward_alias, cr.reverse_alias, cr.from_max_relations, cr.to_max_relations,
      cr.created_at, cr.updated_at, cr.revision, fk.collection_id as from_collection_id, tk.collection_id as to_collection_id
    from class_relations cr
    join classes fk on fk.id = cr.from_class_id
    join classes tk on tk.id = cr.to_class_id
    where cr.from_class_id = ${classId}::int or cr.to_class_id = ${classId}::int
    order by cr.id for update of cr`;
}

export function isEmptyCascade(c: ClassCascade): boolean {
  return !c.objects.length && !c.objectRelations.length && !c.classRelations.length && !c.fields.length;
}

/** Object or class relations deleted with class `cls`, each with its `deleted` event. */
async function deleteRelationsWithClass(
  tx: TransactionSql,
  actor: Actor,
  cls: ClassRow,
  meta: Record<string, unknown>,
  kind: 'object' | 'class',
  rows: readonly ((ObjectRelationRow | ClassRelationRow) & RelationEnds)[],
): Promise<void> {
  if (!rows.length) return;
  await tx`delete from ${tx(`${kind}_relations`)} where id = any(${rows.map((r) => r.id)}::int[])`;
  await appendMany(
    tx,
    actor,
    rows.map((r) => {
      const { from_collection_id, to_collection_id, ...snapshot } = r;
      return {
        entityType: `${kind}_relation`,
        entityId: r.id,
        collectionId: from_collection_id,
        relatedCollectionIds: [to_collection_id],
        action: 'deleted',
        summary: `${kind} relation ${r.id} deleted with class ${cls.name}`,
        before: snapshot,
        beforeRevision: r.revision,
        metadata: meta,
      };
    }),
  );
}

/**
 * Deletes what depends on a class (locked by the caller, `cascade` as readClassCascade read it), each
 * row with a `deleted` event: object relations, class relations, objects, computed fields.
 */
export async function deleteClassDependents(tx: TransactionSql, actor: Actor, cls: ClassRow, cascade: ClassCascade): Promise<void> {
  const meta = { class_id: cls.id, cause: 'class_deleted' };
  const { objects, objectRelations, classRelations, fields } = cascade;
  await deleteRelationsWithClass(tx, actor, cls, meta, 'object', objectRelations);
  await deleteRelationsWithClass(tx, actor, cls, meta, 'class', classRelations);
  if (objects.length) {
    await tx`delete from objects where class_id = ${cls.id}::int`;
    await appendMany(
      tx,
      actor,
      objects.map((o) => ({
        entityType: 'object',
        entityId: o.id,
        entityName: o.name,
        collectionId: o.collection_id,
        action: 'deleted',
        summary: `object ${o.name} deleted with class ${cls.name}`,
        before: objectView(o),
        beforeRevision: o.revision,
        metadata: meta,
      })),
    );
  }
  if (fields.length) {
    await tx`delete from computed_fields where class_id = ${cls.id}::int`;
    await appendMany(
      tx,
      actor,
      fields.map((f) => ({
        entityType: 'computed_field',
        entityId: f.id,
        entityName: f.key,
        collectionId: cls.collection_id,
        action: 'deleted',
        summary: `computed field ${f.key} deleted with class ${cls.name}`,
        before: computedFieldView(f),
        beforeRevision: f.revision,
        metadata: meta,
      })),
    );
  }
}

/** The `deleted` event of a class deleted with `cascade`. */
export function classDeletedEvent(cls: ClassRow, cascade: ClassCascade): NewEvent {
  return {
    entityType: 'class',
    entityId: cls.id,
    entityName: cls.name,
    collectionId: cls.collection_id,
    action: 'deleted',
    summary: `class ${cls.name} deleted`,
    before: classView(cls),
    beforeRevision: cls.revision,
    metadata: {
      deleted_objects: cascade.objects.length,
      deleted_object_relations: cascade.objectRelations.length,
      deleted_class_relations: cascade.classRelations.length,
    },
  };
}
