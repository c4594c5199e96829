// Structured search DSL, version 1: validation and planning (pure rules, no SQL).
// The request has already passed the contract's JSON Schema (types, enums, additionalProperties:
// false at every level, array sizes); this module applies what a schema cannot express: the
// field table per target, operators per field type, value shapes per operator, the expression
// bounds (64 nodes, depth 8, 32 field predicates, 4 related predicates with at most 16 filters),
// sorts (each field once, at most 8, sortable for the target) and the page limit.
// The result is a SearchPlan that src/db/search.ts turns into SQL with the list query language's
// filterSql, so structured search and list filters share one meaning.
import { isIP } from 'node:net';
import type { components } from '../../generated/openapi.ts';
import { ApiError, badRequest, type ErrorDetail } from './errors.ts';
import { likePatternProblem, OPERATORS, parseLimit, parseTimestamp, type FieldType, type Scalar, type SortKey } from './list-query.ts';

export type StructuredSearchRequest = components['schemas']['StructuredSearchRequest'];
export type SearchExpression = components['schemas']['SearchExpression'];
export type SearchFieldPredicate = components['schemas']['SearchFieldPredicate'];

export const TARGET_KINDS = ['collection', 'class', 'object', 'audit_event', 'user', 'group', 'service_account'] as const;
export type TargetKind = (typeof TARGET_KINDS)[number];

export interface TargetField {
  type: FieldType;
  sortable: boolean;
}

const f = (type: FieldType, sortable = true): TargetField => ({ type, sortable });

/** Filter and sort fields per target (interface spec, "Fields per target"). */
export const TARGET_FIELDS: Record<TargetKind, Record<string, TargetField>> = {
  collection: {
    id: f('integer'),
    name: f('text'),
    description: f('text'),
    created_at: f('timestamp'),
    updated_at: f('timestamp'),
    revision: f('integer'),
  },
  class: {
    id: f('integer'),
    name: f('text'),
    description: f('text'),
    collection_id: f('integer'),
    created_at: f('timestamp'),
    updated_at: f('timestamp'),
    revision: f('integer'),
    validate_schema: f('boolean', false),
    json_schema: f('json', false),
  },
  object: {
    id: f('integer'),
    name: f('text'),
    description: f('text'),
    collection_id: f('integer'),
    created_at: f('timestamp'),
    updated_at: f('timestamp'),
    revision: f('integer'),
    json_data: f('json', false),
  },
  audit_event: {
    id: f('integer'),
    occurred_at: f('timestamp'),
    entity_type: f('text', false),
    entity_id: f('integer', false),
    entity_name: f('text', false),
    collection_id: f('integer', false),
    action: f('text', false),
    actor_kind: f('text', false),
    actor_user_id: f('integer', false),
    initiator_user_id: f('integer', false),
    summary: f('text', false),
    metadata: f('json', false),
  },
  user: {
    id: f('integer'),
    name: f('text'),
    identity_scope: f('text'),
    proper_name: f('text'),
    email: f('text'),
    created_at: f('timestamp'),
    updated_at: f('timestamp'),
    revision: f('integer'),
  },
  group: {
    id: f('integer'),
    name: f('text'),
    description: f('text'),
    identity_scope: f('text', false),
    managed_by: f('text', false),
    external_key: f('text', false),
    last_sync_attempted_at: f('timestamp', false),
    last_sync_success_at: f('timestamp', false),
    created_at: f('timestamp'),
    updated_at: f('timestamp'),
    revision: f('integer'),
  },
  service_account: {
    id: f('integer'),
    name: f('text'),
    description: f('text', false),
    identity_scope: f('text'),
    owner_group_id: f('integer', false),
    created_by: f('integer', false),
    disabled_at: f('timestamp', false),
    created_at: f('timestamp'),
    updated_at: f('timestamp'),
    revision: f('integer'),
  },
};

export const DEFAULT_SORT: Record<TargetKind, SortKey[]> = {
  collection: [{ field: 'id', desc: false }],
  class: [{ field: 'id', desc: false }],
  object: [{ field: 'id', desc: false }],
  audit_event: [
    { field: 'occurred_at', desc: true },
    { field: 'id', desc: true },
  ],
  user: [{ field: 'id', desc: false }],
  group: [{ field: 'id', desc: false }],
  service_account: [{ field: 'id', desc: false }],
};

