// Task events (a task's own history): the row as the database returns it and its wire view. Pure functions (no SQL).
import type { ResponseBody } from '../wire.ts';

export interface TaskEventRow {
  [key: string]: unknown;
  id: number;
  task_id: number;
  event_type: string;
  message: string;
  data: unknown;
  created_at: Date;
}

export function taskEventWire(r: TaskEventRow): ResponseBody<'listTaskEvents', 200>[number] {
  return { id: r.id, task_id: r.task_id, event_type: r.event_type, message: r.message, data: r.data ?? null, created_at: r.created_at };
}
