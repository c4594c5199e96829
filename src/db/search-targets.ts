// Structured search: the SQL side of each target kind: the field → column table for the list
// query language, the caller's visibility, the page query and the public representation. Pages
// and representations reuse the resources' own list code where it accepts extra conditions
// (collections, classes, objects, audit events, the latter with its visibility and redaction);
// users, groups and service accounts use the same FROM and select list with their views.
import type { Db } from './sql.ts';
import { collectionWhere, classWhere, objectWhere } from './authz.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import { listCollectionRows } from './collections.ts';
import { collectionView, type CollectionRow } from '../domain/views/collections.ts';
import { listClasses } from './classes.ts';
import { classExpandedView, type ClassExpandedRow } from '../domain/views/classes.ts';
import { listObjects } from './objects.ts';
import { objectJsonText, objectView, type ObjectRow } from '../domain/views/objects.ts';
import { listEventRows, type AuditCollections } from './audit.ts';
import { eventJsonText, eventWire, type EventRow } from '../domain/audit.ts';
import { userView, type UserRow } from '../domain/views/users.ts';
import { groupView, type GroupRow } from '../domain/views/groups.ts';
import { serviceAccountView, type ServiceAccountRow } from '../domain/views/service-accounts.ts';
import type { FieldDef, ListSpec, ParsedList } from '../domain/list-query.ts';
import { DEFAULT_SORT, TARGET_FIELDS, type TargetKind } from '../domain/search.ts';
import type { Authority } from '../domain/authz.ts';
import type { ResponseBody } from '../domain/wire.ts';
import type { JsonTexts } from '../domain/json-text.ts';

type Row = Record<string, unknown>;

/** One search result as the contract declares it (SearchResult): the kind and its list representation. */
export type SearchResult = ResponseBody<'searchStructured', 200>['results'][number];

export interface TargetSql {
  /** Field → column of the target (columns on the aliases its list query uses). */
  spec: ListSpec;
  /** Visibility: the caller's authorized universe (the complement of `not` stays inside it). */
  where: Fragment[];
  /** One page with the resource's own list query (its FROM, select list and any built-in visibility). */
  list: (parsed: ParsedList, where: Fragment[]) => Promise<ListPage<Row>>;
  /** The result of a row: its kind and the public representation of the resource's list endpoint. */
  result: (row: Row) => SearchResult;
}

/** Field → column per target; types and sortability come from the domain's field table. */
const COLUMNS: Record<TargetKind, Record<string, string>> = {
  collection: {
    id: 'c.id',
    name: 'c.name',
    description: 'c.description',
    created_at: 'c.created_at',
    updated_at: 'c.updated_at',
    revision: 'c.revision',
  },
  class: {
    id: 'k.id',
    name: 'k.name',
    description: 'k.description',
    collection_id: 'k.collection_id',
    created_at: 'k.created_at',
    updated_at: 'k.updated_at',
    revision: 'k.revision',
    validate_schema: 'k.validate_schema',
    json_schema: 'k.json_schema',
  },
  object: {
    id: 'o.id',
    name: 'o.name',
    description: 'o.description',
    collection_id: 'o.collection_id',
    created_at: 'o.created_at',
    updated_at: 'o.updated_at',
    revision: 'o.revision',
    json_data: 'o.json_data',
  },
  audit_event: {
    id: 'e.id',
    occurred_at: 'e.occurred_at',
    entity_type: 'e.entity_type',
    entity_id: 'e.entity_id',
    entity_name: 'e.entity_name',
    collection_id: 'e.collection_id',
    action: 'e.action',
    actor_kind: 'e.actor_kind',
    actor_user_id: 'e.actor_user_id',
    initiator_user_id: 'e.initiator_user_id',
    summary: 'e.summary',
    metadata: 'e.metadata',
  },
  user: {
    id: 'p.id',
    name: 'p.name',
    identity_scope: 'p.identity_scope',
    proper_name: 'u.proper_name',
    email: 'u.email',
    created_at: 'p.created_at',
    updated_at: 'p.updated_at',
    revision: 'p.revision',
  },
  group: {
    id: 'g.id',
    name: 'g.name',
    description: 'g.description',
    identity_scope: 'g.identity_scope',
    managed_by: 'g.managed_by',
    external_key: 'g.external_key',
    last_sync_attempted_at: 'g.last_sync_attempted_at',
    last_sync_success_at: 'g.last_sync_success_at',
    created_at: 'g.created_at',
    updated_at: 'g.updated_at',
    revision: 'g.revision',
  },
  service_account: {
    id: 'p.id',
    name: 'p.name',
    description: 'sa.description',
    identity_scope: 'p.identity_scope',
    owner_group_id: 'sa.owner_group_id',
    created_by: 'sa.created_by',
    disabled_at: 'sa.disabled_at',
    created_at: 'p.created_at',
    updated_at: 'p.updated_at',
    revision: 'p.revision',
  },
};

