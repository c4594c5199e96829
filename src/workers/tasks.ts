// The task runner. Workers claim the oldest queued task of a kind that has an executor
// (`for update skip locked`, so any number of processes share the queue), mark it running under a
// fresh claim token with a lease, run the executor, and finalize fenced by the claim token: a
// worker whose claim was lost (lease expired and recovered elsewhere) writes nothing.
//
// Wake-ups come from LISTEN svc_tasks (sent after the commit of each task submitted: db/wakeups.ts;
// until migration 0300 an insert trigger sent it inside the submitting transaction); polling every
// SVC_TASK_POLL_INTERVAL_MS is the fallback. SVC_TASK_WORKERS workers run per process. Shutdown
// stops claiming at once, gives running executors a grace period, then aborts them.
//
// Pre-dispatch: a task whose submitter no longer exists or is a disabled service account is not
// executed (status failed, details.reason submitter_disabled / submitter_missing); a task with a
// cancel request is cancelled. Executors call checkpoint() to honour cancel requests; it throws
// TaskCancelledError, and the runner records `cancelled`.
//
// The executors (imports, exports, backups, remote calls) are listed below; tests add theirs with
// registerTaskExecutor(kind, fn).
// runTaskOnce(deps) runs one claim cycle to completion (tests, and one-shot tools).
import type { Deps } from '../deps.ts';
import type { Loop } from './loop.ts';
import type { Actor } from '../domain/actor.ts';
import { withTx } from '../db/tx.ts';
import { TASKS_CHANNEL } from '../db/wakeups.ts';
import { insertTaskEvent } from '../db/tasks.ts';
import {
  findSubmitter,
  lockClaimedTask,
  lockExpiredClaims,
  lockNextQueuedTask,
  markClaimed,
  markFinished,
  recordTaskTransition,
  renewClaim,
  type ClaimedTask,
  type Finish,
} from '../db/task-runner.ts';
import type { Authority, ScopeValue } from '../domain/authz.ts';
import { executeRemoteCall } from './remote-call.ts';
import { executeExport } from './export.ts';
import { executeImport } from './import.ts';
import { executeBackup } from './backup.ts';
import { ClaimLostError, TaskCancelledError, type TaskExecutor, type TaskOutcome, type TaskRunContext } from './task-context.ts';
import { runWokenWorkers } from './waker.ts';
import { taskDuration } from '../metrics.ts';

// A claim lasts SVC_TASK_LEASE_MS without renewal; it is renewed every third of that while the executor runs.
/** How long running executors may finish after shutdown begins, before they are aborted. */
export const SHUTDOWN_GRACE_MS = 7_000;

export { ClaimLostError, TaskCancelledError, type TaskOutcome, type TaskRunContext } from './task-context.ts';

const executors = new Map<string, TaskExecutor>([
  ['remote_call', executeRemoteCall],
  ['export', executeExport],
  ['import', executeImport],
  ['backup', executeBackup],
]);

/** Adds or replaces the executor of a task kind (tests add their own). */
export function registerTaskExecutor(kind: string, fn: TaskExecutor): void {
  executors.set(kind, fn);
}

export function registeredTaskKinds(): string[] {
  return [...executors.keys()];
}

function adminOf(deps: Deps) {
  return { group: deps.config.SVC_ADMIN_GROUPNAME, scope: deps.config.SVC_ADMIN_IDENTITY_SCOPE };
}

function workerActor(task: ClaimedTask, submitterName: string | null): Actor {
  return {
    kind: 'worker',
    principalId: null,
    principalName: null,
    initiatorId: task.submitted_by,
    initiatorName: submitterName,
    taskId: task.id,
  };
}

/** The token scope snapshot as a scope value; a scoped flag without a usable snapshot denies all. */
function snapshotScope(task: ClaimedTask): ScopeValue | null {
  if (!task.token_scoped) return null;
  const s = task.token_scope;
  if (!s || typeof s !== 'object' || (s.permissions === undefined && s.resources === undefined)) return { permissions: [], resources: [] };
  return s;
}

type Claim =
  | { kind: 'none' }
  | { kind: 'finished'; task: ClaimedTask }
  | { kind: 'claimed'; task: ClaimedTask; authority: Authority; submitterName: string };

