// Objects: SQL only. Authorization is src/db/authz.ts; computed-field expressions come from
// src/db/computed-fields.ts. Object queries use the alias `o` for the objects table.
import { partOf, textPart, type Db, type TransactionSql } from './sql.ts';
import { and, runList, filterSql, type Fragment, type ListPage } from './list.ts';
import { parseListQuery, type FieldDef, type Filter, type ListSpec, type ParsedList } from '../domain/list-query.ts';
import { badRequest } from '../domain/errors.ts';
import {
  eventsCte,
  isoTimeText,
  markWritten,
  ROW_EVENT_PARAMS,
  rowEventInsertText,
  rowEventParams,
  type RowEventColumns,
} from './events.ts';
import { actorBinding, actorBindingParams, actorBindingText } from './history.ts';
import { grantExistsText } from './authz.ts';
import { notFinal, type Final } from './tx.ts';
import { classCols } from './classes.ts';
import type { NewEvent } from '../domain/new-event.ts';
import type { Actor } from '../domain/actor.ts';
import type { Authority } from '../domain/authz.ts';
import { evalExpr, evalSetExpr, type ActiveFields } from './computed-fields.ts';
import { parseComputedName, type ComputedDef } from '../domain/computed.ts';
import { relatedParamCondition } from './related-filters.ts';
import type { ObjectRelationRow, RelationEnds } from '../domain/relations.ts';
import { type ObjectRow } from '../domain/views/objects.ts';

/** Condition over alias `o`: the object is of class `classId`. */
export function ofClassWhere(db: Db, classId: number): Fragment {
  return partOf(db)`o.class_id = ${classId}::int` as Fragment;
}

const OBJECT_COLUMN_LIST = 'o.id, o.name, o.description, o.collection_id, o.class_id, o.json_data, o.created_at, o.updated_at, o.revision';

export function objectCols(db: Db): Fragment {
  return textPart(db, OBJECT_COLUMN_LIST) as Fragment;
}

/**
 * objectCols for a reply: json_data as the database's JSON text (`jsonb::text`), which the reply
 * passes through unparsed (src/domain/json-text.ts), and the times as UTC text, which isoTime turns
 * into the reply's ISO text (src/domain/wire.ts) without the driver's Date parsing.
 */
export function objectColsJsonText(db: Db): Fragment {
  return textPart(db, OBJECT_COLUMN_LIST_JSON_TEXT) as Fragment;
}

/** objectColsJsonText as text, for a statement kept as text. */
export const OBJECT_COLUMN_LIST_JSON_TEXT = `o.id, o.name, o.description, o.collection_id, o.class_id, o.json_data::text as json_data,
    (o.created_at at time zone 'UTC')::text as created_at, (o.updated_at at time zone 'UTC')::text as updated_at, o.revision`;

const BASE_FIELDS: Record<string, FieldDef> = {
  id: { type: 'integer', column: 'o.id', notNull: true },
  name: { type: 'text', column: 'o.name', notNull: true, lowerIndexed: true },
  description: { type: 'text', column: 'o.description', notNull: true, lowerIndexed: true },
  collection_id: { type: 'integer', column: 'o.collection_id', notNull: true },
  created_at: { type: 'timestamp', column: 'o.created_at', notNull: true },
  updated_at: { type: 'timestamp', column: 'o.updated_at', notNull: true },
  revision: { type: 'integer', column: 'o.revision', notNull: true },
  json_data: { type: 'json', column: 'o.json_data' },
};

/** Internal list-field name under which a computed field is sorted (filters use the public name). */
const SORT_PREFIX = 'sort:';

/** The value of a computed field as jsonb, null when evaluation failed. */
export function computedValue(db: Db, def: ComputedDef): Fragment {
  return db`(${evalExpr(db, def)} -> 'v')` as Fragment;
}

/** Whether evaluation failed for the row. */
export function computedFailed(db: Db, def: ComputedDef): Fragment {
  return db`(${evalExpr(db, def)} ? 'e')` as Fragment;
}

