// Audit reads: SQL only. The visibility rules are documented in src/domain/audit.ts; the ReadAudit
// checks themselves come from src/db/authz.ts (collectionWhere), applied per event row in SQL so
// that pages and totals count only what the caller may see.
import { nameOf, partOf, textPart, type Db } from './sql.ts';
import { and, or, runList, selectsOverPlain, type Fragment, type ListPage } from './list.ts';
import { collectionWhere, knownVisibleCollectionIds, readInCollectionAs, visibleCollectionIds } from './authz.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { readsCollectionlessEvents, type EventRow } from '../domain/audit.ts';
import type { Authority } from '../domain/authz.ts';

/** The list fields of GET /api/v1/events and its wrappers (the Ev* parameters of the contract). */
export const EVENT_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'e.id', notNull: true },
    occurred_at: { type: 'timestamp', column: 'e.occurred_at', notNull: true },
    entity_type: { type: 'text', column: 'e.entity_type', sortable: false },
    entity_id: { type: 'integer', column: 'e.entity_id', sortable: false },
    entity_name: { type: 'text', column: 'e.entity_name', sortable: false },
    action: { type: 'text', column: 'e.action', sortable: false },
    actor_kind: { type: 'text', column: 'e.actor_kind', sortable: false, values: ['user', 'worker', 'system'] },
    actor_user_id: { type: 'integer', column: 'e.actor_user_id', sortable: false },
    initiator_user_id: { type: 'integer', column: 'e.initiator_user_id', sortable: false },
    task_id: { type: 'integer', column: 'e.task_id', sortable: false },
    collection_id: { type: 'integer', column: 'e.collection_id', sortable: false },
    before_revision: { type: 'integer', column: 'e.before_revision', sortable: false },
    after_revision: { type: 'integer', column: 'e.after_revision', sortable: false },
    // strict bounds on occurred_at; applyTimeWindow (src/domain/audit.ts) turns `=` into > / <
    occurred_after: { type: 'timestamp', column: 'e.occurred_at', sortable: false },
    occurred_before: { type: 'timestamp', column: 'e.occurred_at', sortable: false },
  },
  defaultSort: [{ field: 'id', desc: true }],
};

/**
 * Full visibility of an event row `e`: ReadAudit on its own collection; every event for an unscoped
 * administrator (who holds ReadAudit everywhere and alone reads collection-less events).
 */
function fullVisibility(db: Db, auth: Authority): Fragment {
  if (readsCollectionlessEvents(auth)) return partOf(db)`true` as Fragment;
  const granted = collectionWhere(db, auth, 'ReadAudit', { id: 'e.collection_id' });
  return partOf(db)`(e.collection_id is not null and ${granted})` as Fragment;
}

/**
 * Redacted visibility: ReadAudit on one of the event's related collections. An array overlap with
 * the caller's ReadAudit collections (computed once per query; the GIN index on
 * related_collection_ids can serve it). Unscoped admins already see every event fully.
 */
function relatedVisibility(db: Db, auth: Authority): Fragment {
  if (readsCollectionlessEvents(auth)) return partOf(db)`false` as Fragment;
  return partOf(db)`e.related_collection_ids && array(${visibleCollectionIds(db, auth, 'ReadAudit')})::int[]` as Fragment;
}

/** Boolean fragment over `events e`: the caller may see the event (fully or redacted). */
export function eventVisibleWhere(db: Db, auth: Authority): Fragment {
  return or(db, [fullVisibility(db, auth), relatedVisibility(db, auth)]);
}

/** The conversions of eventColumns with `jsonText`: the JSON columns as the database's text, occurred_at as its UTC text. */
const EVENT_TEXTS = [
  "(e.occurred_at at time zone 'UTC')::text",
  'e.provenance::text',
  'e.before::text',
  'e.after::text',
  'e.metadata::text',
];
const EVENT_VALUES = ['e.occurred_at', 'e.provenance', 'e.before', 'e.after', 'e.metadata'];

