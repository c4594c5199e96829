// Exports: SQL only. An export reads one of the lists (collections, classes, objects of a class,
// class relations, object relations, objects related to an object) through the very list code of
// those endpoints: the same query language, visibility in SQL (grants ∩ token scope), keyset
// pages and wire representations. Rules are in src/domain/exports.ts.
import type { Db, TransactionSql } from './sql.ts';
import type { Fragment, ListPage } from './list.ts';
import { parseListQuery, type ParsedList } from '../domain/list-query.ts';
import { badRequest } from '../domain/errors.ts';
import type { Authority } from '../domain/authz.ts';
import type { ExportScope } from '../domain/exports.ts';
import { classRelationView, ignoredObjectClasses, objectRelationView, parseDepth } from '../domain/relations.ts';
import { classWhere, collectionWhere, objectWhere, permissionsFilter, requireClassPermission, requireObjectPermission } from './authz.ts';
import { COLLECTION_LIST_SPEC, listCollectionRows } from './collections.ts';
import { collectionView } from '../domain/views/collections.ts';
import { CLASS_LIST_SPEC, listClasses } from './classes.ts';
import { classExpandedView } from '../domain/views/classes.ts';
import { listObjects, parseObjectQuery } from './objects.ts';
import { objectView } from '../domain/views/objects.ts';
import { activeFields } from './computed-fields.ts';
import {
  CLASS_RELATION_LIST_SPEC,
  OBJECT_RELATION_LIST_SPEC,
  classRelationWhere,
  listClassRelationRows,
  listObjectRelationRows,
  objectRelationWhere,
} from './relations.ts';
import { RELATED_OBJECT_LIST_SPEC, listRelatedObjectRows, traverseObjects } from './traversal.ts';
// Registers the related.<alias>.* object filters, as the object list does.

/** Who exports: an authority (live grants ∩ token scope) and the principal's kind (personal computed fields). */
export type Exporter = Authority & { principal: { id: number; kind: 'human' | 'service_account' } };

export interface ExportPage {
  rows: Record<string, unknown>[];
  /** Sort values of the last row when more rows follow. */
  next: unknown[] | null;
  total: number | null;
}

/** One list of the export, bound to a database handle (a transaction in the worker). */
export interface ExportSource {
  /** Collection the export reads from, when it reads from one (the task's audit events attach to it). */
  collectionId: number | null;
  /** The page after `after` (null: the first page) of at most `limit` rows; `includeTotal` counts all matches. */
  page(after: unknown[] | null, limit: number, includeTotal: boolean): Promise<ExportPage>;
}

/** The sort values inside a list cursor (src/domain/list-query.ts encodeCursor). */
function cursorValues(cursor: string | null): unknown[] | null {
  if (cursor === null) return null;
  return (JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { v: unknown[] }).v;
}

function pageOf(parsed: ParsedList, after: unknown[] | null, limit: number, includeTotal: boolean): ParsedList {
  return Object.assign({}, parsed, { cursor: after, limit, includeTotal });
}

function toPage<T>(page: ListPage<T>, view: (row: T) => Record<string, unknown>): ExportPage {
  return { rows: page.rows.map(view), next: cursorValues(page.nextCursor), total: page.total };
}

function optionalId(raw: unknown, param: string): number | null {
  if (raw === undefined) return null;
  const s = String(raw);
  const n = /^\d+$/.test(s) ? Number(s) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > 2 ** 31 - 1) {
    throw badRequest(`${param} must be a positive integer`, [{ path: `body.query.${param}`, message: 'positive integer' }]);
  }
  return n;
}

/**
 * Prepares the list of an export: parses `query` with that list's rules (400), checks the
 * permission the list endpoint needs on its path resource (objects: ReadClass on the class;
 * related objects: ReadObject on the start object; 403/404). Rows are filtered by the exporter's
 * read permissions in SQL on every page.
 */
