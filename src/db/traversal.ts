// Traversal of class and object relations in both directions: SQL only. The search itself is
// breadth-first, one set-based statement per level (at most 10), with the visited set kept by
// ShortestPaths (src/domain/relations.ts). Compared with one recursive CTE this
// gives exact shortest depths, a global visited set (cycles cost nothing) and hard work bounds
// that fail with a 400 instead of a slow statement. Each level query only returns relations the
// caller may read whose both ends the caller may read, so hidden nodes and relations are never
// crossed. Run the levels and the final page in one read-only repeatable-read transaction
// (readSnapshot) so they see the same data. A relation graph is the same search followed by one
// statement for the nodes (the root at depth 0) and one for the relations among them.
import type { Db, TransactionSql } from './sql.ts';
import { notFinal, type Final } from './tx.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import { classWhere, objectWhere } from './authz.ts';
import { classRelationWhere, objectRelationWhere } from './relations.ts';
import type { Authority } from '../domain/authz.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import {
  LIMITS,
  ShortestPaths,
  graphNodes,
  workLimitError,
  type ClassRelationRow,
  type Edge,
  type ObjectRelationRow,
} from '../domain/relations.ts';

/**
 * Makes the current transaction a read-only snapshot (call first in the transaction). Not awaited:
 * the setting goes out with the transaction's first read, in its round trip (were it refused, the
 * transaction would be aborted and that read would fail).
 */
export function readSnapshot(tx: TransactionSql): void {
  tx`set transaction isolation level repeatable read, read only`.catch(() => undefined);
}

/**
 * What a traversal leaves out: nodes of these classes (object traversals: the objects' classes;
 * class traversals: the classes themselves) are neither reached nor crossed. The start node is
 * never left out.
 */
export interface TraversalOptions {
  ignoreClassIds?: readonly number[];
  /**
   * The start's check, sent before the traversal: the first level goes out right behind it (one
   * round trip for both), and the walk goes on only once the check has passed.
   */
  startChecked?: Promise<unknown>;
}

/** Neither end of the relation is of an ignored class, unless it is the start (true when nothing is ignored). */
function notIgnored(db: Db, start: number, ignore: readonly number[], ends: readonly [[string, string], [string, string]]): Fragment {
  if (ignore.length === 0) return db`true` as Fragment;
  const ids = [...ignore];
  const [[aId, aClass], [bId, bClass]] = ends;
  return db`(${db(aId)} = ${start}::int or ${db(aClass)} <> all(${ids}::int[]))
    and (${db(bId)} = ${start}::int or ${db(bClass)} <> all(${ids}::int[]))` as Fragment;
}

/** Relations touching any of `frontier` the caller may traverse, none with an ignored end but the start. */
type EdgeReader = (db: Db, auth: Authority, frontier: number[], start?: number, ignore?: readonly number[]) => Promise<Edge[]>;

/**
 * Object relations touching any of `frontier` that the caller may traverse: ReadObjectRelation
 * and ReadObject on both end objects (grants and token scope), and neither end of an ignored class
 * (but the start). At most LIMITS.relations + 1 rows.
 */
export const visibleObjectEdges: EdgeReader = async (db, auth, frontier, start = 0, ignore = []) => {
  if (frontier.length === 0) return [];
  return db<Edge[]>`
    select r.id, r.from_object_id as a, r.to_object_id as b
    from object_relations r
    join objects fo on fo.id = r.from_object_id
    join objects tob on tob.id = r.to_object_id
    where (r.from_object_id = any(${frontier}::int[]) or r.to_object_id = any(${frontier}::int[]))
      and ${objectRelationWhere(db, auth, 'ReadObjectRelation')}
      and ${objectWhere(db, auth, 'ReadObject', { id: 'fo.id', classId: 'fo.class_id', collectionId: 'fo.collection_id' })}
      and ${objectWhere(db, auth, 'ReadObject', { id: 'tob.id', classId: 'tob.class_id', collectionId: 'tob.collection_id' })}
      and ${notIgnored(db, start, ignore, [
        ['fo.id', 'fo.class_id'],
        ['tob.id', 'tob.class_id'],
      ])}
    order by r.id
    limit ${LIMITS.relations + 1}`;
};