export const LIMITS = {
  bodyBytes: 64 * 1024,
  nodes: 64,
  depth: 8,
  fieldPredicates: 32,
  relatedPredicates: 4,
  relatedFilters: 16,
  sortFields: 8,
  arrayValues: 50,
  pathSegments: 32,
  relatedDepthMax: 10,
} as const;

export type ClassSelector = { id: number } | { name: string };

/** One validated predicate: `values` are in the form filterSql of src/db/list.ts expects. */
export interface PlannedPredicate {
  field: string;
  type: FieldType;
  op: string;
  values: Scalar[];
  path: string[];
}

export type PlanNode =
  | { op: 'and' | 'or'; args: PlanNode[] }
  | { op: 'not'; arg: PlanNode }
  | { op: 'field'; predicate: PlannedPredicate }
  | { op: 'related'; class: ClassSelector; filters: PlannedPredicate[]; depth: number; index: number };

export interface SearchPlan {
  kind: TargetKind;
  /** Object targets only: the class selector of the target (resolved by the handler). */
  targetClass: ClassSelector | null;
  filter: PlanNode | null;
  /** The effective order, id tie-breaker included. */
  sort: SortKey[];
  limit: number;
  includeTotal: boolean;
  cursor: string | null;
  /** Number of related predicates (their `index` runs 0..relatedCount-1). */
  relatedCount: number;
}

function invalid(path: string, message: string): ApiError {
  return badRequest(`invalid search request: ${path}: ${message}`, [{ path, message }] satisfies ErrorDetail[]);
}

/** Validates a structured search request (already schema-valid) and plans it; 400 on any violation. */
export function planStructuredSearch(req: StructuredSearchRequest): SearchPlan {
  if (req.version !== 1) throw invalid('body.version', 'the search DSL version must be 1');
  const kind = req.target.kind as TargetKind;
  if (!TARGET_KINDS.includes(kind)) throw invalid('body.target.kind', 'unknown target kind');
  let targetClass: ClassSelector | null = null;
  if (req.target.class !== undefined) {
    if (kind !== 'object') throw invalid('body.target.class', 'only an object target may select a class');
    targetClass = selector(req.target.class, 'body.target.class');
  }
  const counters = { nodes: 0, fields: 0, related: 0 };
  const filter = req.filter === undefined || req.filter === null ? null : planNode(req.filter as unknown, kind, 1, 'body.filter', counters);
  const sort = planSort(req.sort ?? [], kind);
  let limit: number;
  try {
    limit = parseLimit(req.limit);
  } catch {
    throw invalid('body.limit', 'limit must be an integer of at least 1');
  }
  const cursor = req.cursor ?? null;
  return { kind, targetClass, filter, sort, limit, includeTotal: req.include_total === true, cursor, relatedCount: counters.related };
}

function selector(raw: unknown, path: string): ClassSelector {
  const s = raw as { id?: unknown; name?: unknown };
  if (s && typeof s === 'object') {
    if (typeof s.id === 'number' && s.name === undefined && Number.isSafeInteger(s.id) && s.id > 0) return { id: s.id };
    if (typeof s.name === 'string' && s.id === undefined && s.name.length > 0) return { name: s.name };
  }
  throw invalid(path, 'a class selector has exactly one of id (positive integer) or name (non-empty string)');
}

