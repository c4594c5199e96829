// What a task executor is given and returns: the contract between the task runner
// (src/workers/tasks.ts) and the executors (imports, exports, backups, remote calls).
import type { Deps } from '../deps.ts';
import type { Actor } from '../domain/actor.ts';
import type { TransactionSql } from '../db/sql.ts';
import type { ClaimedTask, Finish, FinalStatus } from '../db/task-runner.ts';
import type { Authority } from '../domain/authz.ts';

export class TaskCancelledError extends Error {
  constructor() {
    super('the task was cancelled');
    this.name = 'TaskCancelledError';
  }
}

export class ClaimLostError extends Error {
  constructor() {
    super('the claim on the task was lost');
    this.name = 'ClaimLostError';
  }
}

export interface TaskRunContext {
  deps: Deps;
  task: ClaimedTask;
  /**
   * The submitter's authority for re-checks: live grants and admin membership, intersected with
   * the token scope snapshot taken at enqueue (fail closed: a scoped flag without a snapshot
   * denies everything). null when the submitter no longer exists.
   */
  authority: Authority | null;
  /** Worker actor for audit events: actor_kind worker, initiator = submitter, task_id set. */
  actor: Actor;
  /** Aborted when the claim is lost or the process shuts down. */
  signal: AbortSignal;
  /** Throws TaskCancelledError when a cancel was requested (ClaimLostError when the claim is gone). */
  checkpoint(): Promise<void>;
  /** Appends a task_events row (history for GET /tasks/{id}/events). */
  event(eventType: string, message: string, data?: unknown): Promise<void>;
}

export interface TaskOutcome extends Omit<Finish, 'status'> {
  status: Exclude<FinalStatus, 'cancelled'>;
  /** Message of the final task_events row. */
  message?: string;
  /** Runs inside the finalizing transaction after the claim is confirmed (store results here). */
  finalize?: (tx: TransactionSql) => Promise<void>;
}

export type TaskExecutor = (ctx: TaskRunContext) => Promise<TaskOutcome>;
