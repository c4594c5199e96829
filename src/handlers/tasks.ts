import type { HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { ApiError, notFound } from '../domain/errors.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import {
  TASK_EVENT_LIST_SPEC,
  TASK_LIST_SPEC,
  findTask,
  insertTaskEvent,
  listTaskEventRows,
  listTaskRows,
  lockTask,
  setTaskCancelRequested,
  setTaskCancelled,
} from '../db/tasks.ts';
import { taskSnapshot, toTaskWire } from '../domain/views/tasks.ts';
import { taskEventWire } from '../domain/views/task-events.ts';
import { canSeeTask, cancelOutcome } from '../domain/tasks.ts';

export const tasksHandlers = {
  listTasks: async (input, ctx) => {
    const auth = authOf(ctx);
    const page = await listTaskRows(ctx.deps.sql, auth, parseListQuery(input.query, TASK_LIST_SPEC));
    return listReply(page, page.rows.map(toTaskWire));
  },

  getTask: async (input, ctx) => {
    const auth = authOf(ctx);
    const row = await findTask(ctx.deps.sql, input.params.task_id);
    if (!row || !canSeeTask(auth, row.submitted_by)) throw notFound('task');
    return { status: 200, body: toTaskWire(row) };
  },

  listTaskEvents: async (input, ctx) => {
    const auth = authOf(ctx);
    const parsed = parseListQuery(input.query, TASK_EVENT_LIST_SPEC);
    const row = await findTask(ctx.deps.sql, input.params.task_id);
    if (!row || !canSeeTask(auth, row.submitted_by)) throw notFound('task');
    const page = await listTaskEventRows(ctx.deps.sql, row.id, parsed);
    return listReply(page, page.rows.map(taskEventWire));
  },

  cancelTask: async (input, ctx) => {
    const auth = authOf(ctx);
    const task = await withTx(ctx.deps.sql, async (tx) => {
      const before = await lockTask(tx, input.params.task_id);
      if (!before || !canSeeTask(auth, before.submitted_by)) throw notFound('task');
      const outcome = cancelOutcome(before.status, before.cancel_requested);
      if (outcome === 'noop') return before;
      if (outcome === 'finished') {
        throw new ApiError('conflict', `the task has already finished (status ${before.status}) and cannot be cancelled`, {
          reason: 'task_finished',
        });
      }
      const by = `${auth.principal.kind === 'human' ? 'user' : 'service account'} ${auth.principal.name}`;
      const after = outcome === 'cancel_now' ? await setTaskCancelled(tx, before.id) : await setTaskCancelRequested(tx, before.id);
      const action = outcome === 'cancel_now' ? 'cancelled' : 'cancel_requested';
      await insertTaskEvent(
        tx,
        after.id,
        action,
        outcome === 'cancel_now' ? `cancelled by ${by}` : `cancel requested by ${by}; the task stops at its next checkpoint`,
        { principal_id: auth.principal.id, previous_status: before.status },
      );
      await appendEvent(tx, actorOf(ctx), {
        entityType: 'task',
        entityId: after.id,
        entityName: null,
        action,
        summary: `${after.kind} task ${after.id} ${outcome === 'cancel_now' ? 'cancelled' : 'cancel requested'}`,
        before: taskSnapshot(before),
        after: taskSnapshot(after),
        metadata: { task_kind: after.kind },
      });
      return after;
    });
    return { status: 200, body: toTaskWire(task) };
  },
} satisfies Partial<HandlerMap>;
