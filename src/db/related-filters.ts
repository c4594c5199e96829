// The `related.<alias>.*` filters of the object list (spec, "List objects query"). Each group names
// an exact target class, object filters on target objects and a depth; an object matches when at
// least one target object satisfying all the group's filters, other than the object itself, is
// reachable from it within the depth over relations in either direction, along a path the caller
// may read: ReadObject on every object and ReadObjectRelation on every relation (grants and token
// scope), and ReadClass on the target class. A target class that does not exist or is not
// readable matches nothing (a filter value, not a point request).
//
// The condition is one SQL fragment on the outer object row, `<id column> in (...)`, computed
// once per statement (uncorrelated): a breadth-first search from all targets at once, unrolled
// into one CTE per level (depth <= 10). Each node keeps at most two distinct source targets, which
// is exactly enough to know whether it reaches a target other than itself, so the work per level
// is linear in the reached objects; cycles add nothing. Work bounds (1,000 targets, 10,000
// reached objects, 20,000 relations per level) fail the statement through svc_work_limit()
// (migration 0041) with SQLSTATE 57014, which the service answers with 400 "narrow the query".
import type { Db } from './sql.ts';
import { and, filterSql, type Fragment } from './list.ts';
import { classWhere, objectWhere } from './authz.ts';
import { objectRelationWhere } from './relations.ts';
import type { Authority } from '../domain/authz.ts';
import type { ListSpec } from '../domain/list-query.ts';
import { LIMITS, isRelatedKey, parseRelatedGroups, relatedAlias, type RelatedGroup } from '../domain/relations.ts';

/** Target-object fields of `related.<alias>.object.<field>` (alias `svc_t` is the target row). */
export const RELATED_TARGET_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'svc_t.id' },
    name: { type: 'text', column: 'svc_t.name', lowerIndexed: true },
    description: { type: 'text', column: 'svc_t.description', lowerIndexed: true },
    collection_id: { type: 'integer', column: 'svc_t.collection_id' },
    created_at: { type: 'timestamp', column: 'svc_t.created_at' },
    updated_at: { type: 'timestamp', column: 'svc_t.updated_at' },
    revision: { type: 'integer', column: 'svc_t.revision' },
    json_data: { type: 'json', column: 'svc_t.json_data' },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

/** Relations the caller may cross, over aliases e (relation), fo and tob (its end objects). */
function crossable(db: Db, auth: Authority): Fragment {
  return and(db, [
    objectRelationWhere(db, auth, 'ReadObjectRelation'),
    objectWhere(db, auth, 'ReadObject', { id: 'fo.id', classId: 'fo.class_id', collectionId: 'fo.collection_id' }),
    objectWhere(db, auth, 'ReadObject', { id: 'tob.id', classId: 'tob.class_id', collectionId: 'tob.collection_id' }),
  ]);
}

/** (node, src) pairs one crossable relation away from the pairs of CTE `prev`, in both directions. */
function neighbours(db: Db, auth: Authority, prev: string): Fragment {
  return db`
    select tob.id as node, f.src from ${db(prev)} f
      join object_relations e on e.from_object_id = f.node
      join objects fo on fo.id = e.from_object_id
      join objects tob on tob.id = e.to_object_id
    where ${crossable(db, auth)}
    union all
    select fo.id as node, f.src from ${db(prev)} f
      join object_relations e on e.to_object_id = f.node
      join objects fo on fo.id = e.from_object_id
      join objects tob on tob.id = e.to_object_id
    where ${crossable(db, auth)}` as Fragment;
}

/** The readable target objects of the group (class selector, ReadClass, ReadObject, object filters). */
function targets(db: Db, auth: Authority, g: RelatedGroup): Fragment {
  const selector = 'id' in g.classSelector ? db`svc_k.id = ${g.classSelector.id}::int` : db`svc_k.name = ${g.classSelector.name}::text`;
  return db`
    select svc_t.id from objects svc_t
    join classes svc_k on svc_k.id = svc_t.class_id
    where ${selector}
      and ${classWhere(db, auth, 'ReadClass', { id: 'svc_k.id', collectionId: 'svc_k.collection_id' })}
      and ${objectWhere(db, auth, 'ReadObject', { id: 'svc_t.id', classId: 'svc_t.class_id', collectionId: 'svc_t.collection_id' })}
      and ${and(
        db,
        g.filters.map((f) => filterSql(db, f)),
      )}
    limit ${LIMITS.targets + 1}` as Fragment;
}

