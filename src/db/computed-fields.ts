// Computed-field definitions (SQL only) and the SQL expressions that evaluate them
// (svc_computed_eval of migration 0030). Rules are in src/domain/computed.ts.
import { textPart, type Db, type TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { classWhere } from './authz.ts';
import type { Authority } from '../domain/authz.ts';
import { sqlDefs, sqlPaths, type ComputedDef, type ComputedOperation, type ResultType } from '../domain/computed.ts';
import { type ComputedFieldRow } from '../domain/views/computed-fields.ts';
import { writeWithEvents } from './events.ts';
import type { Final } from './tx.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';

const COMPUTED_FIELD_COLUMN_LIST =
  'f.id, f.class_id, f.key, f.label, f.description, f.enabled, f.operation, f.result_type, f.visibility, f.owner_user_id, f.created_at, f.updated_at, f.revision';

function cols(db: Db): Fragment {
  return textPart(db, COMPUTED_FIELD_COLUMN_LIST) as Fragment;
}

const COMMON_FIELDS: ListSpec['fields'] = {
  id: { type: 'integer', column: 'f.id', notNull: true },
  key: { type: 'text', column: 'f.key', notNull: true },
  label: { type: 'text', column: 'f.label', notNull: true },
  description: { type: 'text', column: 'f.description', sortable: false },
  enabled: { type: 'boolean', column: 'f.enabled', sortable: false },
  result_type: {
    type: 'text',
    column: 'f.result_type',
    sortable: false,
    values: ['string', 'number', 'integer', 'boolean', 'object', 'array'],
  },
  created_at: { type: 'timestamp', column: 'f.created_at', notNull: true },
  updated_at: { type: 'timestamp', column: 'f.updated_at', notNull: true },
  revision: { type: 'integer', column: 'f.revision', notNull: true },
};

export const SHARED_FIELD_LIST_SPEC: ListSpec = { fields: COMMON_FIELDS, defaultSort: [{ field: 'id', desc: false }] };
export const MY_FIELD_LIST_SPEC: ListSpec = {
  fields: Object.assign({}, COMMON_FIELDS, { class_id: { type: 'integer', column: 'f.class_id', notNull: true } }),
  defaultSort: [{ field: 'id', desc: false }],
};

export function listSharedFields(db: Db, classId: number, parsed: ParsedList): Promise<ListPage<ComputedFieldRow>> {
  return runList<ComputedFieldRow>(db, {
    from: db`computed_fields f` as Fragment,
    select: cols(db),
    where: [db`f.class_id = ${classId}::int and f.visibility = 'shared'` as Fragment],
    parsed,
    spec: SHARED_FIELD_LIST_SPEC,
  });
}

/** The caller's personal fields on classes the caller can still read. */
export function listMyFields(db: Db, auth: Authority, parsed: ParsedList): Promise<ListPage<ComputedFieldRow>> {
  return runList<ComputedFieldRow>(db, {
    from: db`computed_fields f join classes k on k.id = f.class_id` as Fragment,
    select: cols(db),
    where: [
      db`f.visibility = 'personal' and f.owner_user_id = ${auth.principal.id}::int` as Fragment,
      classWhere(db, auth, 'ReadClass', { id: 'k.id', collectionId: 'k.collection_id' }),
    ],
    parsed,
    spec: MY_FIELD_LIST_SPEC,
  });
}

export async function findField(db: Db, id: number): Promise<ComputedFieldRow | undefined> {
  const [row] = await db<ComputedFieldRow[]>`select ${cols(db)} from computed_fields f where f.id = ${id}::int`;
  return row;
}

/** The field locked for a write, with its class's collection (svc_collection_id) and the transaction's now() (svc_now). */
export async function lockField(
  tx: TransactionSql,
  id: number,
): Promise<(ComputedFieldRow & { svc_collection_id: number; svc_now: Date }) | undefined> {
  const [row] = await tx<(ComputedFieldRow & { svc_collection_id: number; svc_now: Date })[]>`
    select ${cols(tx)}, (select k.collection_id from classes k where k.id = f.class_id) as svc_collection_id, now() as svc_now
    from computed_fields f where f.id = ${id}::int for update of f`;
  return row;
}

/** Serializes definition changes of one class, so that the per-class limits cannot be raced. */
export async function lockClassFields(tx: TransactionSql, classId: number): Promise<void> {
  await tx`select pg_advisory_xact_lock(727030, ${classId}::int)`;
}

export async function countFields(tx: TransactionSql, classId: number, ownerUserId: number | null): Promise<number> {
  const [row] = await tx<{ n: number }[]>`
    select count(*)::int as n from computed_fields
    where class_id = ${classId}::int
      and ${ownerUserId === null ? tx`visibility = 'shared'` : tx`visibility = 'personal' and owner_user_id = ${ownerUserId}::int`}`;
  return row!.n;
}

export interface FieldValues {
  label: string;
  description: string;
  enabled: boolean;
  operation: ComputedOperation;
  result_type: ResultType;
}

/** Inserts the field `f` (its id and times reserved: reserveId) with `events`, in one statement. */
export function insertField(
  tx: TransactionSql,
  actor: Actor,
  f: ComputedFieldRow,
  events: NewEvent[],
  final?: Final,
): Promise<ComputedFieldRow> {
  const write = tx`
    insert into computed_fields as f (id, class_id, key, label, description, enabled, operation, result_type, visibility, owner_user_id)
    values (${f.id}::int, ${f.class_id}::int, ${f.key}, ${f.label}, ${f.description}, ${f.enabled}::boolean,
      ${operationJson(f.operation)}::text::jsonb, ${f.result_type}, ${f.visibility}, ${f.owner_user_id}::int)
    returning ${cols(tx)}` as Fragment;
  return writeWithEvents(tx, actor, write, events, final);
}

/** Writes `f` over its locked field (updated_at now(), the revision one up) with `events`, in one statement. */
export function updateField(
  tx: TransactionSql,
  actor: Actor,
  f: ComputedFieldRow,
  events: NewEvent[],
  final?: Final,
): Promise<ComputedFieldRow> {
  const write = tx`
    update computed_fields as f set label = ${f.label}, description = ${f.description}, enabled = ${f.enabled}::boolean,
      operation = ${operationJson(f.operation)}::text::jsonb, result_type = ${f.result_type}, updated_at = now(), revision = f.revision + 1
    where f.id = ${f.id}::int
    returning ${cols(tx)}` as Fragment;
  return writeWithEvents(tx, actor, write, events, final);
}

/** The stored form of an operation: its type and paths, nothing else. */
export function storedOperation(o: ComputedOperation): ComputedOperation {
  return { type: o.type, paths: o.paths };
}

function operationJson(o: ComputedOperation): string {
  return JSON.stringify(storedOperation(o));
}

/** Every definition of a class (for the cascade of a class delete), locked. */
export async function lockClassFieldRows(tx: TransactionSql, classId: number): Promise<ComputedFieldRow[]> {
  return tx<ComputedFieldRow[]>`select ${cols(tx)} from computed_fields f where f.class_id = ${classId}::int order by f.id for update`;
}

/** The computed fields an object request can use: enabled shared ones, and the caller's enabled personal ones (humans). */
export interface ActiveFields {
  shared: ComputedDef[];
  /** null for service accounts (no personal fields). */
  personal: ComputedDef[] | null;
  /** Names (`computed.<visibility>.<key>`) of disabled fields, for a precise 400. */
  disabled: Set<string>;
}

/** No computed fields (a personal list only for humans): what a request naming none needs. */
export function noActiveFields(principal: { kind: string }): ActiveFields {
  return { shared: [], personal: principal.kind === 'human' ? [] : null, disabled: new Set() };
}

export async function activeFields(db: Db, classId: number, principal: { id: number; kind: string }): Promise<ActiveFields> {
  const human = principal.kind === 'human';
  const rows = await db<ComputedFieldRow[]>`
    select ${cols(db)} from computed_fields f
    where f.class_id = ${classId}::int
      and (f.visibility = 'shared' or (${human}::boolean and f.visibility = 'personal' and f.owner_user_id = ${principal.id}::int))
    order by f.id`;
  const out = noActiveFields(principal);
  for (const r of rows) {
    if (!r.enabled) {
      out.disabled.add(`computed.${r.visibility}.${r.key}`);
      continue;
    }
    const def: ComputedDef = { id: r.id, key: r.key, visibility: r.visibility, operation: r.operation, result_type: r.result_type };
    if (r.visibility === 'shared') out.shared.push(def);
    else out.personal?.push(def);
  }
  return out;
}

/** svc_computed_eval(...) for one definition over a json_data column: {"v": value} or {"e": message}. */
export function evalExpr(db: Db, def: ComputedDef, docColumn = 'o.json_data'): Fragment {
  return db`svc_computed_eval(${db(docColumn)}, ${def.operation.type}::text, ${JSON.stringify(sqlPaths(def.operation))}::text::jsonb,
    ${def.result_type}::text)` as Fragment;
}

/** svc_computed_eval_set(...) for several definitions: {key: {"v"} | {"e"}}. */
export function evalSetExpr(db: Db, defs: ComputedDef[], docColumn = 'o.json_data'): Fragment {
  if (defs.length === 0) return db`'{}'::jsonb` as Fragment;
  return db`svc_computed_eval_set(${db(docColumn)}, ${JSON.stringify(sqlDefs(defs))}::text::jsonb)` as Fragment;
}
