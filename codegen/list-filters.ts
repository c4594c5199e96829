// The list filters of every list operation, declared in openapi.yaml as ordinary query parameters
// (`name`, `name__startswith`, `name__not_in`, ...) so that every generated client can send them:
// clients that serialize the free-form `filters` object as `filters[name]=x` (openapi-fetch) or
// `filters=[object Object]` (orval) cannot. The table below names, per operation, the very ListSpec
// the server's list parser (src/domain/list-query.ts) reads that operation's query with, so the
// declared parameters are derived from what the server accepts and cannot drift from it: `make
// codegen` rewrites the generated blocks of openapi.yaml, `make check` fails when they are stale.
// The wire is unchanged (contract section 3); `filters` stays for what cannot be enumerated
// (`computed.*` and `related.*` object filters) and for clients that already send it.
import { OPERATORS, parseListQuery, type FieldDef, type FieldType, type ListSpec, type ParsedList } from '../src/domain/list-query.ts';
import { applyTimeWindow } from '../src/domain/audit.ts';
import { PERMISSIONS } from '../src/domain/authz.ts';
import { USER_LIST } from '../src/db/users.ts';
import { GROUP_LIST } from '../src/db/groups.ts';
import { SERVICE_ACCOUNT_LIST } from '../src/db/service-accounts.ts';
import { COLLECTION_LIST_SPEC } from '../src/db/collections.ts';
import { EVENT_LIST_SPEC } from '../src/db/audit.ts';
import { TASK_LIST_SPEC } from '../src/db/tasks.ts';
import { CLASS_LIST_SPEC } from '../src/db/classes.ts';
import { parseObjectQuery } from '../src/db/objects.ts';
import { SHARED_FIELD_LIST_SPEC, MY_FIELD_LIST_SPEC } from '../src/db/computed-fields.ts';
import { CLASS_RELATION_LIST_SPEC, OBJECT_RELATION_LIST_SPEC } from '../src/db/relations.ts';
import { EXPORT_TEMPLATE_LIST_SPEC } from '../src/db/export-templates.ts';
import { REMOTE_TARGET_LIST_SPEC } from '../src/db/remote-targets.ts';
import { EVENT_SINK_LIST_SPEC } from '../src/db/event-sinks.ts';
import { EVENT_SUBSCRIPTION_LIST_SPEC } from '../src/db/event-subscriptions.ts';
import { EVENT_DELIVERY_LIST_SPEC } from '../src/db/event-deliveries.ts';
import { HISTORY_LIST_SPEC } from '../src/db/history.ts';

/**
 * The list spec of an object list before any computed or related parameter: what parseObjectQuery
 * builds for every object list and aggregate (an empty query touches neither the database nor the
 * caller, so nothing else is needed to read it).
 */
const OBJECT_LIST_SPEC: ListSpec = parseObjectQuery(
  undefined as never,
  {},
  { shared: [], personal: [], disabled: new Set() },
  undefined as never,
  0,
).spec;

/**
 * Operation → the ListSpec its handler passes to parseListQuery, and what the handler does with the
 * parsed list before it runs (`after`, which may refuse some filters: the audit lists take
 * `occurred_after`/`occurred_before` only without an operator).
 */
export interface ListOperation {
  spec: ListSpec;
  after?: (parsed: ParsedList) => unknown;
}
const EVENTS: ListOperation = { spec: EVENT_LIST_SPEC, after: applyTimeWindow };

