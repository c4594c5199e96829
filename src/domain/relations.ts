// Pure rules of relations and traversal: the wire views, the work limits, breadth-first search
// state (single start with shortest paths; many starts with "nearest other start" labels) and the
// parser of the `related.<alias>.*` object-list filters. No SQL, no HTTP.
import { ApiError, badRequest } from './errors.ts';
import { parseFilter, type Filter, type ListSpec } from './list-query.ts';
import type { ResponseBody } from './wire.ts';

/** Traversal depth bounds (spec: related depth 1..10, default 1). */
export const MIN_DEPTH = 1;
export const MAX_DEPTH = 10;
export const DEFAULT_DEPTH = 1;
/** A relation graph is one unpaged document: at most this many hops (default DEFAULT_DEPTH). */
export const GRAPH_MAX_DEPTH = 5;
/** At most this many class ids in `ignore_classes`. */
export const MAX_IGNORED_CLASSES = 64;

/** Work bounds of one traversal (spec limits: 1,000 targets, 10,000 objects, 20,000 relations). */
export const LIMITS = { targets: 1000, nodes: 10_000, relations: 20_000 } as const;

export const LIMIT_GUIDANCE = 'narrow the query: a smaller depth, a class filter or more selective target filters';

/** 400 asking to narrow, with the reason structured search gives its work limit (`search_work_limit`). */
export function workLimitError(what: string): Error {
  return new ApiError('bad_request', `the traversal exceeds the work limit of ${what}; ${LIMIT_GUIDANCE}`, {
    reason: 'search_work_limit',
  });
}

/** The members of a class relation its creator chooses. */
export interface NewClassRelationRow {
  from_class_id: number;
  to_class_id: number;
  forward_alias: string | null;
  reverse_alias: string | null;
  from_max_relations: number | null;
  to_max_relations: number | null;
}

export interface ClassRelationRow extends NewClassRelationRow {
  [key: string]: unknown;
  id: number;
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
export function classRelationView(r: ClassRelationRow): ResponseBody<'listClassRelations', 200>[number] {
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
export function objectRelationView(r: ObjectRelationRow): ResponseBody<'listObjectRelations', 200>[number] {
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

/** Depth from a query value: absent → default; else an integer 1..max (default 10; 400 otherwise). */
export function parseDepth(raw: unknown, param = 'depth', max = MAX_DEPTH): number {
  if (raw === undefined || raw === null || raw === '') return DEFAULT_DEPTH;
  const n = typeof raw === 'number' ? raw : /^\d+$/.test(String(raw)) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < MIN_DEPTH || n > max) {
    throw badRequest(`${param} must be an integer from ${MIN_DEPTH} to ${max}`, [
      { path: `query.${param}`, message: `must be ${MIN_DEPTH}..${max}` },
    ]);
  }
  return n;
}

/** `ignore_classes`: comma-separated class ids (at most 64); absent or empty → none. 400 otherwise. */
export function parseIgnoreClasses(raw: unknown): number[] {
  if (raw === undefined || raw === null || raw === '') return [];
  if (Array.isArray(raw)) {
    throw badRequest('ignore_classes may be given only once (a comma-separated list of class ids)', [
      { path: 'query.ignore_classes', message: 'repeated' },
    ]);
  }
  const parts = String(raw).split(',');
  const ids = parts.map((p) => (/^[1-9][0-9]{0,9}$/.test(p) ? Number(p) : NaN));
  if (ids.some((n) => !Number.isInteger(n) || n > 2 ** 31 - 1) || ids.length > MAX_IGNORED_CLASSES) {
    throw badRequest(`ignore_classes must be a comma-separated list of at most ${MAX_IGNORED_CLASSES} class ids`, [
      { path: 'query.ignore_classes', message: 'comma-separated positive integers' },
    ]);
  }
  return [...new Set(ids)];
}

/** `ignore_self_class`: true or false, default true. */
export function parseIgnoreSelfClass(raw: unknown): boolean {
  if (raw === undefined || raw === null || raw === '' || raw === true || raw === 'true') return true;
  if (raw === false || raw === 'false') return false;
  throw badRequest('ignore_self_class must be true or false', [{ path: 'query.ignore_self_class', message: 'true or false' }]);
}

/**
 * The classes a related-object traversal from an object of class `startClassId` leaves out: the
 * `ignore_classes`, plus the start object's own class unless `ignore_self_class=false`. Objects of
 * these classes are neither returned nor crossed (the start object itself is always the start).
 */
export function ignoredObjectClasses(query: Record<string, unknown>, startClassId: number): number[] {
  const ids = parseIgnoreClasses(query.ignore_classes);
  if (parseIgnoreSelfClass(query.ignore_self_class) && !ids.includes(startClassId)) ids.push(startClassId);
  return ids;
}

/** The query of a relation-graph operation: depth (1..5, default 1) and the classes left out. */
export interface GraphQuery {
  depth: number;
  ignoreClassIds: number[];
}

const GRAPH_PARAMS = { classes: ['depth', 'ignore_classes'], objects: ['depth', 'ignore_classes', 'ignore_self_class'] } as const;

/**
 * Parses a relation-graph query (`kind` says which graph). Objects: `ignore_classes` plus the start
 * class unless `ignore_self_class=false`; classes: `ignore_classes` (the start class is the root
 * either way). Any other parameter is 400.
 */
export function parseGraphQuery(query: Record<string, unknown>, kind: 'classes' | 'objects', startClassId: number): GraphQuery {
  const known: readonly string[] = GRAPH_PARAMS[kind];
  for (const key of Object.keys(query)) {
    if (query[key] !== undefined && !known.includes(key)) {
      throw badRequest(`unknown query parameter "${key}" (the graph takes ${known.join(', ')})`, [
        { path: `query.${key}`, message: 'unknown parameter' },
      ]);
    }
  }
  if (Array.isArray(query.depth)) throw badRequest('depth may be given only once', [{ path: 'query.depth', message: 'repeated' }]);
  const depth = parseDepth(query.depth, 'depth', GRAPH_MAX_DEPTH);
  const ignoreClassIds = kind === 'objects' ? ignoredObjectClasses(query, startClassId) : parseIgnoreClasses(query.ignore_classes);
  return { depth, ignoreClassIds };
}

/** One node of a relation graph: its id, hops from the root (0 for the root) and one shortest path. */
export interface GraphNode {
  id: number;
  depth: number;
  path: number[];
}

/** The root and every reached node of a search, root first, then by depth and id. */
export function graphNodes(bfs: ShortestPaths): GraphNode[] {
  const nodes: GraphNode[] = [{ id: bfs.start, depth: 0, path: [bfs.start] }];
  for (const [id, r] of bfs.reached) nodes.push({ id, depth: r.depth, path: r.path });
  return nodes.sort((a, b) => a.depth - b.depth || a.id - b.id);
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