/** Class relations touching any of `frontier` with ReadClassRelation and ReadClass on both end classes, neither end ignored (but the start). */
export const visibleClassEdges: EdgeReader = async (db, auth, frontier, start = 0, ignore = []) => {
  if (frontier.length === 0) return [];
  return db<Edge[]>`
    select r.id, r.from_class_id as a, r.to_class_id as b
    from class_relations r
    join classes fc on fc.id = r.from_class_id
    join classes tc on tc.id = r.to_class_id
    where (r.from_class_id = any(${frontier}::int[]) or r.to_class_id = any(${frontier}::int[]))
      and ${classRelationWhere(db, auth, 'ReadClassRelation')}
      and ${classWhere(db, auth, 'ReadClass', { id: 'fc.id', collectionId: 'fc.collection_id' })}
      and ${classWhere(db, auth, 'ReadClass', { id: 'tc.id', collectionId: 'tc.collection_id' })}
      and ${notIgnored(db, start, ignore, [
        ['fc.id', 'fc.id'],
        ['tc.id', 'tc.id'],
      ])}
    order by r.id
    limit ${LIMITS.relations + 1}`;
};

type EdgeSource = (db: Db, auth: Authority, frontier: number[], start: number, ignore: readonly number[]) => Promise<Edge[]>;

async function walk(
  db: Db,
  auth: Authority,
  start: number,
  depth: number,
  edges: EdgeSource,
  opts: TraversalOptions,
): Promise<ShortestPaths> {
  const bfs = new ShortestPaths(start);
  const ignore = opts.ignoreClassIds ?? [];
  let gate = opts.startChecked;
  while (bfs.depth < depth && bfs.frontier.length > 0) {
    const level = edges(db, auth, bfs.frontier, start, ignore);
    if (gate) {
      level.catch(() => undefined); // awaited below, once the check has passed
      await gate;
      gate = undefined;
    }
    bfs.step(await level);
  }
  await gate; // no level was read: the check still decides
  return bfs;
}

/** Objects reachable from `start` within `depth` hops (the start must already be checked readable). */
export function traverseObjects(
  db: Db,
  auth: Authority,
  start: number,
  depth: number,
  opts: TraversalOptions = {},
): Promise<ShortestPaths> {
  return walk(db, auth, start, depth, visibleObjectEdges, opts);
}

/** Classes reachable from `start` within `depth` hops (the start must already be checked readable). */
export function traverseClasses(
  db: Db,
  auth: Authority,
  start: number,
  depth: number,
  opts: TraversalOptions = {},
): Promise<ShortestPaths> {
  return walk(db, auth, start, depth, visibleClassEdges, opts);
}

/** The reached nodes as three parallel arrays for unnest(): ids, depths, paths ("1,2,3"). */
function reachedArrays(bfs: ShortestPaths): { ids: number[]; depths: number[]; paths: string[] } {
  const ids: number[] = [];
  const depths: number[] = [];
  const paths: string[] = [];
  for (const [id, r] of bfs.reached) {
    ids.push(id);
    depths.push(r.depth);
    paths.push(r.path.join(','));
  }
  return { ids, depths, paths };
}

function reachedFrom(db: Db, bfs: ShortestPaths): Fragment {
  const { ids, depths, paths } = reachedArrays(bfs);
  return db`unnest(${ids}::int[], ${depths}::int[], ${paths}::text[]) as rel (id, depth, path_text)` as Fragment;
}

const TRAVERSAL_SORT_FIELDS = (alias: string): ListSpec['fields'] => ({
  depth: { type: 'integer', column: 'rel.depth', filterable: false },
  id: { type: 'integer', column: `${alias}.id`, filterable: false },
  name: { type: 'text', column: `${alias}.name`, filterable: false },
  created_at: { type: 'timestamp', column: `${alias}.created_at`, filterable: false },
  updated_at: { type: 'timestamp', column: `${alias}.updated_at`, filterable: false },
});