export const LIST_FILTER_OPERATIONS: Record<string, ListOperation> = {
  listUsers: { spec: USER_LIST },
  listGroups: { spec: GROUP_LIST },
  listServiceAccounts: { spec: SERVICE_ACCOUNT_LIST },
  listCollections: { spec: COLLECTION_LIST_SPEC },
  listCollectionChildren: { spec: COLLECTION_LIST_SPEC },
  listTasks: { spec: TASK_LIST_SPEC },
  listClasses: { spec: CLASS_LIST_SPEC },
  listObjects: { spec: OBJECT_LIST_SPEC },
  listObjectsByClassName: { spec: OBJECT_LIST_SPEC },
  aggregateObjects: { spec: OBJECT_LIST_SPEC },
  aggregateObjectsByClassName: { spec: OBJECT_LIST_SPEC },
  listClassComputedFields: { spec: SHARED_FIELD_LIST_SPEC },
  listMyComputedFields: { spec: MY_FIELD_LIST_SPEC },
  listClassRelations: { spec: CLASS_RELATION_LIST_SPEC },
  listObjectRelations: { spec: OBJECT_RELATION_LIST_SPEC },
  listExportTemplates: { spec: EXPORT_TEMPLATE_LIST_SPEC },
  listRemoteTargets: { spec: REMOTE_TARGET_LIST_SPEC },
  listEventSinks: { spec: EVENT_SINK_LIST_SPEC },
  listCollectionEventSubscriptions: { spec: EVENT_SUBSCRIPTION_LIST_SPEC },
  listSystemEventSubscriptions: { spec: EVENT_SUBSCRIPTION_LIST_SPEC },
  listEventDeliveries: { spec: EVENT_DELIVERY_LIST_SPEC },
  listEvents: EVENTS,
  listUserEvents: EVENTS,
  listGroupEvents: EVENTS,
  listCollectionEvents: EVENTS,
  listClassEvents: EVENTS,
  listObjectEvents: EVENTS,
  listExportTemplateEvents: EVENTS,
  listRemoteTargetEvents: EVENTS,
  listObjectHistory: { spec: HISTORY_LIST_SPEC },
  listObjectHistoryByName: { spec: HISTORY_LIST_SPEC },
  listCollectionHistory: { spec: HISTORY_LIST_SPEC },
  listClassHistory: { spec: HISTORY_LIST_SPEC },
  listClassHistoryByName: { spec: HISTORY_LIST_SPEC },
  listClassRelationHistory: { spec: HISTORY_LIST_SPEC },
  listObjectRelationHistory: { spec: HISTORY_LIST_SPEC },
  listExportTemplateHistory: { spec: HISTORY_LIST_SPEC },
  listRemoteTargetHistory: { spec: HISTORY_LIST_SPEC },
};

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
function alternatives(values: readonly string[]): string {
  return `(?:${values.map(esc).join('|')})`;
}
/** A comma-separated list whose parts are trimmed before they are read. */
function listPattern(part: string): string {
  return `^\\s*${part}\\s*(?:,\\s*${part}\\s*)*$`;
}
/** Query parameters a handler reads itself (ListSpec.extraParams), with their declared schema. */
const EXTRA_PARAMS: Record<string, { description: string; schema: Record<string, unknown> }> = {
  permissions: {
    description:
      'Only resources on which the caller holds every one of these permissions (comma-separated PermissionName values). Given at most once.',
    schema: { type: 'string', pattern: listPattern(alternatives(PERMISSIONS)) },
  },
};

/** One declared filter parameter: a name the list parser accepts and the value it accepts. */
export interface FilterParam {
  name: string;
  field: string;
  op: string;
  negate: boolean;
  type: FieldType;
  values?: readonly string[];
}

/** Every filter name the parser accepts for a spec: `field`, `field__<op>`, `field__not_<op>`, aliases included. */
export function filterParams(op: ListOperation): FilterParam[] {
  const { spec } = op;
  const out: FilterParam[] = [];
  const names: [string, string, FieldDef][] = [];
  for (const [field, def] of Object.entries(spec.fields)) {
    if (def.filterable === false || field.includes(':')) continue;
    names.push([field, field, def]);
  }
  for (const [alias, field] of Object.entries(spec.aliases ?? {})) {
    const def = spec.fields[field];
    if (def && def.filterable !== false) names.push([alias, field, def]);
  }
  for (const [name, field, def] of names) {
    const base = { field, type: def.type, ...(def.values ? { values: def.values } : {}) };
    out.push({ name, op: 'equals', negate: false, ...base });
    for (const op of OPERATORS[def.type]) {
      out.push({ name: `${name}__${op}`, op, negate: false, ...base });
      out.push({ name: `${name}__not_${op}`, op, negate: true, ...base });
    }
  }
  return out.filter((p) => accepts(op, p.name, sampleValue(p)));
}

