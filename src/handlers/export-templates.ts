import type { HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
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
import { applyTemplatePatch, sameTemplateFields, templateFieldsFromNew, type PatchBody } from '../domain/exports.ts';
import { templateLimits } from '../domain/templates.ts';
import { submitExport } from './exports.ts';

const KIND = 'export_template';

function ok(status: number, row: ExportTemplateRow, extra: Record<string, string> = {}) {
  return { status, body: exportTemplateView(row), headers: { ...etagHeader(KIND, row.id, row.revision), ...extra } };
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
    const auth = authOf(ctx);
    const fields = templateFieldsFromNew(input.body as Parameters<typeof templateFieldsFromNew>[0]);
    const row = await withTx(ctx.deps.sql, async (tx) => {
      await requireCollectionPermission(tx, auth, fields.collection_id, 'CreateTemplate');
      await validateTemplateWithIncludes(tx, fields, templateLimits(ctx.deps.config), 'body.template');
      const created = await insertExportTemplate(tx, fields);
      await appendEvent(tx, actorOf(ctx), exportTemplateEvent(created, 'created', null));
      return created;
    });
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
    const auth = authOf(ctx);
    const id = input.params.template_id;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const current = await findExportTemplate(tx, id);
      if (!current) throw notFound('export template');
      await requireCollectionPermission(tx, auth, current.collection_id, 'UpdateTemplate');
      const before = await lockExportTemplate(tx, id);
      if (!before) throw notFound('export template');
      if (before.collection_id !== current.collection_id) {
        await requireCollectionPermission(tx, auth, before.collection_id, 'UpdateTemplate');
      }
      checkIfMatch(input.headers, KIND, before.id, before.revision);
      const next = applyTemplatePatch(templateRowFields(before), input.body as PatchBody);
      if (sameTemplateFields(next, templateRowFields(before))) return before;
      if (next.collection_id !== before.collection_id) {
        await requireCollectionPermission(tx, auth, next.collection_id, 'CreateTemplate');
      }
      await validateTemplateWithIncludes(tx, next, templateLimits(ctx.deps.config), 'body.template');
      const after = await updateExportTemplateRow(tx, id, next);
      const moved = after.collection_id !== before.collection_id;
      await appendEvent(tx, actorOf(ctx), {
        ...exportTemplateEvent(after, 'updated', before, moved ? [before.collection_id] : []),
        ...(moved ? { metadata: { from_collection_id: before.collection_id, to_collection_id: after.collection_id } } : {}),
      });
      return after;
    });
    return ok(200, row);
  },

  deleteExportTemplate: async (input, ctx) => {
    const auth = authOf(ctx);
    const id = input.params.template_id;
    await withTx(ctx.deps.sql, async (tx) => {
      const current = await findExportTemplate(tx, id);
      if (!current) throw notFound('export template');
      await requireCollectionPermission(tx, auth, current.collection_id, 'DeleteTemplate');
      const before = await lockExportTemplate(tx, id);
      if (!before) throw notFound('export template');
      if (before.collection_id !== current.collection_id) {
        await requireCollectionPermission(tx, auth, before.collection_id, 'DeleteTemplate');
      }
      checkIfMatch(input.headers, KIND, before.id, before.revision);
      await deleteExportTemplateRow(tx, id);
      await appendEvent(tx, actorOf(ctx), exportTemplateEvent(before, 'deleted', before));
    });
    return { status: 204 };
  },

  runExportTemplate: async (input, ctx) =>
    submitExport(ctx, { ...(input.body as Record<string, unknown>), template_id: input.params.template_id }, input.headers),
} satisfies Partial<HandlerMap>;
