import type { Ctx, HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { ApiError, badRequest, notFound } from '../http/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import { collectionWhere, requireCollectionPermission } from '../db/authz.ts';
import { insertTask, toTaskWire } from '../db/tasks.ts';
import { parseIdempotencyKey } from '../domain/tasks.ts';
import {
  REMOTE_TARGET_LIST_SPEC,
  classCollectionId,
  deleteRemoteTargetRow,
  findRemoteTarget,
  hasIdempotentRemoteCall,
  insertRemoteTarget,
  listRemoteTargetRows,
  loadSubjectContext,
  lockAndCountActiveRemoteCalls,
  lockRemoteTarget,
  remoteTargetEvent,
  remoteTargetView,
  requireSubjectRead,
  rowFields,
  updateRemoteTargetRow,
  type RemoteTargetRow,
} from '../db/remote-targets.ts';
import {
  applyPatch,
  fieldsFromNew,
  parseSubject,
  sameFields,
  subjectId,
  validateTarget,
  type TargetFields,
} from '../domain/remote-targets.ts';
import type { Db } from '../db/sql.ts';
import { createInCollection, deleteInCollection, updateInCollection, type CollectionResource } from './collection-resources.ts';
import { templateLimits } from '../domain/templates.ts';

const KIND = 'remote_target';

function ok(status: number, row: RemoteTargetRow, extra: Record<string, string> = {}) {
  return { status, body: remoteTargetView(row), headers: { ...etagHeader(KIND, row.id, row.revision), ...extra } };
}

/** Validation that needs the database: the class exists (404) and belongs to collection_id (400). */
async function validateWithDb(db: Db, f: TargetFields, ctx: Ctx): Promise<void> {
  validateTarget(f, templateLimits(ctx.deps.config));
  if (f.class_id !== null) {
    const cid = await classCollectionId(db, f.class_id);
    if (cid === undefined) throw notFound('class');
    if (cid !== f.collection_id) {
      throw badRequest('the remote target is invalid', [{ path: 'body.class_id', message: 'must name a class of collection_id' }]);
    }
  }
}

const REMOTE_TARGET: CollectionResource<RemoteTargetRow, TargetFields> = {
  kind: KIND,
  label: 'remote target',
  perms: { create: 'CreateRemoteTarget', update: 'UpdateRemoteTarget', delete: 'DeleteRemoteTarget' },
  find: findRemoteTarget,
  lock: lockRemoteTarget,
  fields: rowFields,
  applyPatch: (f, body) => applyPatch(f, body as Parameters<typeof applyPatch>[1]),
  same: sameFields,
  validate: validateWithDb,
  insert: insertRemoteTarget,
  update: updateRemoteTargetRow,
  remove: deleteRemoteTargetRow,
  event: remoteTargetEvent,
};

export const remoteTargetsHandlers = {
  listRemoteTargets: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const parsed = parseListQuery(input.query, REMOTE_TARGET_LIST_SPEC);
    const page = await listRemoteTargetRows(db, parsed, [collectionWhere(db, auth, 'ReadRemoteTarget', { id: 'rt.collection_id' })]);
    return listReply(page, page.rows.map(remoteTargetView));
  },

  createRemoteTarget: async (input, ctx) => {
    const fields = fieldsFromNew(input.body as Parameters<typeof fieldsFromNew>[0]);
    const row = await withTx(ctx.deps.sql, (tx) => createInCollection(tx, ctx, REMOTE_TARGET, fields));
    return ok(201, row, { location: `/api/v1/remote-targets/${row.id}` });
  },

  getRemoteTarget: async (input, ctx) => {
    const auth = authOf(ctx);
    const row = await findRemoteTarget(ctx.deps.sql, input.params.target_id);
    if (!row) throw notFound('remote target');
    await requireCollectionPermission(ctx.deps.sql, auth, row.collection_id, 'ReadRemoteTarget');
    return ok(200, row);
  },

  updateRemoteTarget: async (input, ctx) => {
    const row = await withTx(ctx.deps.sql, (tx) =>
      updateInCollection(tx, ctx, REMOTE_TARGET, input.params.target_id, input.headers, input.body),
    );
    return ok(200, row);
  },

  deleteRemoteTarget: async (input, ctx) => {
    await withTx(ctx.deps.sql, (tx) => deleteInCollection(tx, ctx, REMOTE_TARGET, input.params.target_id, input.headers));
    return { status: 204 };
  },

  invokeRemoteTarget: async (input, ctx) => {
    const auth = authOf(ctx);
    const id = input.params.target_id;
    const body = input.body as { subject: Parameters<typeof parseSubject>[0]; parameters?: object; body_override?: object };
    const subject = parseSubject(body.subject);
    const parameters = body.parameters ?? {};
    const bodyOverride = body.body_override ?? {};
    const idempotencyKey = parseIdempotencyKey(input.headers['idempotency-key']);
    const { task } = await withTx(ctx.deps.sql, async (tx) => {
      const target = await findRemoteTarget(tx, id);
      if (!target) throw notFound('remote target');
      await requireCollectionPermission(tx, auth, target.collection_id, 'ExecuteRemoteTarget');
      if (!target.enabled) throw badRequest('the remote target is disabled', [{ path: 'target', message: 'disabled' }]);
      if (!target.allowed_subject_types.includes(subject.type)) {
        throw badRequest(`the remote target does not accept ${subject.type} subjects`, [
          { path: 'body.subject.type', message: `must be one of ${target.allowed_subject_types.join(', ')}` },
        ]);
      }
      if (subject.type === 'object' && subject.class_id !== target.class_id) throw notFound('object of the target class');
      await requireSubjectRead(tx, auth, subject);
      const sc = await loadSubjectContext(tx, subject);
      if (!sc) throw notFound('subject');
      if (!sc.collectionIds.includes(target.collection_id)) throw notFound('subject in the target collection');

      const active = await lockAndCountActiveRemoteCalls(tx, auth.principal.id);
      const cap = ctx.deps.config.SVC_REMOTE_CALL_MAX_ACTIVE_TASKS_PER_USER;
      if (active >= cap && !(idempotencyKey !== null && (await hasIdempotentRemoteCall(tx, auth.principal.id, idempotencyKey)))) {
        throw new ApiError(429, `too many active remote-call tasks (at most ${cap} queued or running per user)`, {
          reason: 'too_many_active_tasks',
        });
      }
      const result = await insertTask(tx, actorOf(ctx), {
        kind: 'remote_call',
        auth: { principal: auth.principal, token: { id: auth.token.id, scope: auth.token.scope } },
        request: { target_id: target.id, subject, parameters, body_override: bodyOverride },
        idempotencyKey,
        collectionId: target.collection_id,
        metadata: { remote_target_id: target.id, subject_type: subject.type, subject_id: subjectId(subject) },
      });
      if (result.created) {
        await appendEvent(
          tx,
          { ...actorOf(ctx), taskId: result.task.id },
          {
            entityType: KIND,
            entityId: target.id,
            entityName: target.name,
            collectionId: target.collection_id,
            relatedCollectionIds: sc.collectionIds,
            action: 'invoked',
            summary: `remote target ${target.name} invoked for ${subject.type} ${subjectId(subject)}`,
            metadata: { task_id: result.task.id, subject_type: subject.type, subject_id: subjectId(subject) },
          },
        );
      }
      return result;
    });
    return { status: 202, body: toTaskWire(task), headers: { location: `/api/v1/tasks/${task.id}` } };
  },
} satisfies Partial<HandlerMap>;