/**
 * Related objects: sorts depth, id, name, created_at, updated_at (default depth, id); no filters;
 * `ignore_classes` and `ignore_self_class` (domain ignoredObjectClasses) say which classes the
 * traversal leaves out.
 */
export const RELATED_OBJECT_LIST_SPEC: ListSpec = {
  fields: TRAVERSAL_SORT_FIELDS('o'),
  defaultSort: [{ field: 'depth', desc: false }],
  extraParams: ['depth', 'class_id', 'ignore_classes', 'ignore_self_class'],
};

/** Related classes: the same sorts as related objects. */
export const RELATED_CLASS_LIST_SPEC: ListSpec = {
  fields: TRAVERSAL_SORT_FIELDS('c'),
  defaultSort: [{ field: 'depth', desc: false }],
  extraParams: ['depth'],
};

export interface RelatedObjectRow {
  [key: string]: unknown;
  id: number;
  name: string;
  description: string;
  collection_id: number;
  svc_class_id: number;
  json_data: unknown;
  created_at: Date;
  updated_at: Date;
  revision: number;
  depth: number;
  path: number[];
}

export interface RelatedClassRow {
  [key: string]: unknown;
  id: number;
  name: string;
  description: string;
  collection_id: number;
  validate_schema: boolean;
  json_schema: unknown;
  created_at: Date;
  updated_at: Date;
  revision: number;
  depth: number;
  path: number[];
}

/** A reached object's columns (RelatedObjectRow) over `o` and the reached set `rel`: a list page's and a graph's. */
function reachedObjectColumns(db: Db): Fragment {
  return db`o.id, o.name, o.description, o.collection_id, o.class_id as svc_class_id, o.json_data, o.created_at,
    o.updated_at, o.revision, rel.depth, string_to_array(rel.path_text, ',')::int[] as path` as Fragment;
}

/** A reached class's columns (RelatedClassRow) over `c` and the reached set `rel`: a list page's and a graph's. */
function reachedClassColumns(db: Db): Fragment {
  return db`c.id, c.name, c.description, c.collection_id, c.validate_schema, c.json_schema, c.created_at, c.updated_at,
    c.revision, rel.depth, string_to_array(rel.path_text, ',')::int[] as path` as Fragment;
}

/** One page of the reached objects, optionally only those of class `classId`. */
export function listRelatedObjectRows(
  db: Db,
  bfs: ShortestPaths,
  parsed: ParsedList,
  classId: number | null,
  final?: Final,
): Promise<ListPage<RelatedObjectRow>> {
  return runList<RelatedObjectRow>(db, {
    from: db`${reachedFrom(db, bfs)} join objects o on o.id = rel.id` as Fragment,
    select: reachedObjectColumns(db),
    where: classId === null ? [] : [db`o.class_id = ${classId}::int` as Fragment],
    parsed,
    spec: RELATED_OBJECT_LIST_SPEC,
    final,
  });
}

/** One page of the reached classes. */
export function listRelatedClassRows(db: Db, bfs: ShortestPaths, parsed: ParsedList, final?: Final): Promise<ListPage<RelatedClassRow>> {
  return runList<RelatedClassRow>(db, {
    from: db`${reachedFrom(db, bfs)} join classes c on c.id = rel.id` as Fragment,
    select: reachedClassColumns(db),
    parsed,
    spec: RELATED_CLASS_LIST_SPEC,
    final,
  });
}

// ---- relation graphs -------------------------------------------------------------------------

/** The graph's nodes as three parallel arrays for unnest(): ids, depths, paths ("1,2,3"); the root has depth 0. */
function graphFrom(db: Db, bfs: ShortestPaths): Fragment {
  const nodes = graphNodes(bfs);
  const ids = nodes.map((n) => n.id);
  const depths = nodes.map((n) => n.depth);
  const paths = nodes.map((n) => n.path.join(','));
  return db`unnest(${ids}::int[], ${depths}::int[], ${paths}::text[]) as rel (id, depth, path_text)` as Fragment;
}

