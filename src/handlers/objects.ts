import type { Ctx, HandlerMap, RequestBody } from '../http/contract.ts';
import { authOf, callerOf } from '../http/contract.ts';
import { badRequest, notFound } from '../domain/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { filtersSql, type Fragment } from '../db/list.ts';
import { listReply } from '../http/paging.ts';
import { objectWhere, permissionsFilter, readObjectAs, readObjectByIdAs, requireObjectPermission } from '../db/authz.ts';
import { classIdByName } from '../db/classes.ts';
import {
  findObject,
  listObjects,
  namesComputedField,
  objectCols,
  OBJECT_COLUMN_LIST_JSON_TEXT,
  objectIdByName,
  ofClassWhere,
  parseObjectQuery,
  computedDef,
} from '../db/objects.ts';
import { objectJsonText, objectView, type ObjectRow } from '../domain/views/objects.ts';
import { runAggregate } from '../db/aggregates.ts';
import { STATES, aggregateSignature, decodeAggregateCursor, encodeAggregateCursor, parseAggregateRequest } from '../domain/aggregates.ts';
import { activeFields, noActiveFields, type ActiveFields } from '../db/computed-fields.ts';
import { valueSet, type ComputedDef } from '../domain/computed.ts';
import {
  createOwnObject,
  deleteOwnObject,
  type CreateTarget,
  patchOwnObjectData,
  updateOwnObject,
  type ObjectTarget,
} from '../mutations/objects.ts';
import type { ResponseBody } from '../domain/wire.ts';
import type { Db } from '../db/sql.ts';
import type { Authority } from '../domain/authz.ts';
import { JsonTexts } from '../domain/json-text.ts';
import { requireClassAccess } from '../services/class-access.ts';

/** Query parameters of the aggregate operations that are not object filters. */
const AGGREGATE_PARAMS = new Set(['group_by', 'aggregate', 'sort', 'cursor', 'include_total']);

async function aggregateHandler(ctx: Ctx, classId: number, query: Record<string, unknown>) {
  const auth = authOf(ctx);
  const db = ctx.deps.sql;
  // (without a statement when the class's collection is kept: services/class-access.ts)
  const allowed = requireClassAccess(ctx.deps, auth, classId, 'ReadClass');
  const names = (v: unknown) => String(v ?? '').includes('computed.');
  const needsFields = namesComputedField(query) || names(query.group_by) || names(query.aggregate);
  return (await afterClassCheck(ctx, classId, allowed, needsFields, (active) => aggregate(db, auth, classId, query, active))).result;
}

/**
 * `read` of a class's objects once `allowed` (the permission check on the class) has passed. A read
 * that names no computed field goes out beside the check (one round trip; its rows are answered only
 * once the check passes, and a query error only after it); otherwise the class's computed fields
 * are read beside the check, and `read` after (two round trips).
 */
async function afterClassCheck<T>(
  ctx: Ctx,
  classId: number,
  allowed: Promise<unknown>,
  needsFields: boolean,
  read: (active: ActiveFields) => Promise<T>,
): Promise<{ result: T; active: ActiveFields }> {
  const auth = authOf(ctx);
  if (!needsFields) {
    const active = noActiveFields(auth.principal);
    const reading = Promise.resolve().then(() => read(active));
    reading.catch(() => undefined); // awaited below, unless the permission check refuses
    await allowed;
    return { result: await reading, active };
  }
  const fields = activeFields(ctx.deps.sql, classId, auth.principal);
  fields.catch(() => undefined); // awaited below, unless the permission check refuses
  await allowed;
  const active = await fields;
  return { result: await read(active), active };
}

