// Backup documents (formats 7 and 6): which tables a backup holds, which columns it writes, what
// it leaves out and why, and the validation of an uploaded document before a restore is staged.
//
// SECTIONS is the one declarative list. Each entry is one database table and one document section
// (`state.<section>` or `history.<section>`); its rows carry exactly `fields` (the table's column
// names), `omitted` names every other column of the table with the reason it is not written (a
// restore gives those columns their defaults), `refs` are the links a restore checks inside the
// document, and `rows` narrows which rows a backup takes. The array order is the insert order
// of a restore (referenced tables first); deletes run in reverse. EXCLUDED_TABLES names the tables
// that are not backed up and what a restore does with them. test/backups.test.ts fails when a
// table or column in the database is neither listed here nor excluded, so adding a table is one
// entry here plus its section in openapi.yaml (BackupDocument).
import { badRequest, type ErrorDetail } from './errors.ts';

export const BACKUP_FORMAT = 7;
export const SUPPORTED_FORMATS = [6, 7] as const;
export type BackupFormat = (typeof SUPPORTED_FORMATS)[number];

export type Part = 'state' | 'history';

export interface SectionRef {
  /** Field of this section's rows; null values are not checked. */
  field: string;
  /** Section the value must name a row of. */
  section: string;
  /** Field of the target rows (default: its single key field). */
  target?: string;
}

export type RowFilter =
  /** Only rows whose column holds one of the values. */
  | { column: string; in: readonly string[] }
  /** Only rows whose column names a backed-up row (its key) of the parent section. */
  | { column: string; parent: string };

export interface SectionSpec {
  section: string;
  part: Part;
  table: string;
  /** The fields that identify a row (unique within the section). */
  key: readonly string[];
  /** Columns written to the document, in this order; every row of an upload carries exactly these. */
  fields: readonly string[];
  /** Every other column of the table, with the reason it is not in the document. */
  omitted: Readonly<Record<string, string>>;
  refs: readonly SectionRef[];
  rows?: RowFilter;
  /** First format with this section (older documents have none: restored empty). */
  since?: BackupFormat;
  /** Fields format 6 rows may lack, and the legacy default a restore gives them. */
  legacyDefaults?: Readonly<Record<string, unknown>>;
}

export const FINISHED_TASK_STATUSES = ['succeeded', 'failed', 'partially_succeeded', 'cancelled'] as const;
export const TERMINAL_DELIVERY_STATUSES = ['succeeded', 'dead'] as const;

const TS = ['created_at', 'updated_at', 'revision'] as const;

