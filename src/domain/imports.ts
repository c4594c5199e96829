// Imports: pure rules (no SQL, no HTTP beyond the ApiErrors thrown). The graph of an import
// request is checked once when it is submitted (refs, natural keys, duplicates, class schemas,
// remote-target documents) and turned into a plan: every item in processing order with the refs
// it depends on. The worker (src/workers/import.ts) runs the plan; src/db/imports.ts stores the
// per-item results.
//
// Processing order is dependency order. It follows the graph's section order except that
// `groups` come before `collection_permissions`, whose `group_ref` names a group of the same
// import. A `*_ref` must name an item processed earlier (within `collections`, an earlier item).
import { createHmac } from 'node:crypto';
import { ApiError, badRequest, type ErrorDetail } from './errors.ts';
import { compileClassSchema, schemaErrors } from './class-schema.ts';
import { validateTarget, fieldsFromNew, type TemplateLimits } from './remote-targets.ts';
import { templateFieldsFromNew, validateTemplateFields } from './exports.ts';
import { subscriptionFromNew, validateSubscription } from './event-subscriptions.ts';
import { mergeMembers } from './json-patch.ts';

export const SECTIONS = [
  'collections',
  'classes',
  'objects',
  'class_relations',
  'object_relations',
  'groups',
  'collection_permissions',
  'principals',
  'group_memberships',
  'export_templates',
  'remote_targets',
  'event_sinks',
  'event_subscriptions',
] as const;
export type Section = (typeof SECTIONS)[number];

export const ENTITY_KINDS = [
  'collection',
  'class',
  'object',
  'class_relation',
  'object_relation',
  'collection_permission',
  'group',
  'principal',
  'group_membership',
  'export_template',
  'remote_target',
  'event_sink',
  'event_subscription',
] as const;
export type EntityKind = (typeof ENTITY_KINDS)[number];

export const SECTION_KIND: Record<Section, EntityKind> = {
  collections: 'collection',
  classes: 'class',
  objects: 'object',
  class_relations: 'class_relation',
  object_relations: 'object_relation',
  groups: 'group',
  collection_permissions: 'collection_permission',
  principals: 'principal',
  group_memberships: 'group_membership',
  export_templates: 'export_template',
  remote_targets: 'remote_target',
  event_sinks: 'event_sink',
  event_subscriptions: 'event_subscription',
};

/** Sections that need an unscoped administrator (identity, template and integration imports). */
export const ADMIN_SECTIONS: readonly Section[] = [
  'groups',
  'principals',
  'group_memberships',
  'export_templates',
  'remote_targets',
  'event_sinks',
  'event_subscriptions',
];

export const RESULT_ACTIONS = ['create', 'update', 'unchanged'] as const;
export type ResultAction = (typeof RESULT_ACTIONS)[number];
export const RESULT_OUTCOMES = ['succeeded', 'failed', 'skipped', 'rolled_back'] as const;
export type ResultOutcome = (typeof RESULT_OUTCOMES)[number];

/** At most this many items per import (ours): one import is one task and, when strict, one transaction. */
export const MAX_IMPORT_ITEMS = 10_000;
/** At most this many validation details are reported. */
const MAX_DETAILS = 50;

// ---- the request --------------------------------------------------------------------------------

export interface CollectionKey {
  name: string;
  path: string[];
}
export interface ClassKey {
  name: string;
}
export interface ObjectKey {
  name: string;
  class: ClassKey;
}
export interface IdentityKey {
  name: string;
  identity_scope: string;
}

