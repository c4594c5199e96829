// Tasks: the row as the database returns it and its wire view. Pure functions (no SQL).
import { taskLinks, type TaskKind, type TaskLinks, type TaskStatus } from '../tasks.ts';

export interface TaskProgress {
  total_items: number;
  processed_items: number;
  success_items: number;
  failed_items: number;
}

export interface TaskRow {
  [key: string]: unknown;
  id: number;
  kind: TaskKind;
  status: TaskStatus;
  submitted_by: number;
  cancel_requested: boolean;
  progress: Partial<TaskProgress> | null;
  summary: unknown;
  details: unknown;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

export interface TaskWire {
  id: number;
  kind: TaskKind;
  status: TaskStatus;
  submitted_by: number;
  cancel_requested: boolean;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  progress: TaskProgress;
  summary: unknown;
  links: TaskLinks;
  details: unknown;
}

/** A progress figure as stored (a missing or bad value counts as 0). */
export function progressCount(v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : 0;
}

/** The Task wire shape (components.schemas.Task); every task-returning endpoint uses it. */
export function toTaskWire(r: TaskRow): TaskWire {
  const p = r.progress ?? {};
  return {
    id: r.id,
    kind: r.kind,
    status: r.status,
    submitted_by: r.submitted_by,
    cancel_requested: r.cancel_requested,
    created_at: r.created_at,
    started_at: r.started_at,
    finished_at: r.finished_at,
    progress: {
      total_items: progressCount(p.total_items),
      processed_items: progressCount(p.processed_items),
      success_items: progressCount(p.success_items),
      failed_items: progressCount(p.failed_items),
    },
    summary: r.summary ?? null,
    links: taskLinks(r.id, r.kind),
    details: r.details ?? null,
  };
}

/** The audit snapshot of a task (no request document, no scope snapshot, no output). */
export function taskSnapshot(r: TaskRow): Record<string, unknown> {
  const w = toTaskWire(r);
  return {
    id: w.id,
    kind: w.kind,
    status: w.status,
    submitted_by: w.submitted_by,
    cancel_requested: w.cancel_requested,
    created_at: w.created_at,
    started_at: w.started_at,
    finished_at: w.finished_at,
    progress: w.progress,
  };
}
