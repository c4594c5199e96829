import type { HandlerMap } from '../http/contract.ts';
import { authOf } from '../http/contract.ts';
import { notFound } from '../http/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { collectionWhere, requireCollectionPermission } from '../db/authz.ts';
import {
  EXPORT_TEMPLATE_LIST_SPEC,
  deleteExportTemplateRow,
  exportTemplateView,
  findExportTemplate,
  insertExportTemplate,
  listExportTemplateRows,
  lockExportTemplate,
  validateTemplateWithIncludes,
  exportTemplateEvent,
  templateRowFields,
  updateExportTemplateRow,
  type ExportTemplateRow,
} from '../db/export-templates.ts';
import { applyTemplatePatch, sameTemplateFields, templateFieldsFromNew, type PatchBody, type TemplateFields } from '../domain/exports.ts';
import { templateLimits } from '../domain/templates.ts';
import { submitExport } from './exports.ts';
import { createInCollection, deleteInCollection, updateInCollection, type CollectionResource } from './collection-resources.ts';

const KIND = 'export_template';

function ok(status: number, row: ExportTemplateRow, extra: Record<string, string> = {}) {
  return { status, body: exportTemplateView(row), headers: { ...etagHeader(KIND, row.id, row.revision), ...extra } };
}

const EXPORT_TEMPLATE: CollectionResource<ExportTemplateRow, TemplateFields> = {
  kind: KIND,
  label: 'export template',
  perms: { create: 'CreateTemplate', update: 'UpdateTemplate', delete: 'DeleteTemplate' },
  find: findExportTemplate,
  lock: lockExportTemplate,
  fields: templateRowFields,
  applyPatch: (f, body) => applyTemplatePatch(f, body as PatchBody),
  same: sameTemplateFields,
  validate: (tx, f, ctx) => validateTemplateWithIncludes(tx, f, templateLimits(ctx.deps.config), 'body.template'),
  insert: insertExportTemplate,
  update: updateExportTemplateRow,
  remove: deleteExportTemplateRow,
  event: exportTemplateEvent,
};

export const exportTemplatesHandlers = {
  listExportTemplates: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const parsed = parseListQuery(input.query, EXPORT_TEMPLATE_LIST_SPEC);
    const page = await listExportTemplateRows(db, parsed, [collectionWhere(db, auth, 'ReadTemplate', { id: 'et.collection_id' })]);
    return listReply(page, page.rows.map(exportTemplateView));
  },

  createExportTemplate: async (input, ctx) => {
    const fields = templateFieldsFromNew(input.body as Parameters<typeof templateFieldsFromNew>[0]);
    const row = await withTx(ctx.deps.sql, (tx) => createInCollection(tx, ctx, EXPORT_TEMPLATE, fields));
    return ok(201, row, { location: `/api/v1/export-templates/${row.id}` });
  },

  getExportTemplate: async (input, ctx) => {
    const auth = authOf(ctx);
    const row = await findExportTemplate(ctx.deps.sql, input.params.template_id);
    if (!row) throw notFound('export template');
    await requireCollectionPermission(ctx.deps.sql, auth, row.collection_id, 'ReadTemplate');
    return ok(200, row);
  },

  updateExportTemplate: async (input, ctx) => {
    const row = await withTx(ctx.deps.sql, (tx) =>
      updateInCollection(tx, ctx, EXPORT_TEMPLATE, input.params.template_id, input.headers, input.body),
    );
    return ok(200, row);
  },

  deleteExportTemplate: async (input, ctx) => {
    await withTx(ctx.deps.sql, (tx) => deleteInCollection(tx, ctx, EXPORT_TEMPLATE, input.params.template_id, input.headers));
    return { status: 204 };
  },

  runExportTemplate: async (input, ctx) =>
    submitExport(ctx, { ...(input.body as Record<string, unknown>), template_id: input.params.template_id }, input.headers),
} satisfies Partial<HandlerMap>;
