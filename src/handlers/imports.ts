import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const importsHandlers = {
  createImport: pending('createImport'),
  getImport: pending('getImport'),
  listImportResults: pending('listImportResults'),
} satisfies Partial<HandlerMap>;
