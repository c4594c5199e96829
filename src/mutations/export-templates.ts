// Export templates (and fragments): the one write path, for the API and the import worker alike
// (the shared shape of collection-owned resources, src/mutations/collection-resources.ts). A
// template is checked with the fragments it includes, which must be fragments of its collection.
import { applyTemplatePatch, sameTemplateFields, type PatchBody, type TemplateFields } from '../domain/exports.ts';
import type { TemplateLimits } from '../domain/templates.ts';
import {
  insertExportTemplate,
  lockExportTemplateAs,
  updateExportTemplate as updateExportTemplateRow,
  validateTemplateWithIncludes,
} from '../db/export-templates.ts';
import { exportTemplateEvent, exportTemplateFields, type ExportTemplateRow } from '../domain/views/export-templates.ts';
import {
  createInCollection,
  deleteInCollection,
  updateInCollection,
  type CollectionResource,
  type Validate,
} from './collection-resources.ts';
import type { MutationContext, Written } from './context.ts';

/**
 * The rules of a template write: the template engine's limits, and where the template member sits
 * in the caller's input (error details name it): `body.template` for the API, `template` for an
 * import item.
 */
export interface TemplateRules {
  limits: TemplateLimits;
  templatePath?: string;
}

const EXPORT_TEMPLATE: CollectionResource<ExportTemplateRow, TemplateFields> = {
  kind: 'export_template',
  table: 'export_templates',
  perms: { create: 'CreateTemplate', update: 'UpdateTemplate', delete: 'DeleteTemplate' },
  lockAs: lockExportTemplateAs,
  fields: exportTemplateFields,
  applyPatch: (f, body) => applyTemplatePatch(f, body as PatchBody),
  same: sameTemplateFields,
  insert: insertExportTemplate,
  update: updateExportTemplateRow,
  event: exportTemplateEvent,
};

const validate =
  (rules: TemplateRules): Validate<TemplateFields> =>
  (tx, f) =>
    validateTemplateWithIncludes(tx, f, rules.limits, rules.templatePath ?? 'body.template');

export function createExportTemplate(m: MutationContext, fields: TemplateFields, rules: TemplateRules): Promise<ExportTemplateRow> {
  return createInCollection(m, EXPORT_TEMPLATE, fields, validate(rules));
}

export function updateExportTemplate(
  m: MutationContext,
  id: number,
  patch: PatchBody,
  rules: TemplateRules,
  ifMatch?: string,
): Promise<Written<ExportTemplateRow>> {
  return updateInCollection(m, EXPORT_TEMPLATE, id, patch, validate(rules), ifMatch);
}

export function deleteExportTemplate(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  return deleteInCollection(m, EXPORT_TEMPLATE, id, ifMatch);
}
