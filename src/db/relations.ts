// Class relations and object relations: SQL only. Authorization comes from src/db/authz.ts (the
// visibility helpers below only combine its fragments for both ends of a relation); the rules and
// wire views are in src/domain/relations.ts, their audit events in src/domain/views/relations.ts.
import type { Db, TransactionSql } from './sql.ts';
import { and, runList, type Fragment, type ListPage } from './list.ts';
import { appendEvent, eventsCte } from './events.ts';
import { notFinal, type Final } from './tx.ts';
import { actorBinding } from './history.ts';
import type { NewEvent } from '../domain/new-event.ts';
import type { Actor } from '../domain/actor.ts';
import { classWhere, enforceGranted, grantColumn, objectWhere } from './authz.ts';
import type { Authority, Permission } from '../domain/authz.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { conflict, notFound } from '../domain/errors.ts';
import type { ClassRelationRow, NewClassRelationRow, ObjectRelationRow, RelationEnds } from '../domain/relations.ts';
import { type ClassRelationWithEnds, classRelationEvent, objectRelationEvent } from '../domain/views/relations.ts';

/** Rows of the class-relation list: `r` is the relation, `fc`/`tc` its from and to classes. */
export const CLASS_RELATION_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'r.id', notNull: true },
    from_class_id: { type: 'integer', column: 'r.from_class_id', notNull: true },
    to_class_id: { type: 'integer', column: 'r.to_class_id', notNull: true },
    from_class_name: { type: 'text', column: 'fc.name', sortable: false },
    to_class_name: { type: 'text', column: 'tc.name', sortable: false },
    created_at: { type: 'timestamp', column: 'r.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'r.updated_at', notNull: true },
    revision: { type: 'integer', column: 'r.revision', notNull: true },
  },
  defaultSort: [{ field: 'id', desc: false }],
  extraParams: ['permissions'],
};

function classRelationCols(db: Db): Fragment {
  return db`r.id, r.from_class_id, r.to_class_id, r.forward_alias, r.reverse_alias, r.from_max_relations,
    r.to_max_relations, r.created_at, r.updated_at, r.revision` as Fragment;
}

/**
 * The class relation with its ends' collections and the check of `perm` on both of its classes, in
 * one statement: 404 when there is no such relation, 403 as requireClassRelationPermission decides.
 */
export async function readClassRelationAs(db: Db, auth: Authority, id: number, perm: Permission): Promise<ClassRelationWithEnds> {
  const [row] = await db<(ClassRelationWithEnds & { svc_from_granted: boolean; svc_to_granted: boolean })[]>`
    select ${classRelationCols(db)}, fc.collection_id as from_collection_id, tc.collection_id as to_collection_id,
      ${grantColumn(db, auth, perm, db`fc.collection_id` as Fragment)} as svc_from_granted,
      ${grantColumn(db, auth, perm, db`tc.collection_id` as Fragment)} as svc_to_granted
    from class_relations r
    join classes fc on fc.id = r.from_class_id
    join classes tc on tc.id = r.to_class_id
    where r.id = ${id}::int`;
  if (!row) throw notFound('class relation');
  enforceGranted(auth, perm, { kind: 'class', id: row.from_class_id, collectionId: row.from_collection_id }, row.svc_from_granted);
  if (row.to_class_id !== row.from_class_id)
    enforceGranted(auth, perm, { kind: 'class', id: row.to_class_id, collectionId: row.to_collection_id }, row.svc_to_granted);
  return row;
}

/**
 * The class relation with its ends' collections; `lock` takes a row lock on the relation
 * (share: object relations are being created under it; update: it is being deleted).
 */
export async function findClassRelation(db: Db, id: number, lock?: 'share' | 'update'): Promise<ClassRelationWithEnds | undefined> {
  const suffix = lock === 'update' ? db`for update of r` : lock === 'share' ? db`for share of r` : db``;
  const [row] = await db<ClassRelationWithEnds[]>`
    select ${classRelationCols(db)}, fc.collection_id as from_collection_id, tc.collection_id as to_collection_id
    from class_relations r
    join classes fc on fc.id = r.from_class_id
    join classes tc on tc.id = r.to_class_id
    where r.id = ${id}::int
    ${suffix}`;
  return row;
}

