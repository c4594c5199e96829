import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const eventsHandlers = {
  listEvents: pending('listEvents'),
  listUserEvents: pending('listUserEvents'),
  listGroupEvents: pending('listGroupEvents'),
  listClassEvents: pending('listClassEvents'),
  listObjectEvents: pending('listObjectEvents'),
  listExportTemplateEvents: pending('listExportTemplateEvents'),
  listRemoteTargetEvents: pending('listRemoteTargetEvents'),
  listCollectionEvents: pending('listCollectionEvents'),
} satisfies Partial<HandlerMap>;
