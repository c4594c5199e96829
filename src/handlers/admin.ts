import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const adminHandlers = {
  getAdminConfig: pending('getAdminConfig'),
} satisfies Partial<HandlerMap>;