/** The ids of the given classes that exist. */
export async function existingClassIds(db: Db, ids: number[]): Promise<Set<number>> {
  const rows = await db<{ id: number }[]>`select id from classes where id = any(${ids}::int[])`;
  return new Set(rows.map((r) => r.id));
}

export async function insertClassRelation(tx: TransactionSql, r: NewClassRelationRow): Promise<ClassRelationRow> {
  const [row] = await tx<ClassRelationRow[]>`
    insert into class_relations as r (from_class_id, to_class_id, forward_alias, reverse_alias, from_max_relations, to_max_relations)
    values (${r.from_class_id}::int, ${r.to_class_id}::int, ${r.forward_alias}::text, ${r.reverse_alias}::text,
      ${r.from_max_relations}::int, ${r.to_max_relations}::int)
    returning ${classRelationCols(tx)}`;
  return row!;
}

/** Writes changed aliases and maximum counts of a class relation (the caller holds its row lock). */
export async function updateClassRelationRow(
  tx: TransactionSql,
  id: number,
  r: Pick<NewClassRelationRow, 'forward_alias' | 'reverse_alias' | 'from_max_relations' | 'to_max_relations'>,
): Promise<ClassRelationRow> {
  const [row] = await tx<ClassRelationRow[]>`
    update class_relations r set forward_alias = ${r.forward_alias}::text, reverse_alias = ${r.reverse_alias}::text,
      from_max_relations = ${r.from_max_relations}::int, to_max_relations = ${r.to_max_relations}::int,
      updated_at = now(), revision = r.revision + 1
    where r.id = ${id}::int
    returning ${classRelationCols(tx)}`;
  return row!;
}

/** Both ends of a class relation visible with `perm` (grants and token scope on both classes). */
export function classRelationWhere(db: Db, auth: Authority, perm: Permission): Fragment {
  return and(db, [
    classWhere(db, auth, perm, { id: 'fc.id', collectionId: 'fc.collection_id' }),
    classWhere(db, auth, perm, { id: 'tc.id', collectionId: 'tc.collection_id' }),
  ]);
}

export function listClassRelationRows(db: Db, parsed: ParsedList, where: Fragment[]): Promise<ListPage<ClassRelationRow>> {
  return runList<ClassRelationRow>(db, {
    from: db`class_relations r join classes fc on fc.id = r.from_class_id join classes tc on tc.id = r.to_class_id` as Fragment,
    select: classRelationCols(db),
    where,
    parsed,
    spec: CLASS_RELATION_LIST_SPEC,
  });
}

/**
 * Deletes a class relation and every object relation under it, with an audit event for each
 * (the relation row must already be locked for update).
 */
export async function deleteClassRelationCascade(tx: TransactionSql, actor: Actor, r: ClassRelationWithEnds): Promise<void> {
  await deleteObjectRelationsWhere(tx, actor, tx`r.class_relation_id = ${r.id}::int` as Fragment);
  await tx`delete from class_relations where id = ${r.id}::int`;
  await appendEvent(tx, actor, classRelationEvent(r, 'deleted'));
}

// ---- object relations -------------------------------------------------------------------------

/** Rows of the object-relation list: `r` is the relation, `fo`/`tob` its from and to objects. */
export const OBJECT_RELATION_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'r.id', notNull: true },
    class_relation_id: { type: 'integer', column: 'r.class_relation_id', notNull: true },
    from_object_id: { type: 'integer', column: 'r.from_object_id', notNull: true },
    to_object_id: { type: 'integer', column: 'r.to_object_id', notNull: true },
    created_at: { type: 'timestamp', column: 'r.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'r.updated_at', notNull: true },
    revision: { type: 'integer', column: 'r.revision', notNull: true },
  },
  defaultSort: [{ field: 'id', desc: false }],
  extraParams: ['permissions'],
};

