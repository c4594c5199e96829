// Export templates (and fragments): SQL only. Rules are in src/domain/exports.ts and the engine in
// src/domain/templates.ts.
import { textPart, type Db, type TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { badRequest, type ErrorDetail } from '../domain/errors.ts';
import { CONTENT_TYPES, TEMPLATE_KINDS, validateTemplateFields, type TemplateFields } from '../domain/exports.ts';
import type { TemplateLimits } from '../domain/templates.ts';
import { type ExportTemplateRow } from '../domain/views/export-templates.ts';
import type { Authority, Permission } from '../domain/authz.ts';
import { readInCollectionAs } from './authz.ts';

export const EXPORT_TEMPLATE_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'et.id', notNull: true },
    name: { type: 'text', column: 'et.name', notNull: true },
    description: { type: 'text', column: 'et.description', notNull: true },
    collection_id: { type: 'integer', column: 'et.collection_id', notNull: true },
    kind: { type: 'text', column: 'et.kind', values: TEMPLATE_KINDS, notNull: true },
    content_type: { type: 'text', column: 'et.content_type', values: CONTENT_TYPES, notNull: true },
    created_at: { type: 'timestamp', column: 'et.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'et.updated_at', notNull: true },
    revision: { type: 'integer', column: 'et.revision', notNull: true },
  },
  aliases: { collections: 'collection_id' },
  defaultSort: [{ field: 'id', desc: false }],
};

const EXPORT_TEMPLATE_COLUMN_LIST =
  'et.id, et.collection_id, et.name, et.description, et.kind, et.content_type, et.template, et.default_query, et.created_at, et.updated_at, et.revision';

function cols(db: Db): Fragment {
  return textPart(db, EXPORT_TEMPLATE_COLUMN_LIST) as Fragment;
}

export function listExportTemplateRows(db: Db, parsed: ParsedList, where: Fragment[]): Promise<ListPage<ExportTemplateRow>> {
  return runList<ExportTemplateRow>(db, {
    from: db`export_templates et` as Fragment,
    select: cols(db),
    where,
    parsed,
    spec: EXPORT_TEMPLATE_LIST_SPEC,
  });
}

/** The template and the check of `perm` on its collection, in one statement: 404 or 403 otherwise. */
export function readExportTemplateAs(db: Db, auth: Authority, id: number, perm: Permission): Promise<ExportTemplateRow> {
  return readInCollectionAs<ExportTemplateRow>(db, auth, perm, 'export template', {
    columns: cols(db),
    from: db`export_templates et` as Fragment,
    where: db`et.id = ${id}::int` as Fragment,
    collection: 'et.collection_id',
  });
}

export async function findExportTemplate(db: Db, id: number): Promise<ExportTemplateRow | undefined> {
  const [row] = await db<ExportTemplateRow[]>`select ${cols(db)} from export_templates et where et.id = ${id}::int`;
  return row;
}

export async function lockExportTemplate(tx: TransactionSql, id: number): Promise<ExportTemplateRow | undefined> {
  const [row] = await tx<ExportTemplateRow[]>`select ${cols(tx)} from export_templates et where et.id = ${id}::int for update`;
  return row;
}

/** Name and kind of the named templates of a collection (to check includes when saving). */
async function templateKindsByName(db: Db, collectionId: number, names: string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = await db<{ name: string; kind: string }[]>`
    select et.name, et.kind from export_templates et
    where et.collection_id = ${collectionId}::int and et.name = any(${names}::text[])`;
  return new Map(rows.map((r) => [r.name, r.kind]));
}

/**
 * Syntax (400) and includes: every included name must be a fragment of the template's own
 * collection (a fragment may include itself by its own name; the depth bound stops the recursion).
 * `path` names the template member in the error details.
 */
export async function validateTemplateWithIncludes(db: Db, f: TemplateFields, limits: TemplateLimits, path: string): Promise<void> {
  const compiled = validateTemplateFields(f, limits);
  const others = compiled.includes.filter((n) => !(n === f.name && f.kind === 'fragment'));
  const kinds = await templateKindsByName(db, f.collection_id, others);
  const details: ErrorDetail[] = [];
  for (const name of others) {
    const kind = kinds.get(name);
    if (kind === undefined) details.push({ path, message: `includes ${JSON.stringify(name)}, which is no fragment of this collection` });
    else if (kind !== 'fragment') {
      details.push({ path, message: `includes ${JSON.stringify(name)}, an export template (only fragments can be included)` });
    }
  }
  if (details.length) throw badRequest('the export template is invalid', details);
}

/** The sources of the named fragments of a collection (kind fragment only). */
export async function fragmentSources(db: Db, collectionId: number, names: string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = await db<{ name: string; template: string }[]>`
    select et.name, et.template from export_templates et
    where et.collection_id = ${collectionId}::int and et.kind = 'fragment' and et.name = any(${names}::text[])`;
  return new Map(rows.map((r) => [r.name, r.template]));
}

export async function insertExportTemplate(tx: TransactionSql, f: TemplateFields): Promise<ExportTemplateRow> {
  const [row] = await tx<ExportTemplateRow[]>`
    insert into export_templates as et (collection_id, name, description, kind, content_type, template, default_query)
    values (${f.collection_id}::int, ${f.name}, ${f.description}, ${f.kind}, ${f.content_type}, ${f.template},
      ${f.default_query}::text)
    returning ${cols(tx)}`;
  return row!;
}

export async function updateExportTemplateRow(tx: TransactionSql, id: number, f: TemplateFields): Promise<ExportTemplateRow> {
  const [row] = await tx<ExportTemplateRow[]>`
    update export_templates et set collection_id = ${f.collection_id}::int, name = ${f.name}, description = ${f.description},
      kind = ${f.kind}, content_type = ${f.content_type}, template = ${f.template}, default_query = ${f.default_query}::text,
      updated_at = now(), revision = et.revision + 1
    where et.id = ${id}::int
    returning ${cols(tx)}`;
  return row!;
}

export async function deleteExportTemplateRow(tx: TransactionSql, id: number): Promise<void> {
  await tx`delete from export_templates where id = ${id}::int`;
}
