import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const eventSinksHandlers = {
  listEventSinks: pending('listEventSinks'),
  createEventSink: pending('createEventSink'),
  getEventSink: pending('getEventSink'),
  deleteEventSink: pending('deleteEventSink'),
  updateEventSink: pending('updateEventSink'),
  previewEventSink: pending('previewEventSink'),
  testEventSink: pending('testEventSink'),
} satisfies Partial<HandlerMap>;