export const SECTIONS: readonly SectionSpec[] = [
  // ---- state: identities ---------------------------------------------------------------------
  {
    section: 'principals',
    part: 'state',
    table: 'principals',
    key: ['id'],
    fields: [
      'id',
      'kind',
      'name',
      'identity_scope',
      'provider_managed',
      'external_subject',
      'last_synced_at',
      'settings',
      'settings_revision',
      ...TS,
    ],
    omitted: {},
    refs: [],
  },
  {
    section: 'users',
    part: 'state',
    table: 'users',
    key: ['principal_id'],
    fields: ['principal_id', 'email', 'proper_name'],
    omitted: { password_hash: 'password hashes never leave the service; passwords are set again after a restore' },
    refs: [{ field: 'principal_id', section: 'principals' }],
  },
  {
    section: 'groups',
    part: 'state',
    table: 'groups',
    key: ['id'],
    fields: [
      'id',
      'name',
      'description',
      'identity_scope',
      'managed_by',
      'external_key',
      'last_sync_attempted_at',
      'last_sync_success_at',
      ...TS,
    ],
    omitted: {},
    refs: [],
  },
  {
    section: 'service_accounts',
    part: 'state',
    table: 'service_accounts',
    key: ['principal_id'],
    fields: ['principal_id', 'description', 'owner_group_id', 'created_by', 'disabled_at'],
    omitted: {},
    refs: [
      { field: 'principal_id', section: 'principals' },
      { field: 'owner_group_id', section: 'groups' },
    ],
  },
  {
    section: 'group_memberships',
    part: 'state',
    table: 'group_members',
    key: ['group_id', 'principal_id'],
    fields: ['group_id', 'principal_id', 'created_at'],
    omitted: {},
    refs: [
      { field: 'group_id', section: 'groups' },
      { field: 'principal_id', section: 'principals' },
    ],
  },
  // ---- state: inventory ----------------------------------------------------------------------
  {
    section: 'collections',
    part: 'state',
    table: 'collections',
    key: ['id'],
    fields: ['id', 'name', 'description', 'parent_collection_id', ...TS],
    omitted: {},
    refs: [{ field: 'parent_collection_id', section: 'collections' }],
  },
  {
    section: 'collection_permissions',
    part: 'state',
    table: 'collection_permissions',
    key: ['collection_id', 'group_id', 'permission'],
    fields: ['collection_id', 'group_id', 'permission', 'created_at'],
    omitted: {},
    refs: [
      { field: 'collection_id', section: 'collections' },
      { field: 'group_id', section: 'groups' },
    ],
  },
  {
    section: 'classes',
    part: 'state',
    table: 'classes',
    key: ['id'],
    fields: ['id', 'name', 'description', 'collection_id', 'json_schema', 'validate_schema', ...TS],
    omitted: {},
    refs: [{ field: 'collection_id', section: 'collections' }],
  },
  {
    section: 'computed_fields',
    part: 'state',
    table: 'computed_fields',
    key: ['id'],
    fields: ['id', 'class_id', 'key', 'label', 'description', 'enabled', 'operation', 'result_type', 'visibility', 'owner_user_id', ...TS],
    omitted: {},
    refs: [
      { field: 'class_id', section: 'classes' },
      { field: 'owner_user_id', section: 'principals' },
    ],
  },
  {
    section: 'objects',
    part: 'state',
    table: 'objects',
    key: ['id'],
    fields: ['id', 'name', 'description', 'collection_id', 'class_id', 'json_data', ...TS],
    omitted: {},
    refs: [
      { field: 'collection_id', section: 'collections' },
      { field: 'class_id', section: 'classes' },
    ],
  },
  {
    section: 'class_relations',
    part: 'state',
    table: 'class_relations',
    key: ['id'],
    fields: ['id', 'from_class_id', 'to_class_id', 'forward_alias', 'reverse_alias', 'from_max_relations', 'to_max_relations', ...TS],
    omitted: {},
    refs: [
      { field: 'from_class_id', section: 'classes' },
      { field: 'to_class_id', section: 'classes' },
    ],
  },
  {
    section: 'object_relations',
    part: 'state',
    table: 'object_relations',
    key: ['id'],
    fields: ['id', 'class_relation_id', 'from_object_id', 'to_object_id', ...TS],
    omitted: {},
    refs: [
      { field: 'class_relation_id', section: 'class_relations' },
      { field: 'from_object_id', section: 'objects' },
      { field: 'to_object_id', section: 'objects' },
    ],
  },
  {
    section: 'export_templates',
    part: 'state',
    table: 'export_templates',
    key: ['id'],
    fields: ['id', 'collection_id', 'name', 'description', 'kind', 'content_type', 'template', 'default_query', ...TS],
    omitted: {},
    refs: [{ field: 'collection_id', section: 'collections' }],
  },
  {
    section: 'remote_targets',
    part: 'state',
    table: 'remote_targets',
    key: ['id'],
    fields: [
      'id',
      'collection_id',
      'class_id',
      'name',
      'description',
      'method',
      'url_template',
      'headers_template',
      'body_template',
      'auth_config',
      'allowed_subject_types',
      'timeout_ms',
      'enabled',
      ...TS,
    ],
    omitted: {},
    refs: [
      { field: 'collection_id', section: 'collections' },
      { field: 'class_id', section: 'classes' },
    ],
  },
  // ---- state: event delivery -----------------------------------------------------------------
  {
    section: 'event_sinks',
    part: 'state',
    table: 'event_sinks',
    key: ['id'],
    fields: ['id', 'name', 'kind', 'config', 'secret_ref', 'enabled', 'min_interval_ms', ...TS],
    omitted: {},
    refs: [],
    legacyDefaults: { min_interval_ms: null },
  },
  {
    section: 'event_subscriptions',
    part: 'state',
    table: 'event_subscriptions',
    key: ['id'],
    fields: ['id', 'collection_id', 'sink_id', 'name', 'description', 'entity_types', 'actions', 'filter', 'routing', 'enabled', ...TS],
    omitted: {
      routing_admin_approved:
        "an administrator's routing approval is not carried by documents: restored collection subscriptions deliver within their sink's allowed_routing until an administrator saves their routing again",
    },
    refs: [
      { field: 'collection_id', section: 'collections' },
      { field: 'sink_id', section: 'event_sinks' },
    ],
  },
  // ---- history -------------------------------------------------------------------------------
  {
    section: 'events',
    part: 'history',
    table: 'events',
    key: ['id'],
    fields: [
      'id',
      'event_id',
      'occurred_at',
      'entity_type',
      'entity_id',
      'entity_name',
      'collection_id',
      'related_collection_ids',
      'action',
      'actor_kind',
      'actor_user_id',
      'initiator_user_id',
      'task_id',
      'provenance',
      'request_id',
      'correlation_id',
      'summary',
      'before',
      'after',
      'before_revision',
      'after_revision',
      'metadata',
      'schema_version',
    ],
    omitted: {},
    refs: [],
  },
  {
    section: 'tasks',
    part: 'history',
    table: 'tasks',
    key: ['id'],
    fields: [
      'id',
      'kind',
      'status',
      'submitted_by',
      'cancel_requested',
      'attempts',
      'progress',
      'summary',
      'details',
      'created_at',
      'started_at',
      'finished_at',
      'updated_at',
    ],
    omitted: {
      submitted_token_id: 'tokens are not backed up',
      token_scope: 'token scopes are not backed up',
      token_scoped: 'goes with the token scope snapshot',
      idempotency_key: 'idempotency keys are not backed up',
      request_hash: 'goes with the idempotency key',
      request: 'submitted request documents may carry credentials',
      claim_token: 'transient scheduling',
      locked_until: 'transient scheduling',
      output: 'stored export and backup outputs are not backed up',
      output_content_type: 'goes with the output',
      output_expires_at: 'goes with the output',
    },
    refs: [],
    rows: { column: 'status', in: FINISHED_TASK_STATUSES },
  },
  {
    section: 'task_events',
    part: 'history',
    table: 'task_events',
    key: ['id'],
    fields: ['id', 'task_id', 'event_type', 'message', 'data', 'created_at'],
    omitted: {},
    refs: [{ field: 'task_id', section: 'tasks' }],
    rows: { column: 'task_id', parent: 'tasks' },
  },
  {
    section: 'remote_call_results',
    part: 'history',
    table: 'remote_call_results',
    key: ['id'],
    fields: [
      'id',
      'task_id',
      'target_id',
      'subject_type',
      'subject_id',
      'method',
      'url',
      'response_status',
      'response_headers',
      'body_preview',
      'body_truncated',
      'duration_ms',
      'success',
      'error',
      'created_at',
    ],
    omitted: {},
    refs: [{ field: 'task_id', section: 'tasks' }],
    rows: { column: 'task_id', parent: 'tasks' },
  },
  {
    section: 'import_results',
    part: 'history',
    table: 'import_results',
    key: ['task_id', 'seq'],
    fields: ['task_id', 'seq', 'item_ref', 'entity_kind', 'action', 'outcome', 'error', 'entity_id'],
    omitted: {},
    refs: [{ field: 'task_id', section: 'tasks' }],
    rows: { column: 'task_id', parent: 'tasks' },
  },
  {
    section: 'event_deliveries',
    part: 'history',
    table: 'event_deliveries',
    key: ['id'],
    fields: ['id', 'event_id', 'subscription_id', 'sink_id', 'purpose', 'status', 'attempts', 'last_error', 'created_at', 'updated_at'],
    omitted: {
      deferred_reason: 'transient scheduling (terminal rows are never deferred)',
      next_attempt_at: 'transient scheduling',
      locked_until: 'transient scheduling (claims)',
      claim_token: 'transient scheduling (claims)',
    },
    refs: [
      { field: 'event_id', section: 'events', target: 'event_id' },
      { field: 'subscription_id', section: 'event_subscriptions' },
      { field: 'sink_id', section: 'event_sinks' },
    ],
    rows: { column: 'status', in: TERMINAL_DELIVERY_STATUSES },
    since: 7,
  },
];

