import type { HandlerMap } from '../http/contract.ts';
import { actorOf, authOf, callerOf } from '../http/contract.ts';
import { ApiError, badRequest, notFound } from '../domain/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { finalFor, withTx } from '../db/tx.ts';
import { reserveId } from '../db/events.ts';
import { collectionWhere } from '../db/authz.ts';
import { insertTask } from '../db/tasks.ts';
import { toTaskWire } from '../domain/views/tasks.ts';
import { parseIdempotencyKey } from '../domain/tasks.ts';
import {
  REMOTE_TARGET_LIST_SPEC,
  readRemoteTargetAs,
  hasIdempotentRemoteCall,
  listRemoteTargetRows,
  loadSubjectContext,
  lockAndCountActiveRemoteCalls,
  requireSubjectRead,
} from '../db/remote-targets.ts';
import { remoteTargetView, type RemoteTargetRow } from '../domain/views/remote-targets.ts';
import { fieldsFromNew, parseSubject, subjectId } from '../domain/remote-targets.ts';
import { inTx } from '../mutations/context.ts';
import { createRemoteTarget, deleteRemoteTarget, updateRemoteTarget, type RemoteTargetPatch } from '../mutations/remote-targets.ts';

const KIND = 'remote_target';

function ok<S extends number>(status: S, row: RemoteTargetRow, extra: Record<string, string> = {}) {
  return { status, body: remoteTargetView(row), headers: etagHeader(KIND, row.id, row.revision, extra) };
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
    const fields = fieldsFromNew(input.body as Parameters<typeof fieldsFromNew>[0]);
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) => createRemoteTarget(m, fields, ctx.deps.config));
    return ok(201, row, { location: `/api/v1/remote-targets/${row.id}` });
  },

  getRemoteTarget: async (input, ctx) => {
    return ok(200, await readRemoteTargetAs(ctx.deps.sql, authOf(ctx), input.params.target_id, 'ReadRemoteTarget'));
  },

  updateRemoteTarget: async (input, ctx) => {
    const patch = input.body as RemoteTargetPatch;
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      updateRemoteTarget(m, input.params.target_id, patch, ctx.deps.config, input.headers['if-match']),
    );
    return ok(200, row);
  },

  deleteRemoteTarget: async (input, ctx) => {
    await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteRemoteTarget(m, input.params.target_id, input.headers['if-match']));
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
      // What the submission checks goes out together (one round trip), read in the order that
      // decides which error a request gets: the target with its check, the subject's check and
      // context, the caller's active calls (behind the caller's lock), the task's id. The task with
      // its events follows, with COMMIT.
      const reading = readRemoteTargetAs(tx, auth, id, 'ExecuteRemoteTarget');
      const subjectChecked = requireSubjectRead(tx, auth, subject);
      const loading = loadSubjectContext(tx, subject);
      const counting = lockAndCountActiveRemoteCalls(tx, auth.principal.id);
      const reserved = reserveId(tx, 'tasks');
      for (const p of [subjectChecked, loading, counting, reserved]) p.catch(() => undefined); // awaited below, in order
      const target = await reading;
      if (!target.enabled) throw badRequest('the remote target is disabled', [{ path: 'target', message: 'disabled' }]);
      if (!target.allowed_subject_types.includes(subject.type)) {
        throw badRequest(`the remote target does not accept ${subject.type} subjects`, [
          { path: 'body.subject.type', message: `must be one of ${target.allowed_subject_types.join(', ')}` },
        ]);
      }
      if (subject.type === 'object' && subject.class_id !== target.class_id) {
        throw badRequest('unsupported subject combination: class_id is not the class of the remote target', [
          { path: 'body.subject.class_id', message: 'unsupported subject combination: must be the class_id of the remote target' },
        ]);
      }
      await subjectChecked;
      const sc = await loading;
      if (!sc) throw notFound('subject');
      if (!sc.collectionIds.includes(target.collection_id)) throw notFound('subject in the target collection');

      const active = await counting;
      const cap = ctx.deps.config.SVC_REMOTE_CALL_MAX_ACTIVE_TASKS_PER_USER;
      if (active >= cap && !(idempotencyKey !== null && (await hasIdempotentRemoteCall(tx, auth.principal.id, idempotencyKey)))) {
        throw new ApiError('too_many_requests', `too many active remote-call tasks (at most ${cap} queued or running per user)`, {
          reason: 'too_many_active_tasks',
        });
      }
      return insertTask(
        tx,
        actorOf(ctx),
        {
          kind: 'remote_call',
          auth: { principal: auth.principal, token: { id: auth.token.id, scope: auth.token.scope } },
          request: { target_id: target.id, subject, parameters, body_override: bodyOverride },
          idempotencyKey,
          collectionId: target.collection_id,
          metadata: { remote_target_id: target.id, subject_type: subject.type, subject_id: subjectId(subject) },
        },
        {
          reserved,
          final: finalFor(ctx.deps.sql, tx), // COMMIT goes with it
          // a new task: the target's `invoked` event, as the task's actor, after the task's own
          more: (t) => ({
            actor: Object.assign(actorOf(ctx), { taskId: t.id }),
            events: [
              {
                entityType: KIND,
                entityId: target.id,
                entityName: target.name,
                collectionId: target.collection_id,
                relatedCollectionIds: sc.collectionIds,
                action: 'invoked',
                summary: `remote target ${target.name} invoked for ${subject.type} ${subjectId(subject)}`,
                metadata: { task_id: t.id, subject_type: subject.type, subject_id: subjectId(subject) },
              },
            ],
          }),
        },
      );
    });
    return { status: 202, body: toTaskWire(task), headers: { location: `/api/v1/tasks/${task.id}` } };
  },
} satisfies Partial<HandlerMap>;
