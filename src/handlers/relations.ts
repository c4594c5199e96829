import type { HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { badRequest, conflict, notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply, type Fragment } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import { permissionsFilter, requireClassPermission, requireObjectPermission } from '../db/authz.ts';
import {
  CLASS_RELATION_KIND,
  CLASS_RELATION_LIST_SPEC,
  OBJECT_RELATION_KIND,
  OBJECT_RELATION_LIST_SPEC,
  classRelationEvent,
  classRelationWhere,
  assertRoomForRelation,
  deleteClassRelationCascade,
  deleteObjectRelationRow,
  existingClassIds,
  findClassRelation,
  findObjectEnds,
  findObjectRelation,
  insertClassRelation,
  insertObjectRelation,
  listClassRelationRows,
  listObjectRelationRows,
  lockRelationEnds,
  objectRelationEvent,
  objectRelationExists,
  objectRelationWhere,
  type ClassRelationWithEnds,
  type ObjectRelationWithEnds,
} from '../db/relations.ts';
import {
  RELATED_CLASS_LIST_SPEC,
  RELATED_OBJECT_LIST_SPEC,
  listRelatedClassRows,
  listRelatedObjectRows,
  readSnapshot,
  traverseClasses,
  traverseObjects,
} from '../db/traversal.ts';
import { classRelationView, objectRelationView, parseDepth, type ClassRelationRow, type ObjectRelationRow } from '../domain/relations.ts';
import type { Permission } from '../domain/authz.ts';
import type { AuthInfo } from '../http/auth.ts';
import type { Db } from '../db/sql.ts';
// Registers the related.<alias>.* object-list filters in the object list's filter hooks.
import '../db/related-filters.ts';

/** `perm` on both classes of a class relation (grants and token scope): 403 otherwise. */
async function requireClassRelationPermission(db: Db, auth: AuthInfo, r: ClassRelationWithEnds, perm: Permission): Promise<void> {
  await requireClassPermission(db, auth, r.from_class_id, perm);
  if (r.to_class_id !== r.from_class_id) await requireClassPermission(db, auth, r.to_class_id, perm);
}

/** `perm` on both objects of an object relation (grants and token scope): 403 otherwise. */
async function requireObjectRelationPermission(db: Db, auth: AuthInfo, r: ObjectRelationWithEnds, perm: Permission): Promise<void> {
  await requireObjectPermission(db, auth, r.from_object_id, perm);
  await requireObjectPermission(db, auth, r.to_object_id, perm);
}

function classRelationReply(status: number, row: ClassRelationRow, extra: Record<string, string> = {}) {
  return { status, body: classRelationView(row), headers: { ...etagHeader(CLASS_RELATION_KIND, row.id, row.revision), ...extra } };
}

function objectRelationReply(status: number, row: ObjectRelationRow, extra: Record<string, string> = {}) {
  return { status, body: objectRelationView(row), headers: { ...etagHeader(OBJECT_RELATION_KIND, row.id, row.revision), ...extra } };
}

/** An optional positive int32 query value (the adapter has validated it; this only types it). */
function parseOptionalId(raw: unknown, param: string): number | null {
  if (raw === undefined || raw === null || raw === '') return null;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 2 ** 31 - 1)
    throw badRequest(`${param} must be a positive integer`, [{ path: `query.${param}`, message: 'positive integer' }]);
  return n;
}