export interface ExcludedTable {
  table: string;
  /** keep: a restore leaves the rows alone; clear: a restore deletes every row. */
  onRestore: 'keep' | 'clear';
  why: string;
}

export const EXCLUDED_TABLES: readonly ExcludedTable[] = [
  { table: 'schema_migrations', onRestore: 'keep', why: 'migration bookkeeping of this database' },
  { table: 'meta_kv', onRestore: 'keep', why: 'process secrets such as the generated token hash key' },
  { table: 'restore_stages', onRestore: 'keep', why: 'restore stages (the outcome stays readable after a restore)' },
  { table: 'tokens', onRestore: 'clear', why: 'raw or hashed tokens are never backed up; a restore removes every token' },
  { table: 'credential_approvals', onRestore: 'clear', why: 'one-use approvals bound to tokens' },
  { table: 'event_fanout_queue', onRestore: 'clear', why: 'transient fan-out scheduling; restored events are not delivered again' },
  { table: 'event_sink_pacing', onRestore: 'clear', why: 'transient delivery pacing' },
  {
    table: 'event_retention_batch_events',
    onRestore: 'clear',
    why: 'purge claims name event ids of the replaced history; completing one after a restore would delete restored events',
  },
  { table: 'event_retention_batches', onRestore: 'clear', why: 'the purge ledger of the replaced history (archive files stay on disk)' },
  {
    table: 'entity_history',
    onRestore: 'keep',
    why: 'entity versions (#11) are the optional top-level section ENTITY_HISTORY below, not a state or history section; a restore of a document without it keeps the table and is recorded in it as deletes and inserts by its actor',
  },
];