/** A sortable scalar for a computed field of a sortable result type. */
function computedSortField(def: ComputedDef): FieldDef | undefined {
  const v = (db: Db) => computedValue(db, def);
  switch (def.result_type) {
    case 'string':
      return { type: 'text', column: 'computed', expr: ((db: Db) => db`(${v(db)} #>> '{}')`) as FieldDef['expr'] };
    case 'integer':
      return {
        type: 'integer',
        column: 'computed',
        expr: ((db: Db) => db`(case when jsonb_typeof(${v(db)}) = 'number' then (${v(db)})::numeric::bigint end)`) as FieldDef['expr'],
      };
    case 'number':
      return {
        type: 'text',
        column: 'computed',
        expr: ((db: Db) =>
          db`(svc_numeric_sort_key(case when jsonb_typeof(${v(db)}) = 'number' then (${v(db)})::numeric end) collate "C")`) as FieldDef['expr'],
      };
    case 'boolean':
      return {
        type: 'boolean',
        column: 'computed',
        expr: ((db: Db) => db`(case when jsonb_typeof(${v(db)}) = 'boolean' then (${v(db)})::boolean end)`) as FieldDef['expr'],
      };
    default:
      return undefined;
  }
}

export interface ObjectQuery {
  parsed: ParsedList;
  spec: ListSpec;
  /** Visibility-independent conditions: list filters, computed filters, related hooks. */
  where: Fragment[];
  /** Number of computed filters used. */
  computedFilters: number;
  /** Whether a computed field is sorted on. */
  computedSort: boolean;
}

/** The enabled computed field a `computed.<visibility>.<key>` name refers to; 400 when unknown or disabled. */
export function computedDef(active: ActiveFields, name: string): ComputedDef {
  const parsed = parseComputedName(name);
  if (!parsed) throw badRequest(`unknown field "${name}"`, [{ path: `query.${name}`, message: 'unknown field' }]);
  if (active.disabled.has(name))
    throw badRequest(`computed field "${name}" is disabled`, [{ path: `query.${name}`, message: 'disabled computed field' }]);
  const list = parsed.visibility === 'shared' ? active.shared : active.personal;
  const def = list?.find((d) => d.key === parsed.key);
  if (!def) throw badRequest(`unknown computed field "${name}"`, [{ path: `query.${name}`, message: 'unknown computed field' }]);
  return def;
}

/** Whether an object-list query names a computed field (a filter, or in its sort), which parseObjectQuery then needs. */
export function namesComputedField(query: Record<string, unknown>): boolean {
  return Object.keys(query).some((k) => k.startsWith('computed.')) || String(query.sort ?? '').includes('computed.');
}

/**
 * Parses an object-list query (the list query language plus computed and related filters).
 * `reserved` names query parameters the caller reads itself (e.g. include, group_by).
 */