export interface ImportCollection {
  ref?: string;
  name: string;
  description?: string;
  parent_collection_ref?: string;
  parent_collection_key?: CollectionKey;
}
export interface ImportClass {
  ref?: string;
  name: string;
  description?: string;
  json_schema?: unknown;
  validate_schema?: boolean;
  collection_ref?: string;
  collection_key?: CollectionKey;
}
export interface ImportObject {
  ref?: string;
  name: string;
  description?: string;
  json_data: unknown;
  class_ref?: string;
  class_key?: ClassKey;
}
export interface ImportClassRelation {
  ref?: string;
  from_class_ref?: string;
  from_class_key?: ClassKey;
  to_class_ref?: string;
  to_class_key?: ClassKey;
  forward_alias?: string | null;
  reverse_alias?: string | null;
  from_max_relations?: number | null;
  to_max_relations?: number | null;
}
export interface ImportObjectRelation {
  ref?: string;
  from_object_ref?: string;
  from_object_key?: ObjectKey;
  to_object_ref?: string;
  to_object_key?: ObjectKey;
}
export interface ImportCollectionPermission {
  ref?: string;
  collection_ref?: string;
  collection_key?: CollectionKey;
  group_ref?: string;
  group_key?: IdentityKey;
  permissions: string[];
  replace_existing?: boolean;
}
export interface ImportGroup {
  ref?: string;
  name: string;
  description?: string;
  identity_scope?: string;
}
export interface ImportHuman {
  ref?: string;
  kind: 'human';
  name: string;
  identity_scope?: string;
  email?: string | null;
  proper_name?: string | null;
  /** In the submitted body only; never stored (see storedImportRequest). */
  password?: string;
  /** In the stored request only: the Argon2id hash made from `password` at submission. */
  password_hash?: string;
}
export interface ImportServiceAccount {
  ref?: string;
  kind: 'service_account';
  name: string;
  identity_scope?: string;
  description?: string;
  owner_group_ref?: string;
  owner_group_key?: IdentityKey;
  disabled?: boolean;
}
export type ImportPrincipal = ImportHuman | ImportServiceAccount;
export interface ImportGroupMembership {
  ref?: string;
  principal_ref?: string;
  principal_key?: IdentityKey;
  group_ref?: string;
  group_key?: IdentityKey;
}
export interface ImportRemoteTarget {
  ref?: string;
  collection_ref?: string;
  collection_key?: CollectionKey;
  class_ref?: string;
  class_key?: ClassKey;
  name: string;
  description: string;
  method: 'get' | 'post' | 'patch' | 'delete';
  url_template: string;
  headers_template?: Record<string, string>;
  body_template?: string | null;
  auth_config?: { type: string } & Record<string, unknown>;
  allowed_subject_types: ('collection' | 'class' | 'object' | 'class_relation' | 'object_relation')[];
  timeout_ms?: number;
  enabled?: boolean;
}

export interface ImportExportTemplate {
  ref?: string;
  collection_ref?: string;
  collection_key?: CollectionKey;
  name: string;
  description?: string;
  kind?: 'export' | 'fragment';
  content_type?: 'text/plain' | 'text/html' | 'text/csv' | 'application/json';
  template: string;
  default_query?: string | null;
}
export interface SinkKey {
  name: string;
}
export interface ImportEventSink {
  ref?: string;
  name: string;
  kind: 'webhook' | 'amqp' | 'redis_stream' | 'email';
  config: Record<string, unknown>;
  secret_ref?: string | null;
  enabled?: boolean;
  delivery_policy?: { min_interval_ms?: number | null };
}
export interface ImportEventSubscription {
  ref?: string;
  collection_ref?: string;
  collection_key?: CollectionKey;
  sink_ref?: string;
  sink_key?: SinkKey;
  name: string;
  description?: string;
  entity_types: string[];
  actions: string[];
  filter?: Record<string, unknown>;
  routing?: Record<string, unknown>;
  enabled?: boolean;
}

/** Every section is optional: an omitted section is the same as an empty one. */
export type ImportGraph = { [S in Section]?: Record<string, unknown>[] };

export interface ImportRequest {
  version: 2;
  dry_run?: boolean;
  mode?: { atomicity?: 'strict' | 'best_effort'; collision_policy?: 'abort' | 'overwrite' };
  graph: ImportGraph;
}

// ---- the plan -----------------------------------------------------------------------------------

