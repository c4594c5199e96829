import type { Ctx, HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { ApiError, badRequest, notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
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
import { templateLimits } from '../domain/templates.ts';

const KIND = 'remote_target';

function ok(status: number, row: RemoteTargetRow, extra: Record<string, string> = {}) {
  return { status, body: remoteTargetView(row), headers: { ...etagHeader(KIND, row.id, row.revision), ...extra } };
}

function targetEvent(row: RemoteTargetRow, action: string, before: RemoteTargetRow | null, related: number[] = []) {
  return {
    entityType: KIND,
    entityId: row.id,
    entityName: row.name,
    collectionId: row.collection_id,
    relatedCollectionIds: related,
    action,
    summary: `remote target ${row.name} ${action}`,
    before: before ? remoteTargetView(before) : null,
    after: action === 'deleted' ? null : remoteTargetView(row),
    beforeRevision: before?.revision ?? null,
    afterRevision: action === 'deleted' ? null : row.revision,
  };
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

export const remoteTargetsHandlers = {
  listRemoteTargets: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const parsed = parseListQuery(input.query, REMOTE_TARGET_LIST_SPEC);
    const page = await listRemoteTargetRows(db, parsed, [collectionWhere(db, auth, 'ReadRemoteTarget', { id: 'rt.collection_id' })]);
    return listReply(page, page.rows.map(remoteTargetView));
  },

  createRemoteTarget: async (input, ctx) => {
    const auth = authOf(ctx);
    const fields = fieldsFromNew(input.body as Parameters<typeof fieldsFromNew>[0]);
    const row = await withTx(ctx.deps.sql, async (tx) => {
      await requireCollectionPermission(tx, auth, fields.collection_id, 'CreateRemoteTarget');
      await validateWithDb(tx, fields, ctx);
      const created = await insertRemoteTarget(tx, fields);
      await appendEvent(tx, actorOf(ctx), targetEvent(created, 'created', null));
      return created;
    });
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
    const auth = authOf(ctx);
    const id = input.params.target_id;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const current = await findRemoteTarget(tx, id);
      if (!current) throw notFound('remote target');
      await requireCollectionPermission(tx, auth, current.collection_id, 'UpdateRemoteTarget');
      const before = await lockRemoteTarget(tx, id);
      if (!before) throw notFound('remote target');
      if (before.collection_id !== current.collection_id) {
        await requireCollectionPermission(tx, auth, before.collection_id, 'UpdateRemoteTarget');
      }
      checkIfMatch(input.headers, KIND, before.id, before.revision);
      const next = applyPatch(rowFields(before), input.body as Parameters<typeof applyPatch>[1]);
      if (sameFields(next, rowFields(before))) return before;
      if (next.collection_id !== before.collection_id) {
        await requireCollectionPermission(tx, auth, next.collection_id, 'CreateRemoteTarget');
      }
      await validateWithDb(tx, next, ctx);
      const after = await updateRemoteTargetRow(tx, id, next);
      const moved = after.collection_id !== before.collection_id;
      await appendEvent(tx, actorOf(ctx), {
        ...targetEvent(after, 'updated', before, moved ? [before.collection_id] : []),
        ...(moved ? { metadata: { from_collection_id: before.collection_id, to_collection_id: after.collection_id } } : {}),
      });
      return after;
    });
    return ok(200, row);
  },

  deleteRemoteTarget: async (input, ctx) => {
    const auth = authOf(ctx);
    const id = input.params.target_id;
    await withTx(ctx.deps.sql, async (tx) => {
      const current = await findRemoteTarget(tx, id);
      if (!current) throw notFound('remote target');
      await requireCollectionPermission(tx, auth, current.collection_id, 'DeleteRemoteTarget');
      const before = await lockRemoteTarget(tx, id);
      if (!before) throw notFound('remote target');
      if (before.collection_id !== current.collection_id) {
        await requireCollectionPermission(tx, auth, before.collection_id, 'DeleteRemoteTarget');
      }
      checkIfMatch(input.headers, KIND, before.id, before.revision);
      await deleteRemoteTargetRow(tx, id);
      await appendEvent(tx, actorOf(ctx), targetEvent(before, 'deleted', before));
    });
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
