// Export templates: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import type { NewEvent } from '../new-event.ts';
import { type TemplateFields } from '../exports.ts';
import type { ResponseBody } from '../wire.ts';

export interface ExportTemplateRow extends TemplateFields {
  [key: string]: unknown;
  id: number;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/** The stored, user-controlled members of a template. */
export function exportTemplateFields(r: ExportTemplateRow): TemplateFields {
  return {
    collection_id: r.collection_id,
    name: r.name,
    description: r.description,
    kind: r.kind,
    content_type: r.content_type,
    template: r.template,
    default_query: r.default_query,
  };
}

/** The public representation (components.schemas.ExportTemplate); also the audit snapshot. */
export function exportTemplateView(r: ExportTemplateRow): ResponseBody<'getExportTemplate', 200> {
  return Object.assign({ id: r.id }, exportTemplateFields(r), {
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  });
}

/** The audit event of a template change; a deleted template has no after snapshot. */
export function exportTemplateEvent(
  row: ExportTemplateRow,
  action: string,
  before: ExportTemplateRow | null,
  related: number[] = [],
): NewEvent {
  return {
    entityType: 'export_template',
    entityId: row.id,
    entityName: row.name,
    collectionId: row.collection_id,
    relatedCollectionIds: related,
    action,
    summary: `export template ${row.name} ${action}`,
    before: before ? exportTemplateView(before) : null,
    after: action === 'deleted' ? null : exportTemplateView(row),
    beforeRevision: before?.revision ?? null,
    afterRevision: action === 'deleted' ? null : row.revision,
  };
}
