// Tasks: pure rules (no SQL, no HTTP). Who may see a task, what a cancel does in each status, the
// wire links per kind, and the Idempotency-Key rules of task submission.
import { createHash } from 'node:crypto';
import { badRequest } from './errors.ts';
import { isUnscoped, type Authority } from './authz.ts';
import { canonicalJson } from './canonical-json.ts';

export const TASK_KINDS = ['import', 'export', 'remote_call', 'backup', 'restore'] as const;
export type TaskKind = (typeof TASK_KINDS)[number];

export const TASK_STATUSES = ['queued', 'validating', 'running', 'succeeded', 'failed', 'partially_succeeded', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** Statuses a worker may still move forward (counted as active). */
export const ACTIVE_STATUSES: readonly TaskStatus[] = ['queued', 'validating', 'running'];

export const MAX_IDEMPOTENCY_KEY_BYTES = 255;

/**
 * Task visibility is owned by the principal: the submitter (with any token, scoped or not) or an
 * administrator using an unscoped token. Everyone else is told 404.
 */
export function canSeeTask(auth: Authority, submittedBy: number): boolean {
  return auth.principal.id === submittedBy || (auth.isAdmin && isUnscoped(auth));
}

/** Whether the caller sees every task (the admin fast path applies only to unscoped tokens). */
export function seesAllTasks(auth: Authority): boolean {
  return auth.isAdmin && isUnscoped(auth);
}

export type CancelOutcome =
  /** queued → cancelled at once */
  | 'cancel_now'
  /** validating/running → cancel_requested; the worker stops at its next checkpoint */
  | 'request_cancel'
  /** already cancelled, or a cancel request already pending: nothing changes */
  | 'noop'
  /** succeeded, failed, partially_succeeded: 409 */
  | 'finished';

export function cancelOutcome(status: TaskStatus, cancelRequested: boolean): CancelOutcome {
  switch (status) {
    case 'queued':
      return 'cancel_now';
    case 'validating':
    case 'running':
      return cancelRequested ? 'noop' : 'request_cancel';
    case 'cancelled':
      return 'noop';
    default:
      return 'finished';
  }
}

export interface TaskLinks {
  task: string;
  events: string;
  import: string | null;
  import_results: string | null;
  export: string | null;
  export_output: string | null;
}

/** The links member of the Task wire shape: paths for the task's own kind, null otherwise. */
export function taskLinks(id: number, kind: string): TaskLinks {
  return {
    task: `/api/v1/tasks/${id}`,
    events: `/api/v1/tasks/${id}/events`,
    import: kind === 'import' ? `/api/v1/imports/${id}` : null,
    import_results: kind === 'import' ? `/api/v1/imports/${id}/results` : null,
    export: kind === 'export' ? `/api/v1/exports/${id}` : null,
    export_output: kind === 'export' ? `/api/v1/exports/${id}/output` : null,
  };
}

/**
 * The Idempotency-Key header of a task submission: absent → null; empty or longer than 255 bytes
 * (UTF-8) → 400.
 */
export function parseIdempotencyKey(raw: string | undefined | null): string | null {
  if (raw === undefined || raw === null) return null;
  const bytes = Buffer.byteLength(raw, 'utf8');
  if (bytes === 0 || bytes > MAX_IDEMPOTENCY_KEY_BYTES) {
    throw badRequest(`Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_BYTES} bytes (got ${bytes})`, [
      { path: 'header.Idempotency-Key', message: `must be 1 to ${MAX_IDEMPOTENCY_KEY_BYTES} bytes` },
    ]);
  }
  return raw;
}

/** What "the same submission" means: the same kind and the same canonical request document. */
export function submissionHash(kind: string, request: unknown): string {
  return createHash('sha256').update(canonicalJson({ kind, request })).digest('hex');
}