/** Columns declared NOT NULL (migrations/) on tables every target query reaches by inner joins. */
const NOT_NULL = new Set([
  ...['c.id', 'c.name', 'c.description', 'c.created_at', 'c.updated_at', 'c.revision'],
  ...['k.id', 'k.name', 'k.description', 'k.collection_id', 'k.created_at', 'k.updated_at', 'k.revision', 'k.validate_schema'],
  ...['o.id', 'o.name', 'o.description', 'o.collection_id', 'o.created_at', 'o.updated_at', 'o.revision'],
  ...['e.id', 'e.occurred_at', 'e.entity_type', 'e.action', 'e.actor_kind'],
  ...['p.id', 'p.name', 'p.identity_scope', 'p.created_at', 'p.updated_at', 'p.revision'],
  ...['g.id', 'g.name', 'g.description', 'g.identity_scope', 'g.created_at', 'g.updated_at', 'g.revision'],
  ...['sa.description', 'sa.owner_group_id'],
]);

/** Columns whose lowercase has a trigram index (migrations/0240): objects' names and descriptions. */
export const LOWER_INDEXED = new Set(['o.name', 'o.description']);

function specFor(kind: TargetKind): ListSpec {
  const fields: Record<string, FieldDef> = {};
  for (const [name, def] of Object.entries(TARGET_FIELDS[kind])) {
    const column = COLUMNS[kind][name]!;
    fields[name] = {
      type: def.type,
      column,
      sortable: def.sortable,
      notNull: NOT_NULL.has(column),
      lowerIndexed: LOWER_INDEXED.has(column),
    };
  }
  return { fields, defaultSort: DEFAULT_SORT[kind] };
}

/** The list-language spec of every target (field → column, type, sortability). */
export const TARGET_SPECS: Record<TargetKind, ListSpec> = {
  collection: specFor('collection'),
  class: specFor('class'),
  object: specFor('object'),
  audit_event: specFor('audit_event'),
  user: specFor('user'),
  group: specFor('group'),
  service_account: specFor('service_account'),
};

/**
 * The SQL of one target for the caller. Authorization gates (403) are the handler's job. With
 * `texts`, an object's json_data is the database's JSON text, and the object goes to the reply
 * written directly (objectJsonText) as a placeholder of `texts` (domain/json-text.ts), instead of
 * being parsed and serialised again.
 */
