import type { Ctx, HandlerMap } from '../http/contract.ts';
import { authOf, callerOf } from '../http/contract.ts';
import { badRequest, notFound } from '../domain/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import type { Fragment } from '../db/list.ts';
import { listReply } from '../http/paging.ts';
import { finalFor, withTx } from '../db/tx.ts';
import { permissionsFilter, requireClassPermission, requireObjectPermission } from '../db/authz.ts';
import {
  CLASS_RELATION_LIST_SPEC,
  OBJECT_RELATION_LIST_SPEC,
  classRelationWhere,
  listClassRelationRows,
  listObjectRelationRows,
  objectRelationWhere,
  readClassRelationAs,
  readObjectRelationAs,
} from '../db/relations.ts';
import { CLASS_RELATION_KIND, OBJECT_RELATION_KIND } from '../domain/views/relations.ts';
import {
  RELATED_CLASS_LIST_SPEC,
  RELATED_OBJECT_LIST_SPEC,
  classGraphRows,
  listRelatedClassRows,
  listRelatedObjectRows,
  objectGraphRows,
  readSnapshot,
  traverseClasses,
  traverseObjects,
} from '../db/traversal.ts';
import { classIdByName } from '../db/classes.ts';
import { objectIdByName } from '../db/objects.ts';
import {
  classRelationView,
  ignoredObjectClasses,
  objectRelationView,
  parseDepth,
  parseGraphQuery,
  type ClassRelationRow,
  type ObjectRelationRow,
} from '../domain/relations.ts';
import { inTx } from '../mutations/context.ts';
import { createClassRelation, createOwnObjectRelation, deleteClassRelation, deleteOwnObjectRelation } from '../mutations/relations.ts';

function classRelationReply<S extends number>(status: S, row: ClassRelationRow, extra: Record<string, string> = {}) {
  return { status, body: classRelationView(row), headers: etagHeader(CLASS_RELATION_KIND, row.id, row.revision, extra) };
}

function objectRelationReply<S extends number>(status: S, row: ObjectRelationRow, extra: Record<string, string> = {}) {
  return { status, body: objectRelationView(row), headers: etagHeader(OBJECT_RELATION_KIND, row.id, row.revision, extra) };
}

/** An optional positive int32 query value (the adapter has validated it; this only types it). */
function parseOptionalId(raw: unknown, param: string): number | null {
  if (raw === undefined || raw === null || raw === '') return null;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 2 ** 31 - 1)
    throw badRequest(`${param} must be a positive integer`, [{ path: `query.${param}`, message: 'positive integer' }]);
  return n;
}

/** A start class given by id or by name (404 when no class has the name). */
type ClassStart = { id: number } | { name: string };
/** A start object given by ids or by names (404 when the class or the object is missing). */
type ObjectStart = { classId: number; objectId: number } | { className: string; objectName: string };

/**
 * The class graph around a class (the ClassGraph body): one read-only snapshot for the start check
 * (ReadClass; 404/403), the breadth-first search and the graph statements. Unpaged; 400 beyond
 * the work limits.
 */
async function classGraph(ctx: Ctx, start: ClassStart, query: Record<string, unknown>) {
  const auth = authOf(ctx);
  const graph = await withTx(ctx.deps.sql, async (tx) => {
    readSnapshot(tx);
    const classId = 'id' in start ? start.id : await classIdByName(tx, start.name);
    if (classId === undefined) throw notFound('class');
    const q = parseGraphQuery(query, 'classes', classId);
    const startChecked = requireClassPermission(tx, auth, classId, 'ReadClass');
    const bfs = await traverseClasses(tx, auth, classId, q.depth, { ignoreClassIds: q.ignoreClassIds, startChecked });
    return classGraphRows(tx, auth, bfs, finalFor(ctx.deps.sql, tx)); // COMMIT goes with it
  });
  return { classes: graph.nodes, relations: graph.relations.map(classRelationView) };
}

