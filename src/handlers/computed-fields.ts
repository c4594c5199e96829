import type { Ctx, HandlerMap } from '../http/contract.ts';
import { authOf, callerOf } from '../http/contract.ts';
import type { AuthInfo } from '../http/auth.ts';
import { badRequest, forbidden, notFound } from '../domain/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { requireClassAccess } from '../services/class-access.ts';
import { MY_FIELD_LIST_SPEC, SHARED_FIELD_LIST_SPEC, findField, listMyFields, listSharedFields } from '../db/computed-fields.ts';
import { computedFieldView, type ComputedFieldRow } from '../domain/views/computed-fields.ts';
import { inTx } from '../mutations/context.ts';
import { createComputedField, deleteComputedField, updateComputedField } from '../mutations/computed-fields.ts';

const KIND = 'computed_field';

function fieldReply<S extends number>(row: ComputedFieldRow, status: S, extra: Record<string, string> = {}) {
  return { status, body: computedFieldView(row), headers: etagHeader(KIND, row.id, row.revision, extra) };
}

/** Personal computed fields are for humans (any token scope). */
function requireHuman(ctx: Ctx): AuthInfo {
  const auth = authOf(ctx);
  if (auth.principal.kind !== 'human') throw forbidden('personal computed fields are for human users only');
  return auth;
}

export const computedFieldsHandlers = {
  listClassComputedFields: async (input, ctx) => {
    await requireClassAccess(ctx.deps, authOf(ctx), input.params.class_id, 'ReadClass');
    const page = await listSharedFields(ctx.deps.sql, input.params.class_id, parseListQuery(input.query, SHARED_FIELD_LIST_SPEC));
    return listReply(page, page.rows.map(computedFieldView));
  },

  createClassComputedField: async (input, ctx) => {
    const classId = input.params.class_id;
    if (input.body.class_id !== undefined && input.body.class_id !== classId) {
      throw badRequest('class_id in the body must be omitted or equal the class in the path', [
        { path: 'body.class_id', message: 'does not match the path' },
      ]);
    }
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) => createComputedField(m, classId, 'shared', input.body));
    return fieldReply(row, 201, { location: `/api/v1/classes/${classId}/computed-fields/${row.id}` });
  },

  getClassComputedField: async (input, ctx) => {
    await requireClassAccess(ctx.deps, authOf(ctx), input.params.class_id, 'ReadClass');
    const row = await findField(ctx.deps.sql, input.params.field_id);
    if (!row || row.class_id !== input.params.class_id || row.visibility !== 'shared') throw notFound('computed field');
    return fieldReply(row, 200);
  },

  updateClassComputedField: async (input, ctx) => {
    const { class_id: classId, field_id: fieldId } = input.params;
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      updateComputedField(m, fieldId, { visibility: 'shared', classId }, input.body, input.headers['if-match']),
    );
    return fieldReply(row, 200);
  },

  deleteClassComputedField: async (input, ctx) => {
    const { class_id: classId, field_id: fieldId } = input.params;
    await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      deleteComputedField(m, fieldId, { visibility: 'shared', classId }, input.headers['if-match']),
    );
    return { status: 204 };
  },

  listMyComputedFields: async (input, ctx) => {
    const auth = requireHuman(ctx);
    const page = await listMyFields(ctx.deps.sql, auth, parseListQuery(input.query, MY_FIELD_LIST_SPEC));
    return listReply(page, page.rows.map(computedFieldView));
  },

  createMyComputedField: async (input, ctx) => {
    requireHuman(ctx);
    const classId = input.body.class_id;
    if (classId === undefined) throw badRequest('class_id is required', [{ path: 'body.class_id', message: 'missing required member' }]);
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) => createComputedField(m, classId, 'personal', input.body));
    return fieldReply(row, 201, { location: `/api/v1/iam/me/computed-fields/${row.id}` });
  },

  getMyComputedField: async (input, ctx) => {
    const auth = requireHuman(ctx);
    const row = await findField(ctx.deps.sql, input.params.field_id);
    if (!row || row.visibility !== 'personal' || row.owner_user_id !== auth.principal.id) throw notFound('computed field');
    return fieldReply(row, 200);
  },

  updateMyComputedField: async (input, ctx) => {
    requireHuman(ctx);
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      updateComputedField(m, input.params.field_id, { visibility: 'personal' }, input.body, input.headers['if-match']),
    );
    return fieldReply(row, 200);
  },

  deleteMyComputedField: async (input, ctx) => {
    requireHuman(ctx);
    await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      deleteComputedField(m, input.params.field_id, { visibility: 'personal' }, input.headers['if-match']),
    );
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
