import type { Ctx, HandlerMap, Reply, RequestBody } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import type { AuthInfo } from '../http/auth.ts';
import { badRequest, conflict, forbidden, notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import type { TransactionSql } from '../db/sql.ts';
import { appendEvent } from '../db/events.ts';
import { requireClassPermission, requireCollectionPermission } from '../db/authz.ts';
import { findClassExpanded } from '../db/classes.ts';
import {
  MY_FIELD_LIST_SPEC,
  SHARED_FIELD_LIST_SPEC,
  computedFieldView,
  countFields,
  deleteField,
  findField,
  insertField,
  listMyFields,
  listSharedFields,
  lockClassFields,
  lockField,
  updateField,
  type ComputedFieldRow,
  type FieldValues,
} from '../db/computed-fields.ts';
import { MAX_PERSONAL_PER_CLASS, MAX_SHARED_PER_CLASS, validateOperation } from '../domain/computed.ts';
import { jsonEqual } from '../domain/json-patch.ts';

const KIND = 'computed_field';

function fieldReply(row: ComputedFieldRow, status = 200, extra: Record<string, string> = {}): Reply {
  return { status, body: computedFieldView(row), headers: { ...extra, ...etagHeader(KIND, row.id, row.revision) } };
}

/** Personal computed fields are for humans (any token scope). */
function requireHuman(ctx: Ctx): AuthInfo {
  const auth = authOf(ctx);
  if (auth.principal.kind !== 'human') throw forbidden('personal computed fields are for human users only');
  return auth;
}

/** The class's collection (404 when the class does not exist). */
async function classCollection(db: Ctx['deps']['sql'] | TransactionSql, classId: number): Promise<number> {
  const cls = await findClassExpanded(db, classId);
  if (!cls) throw notFound('class');
  return cls.collection_id;
}

/** Changing shared fields needs UpdateCollection on the class's collection. */
async function requireSharedChange(tx: TransactionSql, auth: AuthInfo, classId: number): Promise<number> {
  const collectionId = await classCollection(tx, classId);
  await requireCollectionPermission(tx, auth, collectionId, 'UpdateCollection');
  return collectionId;
}

async function createField(
  ctx: Ctx,
  auth: AuthInfo,
  classId: number,
  body: RequestBody<'createClassComputedField'>,
  owner: number | null,
): Promise<ComputedFieldRow> {
  validateOperation(body.operation, body.result_type);
  return withTx(ctx.deps.sql, async (tx) => {
    let collectionId: number;
    if (owner === null) {
      collectionId = await requireSharedChange(tx, auth, classId);
    } else {
      collectionId = (await requireClassPermission(tx, auth, classId, 'ReadClass')).collection_id;
    }
    await lockClassFields(tx, classId);
    const max = owner === null ? MAX_SHARED_PER_CLASS : MAX_PERSONAL_PER_CLASS;
    if ((await countFields(tx, classId, owner)) >= max) {
      throw conflict(
        owner === null
          ? `a class has at most ${MAX_SHARED_PER_CLASS} shared computed fields`
          : `you have at most ${MAX_PERSONAL_PER_CLASS} personal computed fields per class`,
        'computed_field_limit',
      );
    }
    const row = await insertField(tx, {
      classId,
      key: body.key,
      label: body.label ?? body.key,
      description: body.description ?? '',
      enabled: body.enabled ?? true,
      operation: { type: body.operation.type, paths: body.operation.paths },
      result_type: body.result_type,
      visibility: owner === null ? 'shared' : 'personal',
      ownerUserId: owner,
    });
    await appendEvent(tx, actorOf(ctx), {
      entityType: KIND,
      entityId: row.id,
      entityName: row.key,
      collectionId,
      action: 'created',
      summary: `${row.visibility} computed field ${row.key} created`,
      after: computedFieldView(row),
      afterRevision: row.revision,
      metadata: { class_id: classId },
    });
    return row;
  });
}

/** Locks a field, checks it is the one the route names (else 404) and that the caller may change it. */
type Locate = (tx: TransactionSql, row: ComputedFieldRow | undefined) => Promise<{ row: ComputedFieldRow; collectionId: number }>;

async function updateFieldBy(
  ctx: Ctx,
  fieldId: number,
  body: RequestBody<'updateClassComputedField'>,
  locate: Locate,
  headers: Record<string, string>,
) {
  return withTx(ctx.deps.sql, async (tx) => {
    const { row: before, collectionId } = await locate(tx, await lockField(tx, fieldId));
    checkIfMatch(headers, KIND, before.id, before.revision);
    const next: FieldValues = {
      label: body.label ?? before.label,
      description: body.description ?? before.description,
      enabled: body.enabled ?? before.enabled,
      operation: body.operation ? { type: body.operation.type, paths: body.operation.paths } : before.operation,
      result_type: body.result_type ?? before.result_type,
    };
    if (
      next.label === before.label &&
      next.description === before.description &&
      next.enabled === before.enabled &&
      next.result_type === before.result_type &&
      jsonEqual(next.operation, { type: before.operation.type, paths: before.operation.paths })
    ) {
      return before;
    }
    validateOperation(next.operation, next.result_type);
    const after = await updateField(tx, before.id, next);
    await appendEvent(tx, actorOf(ctx), {
      entityType: KIND,
      entityId: after.id,
      entityName: after.key,
      collectionId,
      action: 'updated',
      summary: `${after.visibility} computed field ${after.key} updated`,
      before: computedFieldView(before),
      after: computedFieldView(after),
      beforeRevision: before.revision,
      afterRevision: after.revision,
      metadata: { class_id: after.class_id },
    });
    return after;
  });
}

async function deleteFieldBy(ctx: Ctx, fieldId: number, locate: Locate, headers: Record<string, string>): Promise<void> {
  await withTx(ctx.deps.sql, async (tx) => {
    const { row, collectionId } = await locate(tx, await lockField(tx, fieldId));
    checkIfMatch(headers, KIND, row.id, row.revision);
    await deleteField(tx, row.id);
    await appendEvent(tx, actorOf(ctx), {
      entityType: KIND,
      entityId: row.id,
      entityName: row.key,
      collectionId,
      action: 'deleted',
      summary: `${row.visibility} computed field ${row.key} deleted`,
      before: computedFieldView(row),
      beforeRevision: row.revision,
      metadata: { class_id: row.class_id },
    });
  });
}

function sharedLocator(auth: AuthInfo, classId: number): Locate {
  return async (tx, row) => {
    const collectionId = await requireSharedChange(tx, auth, classId);
    if (!row || row.class_id !== classId || row.visibility !== 'shared') throw notFound('computed field');
    return { row, collectionId };
  };
}

function personalLocator(auth: AuthInfo): Locate {
  return async (tx, row) => {
    if (!row || row.visibility !== 'personal' || row.owner_user_id !== auth.principal.id) throw notFound('computed field');
    return { row, collectionId: await classCollection(tx, row.class_id) };
  };
}

export const computedFieldsHandlers = {
  listClassComputedFields: async (input, ctx) => {
    await requireClassPermission(ctx.deps.sql, authOf(ctx), input.params.class_id, 'ReadClass');
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
    const row = await createField(ctx, authOf(ctx), classId, input.body, null);
    return fieldReply(row, 201, { location: `/api/v1/classes/${classId}/computed-fields/${row.id}` });
  },

  getClassComputedField: async (input, ctx) => {
    await requireClassPermission(ctx.deps.sql, authOf(ctx), input.params.class_id, 'ReadClass');
    const row = await findField(ctx.deps.sql, input.params.field_id);
    if (!row || row.class_id !== input.params.class_id || row.visibility !== 'shared') throw notFound('computed field');
    return fieldReply(row);
  },

  updateClassComputedField: async (input, ctx) => {
    const locate = sharedLocator(authOf(ctx), input.params.class_id);
    return fieldReply(await updateFieldBy(ctx, input.params.field_id, input.body, locate, input.headers));
  },

  deleteClassComputedField: async (input, ctx) => {
    await deleteFieldBy(ctx, input.params.field_id, sharedLocator(authOf(ctx), input.params.class_id), input.headers);
    return { status: 204 };
  },

  listMyComputedFields: async (input, ctx) => {
    const auth = requireHuman(ctx);
    const page = await listMyFields(ctx.deps.sql, auth, parseListQuery(input.query, MY_FIELD_LIST_SPEC));
    return listReply(page, page.rows.map(computedFieldView));
  },

  createMyComputedField: async (input, ctx) => {
    const auth = requireHuman(ctx);
    const classId = input.body.class_id;
    if (classId === undefined) throw badRequest('class_id is required', [{ path: 'body.class_id', message: 'missing required member' }]);
    const row = await createField(ctx, auth, classId, input.body, auth.principal.id);
    return fieldReply(row, 201, { location: `/api/v1/iam/me/computed-fields/${row.id}` });
  },

  getMyComputedField: async (input, ctx) => {
    const auth = requireHuman(ctx);
    const row = await findField(ctx.deps.sql, input.params.field_id);
    if (!row || row.visibility !== 'personal' || row.owner_user_id !== auth.principal.id) throw notFound('computed field');
    return fieldReply(row);
  },

  updateMyComputedField: async (input, ctx) => {
    const auth = requireHuman(ctx);
    return fieldReply(await updateFieldBy(ctx, input.params.field_id, input.body, personalLocator(auth), input.headers));
  },

  deleteMyComputedField: async (input, ctx) => {
    const auth = requireHuman(ctx);
    await deleteFieldBy(ctx, input.params.field_id, personalLocator(auth), input.headers);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