export const relationsHandlers = {
  listRelatedClasses: async (input, ctx) => {
    const auth = authOf(ctx);
    const query = input.query as Record<string, unknown>;
    const depth = parseDepth(query.depth);
    const parsed = parseListQuery(query, RELATED_CLASS_LIST_SPEC);
    const page = await withTx(ctx.deps.sql, async (tx) => {
      await readSnapshot(tx);
      await requireClassPermission(tx, auth, input.params.class_id, 'ReadClass');
      const bfs = await traverseClasses(tx, auth, input.params.class_id, depth);
      return listRelatedClassRows(tx, bfs, parsed);
    });
    return listReply(page, page.rows);
  },

  listRelatedObjects: async (input, ctx) => {
    const auth = authOf(ctx);
    const query = input.query as Record<string, unknown>;
    const depth = parseDepth(query.depth);
    const classFilter = parseOptionalId(query.class_id, 'class_id');
    const parsed = parseListQuery(query, RELATED_OBJECT_LIST_SPEC);
    const page = await withTx(ctx.deps.sql, async (tx) => {
      await readSnapshot(tx);
      await requireObjectPermission(tx, auth, input.params.object_id, 'ReadObject', { classId: input.params.class_id });
      const bfs = await traverseObjects(tx, auth, input.params.object_id, depth);
      return listRelatedObjectRows(tx, bfs, parsed, classFilter);
    });
    return listReply(page, page.rows);
  },

  listClassRelations: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const parsed = parseListQuery(input.query, CLASS_RELATION_LIST_SPEC);
    const where: Fragment[] = [
      classRelationWhere(db, auth, 'ReadClassRelation'),
      ...permissionsFilter(parsed.extras.permissions, (p) => classRelationWhere(db, auth, p)),
    ];
    const page = await listClassRelationRows(db, parsed, where);
    return listReply(page, page.rows.map(classRelationView));
  },

  createClassRelation: async (input, ctx) => {
    const auth = authOf(ctx);
    const b = input.body;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const found = await existingClassIds(tx, [b.from_class_id, b.to_class_id]);
      if (!found.has(b.from_class_id)) throw notFound('class (from_class_id)');
      if (!found.has(b.to_class_id)) throw notFound('class (to_class_id)');
      const from = await requireClassPermission(tx, auth, b.from_class_id, 'CreateClassRelation');
      const to = await requireClassPermission(tx, auth, b.to_class_id, 'CreateClassRelation');
      const created = await insertClassRelation(tx, {
        from_class_id: b.from_class_id,
        to_class_id: b.to_class_id,
        forward_alias: b.forward_alias ?? null,
        reverse_alias: b.reverse_alias ?? null,
        from_max_relations: b.from_max_relations ?? null,
        to_max_relations: b.to_max_relations ?? null,
      });
      await appendEvent(
        tx,
        actorOf(ctx),
        classRelationEvent({ ...created, from_collection_id: from.collection_id, to_collection_id: to.collection_id }, 'created'),
      );
      return created;
    });
    return classRelationReply(201, row, { location: `/api/v1/relations/classes/${row.id}` });
  },

  getClassRelation: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const row = await findClassRelation(db, input.params.relation_id);
    if (!row) throw notFound('class relation');
    await requireClassRelationPermission(db, auth, row, 'ReadClassRelation');
    return classRelationReply(200, row);
  },

  deleteClassRelation: async (input, ctx) => {
    const auth = authOf(ctx);
    await withTx(ctx.deps.sql, async (tx) => {
      const row = await findClassRelation(tx, input.params.relation_id, 'update');
      if (!row) throw notFound('class relation');
      await requireClassRelationPermission(tx, auth, row, 'DeleteClassRelation');
      checkIfMatch(input.headers, CLASS_RELATION_KIND, row.id, row.revision);
      await deleteClassRelationCascade(tx, actorOf(ctx), row);
    });
    return { status: 204 };
  },

  listObjectRelations: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const parsed = parseListQuery(input.query, OBJECT_RELATION_LIST_SPEC);
    const where: Fragment[] = [
      objectRelationWhere(db, auth, 'ReadObjectRelation'),
      ...permissionsFilter(parsed.extras.permissions, (p) => objectRelationWhere(db, auth, p)),
    ];
    const page = await listObjectRelationRows(db, parsed, where);
    return listReply(page, page.rows.map(objectRelationView));
  },

  createObjectRelation: async (input, ctx) => {
    const auth = authOf(ctx);
    const b = input.body;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      // The share lock keeps the class relation (and so its max counts) while we count and insert;
      // deleting it waits for us and then also deletes what we created.
      const cr = await findClassRelation(tx, b.class_relation_id, 'share');
      if (!cr) throw notFound('class relation');
      const ends = await findObjectEnds(tx, [b.from_object_id, b.to_object_id]);
      if (!ends.has(b.from_object_id)) throw notFound('object (from_object_id)');
      if (!ends.has(b.to_object_id)) throw notFound('object (to_object_id)');
      const from = await requireObjectPermission(tx, auth, b.from_object_id, 'CreateObjectRelation');
      const to = await requireObjectPermission(tx, auth, b.to_object_id, 'CreateObjectRelation');
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
        details.push({
          path: 'body.to_object_id',
          message: `must be an object of class ${cr.to_class_id} (it is of class ${to.class_id})`,
        });
      }
      if (details.length) {
        throw badRequest(
          `the objects' classes do not match class relation ${cr.id} (class ${cr.from_class_id} to class ${cr.to_class_id})`,
          details,
        );
      }
      await lockRelationEnds(tx, [from.id, to.id]);
      if (await objectRelationExists(tx, cr.id, from.id, to.id))
        throw conflict('this object relation already exists', 'duplicate_relation');
      await assertRoomForRelation(tx, cr, from.id, to.id);
      const created = await insertObjectRelation(tx, { class_relation_id: cr.id, from_object_id: from.id, to_object_id: to.id });
      await appendEvent(
        tx,
        actorOf(ctx),
        objectRelationEvent(created, { from_collection_id: from.collection_id, to_collection_id: to.collection_id }, 'created'),
      );
      return created;
    });
    return objectRelationReply(201, row, { location: `/api/v1/relations/objects/${row.id}` });
  },

  getObjectRelation: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const row = await findObjectRelation(db, input.params.relation_id);
    if (!row) throw notFound('object relation');
    await requireObjectRelationPermission(db, auth, row, 'ReadObjectRelation');
    return objectRelationReply(200, row);
  },

  deleteObjectRelation: async (input, ctx) => {
    const auth = authOf(ctx);
    await withTx(ctx.deps.sql, async (tx) => {
      const row = await findObjectRelation(tx, input.params.relation_id, true);
      if (!row) throw notFound('object relation');
      await requireObjectRelationPermission(tx, auth, row, 'DeleteObjectRelation');
      checkIfMatch(input.headers, OBJECT_RELATION_KIND, row.id, row.revision);
      await deleteObjectRelationRow(tx, row.id);
      await appendEvent(tx, actorOf(ctx), objectRelationEvent(row, row, 'deleted'));
    });
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