/**
 * Entity versions (#11): the optional top-level `entity_history` section, written only when a
 * backup asks for it (`include_entity_history`, default false, so a default document has neither
 * the member nor its manifest count). Rows are the table's columns, ordered by id; `data` is the
 * versioned row as it was. A restore of a document with the section replaces the whole table with
 * its rows after the state is applied (the versions the restore's own deletes and inserts wrote by
 * trigger are dropped: the restored entities' past is the document's, not "deleted and re-created
 * by the restore"); the identity sequence moves past the restored ids. A document without the
 * section leaves the table as it is (today's behaviour). No links are checked: versions outlive
 * their entities (tombstones), and principals and tasks named as actors may be gone.
 * The table stores no valid_to (migration 0330): a backup reads the rows from the view `source`,
 * which derives it from the next version, and a restore checks that each row's valid_to is that
 * (src/db/restores.ts), then stores the rest.
 */
export const ENTITY_HISTORY = {
  section: 'entity_history',
  table: 'entity_history',
  source: 'entity_versions',
  derived: ['valid_to'],
  key: ['id'],
  fields: [
    'id',
    'entity_kind',
    'entity_id',
    'revision',
    'operation',
    'data',
    'valid_from',
    'valid_to',
    'actor_kind',
    'actor_principal_id',
    'initiator_principal_id',
    'task_id',
    'collection_id',
    'class_id',
  ],
} as const satisfies Pick<SectionSpec, 'section' | 'table' | 'key' | 'fields'> & { source: string; derived: readonly string[] };

export function sectionsOf(part: Part, format: BackupFormat = BACKUP_FORMAT): SectionSpec[] {
  return SECTIONS.filter((s) => s.part === part && (s.since ?? 6) <= format);
}

/** The manifest key of a section: `<section>` for state, `history.<section>` for history. */
export function countKey(s: Pick<SectionSpec, 'part' | 'section'>): string {
  return s.part === 'state' ? s.section : `history.${s.section}`;
}

export type Row = Record<string, unknown>;

export interface BackupDocument {
  backup_version: BackupFormat;
  source_version: string;
  created_at: string;
  manifest: { item_counts: Record<string, number> };
  state: Record<string, Row[]>;
  history: Record<string, Row[]> | null;
  /** Only in documents of backups with include_entity_history (see ENTITY_HISTORY). */
  entity_history?: Row[];
}

/** The document a backup writes (format 7) from the rows of each section. */
export function buildDocument(
  sourceVersion: string,
  createdAt: Date,
  state: Record<string, Row[]>,
  history: Record<string, Row[]> | null,
  entityHistory: Row[] | null = null,
): BackupDocument {
  const counts: Record<string, number> = {};
  for (const s of sectionsOf('state')) counts[countKey(s)] = state[s.section]?.length ?? 0;
  if (history) for (const s of sectionsOf('history')) counts[countKey(s)] = history[s.section]?.length ?? 0;
  if (entityHistory) counts[ENTITY_HISTORY.section] = entityHistory.length;
  const doc: BackupDocument = {
    backup_version: BACKUP_FORMAT,
    source_version: sourceVersion,
    created_at: createdAt.toISOString(),
    manifest: { item_counts: counts },
    state,
    history,
  };
  if (entityHistory) doc.entity_history = entityHistory;
  return doc;
}