/** Fails running tasks whose lease ran out: their worker stopped, and a partial run is not repeated. */
async function recoverExpired(deps: Deps): Promise<number> {
  return withTx(deps.sql, async (tx) => {
    const rows = await lockExpiredClaims(tx, 10);
    for (const before of rows) {
      const after = await markFinished(tx, before.id, {
        status: 'failed',
        details: { reason: 'worker_lost', message: 'the worker running this task stopped before it finished; the task was not retried' },
      });
      const submitter = await findSubmitter(tx, before.submitted_by, adminOf(deps));
      await recordTaskTransition(
        tx,
        workerActor(before, submitter?.name ?? null),
        before,
        after,
        `${after.kind} task failed: its worker stopped`,
      );
    }
    return rows.length;
  });
}

async function claimNext(deps: Deps, only: ClaimFilter): Promise<Claim> {
  const kinds = registeredTaskKinds();
  if (kinds.length === 0) return { kind: 'none' };
  return withTx(deps.sql, async (tx): Promise<Claim> => {
    const queued = await lockNextQueuedTask(tx, kinds, only);
    if (!queued) return { kind: 'none' };
    const submitter = await findSubmitter(tx, queued.submitted_by, adminOf(deps));
    const actor = workerActor(queued, submitter?.name ?? null);
    let refusal: Finish | null = null;
    let message = '';
    if (!submitter) {
      refusal = {
        status: 'failed',
        details: { reason: 'submitter_missing', message: 'the submitting principal no longer exists; the task was not executed' },
      };
      message = `${queued.kind} task not executed: the submitter no longer exists`;
    } else if (submitter.disabled) {
      refusal = {
        status: 'failed',
        details: { reason: 'submitter_disabled', message: 'the submitting service account is disabled; the task was not executed' },
      };
      message = `${queued.kind} task not executed: the submitting service account is disabled`;
    } else if (queued.cancel_requested) {
      refusal = { status: 'cancelled' };
      message = `${queued.kind} task cancelled before it started`;
    }
    if (refusal) {
      const after = await markFinished(tx, queued.id, refusal);
      await recordTaskTransition(tx, actor, queued, after, message);
      return { kind: 'finished', task: after };
    }
    const claimed = await markClaimed(tx, queued.id, deps.config.SVC_TASK_LEASE_MS);
    await recordTaskTransition(tx, actor, queued, claimed, `${claimed.kind} task running`);
    const authority: Authority = {
      principal: { id: submitter!.id },
      isAdmin: submitter!.is_admin,
      token: { scope: snapshotScope(claimed) },
    };
    return { kind: 'claimed', task: claimed, authority, submitterName: submitter!.name };
  });
}

