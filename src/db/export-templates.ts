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
import { lockInCollectionAs, readInCollectionAs } from './authz.ts';
import { writeWithEvents } from './events.ts';
import type { Final } from './tx.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';

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

/** The template `id` as readInCollectionAs and lockInCollectionAs read it. */
function templateById(db: Db, id: number) {
  return {
    columns: cols(db),
    from: db`export_templates et` as Fragment,
    where: db`et.id = ${id}::int` as Fragment,
    collection: 'et.collection_id',
  };
}

/** The template and the check of `perm` on its collection, in one statement: 404 or 403 otherwise. */
export function readExportTemplateAs(db: Db, auth: Authority, id: number, perm: Permission): Promise<ExportTemplateRow> {
  return readInCollectionAs<ExportTemplateRow>(db, auth, perm, 'export template', templateById(db, id));
}

export async function findExportTemplate(db: Db, id: number): Promise<ExportTemplateRow | undefined> {
  const [row] = await db<ExportTemplateRow[]>`select ${cols(db)} from export_templates et where et.id = ${id}::int`;
  return row;
}

/** The template locked for a write, with now() and the check of `perm` on its collection: 404 or 403 otherwise. */
export function lockExportTemplateAs(tx: TransactionSql, auth: Authority, id: number, perm: Permission) {
  return lockInCollectionAs<ExportTemplateRow>(tx, auth, perm, 'export template', Object.assign(templateById(tx, id), { lock: 'et' }));
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

/** Inserts the template `t` (its id and times reserved: reserveId) with its audit events, in one statement. */
export function insertExportTemplate(
  tx: TransactionSql,
  actor: Actor,
  t: ExportTemplateRow,
  events: NewEvent[],
  final?: Final,
): Promise<ExportTemplateRow> {
  const write = tx`
    insert into export_templates as et (id, collection_id, name, description, kind, content_type, template, default_query)
    values (${t.id}::int, ${t.collection_id}::int, ${t.name}, ${t.description}, ${t.kind}, ${t.content_type}, ${t.template},
      ${t.default_query}::text)
    returning ${cols(tx)}` as Fragment;
  return writeWithEvents(tx, actor, write, events, final);
}

/** Writes `t` over the locked template of its id (updated_at now(), the revision one up) with its audit events, in one statement. */
export function updateExportTemplate(
  tx: TransactionSql,
  actor: Actor,
  t: ExportTemplateRow,
  events: NewEvent[],
  final?: Final,
): Promise<ExportTemplateRow> {
  const write = tx`
    update export_templates et set collection_id = ${t.collection_id}::int, name = ${t.name}, description = ${t.description},
      kind = ${t.kind}, content_type = ${t.content_type}, template = ${t.template}, default_query = ${t.default_query}::text,
      updated_at = now(), revision = et.revision + 1
    where et.id = ${t.id}::int
    returning ${cols(tx)}` as Fragment;
  return writeWithEvents(tx, actor, write, events, final);
}