function planNode(
  raw: unknown,
  kind: TargetKind,
  depth: number,
  path: string,
  counters: { nodes: number; fields: number; related: number },
): PlanNode {
  if (depth > LIMITS.depth) throw invalid(path, `expressions nest at most ${LIMITS.depth} levels deep`);
  if (++counters.nodes > LIMITS.nodes) throw invalid(path, `an expression has at most ${LIMITS.nodes} nodes`);
  const node = raw as { op?: unknown; args?: unknown; arg?: unknown; predicate?: unknown };
  if (!node || typeof node !== 'object' || Array.isArray(node)) throw invalid(path, 'an expression must be an object');
  switch (node.op) {
    case 'and':
    case 'or': {
      if (!Array.isArray(node.args) || node.args.length < 2) throw invalid(`${path}.args`, `${node.op} takes at least two expressions`);
      const args = node.args.map((a: unknown, i: number) => planNode(a, kind, depth + 1, `${path}.args.${i}`, counters));
      return { op: node.op, args };
    }
    case 'not':
      return { op: 'not', arg: planNode(node.arg, kind, depth + 1, `${path}.arg`, counters) };
    case 'field':
      if (++counters.fields > LIMITS.fieldPredicates)
        throw invalid(path, `at most ${LIMITS.fieldPredicates} field predicates (related filters included)`);
      return { op: 'field', predicate: planPredicate(node.predicate, kind, `${path}.predicate`) };
    case 'related': {
      if (kind !== 'object') throw invalid(path, 'related predicates apply to object targets only');
      if (++counters.related > LIMITS.relatedPredicates) throw invalid(path, `at most ${LIMITS.relatedPredicates} related predicates`);
      const p = node.predicate as { class?: unknown; filters?: unknown; depth?: unknown };
      if (!p || typeof p !== 'object') throw invalid(`${path}.predicate`, 'a related predicate must be an object');
      const cls = selector(p.class, `${path}.predicate.class`);
      const rawFilters = p.filters === undefined ? [] : p.filters;
      if (!Array.isArray(rawFilters) || rawFilters.length > LIMITS.relatedFilters)
        throw invalid(`${path}.predicate.filters`, `at most ${LIMITS.relatedFilters} filters`);
      const filters = rawFilters.map((fp: unknown, i: number) => {
        if (++counters.fields > LIMITS.fieldPredicates)
          throw invalid(`${path}.predicate.filters.${i}`, `at most ${LIMITS.fieldPredicates} field predicates (related filters included)`);
        return planPredicate(fp, 'object', `${path}.predicate.filters.${i}`);
      });
      const d = p.depth === undefined ? 1 : p.depth;
      if (typeof d !== 'number' || !Number.isInteger(d) || d < 1 || d > LIMITS.relatedDepthMax)
        throw invalid(`${path}.predicate.depth`, `depth is an integer from 1 to ${LIMITS.relatedDepthMax}`);
      return { op: 'related', class: cls, filters, depth: d, index: counters.related - 1 };
    }
    default:
      throw invalid(`${path}.op`, 'op must be and, or, not, field or related');
  }
}

/** Validates one field predicate against the target's field table and plans its values. */
export function planPredicate(raw: unknown, kind: TargetKind, path: string): PlannedPredicate {
  const p = raw as SearchFieldPredicate;
  if (!p || typeof p !== 'object') throw invalid(path, 'a field predicate must be an object');
  const def = TARGET_FIELDS[kind][p.field];
  if (!def) throw invalid(`${path}.field`, `"${String(p.field)}" is not a filter field of target ${kind}`);
  const op = p.operator;
  if (!OPERATORS[def.type].includes(op))
    throw invalid(`${path}.operator`, `operator "${String(op)}" does not apply to ${def.type} field ${p.field}`);
  let segments: string[] = [];
  if (def.type === 'json') {
    if (typeof p.path !== 'string' || p.path === '') throw invalid(`${path}.path`, `the JSON field ${p.field} needs a dotted path`);
    segments = p.path.split('.');
    if (segments.length > LIMITS.pathSegments || segments.some((s) => s === '' || /[\u0000-\u001f]/.test(s)))
      throw invalid(`${path}.path`, `a path has 1 to ${LIMITS.pathSegments} non-empty dot-separated keys without control characters`);
  } else if (p.path !== undefined) {
    throw invalid(`${path}.path`, `field ${p.field} is not a JSON field and takes no path`);
  }
  const values = planValues(def.type, op, p.value, `${path}.value`);
  return { field: p.field, type: def.type, op, values, path: segments };
}

const LIST_OPS = new Set(['in', 'all']);

