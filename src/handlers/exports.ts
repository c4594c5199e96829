import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const exportsHandlers = {
  createExport: pending('createExport'),
  getExport: pending('getExport'),
  getExportOutput: pending('getExportOutput'),
} satisfies Partial<HandlerMap>;
