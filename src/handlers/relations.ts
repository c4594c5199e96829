import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const relationsHandlers = {
  listRelatedClasses: pending('listRelatedClasses'),
  listRelatedObjects: pending('listRelatedObjects'),
  listClassRelations: pending('listClassRelations'),
  createClassRelation: pending('createClassRelation'),
  getClassRelation: pending('getClassRelation'),
  deleteClassRelation: pending('deleteClassRelation'),
  listObjectRelations: pending('listObjectRelations'),
  createObjectRelation: pending('createObjectRelation'),
  getObjectRelation: pending('getObjectRelation'),
  deleteObjectRelation: pending('deleteObjectRelation'),
} satisfies Partial<HandlerMap>;
