import type { HandlerMap } from '../http/contract.ts';
import { authOf, callerOf } from '../http/contract.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { collectionWhere } from '../db/authz.ts';
import { EXPORT_TEMPLATE_LIST_SPEC, listExportTemplateRows, readExportTemplateAs } from '../db/export-templates.ts';
import { exportTemplateView, type ExportTemplateRow } from '../domain/views/export-templates.ts';
import { templateFieldsFromNew, type PatchBody } from '../domain/exports.ts';
import { templateLimits } from '../domain/templates.ts';
import { mergeMembers } from '../domain/json-patch.ts';
import { submitExport } from './exports.ts';
import { inTx } from '../mutations/context.ts';
import { createExportTemplate, deleteExportTemplate, updateExportTemplate } from '../mutations/export-templates.ts';

const KIND = 'export_template';

function ok<S extends number>(status: S, row: ExportTemplateRow, extra: Record<string, string> = {}) {
  return { status, body: exportTemplateView(row), headers: etagHeader(KIND, row.id, row.revision, extra) };
}

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
    const rules = { limits: templateLimits(ctx.deps.config) };
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) => createExportTemplate(m, fields, rules));
    return ok(201, row, { location: `/api/v1/export-templates/${row.id}` });
  },

  getExportTemplate: async (input, ctx) => {
    return ok(200, await readExportTemplateAs(ctx.deps.sql, authOf(ctx), input.params.template_id, 'ReadTemplate'));
  },

  updateExportTemplate: async (input, ctx) => {
    const rules = { limits: templateLimits(ctx.deps.config) };
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      updateExportTemplate(m, input.params.template_id, input.body as PatchBody, rules, input.headers['if-match']),
    );
    return ok(200, row);
  },

  deleteExportTemplate: async (input, ctx) => {
    await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteExportTemplate(m, input.params.template_id, input.headers['if-match']));
    return { status: 204 };
  },

  runExportTemplate: async (input, ctx) => {
    const request = mergeMembers(input.body as Record<string, unknown>, { template_id: input.params.template_id });
    return submitExport(ctx, request, input.headers);
  },
} satisfies Partial<HandlerMap>;