function keyOf(row: Row, fields: readonly string[]): string {
  return JSON.stringify(fields.map((f) => row[f] ?? null));
}

function isPlainObject(v: unknown): v is Row {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const MAX_DETAILS = 20;

/**
 * Checks an uploaded document completely (the envelope's JSON shape is already checked against
 * openapi.yaml) and returns it normalized to format 7: every row carries exactly its section's
 * fields (format 6 rows get their legacy defaults, format 6 history gets the format 7 sections it
 * lacks, empty), manifest counts match, keys are unique, every link names a row of the document,
 * and the collection tree has no cycle. Throws 400 with details naming the offending rows.
 */
export function validateDocument(input: unknown): { document: BackupDocument; format: BackupFormat } {
  const details: ErrorDetail[] = [];
  const fail = (path: string, message: string) => {
    if (details.length < MAX_DETAILS) details.push({ path, message });
  };
  if (!isPlainObject(input)) throw badRequest('the backup document must be a JSON object');
  const format = input.backup_version;
  if (format !== 6 && format !== 7) {
    throw badRequest(`unsupported backup_version ${JSON.stringify(format)}; formats 6 and 7 can be restored`, [
      { path: 'body.backup_version', message: 'must be 6 or 7' },
    ]);
  }
  const state = input.state;
  const history = input.history;
  if (!isPlainObject(state)) throw badRequest('the backup document has no state', [{ path: 'body.state', message: 'must be an object' }]);
  if (history !== null && !isPlainObject(history)) {
    throw badRequest('history must be an object or null', [{ path: 'body.history', message: 'must be an object or null' }]);
  }
  const manifest = input.manifest;
  const counts = isPlainObject(manifest) && isPlainObject(manifest.item_counts) ? manifest.item_counts : null;
  if (!counts) throw badRequest('the manifest has no item_counts', [{ path: 'body.manifest.item_counts', message: 'must be an object' }]);

  const outState: Record<string, Row[]> = {};
  const outHistory: Record<string, Row[]> | null = history === null ? null : {};
  const expectedKeys = new Set<string>();

  const parts: [Part, Record<string, unknown> | null, Record<string, Row[]> | null][] = [
    ['state', state, outState],
    ['history', history as Record<string, unknown> | null, outHistory],
  ];
  for (const [part, src, out] of parts) {
    if (!src || !out) continue;
    const known = new Set(sectionsOf(part, format).map((s) => s.section));
    for (const name of Object.keys(src)) {
      if (!known.has(name)) fail(`body.${part}.${name}`, `format ${format} has no ${part} section ${name}`);
    }
    for (const spec of SECTIONS.filter((s) => s.part === part)) {
      if (!known.has(spec.section)) {
        out[spec.section] = [];
        continue;
      }
      const path = `body.${part}.${spec.section}`;
      const rows = src[spec.section];
      expectedKeys.add(countKey(spec));
      if (!Array.isArray(rows)) {
        fail(path, 'the section is missing or not an array');
        out[spec.section] = [];
        continue;
      }
      const count = counts[countKey(spec)];
      if (count !== rows.length) {
        fail(
          `body.manifest.item_counts.${countKey(spec)}`,
          `says ${JSON.stringify(count ?? null)} but the section has ${rows.length} rows`,
        );
      }
      out[spec.section] = rows.map((raw, i) => normalizeRow(raw, spec, format, `${path}.${i}`, fail));
    }
  }
  let outEntityHistory: Row[] | undefined;
  if (Object.hasOwn(input, ENTITY_HISTORY.section)) {
    const path = `body.${ENTITY_HISTORY.section}`;
    const rows = input[ENTITY_HISTORY.section];
    expectedKeys.add(ENTITY_HISTORY.section);
    if (!Array.isArray(rows)) fail(path, 'must be an array of entity versions');
    else {
      const count = counts[ENTITY_HISTORY.section];
      if (count !== rows.length) {
        fail(
          `body.manifest.item_counts.${ENTITY_HISTORY.section}`,
          `says ${JSON.stringify(count ?? null)} but the section has ${rows.length} rows`,
        );
      }
      outEntityHistory = rows.map((raw, i) => normalizeRow(raw, ENTITY_HISTORY, format, `${path}.${i}`, fail));
      const seen = new Set<string>();
      outEntityHistory.forEach((r, i) => {
        const k = keyOf(r, ENTITY_HISTORY.key);
        if (seen.has(k)) fail(`${path}.${i}`, `duplicate id ${k}`);
        seen.add(k);
      });
    }
  }
  for (const k of Object.keys(counts))
    if (!expectedKeys.has(k)) fail(`body.manifest.item_counts.${k}`, 'names no section of this document');
  if (details.length) throw invalid(details);

  checkKeysAndRefs(outState, outHistory, fail);
  if (details.length) throw invalid(details);

  const document: BackupDocument = {
    backup_version: BACKUP_FORMAT,
    source_version: typeof input.source_version === 'string' ? input.source_version : '',
    created_at: typeof input.created_at === 'string' ? input.created_at : '',
    manifest: { item_counts: itemCounts(outState, outHistory) },
    state: outState,
    history: outHistory,
  };
  if (outEntityHistory) {
    document.manifest.item_counts[ENTITY_HISTORY.section] = outEntityHistory.length;
    document.entity_history = outEntityHistory;
  }
  return { format, document };
}

function invalid(details: ErrorDetail[]) {
  return badRequest(`the backup document is invalid: ${details[0]!.path} ${details[0]!.message}`, details);
}

function normalizeRow(
  raw: unknown,
  spec: Pick<SectionSpec, 'section' | 'fields' | 'legacyDefaults'>,
  format: BackupFormat,
  path: string,
  fail: (p: string, m: string) => void,
): Row {
  if (!isPlainObject(raw)) {
    fail(path, 'must be an object');
    return {};
  }
  const row: Row = {};
  const allowed = new Set(spec.fields);
  for (const k of Object.keys(raw)) if (!allowed.has(k)) fail(`${path}.${k}`, `unknown field of ${spec.section}`);
  for (const f of spec.fields) {
    if (Object.hasOwn(raw, f)) row[f] = raw[f];
    else if (format === 6 && spec.legacyDefaults && Object.hasOwn(spec.legacyDefaults, f)) row[f] = spec.legacyDefaults[f];
    else fail(`${path}.${f}`, `missing field of ${spec.section}`);
  }
  return row;
}

function itemCounts(state: Record<string, Row[]>, history: Record<string, Row[]> | null): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const s of SECTIONS) {
    const rows = s.part === 'state' ? state[s.section] : history?.[s.section];
    if (rows) counts[countKey(s)] = rows.length;
  }
  return counts;
}