/** The object graph around an object, as classGraph (ReadObject on the start; 404 when it is not of the class). */
async function objectGraph(ctx: Ctx, start: ObjectStart, query: Record<string, unknown>) {
  const auth = authOf(ctx);
  const graph = await withTx(ctx.deps.sql, async (tx) => {
    readSnapshot(tx);
    let classId: number | undefined;
    let objectId: number | undefined;
    if ('classId' in start) {
      ({ classId, objectId } = start);
    } else {
      classId = await classIdByName(tx, start.className);
      if (classId === undefined) throw notFound('class');
      objectId = await objectIdByName(tx, classId, start.objectName);
      if (objectId === undefined) throw notFound('object');
    }
    const q = parseGraphQuery(query, 'objects', classId);
    const startChecked = requireObjectPermission(tx, auth, objectId, 'ReadObject', { classId });
    const bfs = await traverseObjects(tx, auth, objectId, q.depth, { ignoreClassIds: q.ignoreClassIds, startChecked });
    return objectGraphRows(tx, auth, bfs, finalFor(ctx.deps.sql, tx)); // COMMIT goes with it
  });
  return { objects: graph.nodes, relations: graph.relations.map(objectRelationView) };
}

export const relationsHandlers = {
  getRelatedClassGraph: async (input, ctx) => ({
    status: 200,
    body: await classGraph(ctx, { id: input.params.class_id }, input.query as Record<string, unknown>),
  }),

  getRelatedClassGraphByName: async (input, ctx) => ({
    status: 200,
    body: await classGraph(ctx, { name: input.params.class_name }, input.query as Record<string, unknown>),
  }),

  getRelatedObjectGraph: async (input, ctx) => ({
    status: 200,
    body: await objectGraph(
      ctx,
      { classId: input.params.class_id, objectId: input.params.object_id },
      input.query as Record<string, unknown>,
    ),
  }),

  getRelatedObjectGraphByName: async (input, ctx) => ({
    status: 200,
    body: await objectGraph(
      ctx,
      { className: input.params.class_name, objectName: input.params.object_name },
      input.query as Record<string, unknown>,
    ),
  }),

  listRelatedClasses: async (input, ctx) => {
    const auth = authOf(ctx);
    const query = input.query as Record<string, unknown>;
    const depth = parseDepth(query.depth);
    const parsed = parseListQuery(query, RELATED_CLASS_LIST_SPEC);
    const page = await withTx(ctx.deps.sql, async (tx) => {
      readSnapshot(tx);
      const startChecked = requireClassPermission(tx, auth, input.params.class_id, 'ReadClass');
      const bfs = await traverseClasses(tx, auth, input.params.class_id, depth, { startChecked });
      return listRelatedClassRows(tx, bfs, parsed, finalFor(ctx.deps.sql, tx)); // COMMIT goes with the page
    });
    return listReply(page, page.rows);
  },

  listRelatedObjects: async (input, ctx) => {
    const auth = authOf(ctx);
    const query = input.query as Record<string, unknown>;
    const depth = parseDepth(query.depth);
    const classFilter = parseOptionalId(query.class_id, 'class_id');
    const parsed = parseListQuery(query, RELATED_OBJECT_LIST_SPEC);
    const ignoreClassIds = ignoredObjectClasses(parsed.extras, input.params.object_class_id);
    const page = await withTx(ctx.deps.sql, async (tx) => {
      readSnapshot(tx);
      const startChecked = requireObjectPermission(tx, auth, input.params.object_id, 'ReadObject', {
        classId: input.params.object_class_id,
      });
      const bfs = await traverseObjects(tx, auth, input.params.object_id, depth, { ignoreClassIds, startChecked });
      return listRelatedObjectRows(tx, bfs, parsed, classFilter, finalFor(ctx.deps.sql, tx)); // COMMIT goes with the page
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
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) => createClassRelation(m, input.body));
    return classRelationReply(201, row, { location: `/api/v1/relations/classes/${row.id}` });
  },

  getClassRelation: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    return classRelationReply(200, await readClassRelationAs(db, auth, input.params.relation_id, 'ReadClassRelation'));
  },

  deleteClassRelation: async (input, ctx) => {
    await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteClassRelation(m, input.params.relation_id, input.headers['if-match']));
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
    const row = await createOwnObjectRelation(ctx.deps.sql, callerOf(ctx), input.body);
    return objectRelationReply(201, row, { location: `/api/v1/relations/objects/${row.id}` });
  },

  getObjectRelation: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    return objectRelationReply(200, await readObjectRelationAs(db, auth, input.params.relation_id, 'ReadObjectRelation'));
  },

  deleteObjectRelation: async (input, ctx) => {
    await deleteOwnObjectRelation(ctx.deps.sql, callerOf(ctx), input.params.relation_id, input.headers['if-match']);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