export function parseObjectQuery(
  db: Db,
  query: Record<string, unknown>,
  active: ActiveFields,
  auth: Authority,
  classId: number,
  opts: { reserved?: string[]; allowSort?: boolean } = {},
): ObjectQuery {
  const fields: Record<string, FieldDef> = { ...BASE_FIELDS };
  const rewritten: Record<string, unknown> = {};
  const related: Record<string, string> = {};
  const extra = new Set<string>(['permissions', ...(opts.reserved ?? [])]);
  const computedFilterFields = new Map<string, ComputedDef>();
  for (const [key, raw] of Object.entries(query)) {
    if (key.startsWith('related.')) {
      if (Array.isArray(raw)) throw badRequest(`query parameter ${key} may be given only once`);
      related[key] = String(raw);
      extra.add(key);
      rewritten[key] = raw;
    } else if (key.startsWith('computed.')) {
      const idx = key.indexOf('__');
      const name = idx < 0 ? key : key.slice(0, idx);
      const def = computedDef(active, name);
      // A computed value is filtered as the JSON member "v" of {"v": value}: the JSON-path
      // operators then apply with their number, string and boolean semantics.
      // Booleans are wrapped as the strings "true"/"false", which the text branch of `equals`
      // and `in` compares exactly.
      fields[name] = {
        type: 'json',
        column: name,
        expr: (def.result_type === 'boolean'
          ? (d: Db) => d`jsonb_build_object('v', ${computedValue(d, def)} #>> '{}')`
          : (d: Db) => d`jsonb_build_object('v', ${computedValue(d, def)})`) as FieldDef['expr'],
      };
      computedFilterFields.set(name, def);
      rewritten[key] = Array.isArray(raw) ? raw.map((v) => `v=${String(v)}`) : `v=${String(raw)}`;
    } else {
      rewritten[key] = raw;
    }
  }
  let computedSort = false;
  if (typeof query.sort === 'string' && query.sort.includes('computed.')) {
    if (opts.allowSort === false) throw badRequest('sort is not supported here');
    const parts = query.sort.split(',').map((s) => s.trim());
    rewritten.sort = parts
      .map((p) => {
        const m = /^(-?)(computed\.[^.]+\.[^.]+?)(\.asc|\.desc)?$/.exec(p);
        if (!m) return p;
        const def = computedDef(active, m[2]!);
        const field = computedSortField(def);
        if (!field) throw badRequest(`computed field "${m[2]}" has result type ${def.result_type} and cannot be sorted on`);
        fields[SORT_PREFIX + m[2]] = field;
        computedSort = true;
        return `${m[1]}${SORT_PREFIX}${m[2]}${m[3] ?? ''}`;
      })
      .join(',');
    if (computedSort && parts.length > 2) throw badRequest('sorting by a computed field allows at most two sort fields');
  }
  // Names are unique within a class (objects_class_name_key), and every object list is of one class.
  const spec: ListSpec = { fields, defaultSort: [{ field: 'id', desc: false }], extraParams: [...extra], uniqueFields: ['name'] };
  const parsed = parseListQuery(rewritten, spec);
  // Computed filters: an object whose value failed to evaluate never matches, negated or not.
  const where: Fragment[] = [];
  const plain: Filter[] = [];
  let computedFilters = 0;
  for (const f of parsed.filters) {
    const def = computedFilterFields.get(f.field);
    if (def) {
      computedFilters++;
      where.push(db`(not ${computedFailed(db, def)} and coalesce((${filterSql(db, f)}), false))` as Fragment);
    } else {
      plain.push(f);
    }
  }
  parsed.filters = plain;
  for (const key of Object.keys(related)) {
    const claimed = relatedParamCondition(db, auth, key, related);
    if (!claimed) throw badRequest(`unknown filter "${key}"`, [{ path: `query.${key}`, message: 'unknown related filter' }]);
    where.push(claimed);
  }
  return { parsed, spec, where, computedFilters, computedSort };
}

/**
 * A page of objects; with `computed` the evaluated sets of the given fields are selected as `__cs` /
 * `__cp`; with `jsonText` json_data is the database's JSON text (objectColsJsonText).
 */
export function listObjects(
  db: Db,
  q: ObjectQuery,
  where: Fragment[],
  computed: { shared: ComputedDef[]; personal: ComputedDef[] | null } | null,
  opts: { jsonText?: boolean } = {},
): Promise<ListPage<ObjectRow & { __cs?: unknown; __cp?: unknown }>> {
  const cols = opts.jsonText ? objectColsJsonText(db) : objectCols(db);
  const select = computed
    ? (db`${cols}, ${evalSetExpr(db, computed.shared)} as __cs, ${evalSetExpr(db, computed.personal ?? [])} as __cp` as Fragment)
    : cols;
  return runList(db, {
    from: partOf(db)`objects o` as Fragment,
    select,
    where: [...where, ...q.where],
    parsed: q.parsed,
    spec: q.spec,
    // The text conversions of a reply only for the page's rows (runList `plain`).
    plain: opts.jsonText && !computed ? { columns: objectCols(db), alias: 'o' } : undefined,
    viewed: true, // objectView, objectJsonText
  });
}

