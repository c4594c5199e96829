import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const eventDeliveriesHandlers = {
  listEventDeliveries: pending('listEventDeliveries'),
  getEventDeliveryHealth: pending('getEventDeliveryHealth'),
  getEventDelivery: pending('getEventDelivery'),
  markEventDeliveryDead: pending('markEventDeliveryDead'),
  retryEventDelivery: pending('retryEventDelivery'),
} satisfies Partial<HandlerMap>;