function checkKeysAndRefs(state: Record<string, Row[]>, history: Record<string, Row[]> | null, fail: (p: string, m: string) => void): void {
  const rowsOf = (s: SectionSpec) => (s.part === 'state' ? state[s.section] : history?.[s.section]) ?? [];
  const specOf = new Map(SECTIONS.map((s) => [s.section, s]));
  const index = new Map<string, Set<string>>();
  const indexed = (section: string, field: string): Set<string> => {
    const id = `${section}.${field}`;
    let set = index.get(id);
    if (!set) {
      set = new Set(rowsOf(specOf.get(section)!).map((r) => JSON.stringify(r[field] ?? null)));
      index.set(id, set);
    }
    return set;
  };
  for (const s of SECTIONS) {
    const rows = rowsOf(s);
    const seen = new Set<string>();
    rows.forEach((r, i) => {
      const k = keyOf(r, s.key);
      if (seen.has(k)) fail(`body.${s.part}.${s.section}.${i}`, `duplicate ${s.key.join(', ')} ${k}`);
      seen.add(k);
      for (const ref of s.refs) {
        const v = r[ref.field];
        if (v === null || v === undefined) continue;
        const target = specOf.get(ref.section)!;
        const field = ref.target ?? target.key[0]!;
        if (!indexed(ref.section, field).has(JSON.stringify(v))) {
          fail(`body.${s.part}.${s.section}.${i}.${ref.field}`, `names no row of ${ref.section} (${JSON.stringify(v)})`);
        }
      }
    });
  }
  // The collection tree: a chain of parents must end at the top level.
  const parent = new Map<unknown, unknown>((state.collections ?? []).map((c) => [c.id, c.parent_collection_id ?? null]));
  for (const [id] of parent) {
    let cur: unknown = id;
    for (let steps = 0; cur !== null && cur !== undefined; steps++) {
      cur = parent.get(cur);
      if (cur === id || steps > parent.size) {
        fail('body.state.collections', `collection ${JSON.stringify(id)} is its own ancestor`);
        break;
      }
    }
  }
}
