import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const restoresHandlers = {
  createRestore: pending('createRestore'),
  confirmRestore: pending('confirmRestore'),
  getRestoreStatus: pending('getRestoreStatus'),
} satisfies Partial<HandlerMap>;
