import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const eventSubscriptionsHandlers = {
  listCollectionEventSubscriptions: pending('listCollectionEventSubscriptions'),
  createCollectionEventSubscription: pending('createCollectionEventSubscription'),
  getCollectionEventSubscription: pending('getCollectionEventSubscription'),
  deleteCollectionEventSubscription: pending('deleteCollectionEventSubscription'),
  updateCollectionEventSubscription: pending('updateCollectionEventSubscription'),
  listSystemEventSubscriptions: pending('listSystemEventSubscriptions'),
  createSystemEventSubscription: pending('createSystemEventSubscription'),
  getSystemEventSubscription: pending('getSystemEventSubscription'),
  deleteSystemEventSubscription: pending('deleteSystemEventSubscription'),
  updateSystemEventSubscription: pending('updateSystemEventSubscription'),
} satisfies Partial<HandlerMap>;