/** Whether the handler's parse of `?name=value` succeeds (the list parser, then `after`). */
export function accepts(op: ListOperation, name: string, value: string): boolean {
  try {
    const parsed = parseListQuery({ [name]: value }, op.spec);
    op.after?.(parsed);
    return true;
  } catch {
    return false;
  }
}

/** A value the parser accepts for a filter (used to check each declared name, and by the tests). */
export function sampleValue(p: FilterParam): string {
  if (p.op === 'is_null') return p.type === 'json' ? 'a,b' : 'false';
  switch (p.type) {
    case 'integer':
      return p.op === 'equals' || p.op === 'in' ? '1,2,5-9' : p.op === 'between' ? '1,10' : '5';
    case 'timestamp':
      return p.op === 'in' || p.op === 'between' ? '2026-01-01,2026-12-31T23:59:59Z' : '2026-01-01T00:00:00Z';
    case 'boolean':
      return 'true';
    case 'text':
      if (p.values) return p.op === 'in' ? p.values.slice(0, 2).join(',') : p.values[0]!;
      return p.op === 'regex' ? '^x' : p.op === 'in' ? 'x,y' : 'x';
    case 'json':
      if (p.op === 'array_length') return 'a,b=2';
      if (p.op === 'between') return 'a,b=1,5';
      if (p.op.includes('network') || p.op.startsWith('contains_ip') || p.op === 'inet_equals') return 'addr=10.0.0.0/8';
      return 'a,b=1';
  }
}

/** The extra (non-filter) parameters of a spec that are declared here. */
export function extraParams(op: ListOperation): string[] {
  return (op.spec.extraParams ?? []).filter((p) => p in EXTRA_PARAMS);
}

// ---- value schemas: exactly what parseValues (src/domain/list-query.ts) accepts ------------------

const INT = '-?\\d+';
const INT_OR_RANGE = `${INT}(?:-${INT})?`;
const DATE = '\\d{4}-\\d{2}-\\d{2}';
const TIMESTAMP = `(?:${DATE}|${DATE}[Tt ]\\d{2}:\\d{2}(?::\\d{2}(?:\\.\\d{1,9})?)?(?:[Zz]|[+-]\\d{2}:?\\d{2}))`;
/** One JSON path segment: anything but `,` and `=`, not blank once trimmed (linear to match). */
const SEGMENT = '\\s*[^\\s,=][^,=]*';
const JSON_PATH = `${SEGMENT}(?:,${SEGMENT}){0,31}`;

/** The value kinds shared by many filters, declared once under components/schemas. */
type ValueKind =
  | 'Boolean'
  | 'Integer'
  | 'IntegerList'
  | 'IntegerPair'
  | 'Timestamp'
  | 'TimestampList'
  | 'TimestampPair'
  | 'Text'
  | 'JsonPathValue'
  | 'JsonPathPair'
  | 'JsonPathLength'
  | 'JsonPathIsNull';

