import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const computedFieldsHandlers = {
  listClassComputedFields: pending('listClassComputedFields'),
  createClassComputedField: pending('createClassComputedField'),
  getClassComputedField: pending('getClassComputedField'),
  deleteClassComputedField: pending('deleteClassComputedField'),
  updateClassComputedField: pending('updateClassComputedField'),
  listMyComputedFields: pending('listMyComputedFields'),
  createMyComputedField: pending('createMyComputedField'),
  getMyComputedField: pending('getMyComputedField'),
  deleteMyComputedField: pending('deleteMyComputedField'),
  updateMyComputedField: pending('updateMyComputedField'),
} satisfies Partial<HandlerMap>;