export async function openExportSource(db: Db, who: Exporter, scope: ExportScope, query: Record<string, unknown>): Promise<ExportSource> {
  switch (scope.kind) {
    case 'collections': {
      const parsed = parseListQuery(query, COLLECTION_LIST_SPEC);
      const where: Fragment[] = [
        collectionWhere(db, who, 'ReadCollection'),
        ...permissionsFilter(parsed.extras.permissions, (p) => collectionWhere(db, who, p)),
      ];
      return {
        collectionId: null,
        page: async (after, limit, total) =>
          toPage(await listCollectionRows(db, pageOf(parsed, after, limit, total), where), collectionView),
      };
    }
    case 'classes': {
      const parsed = parseListQuery(query, CLASS_LIST_SPEC);
      const cols = { id: 'k.id', collectionId: 'k.collection_id' };
      const where: Fragment[] = [
        classWhere(db, who, 'ReadClass', cols),
        ...permissionsFilter(parsed.extras.permissions, (p) => classWhere(db, who, p, cols)),
      ];
      return {
        collectionId: null,
        page: async (after, limit, total) => toPage(await listClasses(db, pageOf(parsed, after, limit, total), where), classExpandedView),
      };
    }
    case 'objects_in_class': {
      const classId = scope.class_id;
      // the check and the class's computed fields go out together (one round trip); the check decides first
      const checking = requireClassPermission(db, who, classId, 'ReadClass');
      const reading = activeFields(db, classId, who.principal);
      reading.catch(() => undefined); // awaited below, once the check has passed
      const cls = await checking;
      const active = await reading;
      const q = parseObjectQuery(db, query, active, who, classId);
      const where: Fragment[] = [
        db`o.class_id = ${classId}::int` as Fragment,
        objectWhere(db, who, 'ReadObject'),
        ...permissionsFilter(q.parsed.extras.permissions, (p) => objectWhere(db, who, p)),
      ];
      return {
        collectionId: cls.collection_id,
        page: async (after, limit, total) =>
          toPage(await listObjects(db, Object.assign({}, q, { parsed: pageOf(q.parsed, after, limit, total) }), where, null), objectView),
      };
    }
    case 'class_relations': {
      const parsed = parseListQuery(query, CLASS_RELATION_LIST_SPEC);
      const where: Fragment[] = [
        classRelationWhere(db, who, 'ReadClassRelation'),
        ...permissionsFilter(parsed.extras.permissions, (p) => classRelationWhere(db, who, p)),
      ];
      return {
        collectionId: null,
        page: async (after, limit, total) =>
          toPage(await listClassRelationRows(db, pageOf(parsed, after, limit, total), where), classRelationView),
      };
    }
    case 'object_relations': {
      const parsed = parseListQuery(query, OBJECT_RELATION_LIST_SPEC);
      const where: Fragment[] = [
        objectRelationWhere(db, who, 'ReadObjectRelation'),
        ...permissionsFilter(parsed.extras.permissions, (p) => objectRelationWhere(db, who, p)),
      ];
      return {
        collectionId: null,
        page: async (after, limit, total) =>
          toPage(await listObjectRelationRows(db, pageOf(parsed, after, limit, total), where), objectRelationView),
      };
    }
    case 'related_objects': {
      const parsed = parseListQuery(query, RELATED_OBJECT_LIST_SPEC);
      const depth = parseDepth(parsed.extras.depth);
      const classFilter = optionalId(parsed.extras.class_id, 'class_id');
      const ignoreClassIds = ignoredObjectClasses(parsed.extras, scope.class_id);
      const start = await requireObjectPermission(db, who, scope.object_id, 'ReadObject', { classId: scope.class_id });
      let bfs: Awaited<ReturnType<typeof traverseObjects>> | null = null;
      return {
        collectionId: start.collection_id,
        page: async (after, limit, total) => {
          // The traversal runs once, when the first page is read (never at submission).
          bfs ??= await traverseObjects(db, who, start.id, depth, { ignoreClassIds });
          return toPage(await listRelatedObjectRows(db, bfs, pageOf(parsed, after, limit, total), classFilter), (r) => ({ ...r }));
        },
      };
    }
  }
}

/** The kind of a principal (undefined when it no longer exists). */
export async function principalKind(db: Db, id: number): Promise<'human' | 'service_account' | undefined> {
  const [row] = await db<{ kind: 'human' | 'service_account' }[]>`select kind from principals where id = ${id}::int`;
  return row?.kind;
}

/** Progress of a running export, written only while the claim is still ours. */
export async function setExportProgress(
  db: Db,
  taskId: number,
  claimToken: string,
  progress: { total_items: number; processed_items: number; success_items: number; failed_items: number },
): Promise<void> {
  await db`
    update tasks set progress = ${db.json(progress as never)}, updated_at = now()
    where id = ${taskId}::int and claim_token = ${claimToken}::uuid and status in ('validating', 'running')`;
}

/** Bytes per statement when an output is stored: small enough that no full-size copy is ever built. */
const OUTPUT_PIECE = 32 * 1024;

/**
 * Stores the output of a finished export, given as pieces in order (inside the finalizing
 * transaction). postgres.js sends a bytea parameter as one hex string built in several full copies
 * (about 7x the output in memory at once), so the output travels in small pieces through a
 * transaction-local table and is joined in the database.
 */
export async function storeExportOutput(
  tx: TransactionSql,
  taskId: number,
  output: readonly Buffer[],
  contentType: string,
  retentionHours: number,
): Promise<void> {
  await tx`create temp table svc_export_output (seq integer not null, piece bytea not null) on commit drop`;
  let seq = 0;
  for (const buf of output) {
    for (let at = 0; at < buf.length; at += OUTPUT_PIECE) {
      await tx`insert into svc_export_output (seq, piece) values (${seq++}::int, ${buf.subarray(at, at + OUTPUT_PIECE)})`;
    }
  }
  await tx`
    update tasks set output = (select coalesce(string_agg(o.piece, ''::bytea order by o.seq), ''::bytea) from svc_export_output o),
      output_content_type = ${contentType},
      output_expires_at = now() + make_interval(hours => ${retentionHours}::int)
    where id = ${taskId}::int`;
}

/** Drops the bytes of export outputs past their expiry (their reads answer 410 from output_expires_at alone). */
export async function clearExpiredExportOutputs(tx: TransactionSql, limit = 100): Promise<number> {
  const rows = await tx`
    update tasks set output = null
    where id in (
      select id from tasks
      where kind = 'export' and output is not null and output_expires_at < now()
      order by output_expires_at
      limit ${limit}
      for update skip locked)
    returning id`;
  return rows.length;
}

export interface ExportOutputRow {
  id: number;
  kind: string;
  status: string;
  submitted_by: number;
  summary: unknown;
  output: Buffer | null;
  output_content_type: string | null;
  output_expires_at: Date | null;
  expired: boolean;
}

/** The stored output of a task with its expiry state. */
export async function findExportOutput(db: Db, taskId: number): Promise<ExportOutputRow | undefined> {
  const [row] = await db<ExportOutputRow[]>`
    select t.id, t.kind, t.status, t.submitted_by, t.summary, t.output, t.output_content_type, t.output_expires_at,
      coalesce(t.output_expires_at <= now(), false) as expired
    from tasks t where t.id = ${taskId}::int`;
  return row;
}