/** The aggregate of a class's objects (the permission on the class already checked or being checked). */
async function aggregate(db: Db, auth: Authority, classId: number, query: Record<string, unknown>, active: ActiveFields) {
  const req = parseAggregateRequest(query);
  const computed = new Map<string, ComputedDef>();
  for (const ref of [...req.dimensions.map((d) => d.ref), ...req.measures.map((m) => m.ref)]) {
    if (ref.kind === 'computed') computed.set(ref.name, computedDef(active, ref.name));
  }
  const filterQuery = Object.fromEntries(Object.entries(query).filter(([k]) => !AGGREGATE_PARAMS.has(k)));
  const q = parseObjectQuery(db, filterQuery, active, auth, classId);
  if (q.computedFilters > 2) throw badRequest('at most two computed filters apply to an aggregate');
  const signature = aggregateSignature(classId, req, q.parsed.signature());
  const cursorLength = req.dimensions.length * 2 + (req.sort.startsWith('object_count') ? 1 : 0);
  const after = typeof query.cursor === 'string' ? decodeAggregateCursor(query.cursor, signature, cursorLength) : null;
  const where: Fragment[] = [
    ofClassWhere(db, classId),
    objectWhere(db, auth, 'ReadObject'),
    ...permissionsFilter(q.parsed.extras.permissions, (p) => objectWhere(db, auth, p)),
    ...filtersSql(db, q.parsed.filters),
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
  return { status: 200 as const, body, headers };
}

type Row = ObjectRow & { __cs?: unknown; __cp?: unknown };

/**
 * The object's reply body (with its computed fields when `active`). With `texts`, the row's
 * json_data is the database's JSON text (objectColsJsonText), passed through (src/domain/json-text.ts).
 */
function wire(row: Row, active: ActiveFields | null, texts?: JsonTexts): ResponseBody<'getObject', 200> {
  const view = objectView(row);
  if (texts) view.json_data = texts.add(row.json_data as string);
  if (!active) return view;
  // onto objectView's new object, not members after a spread (eslint.config.js)
  return Object.assign(view, {
    computed: {
      shared: valueSet(active.shared, row.__cs),
      personal: active.personal ? valueSet(active.personal, row.__cp) : null,
    },
  });
}

function wantsComputed(query: unknown): boolean {
  return (query as Record<string, unknown>).include === 'computed';
}

async function classIdOf(ctx: Ctx, name: string): Promise<number> {
  const id = await classIdByName(ctx.deps.sql, name);
  if (id === undefined) throw notFound('class');
  return id;
}

async function objectReply(ctx: Ctx, classId: number, objectId: number, include: boolean, extra: Record<string, string> = {}) {
  const active = include ? await activeFields(ctx.deps.sql, classId, authOf(ctx).principal) : null;
  const row = await findObject(ctx.deps.sql, objectId, active);
  if (!row || row.class_id !== classId) throw notFound('object');
  return rowReply(row, active, extra);
}

/** 200 with the object (and its computed fields when `active`) and its ETag. */
function rowReply(row: Row, active: ActiveFields | null, extra: Record<string, string> = {}, texts?: JsonTexts) {
  return {
    status: 200 as const,
    body: wire(row, active, texts),
    headers: etagHeader('object', row.id, row.revision, extra),
    ...(texts && { jsonTexts: texts.texts }),
  };
}

async function listIn(ctx: Ctx, classId: number, query: Record<string, unknown>) {
  const auth = authOf(ctx);
  const db = ctx.deps.sql;
  // (without a statement when the class's collection is kept: services/class-access.ts)
  const allowed = requireClassAccess(ctx.deps, auth, classId, 'ReadClass');
  const include = wantsComputed(query);
  const pageOf = (active: ActiveFields) => {
    const q = parseObjectQuery(db, query, active, auth, classId, { reserved: ['include'] });
    const where: Fragment[] = [
      ofClassWhere(db, classId),
      objectWhere(db, auth, 'ReadObject'),
      ...permissionsFilter(q.parsed.extras.permissions, (p) => objectWhere(db, auth, p)),
    ];
    return listObjects(db, q, where, include ? active : null, { jsonText: true });
  };
  const { result: page, active } = await afterClassCheck(ctx, classId, allowed, include || namesComputedField(query), pageOf);
  const texts = new JsonTexts();
  if (!include) {
    // The page's JSON written directly (objectJsonText), one text for the whole array.
    const all = texts.addArray<ReturnType<typeof wire>>(page.rows.map((r) => objectJsonText(r as ObjectRow & { json_data: string })));
    return listReply(page, all, texts.texts);
  }
  return listReply(
    page,
    page.rows.map((r) => wire(r, active, texts)),
    texts.texts,
  );
}

function objectWritten<S extends number>(row: ObjectRow, status: S, extra: Record<string, string> = {}) {
  return { status, body: objectView(row), headers: etagHeader('object', row.id, row.revision, extra) };
}

async function createIn(ctx: Ctx, target: CreateTarget, body: RequestBody<'createObject'>) {
  const row = await createOwnObject(ctx.deps.sql, callerOf(ctx), target, body);
  return objectWritten(row, 201, { location: `/api/v1/classes/${row.class_id}/${row.id}` });
}

async function updateIn(ctx: Ctx, t: ObjectTarget, body: RequestBody<'updateObject'>, headers: Record<string, string>) {
  const { row } = await updateOwnObject(ctx.deps.sql, callerOf(ctx), t, body, headers['if-match']);
  return objectWritten(row, 200);
}

async function deleteIn(ctx: Ctx, t: ObjectTarget, headers: Record<string, string>) {
  await deleteOwnObject(ctx.deps.sql, callerOf(ctx), t, headers['if-match']);
  return { status: 204 as const };
}

export const objectsHandlers = {
  aggregateObjectsByClassName: async (input, ctx) =>
    aggregateHandler(ctx, await classIdOf(ctx, input.params.class_name), input.query as Record<string, unknown>),

  listObjectsByClassName: async (input, ctx) =>
    listIn(ctx, await classIdOf(ctx, input.params.class_name), input.query as Record<string, unknown>),

  createObjectByClassName: async (input, ctx) => createIn(ctx, { name: input.params.class_name }, input.body),

  getObjectByName: async (input, ctx) => {
    const { class_name, object_name } = input.params;
    const db = ctx.deps.sql;
    if (!wantsComputed(input.query)) {
      // the class by its name, the object, and its authorization in one statement
      const row = await readObjectAs<ObjectRow>(
        db,
        authOf(ctx),
        { name: object_name, className: class_name },
        'ReadObject',
        {},
        objectCols(db),
      );
      return rowReply(row, null);
    }
    const classId = await classIdOf(ctx, class_name);
    const objectId = await objectIdByName(ctx.deps.sql, classId, object_name);
    if (objectId === undefined) throw notFound('object');
    await requireObjectPermission(ctx.deps.sql, authOf(ctx), objectId, 'ReadObject', { classId });
    const reply = await objectReply(ctx, classId, objectId, wantsComputed(input.query));
    // A class renamed meanwhile no longer answers to the old name.
    if ((await classIdByName(ctx.deps.sql, class_name)) !== classId) throw notFound('class');
    if (reply.body.name !== object_name) throw notFound('object');
    return reply;
  },

  updateObjectByName: async (input, ctx) => {
    const { class_name, object_name } = input.params;
    const classId = await classIdOf(ctx, class_name);
    return updateIn(ctx, { classId, className: class_name, objectName: object_name }, input.body, input.headers);
  },

  deleteObjectByName: async (input, ctx) => {
    const { class_name, object_name } = input.params;
    const classId = await classIdOf(ctx, class_name);
    return deleteIn(ctx, { classId, className: class_name, objectName: object_name }, input.headers);
  },

  aggregateObjects: async (input, ctx) => aggregateHandler(ctx, input.params.class_id, input.query as Record<string, unknown>),

  listObjects: async (input, ctx) => listIn(ctx, input.params.class_id, input.query as Record<string, unknown>),

  createObject: async (input, ctx) => createIn(ctx, { id: input.params.class_id }, input.body),

  getObject: async (input, ctx) => {
    const { class_id, object_id } = input.params;
    const db = ctx.deps.sql;
    if (!wantsComputed(input.query)) {
      // the common read: authorization and the row in one statement (json_data passed through as text)
      const row = await readObjectByIdAs<ObjectRow>(db, authOf(ctx), object_id, 'ReadObject', class_id, OBJECT_COLUMN_LIST_JSON_TEXT);
      return rowReply(row, null, {}, new JsonTexts());
    }
    await requireObjectPermission(db, authOf(ctx), object_id, 'ReadObject', { classId: class_id });
    return objectReply(ctx, class_id, object_id, true);
  },

  updateObject: async (input, ctx) =>
    updateIn(ctx, { classId: input.params.class_id, objectId: input.params.object_id }, input.body, input.headers),

  deleteObject: async (input, ctx) => deleteIn(ctx, { classId: input.params.class_id, objectId: input.params.object_id }, input.headers),

  patchObjectData: async (input, ctx) => {
    const t = { classId: input.params.class_id, objectId: input.params.object_id };
    const { row } = await patchOwnObjectData(ctx.deps.sql, callerOf(ctx), t, input.body, input.headers['if-match']);
    return objectWritten(row, 200);
  },
} satisfies Partial<HandlerMap>;