/** The event columns, with the snapshots only where `full` (full visibility) holds. */
function eventColumns(db: Db, full: Fragment, jsonText: boolean): Fragment {
  const [occurred, provenance, before, after, metadata] = (jsonText ? EVENT_TEXTS : EVENT_VALUES).map(
    (text) => textPart(db, text) as Fragment,
  );
  return partOf(db)`e.id, e.event_id, ${occurred} as occurred_at, e.entity_type, e.entity_id, e.entity_name, e.collection_id, e.action,
    e.actor_kind, e.actor_user_id, e.initiator_user_id, e.task_id, ${provenance} as provenance, e.request_id,
    e.correlation_id, e.summary,
    case when ${full} then ${before} end as before,
    case when ${full} then ${after} end as after,
    e.before_revision, e.after_revision, ${metadata} as metadata, e.schema_version::int as schema_version` as Fragment;
}

/** Where a non-administrator's ReadAudit collections come from (the token cache's collectionsWith), given their `read`. */
export type AuditCollections = (read: () => Promise<number[]>) => Promise<number[]>;

/**
 * One page of the events visible to the caller, matching the parsed query and the extra fixed
 * conditions of a wrapper route (`fixed`), with snapshots redacted where visibility is related-only.
 *
 * For a non-administrator the collections it may read the audit of are taken from its known grants
 * (Authority.grants), or read first (one small statement, or `auditCollections`: the token cache
 * keeps them with the token), and the page is planned with them as a value: full visibility is then
 * `collection_id = any(ids)` and related visibility `related_collection_ids && ids`, which the
 * planner can estimate and serve from the collection and related-collection indexes (as subqueries
 * it could do neither, and counted a non-admin's events with a sequential scan of all of them). The
 * same conditions as eventVisibleWhere: a non-administrator's ReadAudit collections are exactly
 * those ids (grants, token scope and the permission scope included). With `jsonText` the JSON
 * columns are the database's text (for a reply that passes them through: domain/json-text.ts) and
 * occurred_at its UTC text (domain/wire.ts isoTime).
 */
export async function listEventRows(
  db: Db,
  auth: Authority,
  parsed: ParsedList,
  fixed: Fragment[] = [],
  opts: {
    jsonText?: boolean;
    /** Where a non-administrator's ReadAudit collections come from (the token cache); default: `read`. */
    auditCollections?: AuditCollections;
    /** `fixed` names one entity (entityIs: a wrapper route's). */
    oneEntity?: boolean;
  } = {},
): Promise<ListPage<EventRow>> {
  const oneEntity = namesOneEntity(parsed, opts.oneEntity ?? false);
  // The text conversions of a reply (snapshots, provenance, metadata, the time) only for the page's
  // rows: selected over a subquery of plain rows (runList `plain`), unless the page is one entity's
  // in id order, which the entity index (entity_type, entity_id, id) gives in that order, so that
  // PostgreSQL converts only the rows it returns anyway (the subquery would cost a node more).
  const wrapped =
    opts.jsonText === true && !(oneEntity && parsed.sort.every((k) => k.field === 'id')) && selectsOverPlain(parsed, EVENT_LIST_SPEC);
  let from = textPart(db, 'events e') as Fragment;
  let plainColumns = textPart(db, 'e.*') as Fragment;
  let visible: Fragment;
  let shown: Fragment; // full visibility, in the select list
  if (auth.isAdmin) {
    shown = fullVisibility(db, auth);
    visible = eventVisibleWhere(db, auth);
  } else {
    const read = async () =>
      (await db<{ ids: number[] }[]>`select array(${visibleCollectionIds(db, auth, 'ReadAudit')})::int[] as ids`)[0]?.ids ?? [];
    const ids = knownVisibleCollectionIds(auth, 'ReadAudit') ?? (opts.auditCollections ? await opts.auditCollections(read) : await read());
    // The collections are one parameter, named by a row of their own (a subquery without FROM,
    // which PostgreSQL pulls up: a plan for the values sees the value itself), not one per use.
    from = partOf(db)`events e, (select ${ids}::int[] as audit_ids) svc_v` as Fragment;
    visible = textPart(db, '(e.collection_id = any(svc_v.audit_ids) or e.related_collection_ids && svc_v.audit_ids)') as Fragment;
    if (wrapped) {
      plainColumns = textPart(db, 'e.*, svc_v.audit_ids') as Fragment;
      shown = textPart(db, 'e.collection_id = any(e.audit_ids)') as Fragment;
    } else {
      shown = textPart(db, 'e.collection_id = any(svc_v.audit_ids)') as Fragment;
    }
  }
  return runList<EventRow>(db, {
    from,
    select: eventColumns(db, shown, opts.jsonText ?? false),
    where: [...fixed, visible],
    parsed,
    spec: EVENT_LIST_SPEC,
    // One entity's events are read from the entity index (entity_type, entity_id, id) whatever the
    // entity and the caller's collections, so a plan the prepared statement keeps serves them all:
    // planning such a short page for its values would cost more than reading it. Otherwise a
    // non-administrator's collections are values that matter (a few events of a small collection,
    // or most of all of them), and so are filters.
    planForValues: oneEntity ? false : auth.isAdmin ? undefined : true,
    plain: wrapped ? { columns: plainColumns, alias: 'e' } : undefined,
    viewed: true, // eventWire
  });
}

