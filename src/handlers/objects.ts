import type { Ctx, HandlerMap, Reply, RequestBody } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { ApiError, badRequest, notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { filterSql, listReply, type Fragment } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import type { TransactionSql } from '../db/sql.ts';
import { objectWhere, permissionsFilter, requireClassPermission, requireObjectPermission } from '../db/authz.ts';
import { classIdByName, shareLockClass, type ClassRow } from '../db/classes.ts';
import {
  deleteObjectWithRelations,
  findObject,
  insertObject,
  listObjects,
  lockObject,
  objectIdByName,
  objectCreatedEvent,
  objectUpdatedEvent,
  objectView,
  parseObjectQuery,
  updateObjectRow,
  computedDef,
  type ObjectRow,
} from '../db/objects.ts';
import { runAggregate } from '../db/aggregates.ts';
import { STATES, aggregateSignature, decodeAggregateCursor, encodeAggregateCursor, parseAggregateRequest } from '../domain/aggregates.ts';
import { activeFields, type ActiveFields } from '../db/computed-fields.ts';
// Registers the related.<alias>.* filter hook of the relations feature (objectFilterHooks).
import '../db/related-filters.ts';
import { valueSet, type ComputedDef } from '../domain/computed.ts';
import { assertFitsClass } from '../domain/class-schema.ts';
import { recordObjectCompliance } from '../db/class-schema-events.ts';
import { applyJsonPatch, jsonEqual, JsonPatchError } from '../domain/json-patch.ts';

/** Query parameters of the aggregate operations that are not object filters. */
const AGGREGATE_PARAMS = new Set(['group_by', 'aggregate', 'sort', 'cursor', 'include_total']);

async function aggregateHandler(ctx: Ctx, classId: number, query: Record<string, unknown>): Promise<Reply> {
  const auth = authOf(ctx);
  const db = ctx.deps.sql;
  await requireClassPermission(db, auth, classId, 'ReadClass');
  const req = parseAggregateRequest(query);
  const active = await activeFields(db, classId, auth.principal);
  const computed = new Map<string, ComputedDef>();
  for (const ref of [...req.dimensions.map((d) => d.ref), ...req.measures.map((m) => m.ref)]) {
    if (ref.kind === 'computed') computed.set(ref.name, computedDef(active, ref.name));
  }
  const filterQuery = Object.fromEntries(Object.entries(query).filter(([k]) => !AGGREGATE_PARAMS.has(k)));
  const q = parseObjectQuery(db, filterQuery, active, auth, classId);
  if (q.computedFilters > 2) throw badRequest('at most two computed filters apply to an aggregate');
  const signature = aggregateSignature(classId, req, q.parsed.signature);
  const cursorLength = req.dimensions.length * 2 + (req.sort.startsWith('object_count') ? 1 : 0);
  const after = typeof query.cursor === 'string' ? decodeAggregateCursor(query.cursor, signature, cursorLength) : null;
  const where: Fragment[] = [
    db`o.class_id = ${classId}::int` as Fragment,
    objectWhere(db, auth, 'ReadObject'),
    ...permissionsFilter(q.parsed.extras.permissions, (p) => objectWhere(db, auth, p)),
    ...q.parsed.filters.map((f) => filterSql(db, f)),
    ...q.where,
  ];
  const limit = req.dimensions.length ? q.parsed.limit : 1;
  const groups = await runAggregate(db, { req, computed, where, after, limit });
  const more = groups.length > limit;
  if (more) groups.pop();
  const headers: Record<string, string> = { 'x-page-limit': String(q.parsed.limit) };
  const last = groups.at(-1);
  if (more && last) {
    const values = last.ranks.flatMap((r, i) => [r, last.texts[i]]);
    headers['x-next-cursor'] = encodeAggregateCursor(req.sort.startsWith('object_count') ? [last.count, ...values] : values, signature);
  }
  const body = groups.map((g) => ({
    dimensions: req.dimensions.map((d, i) => ({
      field: d.field,
      state: STATES[g.ranks[i]!]!,
      value: g.ranks[i] === 0 ? g.values[i] : null,
    })),
    object_count: g.count,
    measures: req.measures.map((m, j) => ({
      operation: m.operation,
      field: m.field,
      value: g.measures[j]!.value === null ? null : Number(g.measures[j]!.value),
      contributing_count: g.measures[j]!.contributing,
      skipped_count: g.count - g.measures[j]!.contributing,
    })),
  }));
  return { status: 200, body, headers };
}

type Row = ObjectRow & { __cs?: unknown; __cp?: unknown };

function wire(row: Row, active: ActiveFields | null): Record<string, unknown> {
  const view = objectView(row);
  if (!active) return view;
  return {
    ...view,
    computed: {
      shared: valueSet(active.shared, row.__cs),
      personal: active.personal ? valueSet(active.personal, row.__cp) : null,
    },
  };
}

function wantsComputed(query: unknown): boolean {
  return (query as Record<string, unknown>).include === 'computed';
}

async function classIdOf(ctx: Ctx, name: string): Promise<number> {
  const id = await classIdByName(ctx.deps.sql, name);
  if (id === undefined) throw notFound('class');
  return id;
}

async function objectReply(
  ctx: Ctx,
  classId: number,
  objectId: number,
  include: boolean,
  status = 200,
  extra: Record<string, string> = {},
): Promise<Reply> {
  const active = include ? await activeFields(ctx.deps.sql, classId, authOf(ctx).principal) : null;
  const row = await findObject(ctx.deps.sql, objectId, active);
  if (!row || row.class_id !== classId) throw notFound('object');
  return { status, body: wire(row, active), headers: { ...extra, ...etagHeader('object', row.id, row.revision) } };
}

async function listIn(ctx: Ctx, classId: number, query: Record<string, unknown>): Promise<Reply> {
  const auth = authOf(ctx);
  const db = ctx.deps.sql;
  await requireClassPermission(db, auth, classId, 'ReadClass');
  const active = await activeFields(db, classId, auth.principal);
  const include = wantsComputed(query);
  const q = parseObjectQuery(db, query, active, auth, classId, { reserved: ['include'] });
  const where: Fragment[] = [
    db`o.class_id = ${classId}::int` as Fragment,
    objectWhere(db, auth, 'ReadObject'),
    ...permissionsFilter(q.parsed.extras.permissions, (p) => objectWhere(db, auth, p)),
  ];
  const page = await listObjects(db, q, where, include ? active : null);
  return listReply(
    page,
    page.rows.map((r) => wire(r, include ? active : null)),
  );
}

/** Share-locks the class of an object write and checks it still carries the name the route used. */
async function lockClassFor(tx: TransactionSql, classId: number, expectedName: string | null): Promise<ClassRow> {
  const cls = await shareLockClass(tx, classId);
  if (!cls || (expectedName !== null && cls.name !== expectedName)) throw notFound('class');
  return cls;
}

async function createIn(ctx: Ctx, classId: number, className: string | null, body: RequestBody<'createObject'>): Promise<Reply> {
  const auth = authOf(ctx);
  const row = await withTx(ctx.deps.sql, async (tx) => {
    await requireClassPermission(tx, auth, classId, 'CreateObject');
    const cls = await lockClassFor(tx, classId, className);
    assertFitsClass(cls, body.json_data);
    const created = await insertObject(tx, {
      name: body.name,
      description: body.description ?? '',
      collection_id: cls.collection_id,
      class_id: cls.id,
      json_data: body.json_data,
    });
    await appendEvent(tx, actorOf(ctx), objectCreatedEvent(created, cls));
    await recordObjectCompliance(tx, actorOf(ctx), cls, null, created);
    return created;
  });
  return {
    status: 201,
    body: objectView(row),
    headers: { location: `/api/v1/classes/${row.class_id}/${row.id}`, ...etagHeader('object', row.id, row.revision) },
  };
}

interface Target {
  classId: number;
  className: string | null;
  objectId: number | null;
  objectName: string | null;
}

/** Locks the class (share) and the object (update) named by the route; 404 on any mismatch. */
async function lockTarget(tx: TransactionSql, t: Target): Promise<{ cls: ClassRow; obj: ObjectRow }> {
  const cls = await lockClassFor(tx, t.classId, t.className);
  const id = t.objectId ?? (await objectIdByName(tx, t.classId, t.objectName!));
  const obj = id === undefined ? undefined : await lockObject(tx, id);
  if (!obj || obj.class_id !== t.classId || (t.objectName !== null && obj.name !== t.objectName)) throw notFound('object');
  return { cls, obj };
}

/** Writes a changed object with its event; returns `before` untouched when nothing changes. */
async function writeObject(
  tx: TransactionSql,
  ctx: Ctx,
  cls: ClassRow,
  before: ObjectRow,
  next: { name: string; description: string; json_data: unknown },
  how: string,
): Promise<ObjectRow> {
  const dataChanged = !jsonEqual(next.json_data, before.json_data);
  if (!dataChanged && next.name === before.name && next.description === before.description) return before;
  if (dataChanged) assertFitsClass(cls, next.json_data);
  const after = await updateObjectRow(tx, before.id, next);
  await appendEvent(tx, actorOf(ctx), objectUpdatedEvent(before, after, cls.id, dataChanged, how));
  if (dataChanged) await recordObjectCompliance(tx, actorOf(ctx), cls, before, after);
  return after;
}

async function updateIn(ctx: Ctx, t: Target, body: RequestBody<'updateObject'>, headers: Record<string, string>): Promise<Reply> {
  const auth = authOf(ctx);
  const row = await withTx(ctx.deps.sql, async (tx) => {
    const { cls, obj } = await lockTarget(tx, t);
    await requireObjectPermission(tx, auth, obj.id, 'UpdateObject', { classId: t.classId });
    checkIfMatch(headers, 'object', obj.id, obj.revision);
    return writeObject(
      tx,
      ctx,
      cls,
      obj,
      {
        name: body.name ?? obj.name,
        description: body.description ?? obj.description,
        json_data: body.json_data === undefined ? obj.json_data : body.json_data,
      },
      '',
    );
  });
  return { status: 200, body: objectView(row), headers: etagHeader('object', row.id, row.revision) };
}

async function deleteIn(ctx: Ctx, t: Target, headers: Record<string, string>): Promise<Reply> {
  const auth = authOf(ctx);
  await withTx(ctx.deps.sql, async (tx) => {
    const { cls, obj } = await lockTarget(tx, t);
    await requireObjectPermission(tx, auth, obj.id, 'DeleteObject', { classId: t.classId });
    checkIfMatch(headers, 'object', obj.id, obj.revision);
    const relations = await deleteObjectWithRelations(tx, actorOf(ctx), obj);
    await appendEvent(tx, actorOf(ctx), {
      entityType: 'object',
      entityId: obj.id,
      entityName: obj.name,
      collectionId: obj.collection_id,
      action: 'deleted',
      summary: `object ${obj.name} deleted from class ${cls.name}`,
      before: objectView(obj),
      beforeRevision: obj.revision,
      metadata: { class_id: cls.id, deleted_object_relations: relations },
    });
  });
  return { status: 204 };
}

export const objectsHandlers = {
  aggregateObjectsByClassName: async (input, ctx) =>
    aggregateHandler(ctx, await classIdOf(ctx, input.params.class_name), input.query as Record<string, unknown>),

  listObjectsByClassName: async (input, ctx) =>
    listIn(ctx, await classIdOf(ctx, input.params.class_name), input.query as Record<string, unknown>),

  createObjectByClassName: async (input, ctx) =>
    createIn(ctx, await classIdOf(ctx, input.params.class_name), input.params.class_name, input.body),

  getObjectByName: async (input, ctx) => {
    const { class_name, object_name } = input.params;
    const classId = await classIdOf(ctx, class_name);
    const objectId = await objectIdByName(ctx.deps.sql, classId, object_name);
    if (objectId === undefined) throw notFound('object');
    await requireObjectPermission(ctx.deps.sql, authOf(ctx), objectId, 'ReadObject', { classId });
    const reply = await objectReply(ctx, classId, objectId, wantsComputed(input.query));
    // A class renamed meanwhile no longer answers to the old name.
    if ((await classIdByName(ctx.deps.sql, class_name)) !== classId) throw notFound('class');
    if ((reply.body as { name: string }).name !== object_name) throw notFound('object');
    return reply;
  },

  updateObjectByName: async (input, ctx) => {
    const { class_name, object_name } = input.params;
    const classId = await classIdOf(ctx, class_name);
    return updateIn(ctx, { classId, className: class_name, objectId: null, objectName: object_name }, input.body, input.headers);
  },

  deleteObjectByName: async (input, ctx) => {
    const { class_name, object_name } = input.params;
    const classId = await classIdOf(ctx, class_name);
    return deleteIn(ctx, { classId, className: class_name, objectId: null, objectName: object_name }, input.headers);
  },

  aggregateObjects: async (input, ctx) => aggregateHandler(ctx, input.params.class_id, input.query as Record<string, unknown>),

  listObjects: async (input, ctx) => listIn(ctx, input.params.class_id, input.query as Record<string, unknown>),

  createObject: async (input, ctx) => createIn(ctx, input.params.class_id, null, input.body),

  getObject: async (input, ctx) => {
    const { class_id, object_id } = input.params;
    await requireObjectPermission(ctx.deps.sql, authOf(ctx), object_id, 'ReadObject', { classId: class_id });
    return objectReply(ctx, class_id, object_id, wantsComputed(input.query));
  },

  updateObject: async (input, ctx) =>
    updateIn(
      ctx,
      { classId: input.params.class_id, className: null, objectId: input.params.object_id, objectName: null },
      input.body,
      input.headers,
    ),

  deleteObject: async (input, ctx) =>
    deleteIn(ctx, { classId: input.params.class_id, className: null, objectId: input.params.object_id, objectName: null }, input.headers),

  patchObjectData: async (input, ctx) => {
    const auth = authOf(ctx);
    const t: Target = { classId: input.params.class_id, className: null, objectId: input.params.object_id, objectName: null };
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const { cls, obj } = await lockTarget(tx, t);
      await requireObjectPermission(tx, auth, obj.id, 'UpdateObject', { classId: t.classId });
      checkIfMatch(input.headers, 'object', obj.id, obj.revision);
      let data: unknown;
      try {
        data = applyJsonPatch(obj.json_data, input.body, { requireObjectRoot: true });
      } catch (err) {
        if (err instanceof JsonPatchError)
          throw new ApiError(err.status, `the JSON Patch cannot be applied: ${err.message}`, { reason: err.kind });
        throw err;
      }
      return writeObject(tx, ctx, cls, obj, { name: obj.name, description: obj.description, json_data: data }, ' (JSON Patch)');
    });
    return { status: 200, body: objectView(row), headers: etagHeader('object', row.id, row.revision) };
  },
} satisfies Partial<HandlerMap>;