function objectRelationCols(db: Db): Fragment {
  return db`r.id, r.class_relation_id, r.from_object_id, r.to_object_id, r.created_at, r.updated_at, r.revision` as Fragment;
}

/** An object relation with the classes and collections of its two objects. */
export interface ObjectRelationWithEnds extends ObjectRelationRow, RelationEnds {
  from_class_id: number;
  to_class_id: number;
}

function objectRelationEndCols(db: Db): Fragment {
  return db`fo.class_id as from_class_id, tob.class_id as to_class_id,
    fo.collection_id as from_collection_id, tob.collection_id as to_collection_id` as Fragment;
}

/**
 * The object relation with its ends' classes and collections and the check of `perm` on both of its
 * objects, in one statement: 404 when there is no such relation, 403 unless the caller holds `perm`
 * on both ends (grants and token scope; the from end's verdict first). `lock`: the relation locked for update (a delete's).
 */
export async function readObjectRelationAs(
  db: Db,
  auth: Authority,
  id: number,
  perm: Permission,
  lock = false,
): Promise<ObjectRelationWithEnds> {
  const [row] = await db<(ObjectRelationWithEnds & { svc_from_granted: boolean; svc_to_granted: boolean })[]>`
    select ${objectRelationCols(db)}, ${objectRelationEndCols(db)},
      ${grantColumn(db, auth, perm, db`fo.collection_id` as Fragment)} as svc_from_granted,
      ${grantColumn(db, auth, perm, db`tob.collection_id` as Fragment)} as svc_to_granted
    from object_relations r
    join objects fo on fo.id = r.from_object_id
    join objects tob on tob.id = r.to_object_id
    where r.id = ${id}::int
    ${lock ? db`for update of r` : db``}`;
  if (!row) throw notFound('object relation');
  const end = (which: 'from' | 'to') =>
    ({
      kind: 'object',
      id: row[`${which}_object_id`],
      classId: row[`${which}_class_id`],
      collectionId: row[`${which}_collection_id`],
    }) as const;
  enforceGranted(auth, perm, end('from'), row.svc_from_granted);
  enforceGranted(auth, perm, end('to'), row.svc_to_granted);
  return row;
}

export interface ObjectEnd {
  id: number;
  class_id: number;
  collection_id: number;
}

