// Pure rules of relations and traversal: the wire views, the work limits, breadth-first search
// state (single start with shortest paths; many starts with "nearest other start" labels) and the
// parser of the `related.<alias>.*` object-list filters. No SQL, no HTTP.
import { badRequest } from './errors.ts';
import { parseFilter, type Filter, type ListSpec } from './list-query.ts';

/** Traversal depth bounds (spec: related depth 1..10, default 1). */
export const MIN_DEPTH = 1;
export const MAX_DEPTH = 10;
export const DEFAULT_DEPTH = 1;

/** Work bounds of one traversal (spec limits: 1,000 targets, 10,000 objects, 20,000 relations). */
export const LIMITS = { targets: 1000, nodes: 10_000, relations: 20_000 } as const;

export const LIMIT_GUIDANCE = 'narrow the query: a smaller depth, a class filter or more selective target filters';

export function workLimitError(what: string): Error {
  return badRequest(`the traversal exceeds the work limit of ${what}; ${LIMIT_GUIDANCE}`);
}

export interface ClassRelationRow {
  [key: string]: unknown;
  id: number;
  from_class_id: number;
  to_class_id: number;
  forward_alias: string | null;
  reverse_alias: string | null;
  from_max_relations: number | null;
  to_max_relations: number | null;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

export interface ObjectRelationRow {
  [key: string]: unknown;
  id: number;
  class_relation_id: number;
  from_object_id: number;
  to_object_id: number;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/** The collections of a relation's two ends. */
export interface RelationEnds {
  from_collection_id: number;
  to_collection_id: number;
}

/** The public class relation (also its audit snapshot). */
export function classRelationView(r: ClassRelationRow): Record<string, unknown> {
  return {
    id: r.id,
    from_class_id: r.from_class_id,
    to_class_id: r.to_class_id,
    forward_alias: r.forward_alias,
    reverse_alias: r.reverse_alias,
    from_max_relations: r.from_max_relations,
    to_max_relations: r.to_max_relations,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}

/** The public object relation (also its audit snapshot). */
export function objectRelationView(r: ObjectRelationRow): Record<string, unknown> {
  return {
    id: r.id,
    class_relation_id: r.class_relation_id,
    from_object_id: r.from_object_id,
    to_object_id: r.to_object_id,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}

/** Depth from a query value: absent → default; else an integer 1..10 (400 otherwise). */
export function parseDepth(raw: unknown, param = 'depth'): number {
  if (raw === undefined || raw === null || raw === '') return DEFAULT_DEPTH;
  const n = typeof raw === 'number' ? raw : /^\d+$/.test(String(raw)) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < MIN_DEPTH || n > MAX_DEPTH) {
    throw badRequest(`${param} must be an integer from ${MIN_DEPTH} to ${MAX_DEPTH}`, [
      { path: `query.${param}`, message: `must be ${MIN_DEPTH}..${MAX_DEPTH}` },
    ]);
  }
  return n;
}

/** One relation as traversal sees it: an undirected edge between two nodes. */
export interface Edge {
  id: number;
  a: number;
  b: number;
}

export interface Reached {
  depth: number;
  /** Node ids from the start to this node, both included. */
  path: number[];
}

/**
 * Breadth-first search from one start node: every reached node keeps its smallest depth and one
 * shortest path (through the smallest-id parent of the previous level, so results are stable).
 * Cycles are harmless: a node is reached once. The caller fetches the visible edges touching
 * `frontier` for each level and feeds them to step(); limits count reached nodes and distinct
 * relations seen.
 */
export class ShortestPaths {
  readonly start: number;
  readonly reached = new Map<number, Reached>();
  frontier: number[];
  depth = 0;
  private readonly seenEdges = new Set<number>();

  constructor(start: number) {
    this.start = start;
    this.frontier = [start];
  }

  get relationCount(): number {
    return this.seenEdges.size;
  }

  /** Applies the edges touching the frontier; advances one level. Throws 400 beyond the limits. */
  step(edges: readonly Edge[]): void {
    const inFrontier = new Set(this.frontier);
    const parentOf = new Map<number, number>();
    for (const e of edges) {
      this.seenEdges.add(e.id);
      for (const [from, to] of [
        [e.a, e.b],
        [e.b, e.a],
      ] as const) {
        if (!inFrontier.has(from) || to === this.start || this.reached.has(to)) continue;
        const prev = parentOf.get(to);
        if (prev === undefined || from < prev) parentOf.set(to, from);
      }
    }
    if (this.seenEdges.size > LIMITS.relations) throw workLimitError(`${LIMITS.relations} relations`);
    this.depth += 1;
    const next = [...parentOf.keys()].sort((x, y) => x - y);
    for (const node of next) {
      const parent = parentOf.get(node)!;
      const parentPath = parent === this.start ? [this.start] : this.reached.get(parent)!.path;
      this.reached.set(node, { depth: this.depth, path: [...parentPath, node] });
    }
    if (this.reached.size > LIMITS.nodes) throw workLimitError(`${LIMITS.nodes} reached nodes`);
    this.frontier = next;
  }
}

// ---- related.<alias>.* object-list filters ---------------------------------------------------

export const RELATED_PREFIX = 'related.';
export const MAX_RELATED_GROUPS = 4;
export const MAX_RELATED_OBJECT_FILTERS = 16;
const ALIAS = /^[A-Za-z0-9_]{1,64}$/;

export interface RelatedGroup {
  alias: string;
  classSelector: { id: number } | { name: string };
  depth: number;
  filters: Filter[];
}

export function isRelatedKey(key: string): boolean {
  return key.startsWith(RELATED_PREFIX);
}

/** The alias of a `related.<alias>.…` key (null when the key has no alias segment). */
export function relatedAlias(key: string): string | null {
  if (!isRelatedKey(key)) return null;
  const rest = key.slice(RELATED_PREFIX.length);
  const dot = rest.indexOf('.');
  return dot <= 0 ? null : rest.slice(0, dot);
}

function single(key: string, raw: unknown): string {
  if (Array.isArray(raw))
    throw badRequest(`query parameter ${key} may be given only once`, [{ path: `query.${key}`, message: 'repeated' }]);
  return String(raw);
}

/**
 * Parses every `related.<alias>.*` query key into groups (other keys are ignored). `targetSpec`
 * is the ListSpec of target objects (its columns name the target row alias). 400 on any
 * malformed key or value, on a group without exactly one class selector, on more than 4 groups
 * or more than 16 object filters in a group.
 */
export function parseRelatedGroups(query: Record<string, unknown>, targetSpec: ListSpec): RelatedGroup[] {
  interface Draft {
    classId?: number;
    className?: string;
    depth?: number;
    filters: Filter[];
  }
  const drafts = new Map<string, Draft>();
  for (const [key, raw] of Object.entries(query)) {
    if (!isRelatedKey(key) || raw === undefined) continue;
    const bad = (why: string) => badRequest(`invalid related filter ${key}: ${why}`, [{ path: `query.${key}`, message: why }]);
    const rest = key.slice(RELATED_PREFIX.length);
    const dot = rest.indexOf('.');
    const alias = dot < 0 ? rest : rest.slice(0, dot);
    if (!ALIAS.test(alias)) throw bad('the alias must be 1 to 64 letters, digits or underscores');
    if (dot < 0) throw bad('expected related.<alias>.class.name, .class.id, .object.<field>[__<op>] or .depth__lte');
    const sub = rest.slice(dot + 1);
    let d = drafts.get(alias);
    if (!d) {
      if (drafts.size >= MAX_RELATED_GROUPS) throw bad(`at most ${MAX_RELATED_GROUPS} related groups`);
      d = { filters: [] };
      drafts.set(alias, d);
    }
    const value = single(key, raw);
    if (sub === 'class.name' || sub === 'class.name__equals') {
      if (value === '') throw bad('the class name must not be empty');
      d.className = value;
    } else if (sub === 'class.id' || sub === 'class.id__equals') {
      if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 2 ** 31 - 1) throw bad('the class id must be a positive integer');
      d.classId = Number(value);
    } else if (sub === 'depth__lte') {
      d.depth = parseDepth(value, key);
    } else if (sub.startsWith('object.')) {
      const fieldKey = sub.slice('object.'.length);
      let f: Filter;
      try {
        f = parseFilter(fieldKey, value, targetSpec);
      } catch (e) {
        throw bad(e instanceof Error ? e.message : 'invalid object filter');
      }
      d.filters.push(f);
      if (d.filters.length > MAX_RELATED_OBJECT_FILTERS)
        throw bad(`at most ${MAX_RELATED_OBJECT_FILTERS} object filters per related group`);
    } else {
      throw bad('expected related.<alias>.class.name, .class.id, .object.<field>[__<op>] or .depth__lte');
    }
  }
  const groups: RelatedGroup[] = [];
  for (const [alias, d] of drafts) {
    if ((d.classId === undefined) === (d.className === undefined)) {
      throw badRequest(`related group "${alias}" needs exactly one of related.${alias}.class.name or related.${alias}.class.id`, [
        { path: `query.related.${alias}.class`, message: 'exactly one class selector required' },
      ]);
    }
    groups.push({
      alias,
      classSelector: d.classId !== undefined ? { id: d.classId } : { name: d.className! },
      depth: d.depth ?? DEFAULT_DEPTH,
      filters: d.filters,
    });
  }
  return groups;
}
