// Backups: queueing a backup task (refused while a restore is applied, capped by
// SVC_BACKUP_MAX_ACTIVE_TASKS). Used by createBackup and the admin command line.
import { ApiError, conflict } from '../domain/errors.ts';
import { finalFor, withTx } from '../db/tx.ts';
import { insertTask, type NewTask } from '../db/tasks.ts';
import { type TaskRow } from '../domain/views/tasks.ts';
import type { Actor } from '../domain/actor.ts';
import type { Deps } from '../deps.ts';
import { dropExpiredBackupOutputs, hasIdempotentBackup, lockAndCountActiveBackups, noRestoreRunning } from '../db/backups.ts';

/**
 * Queues a backup task for `submitter` (refused while a restore is applied, and 429 beyond
 * SVC_BACKUP_MAX_ACTIVE_TASKS unless it replays an Idempotency-Key). Shared by createBackup and
 * the admin command line. `includeEntityHistory` (default false) adds the entity versions
 * section; the task request and event metadata carry it only when true, so a default submission
 * is recorded as before.
 */
export async function submitBackup(
  deps: Deps,
  actor: Actor,
  submitter: NewTask['auth'],
  includeHistory: boolean,
  idempotencyKey: string | null,
  includeEntityHistory = false,
): Promise<TaskRow> {
  const options = { include_history: includeHistory, ...(includeEntityHistory ? { include_entity_history: true } : {}) };
  await dropExpiredBackupOutputs(deps.sql);
  const { task } = await withTx(deps.sql, async (tx) => {
    if (!(await noRestoreRunning(tx))) throw conflict('a restore is being applied; submit the backup after it finished', 'restore_running');
    const active = await lockAndCountActiveBackups(tx);
    const cap = deps.config.SVC_BACKUP_MAX_ACTIVE_TASKS;
    if (active >= cap && !(idempotencyKey !== null && (await hasIdempotentBackup(tx, submitter.principal.id, idempotencyKey)))) {
      throw new ApiError('too_many_requests', `too many active backup tasks (at most ${cap} queued or running at once)`, {
        reason: 'too_many_active_tasks',
      });
    }
    return insertTask(
      tx,
      actor,
      { kind: 'backup', auth: submitter, request: options, idempotencyKey, metadata: options },
      { final: finalFor(deps.sql, tx) }, // COMMIT goes with it
    );
  });
  return task;
}