export function targetSql(
  db: Db,
  auth: Authority,
  kind: TargetKind,
  opts: { classId: number | null; texts?: JsonTexts; auditCollections?: AuditCollections },
): TargetSql {
  const spec = TARGET_SPECS[kind];
  switch (kind) {
    case 'collection':
      return {
        spec,
        where: [collectionWhere(db, auth, 'ReadCollection', { id: 'c.id' })],
        list: (parsed, where) => listCollectionRows(db, parsed, where) as Promise<ListPage<Row>>,
        result: (r) => ({ kind: 'collection', resource: collectionView(r as CollectionRow) }),
      };
    case 'class':
      return {
        spec,
        where: [classWhere(db, auth, 'ReadClass', { id: 'k.id', collectionId: 'k.collection_id' })],
        list: (parsed, where) => listClasses(db, parsed, where) as Promise<ListPage<Row>>,
        result: (r) => ({ kind: 'class', resource: classExpandedView(r as ClassExpandedRow) }),
      };
    case 'object': {
      const where = [objectWhere(db, auth, 'ReadObject', { id: 'o.id', classId: 'o.class_id', collectionId: 'o.collection_id' })];
      if (opts.classId !== null) where.push(db`o.class_id = ${opts.classId}::int` as Fragment);
      return {
        spec,
        where,
        list: (parsed, w) =>
          listObjects(db, { parsed, spec, where: [], computedFilters: 0, computedSort: false }, w, null, {
            jsonText: opts.texts !== undefined,
          }) as Promise<ListPage<Row>>,
        result: (r) => {
          const row = r as ObjectRow & { json_data: string };
          // with `texts`, the object's JSON written directly (objectJsonText), as an object page's
          const resource = opts.texts ? (opts.texts.add(objectJsonText(row)) as unknown as ReturnType<typeof objectView>) : objectView(row);
          return { kind: 'object', resource };
        },
      };
    }
    case 'audit_event':
      // audit visibility and snapshot redaction are applied inside listEventRows
      return {
        spec,
        where: [],
        list: (parsed, where) =>
          listEventRows(db, auth, parsed, where, {
            jsonText: opts.texts !== undefined,
            auditCollections: opts.auditCollections,
          }) as Promise<ListPage<Row>>,
        // with `texts`, the event's JSON written directly (eventJsonText), as an audit page's
        result: (r) => ({
          kind: 'audit_event',
          resource: opts.texts
            ? (opts.texts.add(eventJsonText(r as EventRow)) as unknown as ReturnType<typeof eventWire>)
            : eventWire(r as EventRow),
        }),
      };
    case 'user':
      return {
        spec,
        where: [db`p.kind = 'human'` as Fragment],
        list: (parsed, where) =>
          runList<Row>(db, {
            from: db`principals p join users u on u.principal_id = p.id` as Fragment,
            select: db`p.id, p.name, p.identity_scope, u.proper_name, u.email, p.created_at, p.updated_at, p.revision,
              p.provider_managed` as Fragment,
            where,
            parsed,
            spec,
          }),
        result: (r) => ({ kind: 'user', resource: userView(r as unknown as UserRow) }),
      };
    case 'group':
      return {
        spec,
        where: [],
        list: (parsed, where) =>
          runList<Row>(db, {
            from: db`groups g` as Fragment,
            select: db`g.id, g.name, g.description, g.identity_scope, g.managed_by, g.external_key, g.last_sync_attempted_at,
              g.last_sync_success_at, g.created_at, g.updated_at, g.revision` as Fragment,
            where,
            parsed,
            spec,
          }),
        result: (r) => ({ kind: 'group', resource: groupView(r as unknown as GroupRow) }),
      };
    case 'service_account':
      return {
        spec,
        // administrators see every account; others the accounts owned by their groups (as the list)
        where: auth.isAdmin
          ? []
          : [
              db`sa.owner_group_id in (select gm.group_id from group_members gm where gm.principal_id = ${auth.principal.id}::int)` as Fragment,
            ],
        list: (parsed, where) =>
          runList<Row>(db, {
            from: db`principals p join service_accounts sa on sa.principal_id = p.id` as Fragment,
            select: db`p.id, p.name, sa.description, p.identity_scope, sa.owner_group_id, sa.created_by, sa.disabled_at,
              p.created_at, p.updated_at, p.revision` as Fragment,
            where,
            parsed,
            spec,
          }),
        result: (r) => ({ kind: 'service_account', resource: serviceAccountView(r as unknown as ServiceAccountRow) }),
      };
  }
}
