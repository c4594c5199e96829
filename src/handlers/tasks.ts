import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const tasksHandlers = {
  listTasks: pending('listTasks'),
  getTask: pending('getTask'),
  cancelTask: pending('cancelTask'),
  listTaskEvents: pending('listTaskEvents'),
} satisfies Partial<HandlerMap>;