/** One object, optionally with evaluated computed sets (`__cs`, `__cp`). */
export async function findObject(
  db: Db,
  id: number,
  computed: { shared: ComputedDef[]; personal: ComputedDef[] | null } | null = null,
): Promise<(ObjectRow & { __cs?: unknown; __cp?: unknown }) | undefined> {
  const [row] = await db<(ObjectRow & { __cs?: unknown; __cp?: unknown })[]>`
    select ${objectCols(db)}
      ${computed ? db`, ${evalSetExpr(db, computed.shared)} as __cs, ${evalSetExpr(db, computed.personal ?? [])} as __cp` : db``}
    from objects o where o.id = ${id}::int`;
  return row;
}

export async function objectIdByName(db: Db, classId: number, name: string): Promise<number | undefined> {
  const [row] = await db<{ id: number }[]>`select id from objects where class_id = ${classId}::int and name = ${name}::text`;
  return row?.id;
}

/**
 * The columns a new object's write reads with its class (readClassAs, over alias `k`): the class row,
 * the id the object will get and the transaction's now() (its created_at), so the object's audit
 * events can be built before the one statement that writes the object and them.
 */
export function newObjectClassCols(db: Db): Fragment {
  return db`${classCols(db)}, nextval(pg_get_serial_sequence('objects', 'id'))::int as svc_next_id, now() as svc_now,
    k.xmin::text as svc_version` as Fragment;
}

/**
 * A version of a class row: its xmin (as newObjectClassCols selects it) and revision. Every change
 * to a class row makes a new xmin, so a statement that finds the version an earlier read found sees
 * the same schema, name and collection (the revision guards against transaction ids wrapping around).
 */
export interface ClassVersion {
  id: number;
  revision: number;
  version: string;
}

/**
 * Inserts an object under a class as the caller read it earlier, with its audit event, in one
 * statement: the class is share-locked as readClassAs(…, { lock: 'share' }) locks it, and nothing is written
 * (no row is returned) unless the class is still at `cls.version` and the caller holds CreateObject
 * on its collection. The object's id and times are the database's; `event` is built without them
 * and the statement fills them in (rowEventInsertText). The statement is constant text with
 * parameters, one per kind of caller: a create's JavaScript cost is mostly the driver's, and a
 * statement composed of fragments is built anew, and its prepared statement looked up by that text,
 * on every call.
 */
export async function insertObjectIfClassUnchanged(
  tx: TransactionSql,
  actor: Actor,
  auth: Authority,
  cls: ClassVersion,
  v: { name: string; description: string; json_data: unknown },
  event: NewEvent,
  final: Final = notFinal,
): Promise<ObjectRow | undefined> {
  const params = [cls.id, cls.version, cls.revision, v.name, v.description, JSON.stringify(v.json_data ?? null)];
  return writeUnderClass(tx, actor, auth, [CREATE_AS_ADMIN, CREATE_AS_GRANTED], params, event, final);
}

/**
 * Runs a one-statement write under a known class (its text for an administrator, or for a caller
 * whose grant it tests, with the principal as the parameter after `params`), then the event's
 * parameters and the actor binding's, as the texts number them; the written row, if any.
 */
async function writeUnderClass(
  tx: TransactionSql,
  actor: Actor,
  auth: Authority,
  [asAdmin, asGranted]: [string, string],
  params: unknown[],
  event: NewEvent,
  final: Final,
): Promise<ObjectRow | undefined> {
  const all = [...params, ...(auth.isAdmin ? [] : [auth.principal.id]), ...rowEventParams(actor, event), ...actorBindingParams(actor)];
  const [row] = await final(tx.unsafe<ObjectRow[]>(auth.isAdmin ? asAdmin : asGranted, all as never[], { prepare: true }));
  // a statement that wrote nothing wakes no fan-out worker (its caller's general way marks what it writes)
  if (row) markWritten(tx, event);
  return row;
}

/**
 * The text of insertObjectIfClassUnchanged's statement: for an administrator, and for a caller whose
 * groups must grant CreateObject on the class's collection or an ancestor (the grant test of
 * src/db/authz.ts, parameter $7). It binds the actor itself (svc_actor, read with the class), so the
 * transaction needs no statement of its own for that.
 */
