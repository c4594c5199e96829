import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const classesHandlers = {
  listClasses: pending('listClasses'),
  createClass: pending('createClass'),
  getClassByName: pending('getClassByName'),
  deleteClassByName: pending('deleteClassByName'),
  updateClassByName: pending('updateClassByName'),
  getClass: pending('getClass'),
  deleteClass: pending('deleteClass'),
  updateClass: pending('updateClass'),
} satisfies Partial<HandlerMap>;
