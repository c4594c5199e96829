import type { Ctx, HandlerMap, RequestBody } from '../http/contract.ts';
import { authOf, callerOf } from '../http/contract.ts';
import { notFound } from '../domain/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import type { Fragment } from '../db/list.ts';
import { listReply } from '../http/paging.ts';
import { classWhere, permissionsFilter } from '../db/authz.ts';
import { readClassExpanded } from '../services/class-access.ts';
import { CLASS_LIST_SPEC, classIdByName, listClasses, readClassExpandedAs } from '../db/classes.ts';
import { classExpandedView, classView, type ClassExpandedRow, type ClassRow } from '../domain/views/classes.ts';
import { inTx } from '../mutations/context.ts';
import { createClass, deleteClass, recordingRefusal, updateClass, type ClassTarget } from '../mutations/classes.ts';

function expandedReply<S extends number>(row: ClassExpandedRow, status: S, extra: Record<string, string> = {}) {
  return { status, body: classExpandedView(row), headers: etagHeader('class', row.id, row.revision, extra) };
}

async function updateClassBy(ctx: Ctx, t: ClassTarget, body: RequestBody<'updateClass'>, headers: Record<string, string>) {
  const caller = callerOf(ctx);
  const { row } = await inTx(ctx.deps.sql, caller, (m) => updateClass(m, t, body, headers['if-match'])).catch(
    recordingRefusal(ctx.deps.sql, ctx.deps.log, caller.actor),
  );
  return expandedReply(row, 200);
}

async function deleteClassBy(ctx: Ctx, t: ClassTarget, headers: Record<string, string>) {
  const before = await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteClass(m, t, headers['if-match']));
  return { status: 204 as const, headers: etagHeader('class', before.id, before.revision) };
}

async function idByName(ctx: Ctx, name: string): Promise<number> {
  const id = await classIdByName(ctx.deps.sql, name);
  if (id === undefined) throw notFound('class');
  return id;
}

export const classesHandlers = {
  listClasses: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const parsed = parseListQuery(input.query, CLASS_LIST_SPEC);
    const cols = { id: 'k.id', collectionId: 'k.collection_id' };
    const where: Fragment[] = [
      classWhere(db, auth, 'ReadClass', cols),
      ...permissionsFilter(parsed.extras.permissions, (p) => classWhere(db, auth, p, cols)),
    ];
    const page = await listClasses(db, parsed, where);
    return listReply(page, page.rows.map(classExpandedView));
  },

  createClass: async (input, ctx) => {
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) => createClass(m, input.body));
    return expandedReply(row, 201, { location: `/api/v1/classes/${row.id}` });
  },

  getClassByName: async (input, ctx) => {
    const row = await readClassExpandedAs(ctx.deps.sql, authOf(ctx), { name: input.params.class_name }, 'ReadClass');
    const body = (input.query as Record<string, unknown>).include === 'collection' ? classExpandedView(row) : classView(row as ClassRow);
    return { status: 200, body, headers: etagHeader('class', row.id, row.revision) };
  },

  updateClassByName: async (input, ctx) => {
    const id = await idByName(ctx, input.params.class_name);
    return updateClassBy(ctx, { classId: id, className: input.params.class_name }, input.body, input.headers);
  },

  deleteClassByName: async (input, ctx) => {
    const id = await idByName(ctx, input.params.class_name);
    return deleteClassBy(ctx, { classId: id, className: input.params.class_name }, input.headers);
  },

  getClass: async (input, ctx) => {
    const row = await readClassExpanded(ctx.deps, authOf(ctx), input.params.class_id, 'ReadClass');
    return { status: 200, body: classExpandedView(row), headers: etagHeader('class', row.id, row.revision) };
  },

  updateClass: async (input, ctx) => updateClassBy(ctx, { classId: input.params.class_id }, input.body, input.headers),

  deleteClass: async (input, ctx) => deleteClassBy(ctx, { classId: input.params.class_id }, input.headers),
} satisfies Partial<HandlerMap>;
