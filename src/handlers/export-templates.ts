import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const exportTemplatesHandlers = {
  listExportTemplates: pending('listExportTemplates'),
  createExportTemplate: pending('createExportTemplate'),
  getExportTemplate: pending('getExportTemplate'),
  deleteExportTemplate: pending('deleteExportTemplate'),
  updateExportTemplate: pending('updateExportTemplate'),
  runExportTemplate: pending('runExportTemplate'),
} satisfies Partial<HandlerMap>;
