// Runs a task the command just queued, in this process, through the service's task runner (the
// same claim, executor and fenced finalization as a worker), while reading its progress row.
// When a running service's worker claims it first, the command follows it to its end instead.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Deps } from '../deps.ts';
import { findTask } from '../db/tasks.ts';
import { type TaskRow } from '../domain/views/tasks.ts';
import { ACTIVE_STATUSES } from '../domain/tasks.ts';
import { runTaskOnce } from '../workers/tasks.ts';

const POLL_MS = 200;

export async function runTask(deps: Deps, taskId: number, seen: (task: TaskRow) => void): Promise<TaskRow> {
  const read = async (): Promise<TaskRow> => {
    const task = await findTask(deps.sql, taskId);
    if (!task) throw new Error(`task ${taskId} disappeared`);
    return task;
  };
  let running = true;
  const watch = (async () => {
    while (running) {
      await sleep(POLL_MS);
      if (running) seen(await read());
    }
  })();
  try {
    const ran = await runTaskOnce(deps, { taskIds: [taskId] });
    if (!ran) {
      for (let task = await read(); ACTIVE_STATUSES.includes(task.status); task = await read()) await sleep(POLL_MS);
    }
  } finally {
    running = false;
    await watch.catch(() => {});
  }
  const task = await read();
  seen(task);
  return task;
}