const VALUE_KINDS: Record<ValueKind, { description: string; one: Record<string, unknown> }> = {
  Boolean: { description: '`true` or `false`.', one: { type: ['boolean', 'string'], pattern: '^(?:true|false)$' } },
  Integer: { description: 'One integer.', one: { type: ['integer', 'string'], pattern: `^${INT}$` } },
  IntegerList: {
    description: 'Comma-separated integers and ranges `lo-hi` (at most 1,024 values after expansion), e.g. `1,2,5-9`.',
    one: { type: ['integer', 'string'], pattern: listPattern(INT_OR_RANGE) },
  },
  IntegerPair: { description: 'Two integers `lo,hi`.', one: { type: 'string', pattern: `^\\s*${INT}\\s*,\\s*${INT}\\s*$` } },
  Timestamp: { description: 'An RFC 3339 timestamp or `YYYY-MM-DD` (midnight UTC).', one: { type: 'string', pattern: `^${TIMESTAMP}$` } },
  TimestampList: {
    description: 'Comma-separated timestamps (RFC 3339 or `YYYY-MM-DD`).',
    one: { type: 'string', pattern: listPattern(TIMESTAMP) },
  },
  TimestampPair: {
    description: 'Two timestamps `lo,hi` (RFC 3339 or `YYYY-MM-DD`).',
    one: { type: 'string', pattern: `^\\s*${TIMESTAMP}\\s*,\\s*${TIMESTAMP}\\s*$` },
  },
  Text: { description: 'Text.', one: { type: 'string' } },
  JsonPathValue: {
    description: '`<comma-separated JSON path>=<value>`, e.g. `metrics,cpu=4`; a missing path or unconvertible value never matches.',
    one: { type: 'string', pattern: `^${JSON_PATH}=` },
  },
  JsonPathPair: { description: '`<comma-separated JSON path>=<lo>,<hi>`.', one: { type: 'string', pattern: `^${JSON_PATH}=[^,]*,[^,]*$` } },
  JsonPathLength: { description: '`<comma-separated JSON path>=<length>`.', one: { type: 'string', pattern: `^${JSON_PATH}=\\d+$` } },
  JsonPathIsNull: {
    description: '`<comma-separated JSON path>`, optionally followed by `=true` (the default) or `=false`.',
    one: { type: 'string', pattern: `^${JSON_PATH}(?:=(?:true|false))?$` },
  },
};

/** One value, or the same filter repeated (all filters combine with AND). */
function repeatable(one: Record<string, unknown>): Record<string, unknown> {
  return { anyOf: [one, { type: 'array', items: structuredClone(one) }] };
}

/** The schema components (`ListFilter<Kind>`) the generated parameters refer to. */
export function valueSchemas(): Map<string, Record<string, unknown>> {
  return new Map(
    Object.entries(VALUE_KINDS).map(([kind, v]) => [
      `ListFilter${kind}`,
      { description: `${v.description} A filter may be repeated; all filters combine with AND.`, ...repeatable(v.one) },
    ]),
  );
}

function valueSchema(p: FilterParam): Record<string, unknown> {
  const ref = (kind: ValueKind) => ({ $ref: `#/components/schemas/ListFilter${kind}` });
  if (p.op === 'is_null' && p.type !== 'json') return ref('Boolean');
  switch (p.type) {
    case 'boolean':
      return ref('Boolean');
    case 'integer':
      if (p.op === 'equals' || p.op === 'in') return ref('IntegerList');
      return ref(p.op === 'between' ? 'IntegerPair' : 'Integer');
    case 'timestamp':
      if (p.op === 'in') return ref('TimestampList');
      return ref(p.op === 'between' ? 'TimestampPair' : 'Timestamp');
    case 'text':
      if (!p.values) return ref('Text');
      if (p.op === 'in') return repeatable({ type: 'string', pattern: listPattern(alternatives(p.values)) });
      return repeatable({ type: 'string', enum: [...p.values] });
    case 'json':
      if (p.op === 'is_null') return ref('JsonPathIsNull');
      if (p.op === 'array_length') return ref('JsonPathLength');
      return ref(p.op === 'between' ? 'JsonPathPair' : 'JsonPathValue');
  }
}