/** Which section each `*_ref` member of an item names. */
const REF_MEMBERS: Record<Section, Record<string, Section>> = {
  collections: { parent_collection_ref: 'collections' },
  classes: { collection_ref: 'collections' },
  objects: { class_ref: 'classes' },
  class_relations: { from_class_ref: 'classes', to_class_ref: 'classes' },
  object_relations: { from_object_ref: 'objects', to_object_ref: 'objects' },
  groups: {},
  collection_permissions: { collection_ref: 'collections', group_ref: 'groups' },
  principals: { owner_group_ref: 'groups' },
  group_memberships: { principal_ref: 'principals', group_ref: 'groups' },
  export_templates: { collection_ref: 'collections' },
  remote_targets: { collection_ref: 'collections', class_ref: 'classes' },
  event_sinks: {},
  event_subscriptions: { collection_ref: 'collections', sink_ref: 'event_sinks' },
};

export interface PlanItem {
  /** Position in processing order (the result row's key). */
  seq: number;
  section: Section;
  index: number;
  kind: EntityKind;
  /** The item's `ref`, or `<section>[<index>]`. */
  itemRef: string;
  /** The client ref other items may use (undefined when the item has none). */
  ref: string | undefined;
  body: Record<string, unknown>;
  /** Refs of earlier items this item needs. */
  deps: string[];
}

export interface ImportPlan {
  items: PlanItem[];
  dryRun: boolean;
  atomicity: 'strict' | 'best_effort';
  collisionPolicy: 'abort' | 'overwrite';
}

export function importMode(req: Pick<ImportRequest, 'dry_run' | 'mode'>): Omit<ImportPlan, 'items'> {
  return {
    dryRun: req.dry_run ?? false,
    atomicity: req.mode?.atomicity ?? 'strict',
    collisionPolicy: req.mode?.collision_policy ?? 'abort',
  };
}

/** Non-empty sections that need an unscoped administrator. */
export function adminSectionsUsed(graph: ImportGraph): Section[] {
  return ADMIN_SECTIONS.filter((s) => (graph[s]?.length ?? 0) > 0);
}

/** Whether the import carries credentials (any human principal with a password). */
export function isCredentialBearing(graph: ImportGraph): boolean {
  return (graph.principals ?? []).some((p) => p.kind === 'human' && typeof p.password === 'string');
}

export function countItems(graph: ImportGraph): number {
  return SECTIONS.reduce((n, s) => n + (graph[s]?.length ?? 0), 0);
}

function at(section: Section, index: number, member?: string): string {
  return `body.graph.${section}[${index}]${member ? `.${member}` : ''}`;
}

const DEFAULT_SCOPE = 'local';

/**
 * Checks an import graph and returns its plan; 400 with details for: too many items, a section
 * this service cannot import, a duplicate `ref`, a `*_ref` that names nothing, an item of the wrong
 * section or a later item, a collection key whose path does not end in its name, two items with
 * the same natural key, an invalid class schema or validate_schema without one, object data that
 * fails the schema of a class of the same import, and a remote target the remote-target API
 * would refuse.
 */