function planValues(type: FieldType, op: string, value: unknown, path: string): Scalar[] {
  if (op === 'is_null') {
    if (value !== undefined) throw invalid(path, 'is_null takes no value (wrap it in not for IS NOT NULL)');
    return [true];
  }
  if (value === undefined) throw invalid(path, `operator ${op} needs a value`);
  let items: unknown[];
  if (Array.isArray(value)) {
    if (!LIST_OPS.has(op) && op !== 'between') throw invalid(path, `operator ${op} takes one value, not an array`);
    if (value.length < 1 || value.length > LIMITS.arrayValues) throw invalid(path, `an array holds 1 to ${LIMITS.arrayValues} values`);
    items = value;
  } else {
    if (op === 'between') throw invalid(path, 'between takes an array of two bounds');
    items = [value];
  }
  if (op === 'between' && items.length !== 2) throw invalid(path, 'between takes exactly two bounds');
  for (const v of items) {
    if (v === null || (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean'))
      throw invalid(path, 'values are strings, numbers or booleans');
    if (Array.isArray(value) && typeof v === 'string' && v.includes(',')) throw invalid(path, 'array strings may not contain commas');
    if (typeof v === 'number' && !Number.isFinite(v)) throw invalid(path, 'numbers must be finite');
  }
  const values = items.map((v) => scalarFor(type, op, v as Scalar, path));
  if (op === 'like') {
    const problem = likePatternProblem(String(values[0]));
    if (problem) throw invalid(path, problem);
  }
  return values;
}

function scalarFor(type: FieldType, op: string, v: Scalar, path: string): Scalar {
  switch (type) {
    case 'integer': {
      const n = typeof v === 'string' && /^-?\d{1,16}$/.test(v) ? Number(v) : v;
      if (typeof n !== 'number' || !Number.isSafeInteger(n)) throw invalid(path, 'expected an integer');
      return n;
    }
    case 'timestamp': {
      const iso = typeof v === 'string' ? parseTimestamp(v) : undefined;
      if (!iso) throw invalid(path, 'expected an RFC 3339 timestamp');
      return iso;
    }
    case 'boolean':
      if (typeof v !== 'boolean') throw invalid(path, 'expected true or false');
      return v;
    case 'text':
      if (typeof v !== 'string') throw invalid(path, 'expected a string');
      return v;
    case 'json':
      return jsonScalar(op, v, path);
  }
}

const NETWORK_OPS = new Set(['within_network', 'contains_network', 'contains_ip', 'overlaps_network', 'inet_equals']);
const TEXT_OPS = new Set(['iequals', 'contains', 'icontains', 'startswith', 'istartswith', 'endswith', 'iendswith', 'like', 'regex']);
const ORDERED_OPS = new Set(['gt', 'gte', 'lt', 'lte', 'between']);

function jsonScalar(op: string, v: Scalar, path: string): Scalar {
  if (op === 'array_length') {
    const n = typeof v === 'string' && /^\d{1,9}$/.test(v) ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1)
      throw invalid(path, 'array_length takes a non-negative integer');
    return String(n);
  }
  if (NETWORK_OPS.has(op)) {
    if (typeof v !== 'string' || !isIpForm(v)) throw invalid(path, `${op} takes an IP address or network (CIDR)`);
    return v;
  }
  if (TEXT_OPS.has(op) || op === 'has_key') {
    if (typeof v !== 'string') throw invalid(path, `${op} takes a string`);
    return v;
  }
  if (ORDERED_OPS.has(op) && typeof v === 'boolean') throw invalid(path, `${op} takes a number, string or timestamp`);
  return String(v);
}

/** An IPv4/IPv6 address, optionally with a /prefix in range. */
export function isIpForm(s: string): boolean {
  const slash = s.indexOf('/');
  const addr = slash < 0 ? s : s.slice(0, slash);
  const family = isIP(addr);
  if (family === 0) return false;
  if (slash < 0) return true;
  const prefix = s.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}

function planSort(entries: readonly { field: string; direction?: 'asc' | 'desc' }[], kind: TargetKind): SortKey[] {
  if (entries.length > LIMITS.sortFields) throw invalid('body.sort', `at most ${LIMITS.sortFields} sort fields`);
  const keys: SortKey[] = [];
  entries.forEach((e, i) => {
    const def = TARGET_FIELDS[kind][e.field];
    if (!def || !def.sortable) throw invalid(`body.sort.${i}.field`, `"${e.field}" is not a sort field of target ${kind}`);
    if (keys.some((k) => k.field === e.field)) throw invalid(`body.sort.${i}.field`, `sort field "${e.field}" is given twice`);
    keys.push({ field: e.field, desc: e.direction === 'desc' });
  });
  if (keys.length === 0) keys.push(...DEFAULT_SORT[kind]);
  if (!keys.some((k) => k.field === 'id')) keys.push({ field: 'id', desc: keys.at(-1)?.desc ?? false });
  return keys;
}

/**
 * The canonical form of a planned request that a cursor is bound to: target, resolved target
 * class, expression (related classes resolved to ids), sort and limit. include_total and the
 * cursor itself are not part of it.
 */
export function canonicalRequest(plan: SearchPlan, resolved: { targetClassId: number | null; relatedClassIds: number[] }): string {
  const node = (n: PlanNode): unknown => {
    switch (n.op) {
      case 'and':
      case 'or':
        return [n.op, n.args.map(node)];
      case 'not':
        return ['not', node(n.arg)];
      case 'field':
        return ['field', pred(n.predicate)];
      case 'related':
        return ['related', resolved.relatedClassIds[n.index], n.depth, n.filters.map(pred)];
    }
  };
  const pred = (p: PlannedPredicate) => [p.field, p.path, p.op, p.values];
  return JSON.stringify({
    v: 1,
    kind: plan.kind,
    class: resolved.targetClassId,
    filter: plan.filter ? node(plan.filter) : null,
    sort: plan.sort.map((k) => [k.field, k.desc]),
    limit: plan.limit,
  });
}

/** Every related predicate of the plan, in index order. */
export function relatedNodes(plan: SearchPlan): Extract<PlanNode, { op: 'related' }>[] {
  const out: Extract<PlanNode, { op: 'related' }>[] = [];
  const walk = (n: PlanNode) => {
    if (n.op === 'and' || n.op === 'or') n.args.forEach(walk);
    else if (n.op === 'not') walk(n.arg);
    else if (n.op === 'related') out.push(n);
  };
  if (plan.filter) walk(plan.filter);
  return out.sort((a, b) => a.index - b.index);
}

// ---------------------------------------------------------------------------------------------
// Plain-text search

export const PLAIN_KINDS = ['collection', 'class', 'object'] as const;
export type PlainKind = (typeof PLAIN_KINDS)[number];
/** The plural group names of the response (`results.collections`, `next.classes`, …). */
export const PLAIN_GROUP: Record<PlainKind, 'collections' | 'classes' | 'objects'> = {
  collection: 'collections',
  class: 'classes',
  object: 'objects',
};
export const MAX_QUERY_LENGTH = 256;

export interface PlainPlan {
  q: string;
  kinds: PlainKind[];
  limit: number;
  searchClassSchema: boolean;
  searchObjectData: boolean;
  cursors: Partial<Record<PlainKind, string>>;
}

const PLAIN_PARAMS = new Set([
  'q',
  'kinds',
  'limit_per_kind',
  'cursor_collections',
  'cursor_classes',
  'cursor_objects',
  'search_class_schema',
  'search_object_data',
]);

/** Validates the plain-text query parameters (already schema-coerced); 400 on any violation. */
export function planPlainSearch(query: Record<string, unknown>): PlainPlan {
  for (const [k, v] of Object.entries(query)) {
    if (!PLAIN_PARAMS.has(k)) throw invalid(`query.${k}`, 'unknown query parameter');
    if (Array.isArray(v) && k !== 'kinds') throw invalid(`query.${k}`, 'the parameter may be given only once');
  }
  const q = typeof query.q === 'string' ? query.q.trim() : '';
  if (q === '') throw invalid('query.q', 'q must contain some text');
  if (q.length > MAX_QUERY_LENGTH) throw invalid('query.q', `q is at most ${MAX_QUERY_LENGTH} characters`);
  let kinds: PlainKind[] = [...PLAIN_KINDS];
  if (query.kinds !== undefined) {
    const raw = Array.isArray(query.kinds) ? query.kinds.map(String) : String(query.kinds).split(',');
    if (raw.length === 0 || raw.some((k) => !(PLAIN_KINDS as readonly string[]).includes(k)))
      throw invalid('query.kinds', 'kinds is a comma-separated subset of collection, class, object');
    kinds = PLAIN_KINDS.filter((k) => raw.includes(k));
  }
  let limit: number;
  try {
    limit = parseLimit(query.limit_per_kind);
  } catch {
    throw invalid('query.limit_per_kind', 'limit_per_kind must be an integer of at least 1');
  }
  const bool = (name: string): boolean => {
    const v = query[name];
    if (v === undefined || v === false || v === 'false') return false;
    if (v === true || v === 'true') return true;
    throw invalid(`query.${name}`, 'must be true or false');
  };
  const cursors: Partial<Record<PlainKind, string>> = {};
  for (const k of PLAIN_KINDS) {
    const v = query[`cursor_${PLAIN_GROUP[k]}`];
    if (v !== undefined) cursors[k] = String(v);
  }
  return { q, kinds, limit, searchClassSchema: bool('search_class_schema'), searchObjectData: bool('search_object_data'), cursors };
}

/** What a plain-text cursor of one kind is bound to. */
export function canonicalPlain(plan: PlainPlan, kind: PlainKind): string {
  return JSON.stringify({
    v: 1,
    plain: kind,
    q: plan.q,
    limit: plan.limit,
    schema: kind === 'class' ? plan.searchClassSchema : undefined,
    data: kind === 'object' ? plan.searchObjectData : undefined,
  });
}