function createUnderClassText(grant: string): string {
  const first = grant ? 8 : 7;
  return `with ${actorBindingText(first + ROW_EVENT_PARAMS)}, k as (
      select k.id, k.collection_id from classes k, svc_actor
      where k.id = $1::int and k.xmin = $2::text::xid and k.revision = $3::int ${grant}
      for share of k
    ), o as (
      insert into objects as o (name, description, collection_id, class_id, json_data)
      select $4::text, $5::text, k.collection_id, k.id, $6::text::jsonb from k
      returning ${OBJECT_COLUMN_LIST}
    ), e as (${rowEventInsertText(first)})
    select * from o`;
}
const CREATE_AS_ADMIN = createUnderClassText('');
const CREATE_AS_GRANTED = createUnderClassText(`and ${grantExistsText('CreateObject', '$7', 'k.collection_id')}`);

/**
 * An object's json_data and revision if it is of class `classId`, read without a lock, for a write
 * that computes its change from them and then writes only at that revision (patchOwnObjectData).
 */
export async function readObjectData(
  db: Db,
  classId: number,
  objectId: number,
): Promise<{ json_data: unknown; revision: number } | undefined> {
  const [row] = await db<{ json_data: unknown; revision: number }[]>`
    select json_data, revision from objects where id = ${objectId}::int and class_id = ${classId}::int`;
  return row;
}

/** The changes an update by updateObjectIfClassUnchanged writes; an omitted member keeps its value. */
export interface ObjectUpdate {
  name?: string;
  description?: string;
  json_data?: unknown;
}

/**
 * Updates an object under a class as the caller read it earlier, with its audit event, in one
 * statement: the class is share-locked and the object locked for update as lockForWrite's two
 * statements lock them (in that order), and nothing is written (no row is returned) unless the class
 * is still at `cls.version`, the object is of it and at one of `revisions` (null: any; If-Match),
 * the caller holds UpdateObject on its collection and the update changes something. `event` is
 * built without the object's row (objectUpdatedEventDraft); the statement completes it from the row
 * as it was and as it is written (OBJECT_UPDATE_EVENT). Constant text with parameters, one per kind
 * of caller, as insertObjectIfClassUnchanged's.
 */
export async function updateObjectIfClassUnchanged(
  tx: TransactionSql,
  actor: Actor,
  auth: Authority,
  cls: ClassVersion,
  objectId: number,
  revisions: number[] | null,
  v: ObjectUpdate,
  event: NewEvent,
  final: Final = notFinal,
): Promise<ObjectRow | undefined> {
  const json = v.json_data === undefined ? null : JSON.stringify(v.json_data);
  const params = [cls.id, cls.version, cls.revision, objectId, v.name ?? null, v.description ?? null, json, revisions];
  return writeUnderClass(tx, actor, auth, [UPDATE_AS_ADMIN, UPDATE_AS_GRANTED], params, event, final);
}

/** An object's audit snapshot (objectView's members), as the database writes it from the row `a`. */
function objectSnapshotText(a: string): string {
  return `jsonb_build_object('id', ${a}.id, 'name', ${a}.name, 'description', ${a}.description,
      'collection_id', ${a}.collection_id, 'svc_class_id', ${a}.class_id, 'json_data', ${a}.json_data,
      'created_at', ${isoTimeText(`${a}.created_at`)}, 'updated_at', ${isoTimeText(`${a}.updated_at`)}, 'revision', ${a}.revision)`;
}

/**
 * The columns of an update's event that updateObjectIfClassUnchanged's statement writes from the
 * object as it was (`old`) and as written (`o`): the name (also in the summary, format's `%s`), the
 * snapshots, the revisions and whether json_data changed (objectUpdatedEvent's members).
 */
const OBJECT_UPDATE_EVENT: RowEventColumns = {
  entity_name: (p) => `coalesce(${p}::text, o.name)`,
  summary: (p) => `format(${p}::text, o.name)`,
  before: (p) => `${p}::text::jsonb || ${objectSnapshotText('old')}`,
  after: (p) => `${p}::text::jsonb || ${objectSnapshotText('o')}`,
  before_revision: (p) => `coalesce(${p}::int, old.revision)`,
  after_revision: (p) => `coalesce(${p}::int, o.revision)`,
  metadata: (p) => `${p}::text::jsonb || jsonb_build_object('data_changed', o.json_data is distinct from old.json_data)`,
};

