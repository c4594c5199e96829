import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const eventsHandlers = {
  listEvents: pending('listEvents'),
} satisfies Partial<HandlerMap>;