async function execute(
  deps: Deps,
  claim: Extract<Claim, { kind: 'claimed' }>,
  shutdown: AbortSignal | undefined,
  graceMs: number,
): Promise<ClaimedTask | null> {
  const { task } = claim;
  const token = task.claim_token!;
  const ctl = new AbortController();
  let lost = false;
  let graceTimer: NodeJS.Timeout | undefined;
  const onShutdown = () => {
    graceTimer = setTimeout(() => ctl.abort(), graceMs);
  };
  if (shutdown?.aborted) onShutdown();
  else shutdown?.addEventListener('abort', onShutdown, { once: true });

  const renew = async (): Promise<boolean> => {
    const cancel = await renewClaim(deps.sql, task.id, token, deps.config.SVC_TASK_LEASE_MS);
    if (cancel === null) {
      lost = true;
      ctl.abort();
      throw new ClaimLostError();
    }
    return cancel;
  };
  const heartbeat = setInterval(() => {
    renew().catch(() => {});
  }, deps.config.SVC_TASK_LEASE_MS / 3);

  const actor = workerActor(task, claim.submitterName);
  const ctx: TaskRunContext = {
    deps,
    task,
    authority: claim.authority,
    actor,
    signal: ctl.signal,
    async checkpoint() {
      if (await renew()) throw new TaskCancelledError();
    },
    async event(eventType, message, data) {
      await insertTaskEvent(deps.sql, task.id, eventType, message, data ?? null);
    },
  };

  let outcome: TaskOutcome | { status: 'cancelled'; message: string; finalize?: undefined };
  const started = performance.now();
  deps.log.info({ task_id: task.id, task_kind: task.kind }, 'task started');
  try {
    const executor = executors.get(task.kind);
    if (!executor) throw new Error(`no executor for task kind ${task.kind}`);
    outcome = await executor(ctx);
  } catch (err) {
    if (err instanceof ClaimLostError || lost) {
      deps.log.warn({ task_id: task.id }, 'task claim lost; the result is discarded');
      return null;
    }
    if (err instanceof TaskCancelledError) {
      outcome = { status: 'cancelled', message: `${task.kind} task cancelled` };
    } else {
      deps.log.error({ err, task_id: task.id, task_kind: task.kind }, 'task executor failed');
      outcome = {
        status: 'failed',
        details: { reason: ctl.signal.aborted ? 'worker_stopped' : 'internal_error', message: 'the task failed with an internal error' },
        message: `${task.kind} task failed`,
      };
    }
  } finally {
    clearInterval(heartbeat);
    if (graceTimer) clearTimeout(graceTimer);
    shutdown?.removeEventListener('abort', onShutdown);
  }

  const final = outcome;
  const finished = await withTx(deps.sql, async (tx) => {
    const before = await lockClaimedTask(tx, task.id, token);
    if (!before) {
      deps.log.warn({ task_id: task.id }, 'task claim lost before finalization; the result is discarded');
      return null;
    }
    if (final.finalize) await final.finalize(tx);
    const { message, finalize: _f, ...finish } = final as TaskOutcome;
    const after = await markFinished(tx, task.id, finish);
    await recordTaskTransition(tx, actor, before, after, message ?? `${after.kind} task ${after.status}`);
    return after;
  });
  if (finished) {
    const seconds = (performance.now() - started) / 1000;
    taskDuration.observe({ kind: finished.kind, status: finished.status }, seconds);
    deps.log.info(
      { task_id: finished.id, task_kind: finished.kind, status: finished.status, duration_ms: Math.round(seconds * 1000) },
      'task finished',
    );
  }
  return finished;
}

/** Narrows what a worker claims (tests sharing one database with other test files). */
export interface ClaimFilter {
  taskIds?: number[];
  submittedBy?: number[];
}

export interface RunOnceOptions extends ClaimFilter {
  /** Shutdown: stop; a running executor is aborted graceMs later (default SHUTDOWN_GRACE_MS). */
  signal?: AbortSignal;
  graceMs?: number;
}

/**
 * One claim cycle, run to completion: recover expired claims, claim the oldest eligible queued
 * task, run it, finalize. Returns the task in its final state, or null when nothing was claimed.
 */
export async function runTaskOnce(deps: Deps, opts: RunOnceOptions = {}): Promise<ClaimedTask | null> {
  await recoverExpired(deps);
  const claim = await claimNext(deps, { taskIds: opts.taskIds, submittedBy: opts.submittedBy });
  if (claim.kind === 'none') return null;
  if (claim.kind === 'finished') return claim.task;
  return execute(deps, claim, opts.signal, opts.graceMs ?? SHUTDOWN_GRACE_MS);
}

export interface RunnerStats {
  notifications: number;
  polls: number;
  executed: number;
}

/** Runs SVC_TASK_WORKERS workers until `signal` aborts; returns when they have all stopped. */
export async function runTaskWorkers(
  deps: Deps,
  signal: AbortSignal,
  stats: RunnerStats = { notifications: 0, polls: 0, executed: 0 },
  only: ClaimFilter & { graceMs?: number } = {},
): Promise<void> {
  const opts = {
    count: deps.config.SVC_TASK_WORKERS,
    channel: TASKS_CHANNEL,
    onNotify: () => {
      stats.notifications++;
    },
  };
  await runWokenWorkers(deps, signal, opts, async (waker) => {
    while (!signal.aborted) {
      let ran = false;
      try {
        ran = (await runTaskOnce(deps, Object.assign({}, only, { signal }))) !== null;
        if (ran) stats.executed++;
      } catch (err) {
        deps.log.error({ err }, 'task runner cycle failed');
      }
      if (!ran) {
        await waker.wait(deps.config.SVC_TASK_POLL_INTERVAL_MS, signal);
        stats.polls++;
      }
    }
  });
}

/** The runner as a background loop (src/workers/index.ts); a tick lasts until shutdown. */
export const taskLoop: Loop = {
  name: 'tasks',
  intervalMs: 1000,
  tick: (deps, signal) => runTaskWorkers(deps, signal),
};