/**
 * The text of updateObjectIfClassUnchanged's statement: for an administrator, and for a caller whose
 * groups must grant UpdateObject on the object's collection or an ancestor (parameter $9). A member
 * passed as null keeps its value; an update that changes nothing writes nothing. $8: the revisions
 * If-Match accepts (null: any).
 */
function updateUnderClassText(grant: string): string {
  const first = grant ? 10 : 9;
  const name = 'coalesce($5::text, old.name)';
  const description = 'coalesce($6::text, old.description)';
  const data = 'coalesce($7::text::jsonb, old.json_data)';
  return `with ${actorBindingText(first + ROW_EVENT_PARAMS)}, k as (
      select k.id from classes k, svc_actor
      where k.id = $1::int and k.xmin = $2::text::xid and k.revision = $3::int
      for share of k
    ), old as (
      select ${OBJECT_COLUMN_LIST} from objects o, k
      where o.id = $4::int and o.class_id = k.id and ($8::int[] is null or o.revision = any($8::int[])) ${grant}
      for update of o
    ), o as (
      update objects as o set name = ${name}, description = ${description}, json_data = ${data},
        updated_at = now(), revision = old.revision + 1
      from old
      where o.id = old.id and (${name}, ${description}, ${data}) is distinct from (old.name, old.description, old.json_data)
      returning ${OBJECT_COLUMN_LIST}
    ), e as (${rowEventInsertText(first, OBJECT_UPDATE_EVENT, 'o, old')})
    select * from o`;
}
const UPDATE_AS_ADMIN = updateUnderClassText('');
const UPDATE_AS_GRANTED = updateUnderClassText(`and ${grantExistsText('UpdateObject', '$9', 'o.collection_id')}`);

/**
 * Deletes an object under a class as the caller read it earlier, with its audit event, in one
 * statement: the class is share-locked and the object locked as lockForWrite's two statements lock
 * them, and nothing is deleted (no row is returned) unless the class is still at `cls.version`, the
 * object is of it, at one of `revisions` (null: any; If-Match) and without relations, and the caller
 * holds DeleteObject on its collection. `event` is objectDeletedEventDraft's; the statement completes
 * it from the row (OBJECT_DELETE_EVENT). A relation that its snapshot missed (committed while the
 * statement waited for the object's lock) fails it with RELATION_APPEARED
 * (migrations/0320_object_delete_alone.sql): its transaction must be one of its own, committed with
 * it, and the delete then goes the two-statement way in another.
 */
export async function deleteObjectIfClassUnchanged(
  tx: TransactionSql,
  actor: Actor,
  auth: Authority,
  cls: ClassVersion,
  objectId: number,
  revisions: number[] | null,
  event: NewEvent,
  final: Final = notFinal,
): Promise<ObjectRow | undefined> {
  const params = [cls.id, cls.version, cls.revision, objectId, revisions];
  return writeUnderClass(tx, actor, auth, [DELETE_AS_ADMIN, DELETE_AS_GRANTED], params, event, final);
}

/** The SQLSTATE of deleteObjectIfClassUnchanged's statement when a relation it did not see went with the object. */
export const RELATION_APPEARED = 'SV001';

/** The columns of a delete's event that deleteObjectIfClassUnchanged's statement writes from the deleted row `o`. */
const OBJECT_DELETE_EVENT: RowEventColumns = {
  entity_name: (p) => `coalesce(${p}::text, o.name)`,
  summary: (p) => `format(${p}::text, o.name)`,
  before: (p) => `${p}::text::jsonb || ${objectSnapshotText('o')}`,
  before_revision: (p) => `coalesce(${p}::int, o.revision)`,
};

/**
 * The text of deleteObjectIfClassUnchanged's statement: for an administrator, and for a caller whose
 * groups must grant DeleteObject on the object's collection or an ancestor (parameter $6). $5: the
 * revisions If-Match accepts (null: any). It marks its transaction (svc.object_delete_alone) for the
 * trigger of migration 0320.
 */