const PHRASES: Record<string, string> = {
  equals: 'equals the value',
  iequals: 'equals the value, ignoring case',
  contains: 'contains the value',
  icontains: 'contains the value, ignoring case',
  startswith: 'starts with the value',
  istartswith: 'starts with the value, ignoring case',
  endswith: 'ends with the value',
  iendswith: 'ends with the value, ignoring case',
  like: 'matches the SQL LIKE pattern',
  regex: 'matches the POSIX regular expression',
  in: 'is one of the comma-separated values',
  is_null: 'is null (`true`) or not null (`false`)',
  gt: 'is greater than the value',
  gte: 'is greater than or equal to the value',
  lt: 'is less than the value',
  lte: 'is less than or equal to the value',
  between: 'lies between `lo,hi` (inclusive)',
  within_network: 'is an address or network within the given network',
  contains_network: 'is a network containing the given network',
  contains_ip: 'is a network containing the given address',
  overlaps_network: 'is a network overlapping the given network',
  inet_equals: 'is the same address or network as the value',
  all: 'is an array containing all of the comma-separated values',
  array_length: 'is an array of this length',
  has_key: 'is an object with this key',
};

function describe(p: FilterParam): string {
  const what = p.type === 'json' ? `the value at the JSON path in \`${p.field}\`` : `\`${p.field}\``;
  const phrase = PHRASES[p.op] ?? p.op;
  const sentence = p.negate ? `Matches unless ${what} ${phrase}.` : `${what[0]!.toUpperCase()}${what.slice(1)} ${phrase}.`;
  return sentence;
}

/** The declared query parameter of a filter: one value, or the same value repeated (all AND). */
export function filterParameter(p: FilterParam): Record<string, unknown> {
  return { name: p.name, in: 'query', description: describe(p), style: 'form', explode: true, schema: valueSchema(p) };
}

export function extraParameter(name: string): Record<string, unknown> {
  const e = EXTRA_PARAMS[name]!;
  return { name, in: 'query', description: e.description, schema: e.schema };
}

/** A parameter component key: one per name, or per name and first operation when lists disagree. */
export interface PlannedParameter {
  key: string;
  parameter: Record<string, unknown>;
}

/**
 * The generated parameters of every list operation, skipping names the operation declares by hand
 * (`handDeclared`, e.g. the audit lists' `entity_type`), and the shared components they refer to.
 */
export function planListFilters(handDeclared: Record<string, Set<string>>): {
  components: Map<string, Record<string, unknown>>;
  operations: Map<string, string[]>;
} {
  const variants = new Map<string, Map<string, { firstOp: string; parameter: Record<string, unknown> }>>();
  const perOp = new Map<string, { name: string; json: string }[]>();
  for (const [opId, op] of Object.entries(LIST_FILTER_OPERATIONS)) {
    const declared = handDeclared[opId] ?? new Set<string>();
    const params = [...filterParams(op).map((p) => filterParameter(p)), ...extraParams(op).map((name) => extraParameter(name))].filter(
      (p) => !declared.has(p.name as string),
    );
    const list: { name: string; json: string }[] = [];
    for (const parameter of params) {
      const name = parameter.name as string;
      const json = JSON.stringify(parameter);
      const byJson = variants.get(name) ?? new Map();
      if (!byJson.has(json)) byJson.set(json, { firstOp: opId, parameter });
      variants.set(name, byJson);
      list.push({ name, json });
    }
    perOp.set(opId, list);
  }
  const keyOf = (name: string, json: string): string => {
    const byJson = variants.get(name)!;
    return byJson.size === 1 ? `ListFilter.${name}` : `ListFilter.${name}.${byJson.get(json)!.firstOp}`;
  };
  const components = new Map<string, Record<string, unknown>>();
  for (const [name, byJson] of [...variants.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    for (const [json, v] of byJson) components.set(keyOf(name, json), v.parameter);
  }
  const operations = new Map<string, string[]>();
  for (const [opId, list] of perOp)
    operations.set(
      opId,
      list.map((p) => keyOf(p.name, p.json)),
    );
  return { components, operations };
}
