import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const objectsHandlers = {
  aggregateObjectsByClassName: pending('aggregateObjectsByClassName'),
  listObjectsByClassName: pending('listObjectsByClassName'),
  createObjectByClassName: pending('createObjectByClassName'),
  getObjectByName: pending('getObjectByName'),
  deleteObjectByName: pending('deleteObjectByName'),
  updateObjectByName: pending('updateObjectByName'),
  aggregateObjects: pending('aggregateObjects'),
  listObjects: pending('listObjects'),
  createObject: pending('createObject'),
  getObject: pending('getObject'),
  deleteObject: pending('deleteObject'),
  updateObject: pending('updateObject'),
  patchObjectData: pending('patchObjectData'),
} satisfies Partial<HandlerMap>;