function deleteUnderClassText(grant: string): string {
  const first = grant ? 7 : 6;
  return `with ${actorBindingText(first + ROW_EVENT_PARAMS)}, k as (
      select k.id, set_config('svc.object_delete_alone', 'on', true) as alone from classes k, svc_actor
      where k.id = $1::int and k.xmin = $2::text::xid and k.revision = $3::int
      for share of k
    ), old as (
      select o.id from objects o, k
      where o.id = $4::int and o.class_id = k.id and ($5::int[] is null or o.revision = any($5::int[])) ${grant}
        and not exists (select from object_relations r where r.from_object_id = o.id or r.to_object_id = o.id)
      for update of o
    ), o as (
      delete from objects as o using old where o.id = old.id
      returning ${OBJECT_COLUMN_LIST}
    ), e as (${rowEventInsertText(first, OBJECT_DELETE_EVENT)})
    select * from o`;
}
const DELETE_AS_ADMIN = deleteUnderClassText('');
const DELETE_AS_GRANTED = deleteUnderClassText(`and ${grantExistsText('DeleteObject', '$6', 'o.collection_id')}`);

/**
 * Inserts the object (with the id newObjectClassCols reserved) and its audit events in one statement;
 * `final` marks it as the transaction's last (COMMIT goes with it).
 */
export async function insertObjectWithEvents(
  tx: TransactionSql,
  actor: Actor,
  v: ObjectRow,
  events: NewEvent[],
  final: Final = notFinal,
): Promise<ObjectRow> {
  const [row] = await final(tx<ObjectRow[]>`
    with o as (
      insert into objects as o (id, name, description, collection_id, class_id, json_data)
      values (${v.id}::int, ${v.name}, ${v.description}, ${v.collection_id}::int, ${v.class_id}::int,
        ${JSON.stringify(v.json_data ?? null)}::text::jsonb)
      returning ${objectCols(tx)}
    )${eventsCte(tx, actor, events)}
    select * from o`);
  return row!;
}

/**
 * Updates the object (locked by the caller) and appends its audit events in one statement. `after` is
 * the row as it will be (revision + 1, updated_at the transaction's now()), so the events can be built
 * first; the returned row is the database's. With `bindsActor` the statement also binds the actor
 * (actorBinding).
 */
export async function updateObjectWithEvents(
  tx: TransactionSql,
  actor: Actor,
  after: ObjectRow,
  events: NewEvent[],
  final: Final = notFinal,
  bindsActor = false,
): Promise<ObjectRow> {
  const b = actorBinding(tx, actor, bindsActor);
  const [row] = await final(tx<ObjectRow[]>`
    with ${b.cte}o as (
      update objects as o set name = ${after.name}, description = ${after.description},
        json_data = ${JSON.stringify(after.json_data ?? null)}::text::jsonb, updated_at = now(), revision = o.revision + 1
      ${b.from}
      where o.id = ${after.id}::int
      returning ${objectCols(tx)}
    )${eventsCte(tx, actor, events)}
    select * from o`);
  return row!;
}

/**
 * The relations of an object (by id, or by name within its class; locked for update), with the
 * collections of both ends. Async like the locks it is pipelined behind (tx.ts, "Pipelines"), so it
 * goes out after them.
 */
export async function lockObjectRelations(
  tx: TransactionSql,
  object: number | { classId: number; name: string },
): Promise<(ObjectRelationRow & RelationEnds)[]> {
  const id =
    typeof object === 'number'
      ? tx`${object}::int`
      : tx`(select id from objects where class_id = ${object.classId}::int and name = ${object.name}::text)`;
  return await tx<(ObjectRelationRow & RelationEnds)[]>`
    select r.id, r.class_relation_id, r.from_object_id, r.to_object_id, r.created_at, r.updated_at, r.revision,
      fo.collection_id as from_collection_id, t.collection_id as to_collection_id
    from object_relations r join objects fo on fo.id = r.from_object_id join objects t on t.id = r.to_object_id
    where r.from_object_id = ${id} or r.to_object_id = ${id}
    order by r.id for update of r`;
}

export { and };