/**
 * The condition of one related group on the outer object row's id column (e.g. 'o.id').
 * CTEs per level k: svc_rel_c<k> candidate (node, src) pairs not held yet; svc_rel_f<k> the fresh
 * pairs kept (at most two sources per node, counting those already held); svc_rel_h<k> all held
 * pairs. Level 0 holds every target with itself as source.
 */
export function relatedGroupCondition(db: Db, auth: Authority, g: RelatedGroup, idColumn = 'o.id'): Fragment {
  let ctes = db`
    svc_rel_t as (${targets(db, auth, g)}),
    svc_rel_f0 as (
      select id as node, id as src from svc_rel_t
      where (select svc_work_limit(count(*), ${LIMITS.targets}, 'target objects') from svc_rel_t)),
    svc_rel_h0 as (select node, src from svc_rel_f0)` as Fragment;
  for (let k = 1; k <= g.depth; k++) {
    const [c, f, h, pf, ph] = [`svc_rel_c${k}`, `svc_rel_f${k}`, `svc_rel_h${k}`, `svc_rel_f${k - 1}`, `svc_rel_h${k - 1}`];
    ctes = db`${ctes},
      ${db(c)} as (
        select distinct n.node, n.src from (${neighbours(db, auth, pf)}) n
        where (select svc_work_limit(count(distinct node), ${LIMITS.nodes}, 'reached objects') from ${db(ph)})
          and (select svc_work_limit(count(*), ${LIMITS.relations}, 'relations') from (
                select 1 from (select distinct node from ${db(pf)}) x
                join object_relations e on e.from_object_id = x.node or e.to_object_id = x.node
                limit ${LIMITS.relations + 1}) svc_rel_work)
          and not exists (select 1 from ${db(ph)} held where held.node = n.node and held.src = n.src)),
      ${db(f)} as (
        select r.node, r.src from (
          select cand.node, cand.src, row_number() over (partition by cand.node order by cand.src) as rn
          from ${db(c)} cand) r
        left join (select node, count(*) as n from ${db(ph)} group by node) held on held.node = r.node
        where r.rn <= 2 - coalesce(held.n, 0)),
      ${db(h)} as (select node, src from ${db(ph)} union all select node, src from ${db(f)})` as Fragment;
  }
  const last = `svc_rel_h${g.depth}`;
  return db`${db(idColumn)} in (with ${ctes}
    select svc_rel_m.node from ${db(last)} svc_rel_m
    where svc_rel_m.node <> svc_rel_m.src
      and (select svc_work_limit(count(distinct node), ${LIMITS.nodes}, 'reached objects') from ${db(last)}))` as Fragment;
}

/**
 * Conditions for every `related.*` key of `query` (other keys are ignored): one fragment per
 * group, all to be ANDed, on the outer object row's id column. 400 for malformed keys or values.
 */
export function relatedObjectConditions(db: Db, auth: Authority, query: Record<string, unknown>, idColumn = 'o.id'): Fragment[] {
  return parseRelatedGroups(query, RELATED_TARGET_SPEC).map((g) => relatedGroupCondition(db, auth, g, idColumn));
}

const parsedGroups = new WeakMap<object, Map<string, RelatedGroup>>();

/**
 * The condition of one `related.*` parameter of the object list (src/db/objects.ts asks for each;
 * `params` holds all of the request's): the first parameter of each group carries the group's
 * whole condition, the group's other parameters answer `true`; undefined for a key that names no
 * group (the caller's 400). Fragments reference o.id. Groups are parsed once per request; a
 * malformed group is 400.
 */
export function relatedParamCondition(db: Db, auth: Authority, key: string, params: Record<string, string>): Fragment | undefined {
  if (!isRelatedKey(key)) return undefined;
  let groups = parsedGroups.get(params);
  if (!groups) {
    groups = new Map(parseRelatedGroups(params, RELATED_TARGET_SPEC).map((g) => [g.alias, g]));
    parsedGroups.set(params, groups);
  }
  const alias = relatedAlias(key);
  const g = alias === null ? undefined : groups.get(alias);
  if (!g) return undefined;
  const first = Object.keys(params).find((k) => relatedAlias(k) === alias);
  return first === key ? relatedGroupCondition(db, auth, g, 'o.id') : (db`true` as Fragment);
}