export function planImport(req: ImportRequest, limits: TemplateLimits): ImportPlan {
  const graph = req.graph;
  const details: ErrorDetail[] = [];
  const bad = (path: string, message: string) => {
    if (details.length < MAX_DETAILS) details.push({ path, message });
  };

  const total = countItems(graph);
  if (total > MAX_IMPORT_ITEMS) {
    throw badRequest(`an import holds at most ${MAX_IMPORT_ITEMS} items (this one has ${total})`, [
      { path: 'body.graph', message: `at most ${MAX_IMPORT_ITEMS} items` },
    ]);
  }

  // Pass 1: items in processing order and the refs they declare.
  const items: PlanItem[] = [];
  const refs = new Map<string, PlanItem>();
  for (const section of SECTIONS) {
    (graph[section] ?? []).forEach((body, index) => {
      const ref = typeof body.ref === 'string' ? body.ref : undefined;
      const item: PlanItem = {
        seq: items.length,
        section,
        index,
        kind: SECTION_KIND[section],
        itemRef: ref ?? `${section}[${index}]`,
        ref,
        body,
        deps: [],
      };
      items.push(item);
      if (ref === undefined) return;
      const first = refs.get(ref);
      if (first) bad(at(section, index, 'ref'), `duplicate ref "${ref}" (first used by ${first.section}[${first.index}])`);
      else refs.set(ref, item);
    });
  }

  // Pass 2: every *_ref names an earlier item of the right section.
  for (const item of items) {
    for (const [member, target] of Object.entries(REF_MEMBERS[item.section])) {
      const value = item.body[member];
      if (value === undefined) continue;
      const named = typeof value === 'string' ? refs.get(value) : undefined;
      if (!named) bad(at(item.section, item.index, member), `unknown ref "${String(value)}"`);
      else if (named.section !== target) {
        bad(at(item.section, item.index, member), `ref "${named.ref}" names an item of ${named.section}, not of ${target}`);
      } else if (named.seq >= item.seq) {
        bad(at(item.section, item.index, member), `ref "${named.ref}" must name an earlier item of ${target}`);
      } else item.deps.push(named.ref!);
    }
  }

  // Natural keys: a collection key's path ends in its name.
  const checkCollectionKey = (item: PlanItem, member: string) => {
    const key = item.body[member] as CollectionKey | undefined;
    if (key && key.path[key.path.length - 1] !== key.name) {
      bad(at(item.section, item.index, member), 'the last element of path must equal name');
    }
  };
  for (const item of items) {
    for (const member of ['parent_collection_key', 'collection_key']) checkCollectionKey(item, member);
  }

  // Natural identities inside the import: two items must not name the same row.
  const identity = new Map<PlanItem, string>();
  const seen = new Map<string, PlanItem>();
  const idOf = (ref: unknown): string | undefined => {
    const named = typeof ref === 'string' ? refs.get(ref) : undefined;
    return named ? identity.get(named) : undefined;
  };
  const collectionIdentity = (b: Record<string, unknown>, refMember: string, keyMember: string): string | undefined => {
    if (b[refMember] !== undefined) return idOf(b[refMember]);
    const key = b[keyMember] as CollectionKey | undefined;
    return key ? JSON.stringify(key.path) : undefined;
  };
  const classIdentity = (b: Record<string, unknown>, refMember: string, keyMember: string): string | undefined => {
    if (b[refMember] !== undefined) return idOf(b[refMember]);
    const key = b[keyMember] as ClassKey | undefined;
    return key ? JSON.stringify(key.name) : undefined;
  };
  const objectIdentity = (b: Record<string, unknown>, refMember: string, keyMember: string): string | undefined => {
    if (b[refMember] !== undefined) return idOf(b[refMember]);
    const key = b[keyMember] as ObjectKey | undefined;
    return key ? JSON.stringify([JSON.stringify(key.class.name), key.name]) : undefined;
  };
  const identityKey = (b: Record<string, unknown>, refMember: string, keyMember: string): string | undefined => {
    if (b[refMember] !== undefined) return idOf(b[refMember]);
    const key = b[keyMember] as IdentityKey | undefined;
    return key ? JSON.stringify([key.identity_scope, key.name]) : undefined;
  };
  /** The identity of an item named by two others; undefined when either is unknown. */
  const pairOf = (a: string | undefined, b: string | undefined): string | undefined =>
    a !== undefined && b !== undefined ? JSON.stringify([a, b]) : undefined;
  for (const item of items) {
    const b = item.body;
    let id: string | undefined;
    switch (item.section) {
      case 'collections': {
        const parent =
          b.parent_collection_ref !== undefined || b.parent_collection_key !== undefined
            ? collectionIdentity(b, 'parent_collection_ref', 'parent_collection_key')
            : '[]';
        if (parent !== undefined) id = JSON.stringify([...(JSON.parse(parent) as string[]), b.name]);
        break;
      }
      case 'classes':
        id = JSON.stringify(b.name);
        break;
      case 'objects': {
        const cls = classIdentity(b, 'class_ref', 'class_key');
        if (cls !== undefined) id = JSON.stringify([cls, b.name]);
        break;
      }
      case 'class_relations':
        id = pairOf(classIdentity(b, 'from_class_ref', 'from_class_key'), classIdentity(b, 'to_class_ref', 'to_class_key'));
        break;
      case 'object_relations': {
        const from = objectIdentity(b, 'from_object_ref', 'from_object_key');
        const to = objectIdentity(b, 'to_object_ref', 'to_object_key');
        if (from !== undefined && to !== undefined) {
          id = JSON.stringify([from, to]);
          if (from === to) bad(at(item.section, item.index), 'an object cannot be related to itself');
        }
        break;
      }
      case 'collection_permissions':
        id = pairOf(collectionIdentity(b, 'collection_ref', 'collection_key'), identityKey(b, 'group_ref', 'group_key'));
        break;
      case 'groups':
      case 'principals':
        id = JSON.stringify([(b.identity_scope as string | undefined) ?? DEFAULT_SCOPE, b.name]);
        break;
      case 'group_memberships':
        id = pairOf(identityKey(b, 'principal_ref', 'principal_key'), identityKey(b, 'group_ref', 'group_key'));
        break;
      case 'remote_targets':
      case 'export_templates': {
        const col = collectionIdentity(b, 'collection_ref', 'collection_key');
        if (col !== undefined) id = JSON.stringify([col, b.name]);
        break;
      }
      case 'event_sinks':
        id = JSON.stringify(b.name);
        break;
      case 'event_subscriptions': {
        const system = b.collection_ref === undefined && b.collection_key === undefined;
        const col = system ? 'system' : collectionIdentity(b, 'collection_ref', 'collection_key');
        if (col !== undefined) id = JSON.stringify([col, b.name]);
        break;
      }
      default:
        id = undefined;
    }
    if (id === undefined) continue;
    identity.set(item, id);
    const first = seen.get(`${item.section}:${id}`);
    if (first) bad(at(item.section, item.index), `names the same ${item.kind} as ${first.section}[${first.index}]`);
    else seen.set(`${item.section}:${id}`, item);
  }

  // Classes: valid schemas; objects of a validating class of this import match its schema.
  const validators = new Map<string, ReturnType<typeof compileClassSchema>>();
  for (const item of items.filter((i) => i.section === 'classes')) {
    const b = item.body as unknown as ImportClass;
    if (b.validate_schema === true && b.json_schema === null) {
      bad(at('classes', item.index, 'validate_schema'), 'validate_schema: true needs a json_schema');
    }
    if (b.json_schema === undefined || b.json_schema === null) continue;
    try {
      const v = compileClassSchema(b.json_schema);
      if (b.validate_schema === true && b.ref !== undefined) validators.set(b.ref, v);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      for (const d of err.details ?? [{ path: 'json_schema', message: err.message }]) {
        bad(`${at('classes', item.index)}.${d.path}`, d.message);
      }
    }
  }
  for (const item of items.filter((i) => i.section === 'objects')) {
    const b = item.body as unknown as ImportObject;
    const v = b.class_ref === undefined ? undefined : validators.get(b.class_ref);
    if (!v) continue;
    for (const d of schemaErrors(v, b.json_data))
      bad(`${at('objects', item.index, 'json_data')}${d.path === '/' ? '' : d.path}`, d.message);
  }

  // Remote targets: the remote-target API's document rules (ids are checked by the worker).
  for (const item of items.filter((i) => i.section === 'remote_targets')) {
    const b = item.body as unknown as ImportRemoteTarget;
    const hasClass = b.class_ref !== undefined || b.class_key !== undefined;
    try {
      const body: { collection_id: number; class_id: number | null } = mergeMembers(targetBody(b), {
        collection_id: 0,
        class_id: hasClass ? 0 : null,
      });
      validateTarget(fieldsFromNew(body as Parameters<typeof fieldsFromNew>[0]), limits);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      for (const d of err.details ?? []) {
        bad(at('remote_targets', item.index) + d.path.replace(/^body/, '').replace(/^\.class_id/, '.class_ref'), d.message);
      }
    }
  }

  // Export templates and subscriptions: their APIs' document rules (includes, sinks and routing are
  // checked by the worker against the database).
  const rewrite = (section: Section, index: number, path: string) => at(section, index) + path.replace(/^body/, '');
  for (const item of items.filter((i) => i.section === 'export_templates')) {
    const b = item.body as unknown as ImportExportTemplate;
    try {
      validateTemplateFields(templateFieldsFromNew(mergeMembers(templateBody(b), { collection_id: 0 })), limits);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      for (const d of err.details ?? []) bad(rewrite('export_templates', item.index, d.path), d.message);
    }
  }
  for (const item of items.filter((i) => i.section === 'event_subscriptions')) {
    const b = item.body as unknown as ImportEventSubscription;
    const system = b.collection_ref === undefined && b.collection_key === undefined;
    try {
      validateSubscription(subscriptionFromNew(system ? null : 0, mergeMembers(subscriptionBody(b), { sink_id: 0 })));
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      for (const d of err.details ?? []) bad(rewrite('event_subscriptions', item.index, d.path), d.message);
    }
  }

  if (details.length) throw badRequest(`the import is invalid: ${details[0]!.path} ${details[0]!.message}`, details);
  return { items, ...importMode(req) };
}