/** The given objects that exist, with their class and collection. */
export async function findObjectEnds(db: Db, ids: number[]): Promise<Map<number, ObjectEnd>> {
  const rows = await db<ObjectEnd[]>`select id, class_id, collection_id from objects where id = any(${ids}::int[])`;
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * Locks both end objects (in id order, so two creators cannot deadlock) so that counting their
 * relations and inserting a new one is serialized per object: concurrent creates cannot exceed
 * from_max_relations / to_max_relations. "No key update" does not block other relations' foreign
 * keys to these objects, only other lockers.
 */
export async function lockRelationEnds(tx: TransactionSql, ids: number[]): Promise<Set<number>> {
  const rows = await tx<{ id: number }[]>`select id from objects where id = any(${ids}::int[]) order by id for no key update`;
  // the ids locked: an end deleted since it was read is missing
  return new Set(rows.map((r) => r.id));
}

/**
 * What decides whether a new object relation fits under its class relation: whether the same
 * relation exists (found), and how many the from end and the to end have under the class relation, each
 * counted only when the class relation bounds it (else null). One statement, the class relation's
 * bounds read in it, so it can go out before the class relation's row has been seen.
 */
export async function relationRoom(
  tx: TransactionSql,
  classRelationId: number,
  fromId: number,
  toId: number,
): Promise<{ found: boolean; from_count: number | null; to_count: number | null }> {
  const [row] = await tx<{ found: boolean; from_count: number | null; to_count: number | null }[]>`
    select exists (select 1 from object_relations
        where class_relation_id = ${classRelationId}::int and from_object_id = ${fromId}::int and to_object_id = ${toId}::int) as found,
      case when cr.from_max_relations is null then null else (select count(*)::int from object_relations
        where class_relation_id = cr.id and from_object_id = ${fromId}::int) end as from_count,
      case when cr.to_max_relations is null then null else (select count(*)::int from object_relations
        where class_relation_id = cr.id and to_object_id = ${toId}::int) end as to_count
    from (select ${classRelationId}::int as id) k left join class_relations cr on cr.id = k.id`;
  return row!;
}

/** 409 when an end already has its class relation's maximum of relations (relationRoom's counts). */
export function requireRoomForRelation(
  cr: { id: number; from_max_relations: number | null; to_max_relations: number | null },
  room: { from_count: number | null; to_count: number | null },
  fromId: number,
  toId: number,
): void {
  if (cr.from_max_relations !== null && (room.from_count ?? 0) >= cr.from_max_relations) {
    throw conflict(
      `object ${fromId} already has ${cr.from_max_relations} relation(s) under class relation ${cr.id} (from_max_relations)`,
      'max_relations_exceeded',
    );
  }
  if (cr.to_max_relations !== null && (room.to_count ?? 0) >= cr.to_max_relations) {
    throw conflict(
      `object ${toId} already has ${cr.to_max_relations} relation(s) under class relation ${cr.id} (to_max_relations)`,
      'max_relations_exceeded',
    );
  }
}

/**
 * Inserts the object relation (with the id reserveId gave) and its audit events in one
 * statement. With `bindsActor` the statement also binds the actor (actorBinding).
 */
export async function insertObjectRelationWithEvents(
  tx: TransactionSql,
  actor: Actor,
  r: { id: number; class_relation_id: number; from_object_id: number; to_object_id: number },
  events: NewEvent[],
  final: Final = notFinal,
  bindsActor = false,
): Promise<ObjectRelationRow> {
  const b = actorBinding(tx, actor, bindsActor);
  const [row] = await final(tx<ObjectRelationRow[]>`
    with ${b.cte}r as (
      insert into object_relations as r (id, class_relation_id, from_object_id, to_object_id)
      select ${r.id}::int, ${r.class_relation_id}::int, ${r.from_object_id}::int, ${r.to_object_id}::int
      ${b.from}
      returning ${objectRelationCols(tx)}
    )${eventsCte(tx, actor, events)}
    select * from r`);
  return row!;
}

/** Both ends of an object relation visible with `perm` (grants and token scope on both objects). */
export function objectRelationWhere(db: Db, auth: Authority, perm: Permission): Fragment {
  return and(db, [
    objectWhere(db, auth, perm, { id: 'fo.id', classId: 'fo.class_id', collectionId: 'fo.collection_id' }),
    objectWhere(db, auth, perm, { id: 'tob.id', classId: 'tob.class_id', collectionId: 'tob.collection_id' }),
  ]);
}

export function listObjectRelationRows(db: Db, parsed: ParsedList, where: Fragment[]): Promise<ListPage<ObjectRelationRow>> {
  return runList<ObjectRelationRow>(db, {
    from: db`object_relations r join objects fo on fo.id = r.from_object_id join objects tob on tob.id = r.to_object_id` as Fragment,
    select: objectRelationCols(db),
    where,
    parsed,
    spec: OBJECT_RELATION_LIST_SPEC,
  });
}

/** Deletes the object relations matching `cond` (over alias `r`), each with its audit event. */
async function deleteObjectRelationsWhere(tx: TransactionSql, actor: Actor, cond: Fragment): Promise<void> {
  const rows = await tx<ObjectRelationWithEnds[]>`
    select ${objectRelationCols(tx)}, ${objectRelationEndCols(tx)}
    from object_relations r
    join objects fo on fo.id = r.from_object_id
    join objects tob on tob.id = r.to_object_id
    where ${cond}
    order by r.id
    for update of r`;
  if (rows.length === 0) return;
  for (const r of rows) await appendEvent(tx, actor, objectRelationEvent(r, r, 'deleted'));
  await tx`delete from object_relations where id = any(${rows.map((r) => r.id)}::int[])`;
}
