import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const collectionsHandlers = {
  listCollections: pending('listCollections'),
  createCollection: pending('createCollection'),
  getCollection: pending('getCollection'),
  deleteCollection: pending('deleteCollection'),
  updateCollection: pending('updateCollection'),
  listCollectionAncestors: pending('listCollectionAncestors'),
  listCollectionChildren: pending('listCollectionChildren'),
  updateCollectionParent: pending('updateCollectionParent'),
} satisfies Partial<HandlerMap>;