/** The remote-target API body members of an import item (refs and keys removed). */
export function targetBody(b: ImportRemoteTarget): Record<string, unknown> {
  const { ref: _r, collection_ref: _cr, collection_key: _ck, class_ref: _kr, class_key: _kk, ...rest } = b;
  return rest;
}

/** The export-template API body members of an import item (refs and keys removed). */
export function templateBody(b: ImportExportTemplate): Omit<ImportExportTemplate, 'ref' | 'collection_ref' | 'collection_key'> {
  const { ref: _r, collection_ref: _cr, collection_key: _ck, ...rest } = b;
  return rest;
}

/** The sink API body members of an import item. */
export function sinkBody(b: ImportEventSink): Omit<ImportEventSink, 'ref'> {
  const { ref: _r, ...rest } = b;
  return rest;
}

/** The subscription API body members of an import item (refs and keys removed). */
export function subscriptionBody(
  b: ImportEventSubscription,
): Omit<ImportEventSubscription, 'ref' | 'collection_ref' | 'collection_key' | 'sink_ref' | 'sink_key'> {
  const { ref: _r, collection_ref: _cr, collection_key: _ck, sink_ref: _sr, sink_key: _sk, ...rest } = b;
  return rest;
}

/** The identity scope of a group or principal item (default `local`). */
export function scopeOf(b: { identity_scope?: string }): string {
  return b.identity_scope ?? DEFAULT_SCOPE;
}

/**
 * The final status of an import from its outcomes: strict imports succeed or fail as a whole;
 * best-effort imports fail when nothing succeeded and something failed, and partially succeed
 * when both happened.
 */
export function finalStatus(
  atomicity: 'strict' | 'best_effort',
  counts: Record<ResultOutcome, number>,
): 'succeeded' | 'failed' | 'partially_succeeded' {
  const troubled = counts.failed + counts.skipped;
  if (troubled === 0) return 'succeeded';
  if (atomicity === 'strict' || counts.succeeded === 0) return 'failed';
  return 'partially_succeeded';
}

/**
 * The salt of an imported password: derived from the server's token hash key and the principal's
 * identity, so that the same submission hashes to the same stored request (Idempotency-Key
 * compares stored requests) while different principals never share a salt.
 */
export function importPasswordSalt(key: Buffer, identityScope: string, name: string): Buffer {
  return createHmac('sha256', key).update(`svc-import-password-salt\u0000${identityScope}\u0000${name}`, 'utf8').digest().subarray(0, 16);
}