function nodeIds(bfs: ShortestPaths): number[] {
  return [bfs.start, ...bfs.reached.keys()];
}

/** An object graph: the root and the reached objects (by depth, id), and the relations among them. */
export interface ObjectGraphRows {
  nodes: RelatedObjectRow[];
  relations: ObjectRelationRow[];
}

/** A class graph: the root and the reached classes (by depth, id), and the relations among them. */
export interface ClassGraphRows {
  nodes: RelatedClassRow[];
  relations: ClassRelationRow[];
}

/**
 * The graph of a finished object traversal: every reached object with the root, and every object
 * relation between two of them the caller may read (ReadObjectRelation; the ends were all found
 * readable), once each, by id. More than LIMITS.relations relations is 400 (narrow). Both
 * statements go out together (one round trip); `final`: COMMIT goes with the second.
 */
export function objectGraphRows(db: Db, auth: Authority, bfs: ShortestPaths, final: Final = notFinal): Promise<ObjectGraphRows> {
  const ids = nodeIds(bfs);
  return graphOf<RelatedObjectRow, ObjectRelationRow>(
    db,
    db`select ${reachedObjectColumns(db)}
      from ${graphFrom(db, bfs)} join objects o on o.id = rel.id
      order by rel.depth, o.id` as Fragment,
    db`select r.id, r.class_relation_id, r.from_object_id, r.to_object_id, r.created_at, r.updated_at, r.revision
      from object_relations r
      join objects fo on fo.id = r.from_object_id
      join objects tob on tob.id = r.to_object_id
      where r.from_object_id = any(${ids}::int[]) and r.to_object_id = any(${ids}::int[])
        and ${objectRelationWhere(db, auth, 'ReadObjectRelation')}
      order by r.id
      limit ${LIMITS.relations + 1}` as Fragment,
    final,
  );
}

/** The graph of a finished class traversal, as objectGraphRows (ReadClassRelation on the relations). */
export function classGraphRows(db: Db, auth: Authority, bfs: ShortestPaths, final: Final = notFinal): Promise<ClassGraphRows> {
  const ids = nodeIds(bfs);
  return graphOf<RelatedClassRow, ClassRelationRow>(
    db,
    db`select ${reachedClassColumns(db)}
      from ${graphFrom(db, bfs)} join classes c on c.id = rel.id
      order by rel.depth, c.id` as Fragment,
    db`select r.id, r.from_class_id, r.to_class_id, r.forward_alias, r.reverse_alias, r.from_max_relations,
        r.to_max_relations, r.created_at, r.updated_at, r.revision
      from class_relations r
      join classes fc on fc.id = r.from_class_id
      join classes tc on tc.id = r.to_class_id
      where r.from_class_id = any(${ids}::int[]) and r.to_class_id = any(${ids}::int[])
        and ${classRelationWhere(db, auth, 'ReadClassRelation')}
      order by r.id
      limit ${LIMITS.relations + 1}` as Fragment,
    final,
  );
}

/**
 * A graph's nodes and relations (at most LIMITS.relations + 1 rows: more is 400), sent together:
 * the nodes first, then the relations, which `final` sends with COMMIT.
 */
async function graphOf<N extends object, R extends object>(
  db: Db,
  nodesSql: Fragment,
  relationsSql: Fragment,
  final: Final,
): Promise<{ nodes: N[]; relations: R[] }> {
  const nodes = db<N[]>`${nodesSql}`;
  nodes.catch(() => undefined); // sent now, before the relations (final sends them and COMMIT at once); awaited below
  const relations = final(db<R[]>`${relationsSql}`);
  relations.catch(() => undefined); // awaited below, after the nodes
  const n = await nodes;
  const r = await relations;
  if (r.length > LIMITS.relations) throw workLimitError(`${LIMITS.relations} relations`);
  return { nodes: [...n], relations: [...r] };
}
