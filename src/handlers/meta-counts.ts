import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const metaCountsHandlers = {
  getMetaCounts: pending('getMetaCounts'),
} satisfies Partial<HandlerMap>;