/**
 * Whether the page is one entity's events and nothing else narrows it: a wrapper route's entity
 * (`fixed`) without filters, or the filters entity_type and entity_id alone, each one value.
 */
function namesOneEntity(parsed: ParsedList, fixed: boolean): boolean {
  if (fixed) return parsed.filters.length === 0;
  const one = (field: string) => parsed.filters.some((f) => f.field === field && f.op === 'equals' && !f.negate && f.values.length === 1);
  return parsed.filters.length === 2 && one('entity_type') && one('entity_id');
}

/** Wrapper condition: events whose entity is (one of `types`, `id`). */
export function entityIs(db: Db, types: readonly string[], id: number): Fragment {
  return and(db, [partOf(db)`e.entity_type = any(${[...types]}::text[])` as Fragment, partOf(db)`e.entity_id = ${id}::int` as Fragment]);
}

/** Wrapper condition: events directly attached to the collection. */
export function attachedTo(db: Db, collectionId: number): Fragment {
  return partOf(db)`e.collection_id = ${collectionId}::int` as Fragment;
}

/** The tables of the entities whose audit wrapper routes check ReadAudit on the entity's collection. */
const AUDITED_IN_COLLECTION = {
  class: { what: 'class', from: 'classes', alias: 'k' },
  object: { what: 'object', from: 'objects', alias: 'o' },
  remote_target: { what: 'remote target', from: 'remote_targets', alias: 'rt' },
  export_template: { what: 'export template', from: 'export_templates', alias: 'et' },
} as const;

/**
 * The check of an audit wrapper route on an entity kept in a collection, in one statement: 404 when
 * the entity does not exist (an object also when it is of another class than `classId`); 403 when
 * the caller lacks ReadAudit on its collection or is scoped out.
 */
export async function requireAuditOf(
  db: Db,
  auth: Authority,
  entity: keyof typeof AUDITED_IN_COLLECTION,
  id: number,
  classId?: number,
): Promise<void> {
  const { what, from, alias } = AUDITED_IN_COLLECTION[entity];
  const where = [db`${nameOf(db, `${alias}.id`)} = ${id}::int` as Fragment];
  if (classId !== undefined) where.push(db`${nameOf(db, `${alias}.class_id`)} = ${classId}::int` as Fragment);
  await readInCollectionAs(db, auth, 'ReadAudit', what, {
    columns: db`${nameOf(db, `${alias}.id`)}` as Fragment,
    from: db`${nameOf(db, from)} ${nameOf(db, alias)}` as Fragment,
    where: and(db, where),
    collection: `${alias}.collection_id`,
  });
}

/** Whether a human user (not a service account) with this principal id exists. */
export async function humanUserExists(db: Db, id: number): Promise<boolean> {
  const [row] = await db<{ id: number }[]>`
    select p.id from principals p join users u on u.principal_id = p.id where p.id = ${id}::int and p.kind = 'human'`;
  return row !== undefined;
}

export async function groupExists(db: Db, id: number): Promise<boolean> {
  const [row] = await db<{ id: number }[]>`select g.id from groups g where g.id = ${id}::int`;
  return row !== undefined;
}
