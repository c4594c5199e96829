import type { Ctx, HandlerMap, Reply } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { badRequest, notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply, type Fragment } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import { classWhere, permissionsFilter, requireClassPermission, requireCollectionPermission } from '../db/authz.ts';
import {
  CLASS_LIST_SPEC,
  classExpandedView,
  classIdByName,
  classCreatedEvent,
  classUpdatedEvent,
  classView,
  deleteClassCascade,
  findClassExpanded,
  insertClass,
  listClasses,
  lockClass,
  moveClassObjects,
  updateClassRow,
  type ClassRow,
  type ClassValues,
} from '../db/classes.ts';
import { NO_IMPACT, compileClassSchema } from '../domain/class-schema.ts';
import {
  SchemaChangeRefused,
  checkClassSchemaChange,
  recordClassSchemaChange,
  recordClassSchemaDeletedWithClass,
  recordRefusedSchemaChange,
} from '../db/class-schema-events.ts';
import { jsonEqual } from '../domain/json-patch.ts';
import type { RequestBody } from '../http/contract.ts';

async function expandedReply(ctx: Ctx, id: number, status = 200, extra: Record<string, string> = {}): Promise<Reply> {
  const row = await findClassExpanded(ctx.deps.sql, id);
  if (!row) throw notFound('class');
  return { status, body: classExpandedView(row), headers: { ...extra, ...etagHeader('class', row.id, row.revision) } };
}

async function updateClassBy(
  ctx: Ctx,
  classId: number,
  expectedName: string | null,
  body: RequestBody<'updateClass'>,
  headers: Record<string, string>,
): Promise<Reply> {
  const auth = authOf(ctx);
  const row = await withTx(ctx.deps.sql, async (tx) => {
    const before = await lockClass(tx, classId);
    if (!before || (expectedName !== null && before.name !== expectedName)) throw notFound('class');
    await requireClassPermission(tx, auth, classId, 'UpdateClass');
    checkIfMatch(headers, 'class', classId, before.revision);
    const next: ClassValues = {
      name: body.name ?? before.name,
      description: body.description ?? before.description,
      collection_id: body.collection_id ?? before.collection_id,
      json_schema: body.json_schema === undefined ? (before.json_schema ?? null) : body.json_schema,
      validate_schema: body.validate_schema ?? before.validate_schema,
    };
    if (next.validate_schema && next.json_schema === null) {
      throw badRequest('validate_schema needs a json_schema', [{ path: 'body.validate_schema', message: 'the class has no json_schema' }]);
    }
    if (body.json_schema !== undefined && body.json_schema !== null) compileClassSchema(body.json_schema);
    const schemaChanged = !jsonEqual(next.json_schema, before.json_schema ?? null);
    const moved = next.collection_id !== before.collection_id;
    if (moved) await requireCollectionPermission(tx, auth, next.collection_id, 'CreateClass');
    if (
      !schemaChanged &&
      !moved &&
      next.name === before.name &&
      next.description === before.description &&
      next.validate_schema === before.validate_schema
    ) {
      return before;
    }
    const impact = await checkClassSchemaChange(tx, before, next);
    const after = await updateClassRow(tx, classId, next);
    const movedObjects = moved ? await moveClassObjects(tx, actorOf(ctx), classId, next.collection_id) : null;
    await appendEvent(tx, actorOf(ctx), classUpdatedEvent(before, after, schemaChanged, movedObjects));
    await recordClassSchemaChange(tx, actorOf(ctx), before, after, impact);
    return after;
  }).catch(async (err: unknown) => {
    if (err instanceof SchemaChangeRefused) await recordRefusedSchemaChange(ctx.deps.sql, ctx.deps.log, actorOf(ctx), err);
    throw err;
  });
  return expandedReply(ctx, row.id);
}

async function deleteClassBy(ctx: Ctx, classId: number, expectedName: string | null, headers: Record<string, string>): Promise<Reply> {
  const auth = authOf(ctx);
  const before = await withTx(ctx.deps.sql, async (tx) => {
    const cls = await lockClass(tx, classId);
    if (!cls || (expectedName !== null && cls.name !== expectedName)) throw notFound('class');
    await requireClassPermission(tx, auth, classId, 'DeleteClass');
    checkIfMatch(headers, 'class', classId, cls.revision);
    await recordClassSchemaDeletedWithClass(tx, actorOf(ctx), cls);
    await deleteClassCascade(tx, actorOf(ctx), cls);
    return cls;
  });
  return { status: 204, headers: etagHeader('class', before.id, before.revision) };
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
    const auth = authOf(ctx);
    const body = input.body;
    const schema = body.json_schema ?? null;
    const validateSchema = body.validate_schema ?? false;
    if (validateSchema && schema === null) {
      throw badRequest('validate_schema: true needs a json_schema', [{ path: 'body.validate_schema', message: 'no json_schema given' }]);
    }
    if (schema !== null) compileClassSchema(schema);
    const row = await withTx(ctx.deps.sql, async (tx) => {
      await requireCollectionPermission(tx, auth, body.collection_id, 'CreateClass');
      const created = await insertClass(tx, {
        name: body.name,
        description: body.description ?? '',
        collection_id: body.collection_id,
        json_schema: schema,
        validate_schema: validateSchema,
      });
      await appendEvent(tx, actorOf(ctx), classCreatedEvent(created));
      await recordClassSchemaChange(tx, actorOf(ctx), null, created, NO_IMPACT);
      return created;
    });
    return expandedReply(ctx, row.id, 201, { location: `/api/v1/classes/${row.id}` });
  },

  getClassByName: async (input, ctx) => {
    const auth = authOf(ctx);
    const id = await idByName(ctx, input.params.class_name);
    await requireClassPermission(ctx.deps.sql, auth, id, 'ReadClass');
    const row = await findClassExpanded(ctx.deps.sql, id);
    if (!row || row.name !== input.params.class_name) throw notFound('class');
    const body = (input.query as Record<string, unknown>).include === 'collection' ? classExpandedView(row) : classView(row as ClassRow);
    return { status: 200, body, headers: etagHeader('class', row.id, row.revision) };
  },

  updateClassByName: async (input, ctx) => {
    const id = await idByName(ctx, input.params.class_name);
    return updateClassBy(ctx, id, input.params.class_name, input.body, input.headers);
  },

  deleteClassByName: async (input, ctx) => {
    const id = await idByName(ctx, input.params.class_name);
    return deleteClassBy(ctx, id, input.params.class_name, input.headers);
  },

  getClass: async (input, ctx) => {
    await requireClassPermission(ctx.deps.sql, authOf(ctx), input.params.class_id, 'ReadClass');
    return expandedReply(ctx, input.params.class_id);
  },

  updateClass: async (input, ctx) => updateClassBy(ctx, input.params.class_id, null, input.body, input.headers),

  deleteClass: async (input, ctx) => deleteClassBy(ctx, input.params.class_id, null, input.headers),
} satisfies Partial<HandlerMap>;
