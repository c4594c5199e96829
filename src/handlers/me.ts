import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const meHandlers = {
  getMe: pending('getMe'),
} satisfies Partial<HandlerMap>;
