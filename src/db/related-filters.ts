// The `related.<alias>.*` filters of the object list (spec, "List objects query"). Each group names
// an exact target class, object filters on target objects and a depth; an object matches when at
// least one target object satisfying all the group's filters is reachable from it within the
// depth over relations in either direction, along a path the caller may read (ReadObject on every
// object, ReadObjectRelation on every relation, both within the token scope). The target class
// needs ReadClass (404 when it does not exist, 403 when not readable).
//
// How: the matching targets are found in SQL (at most 1,000, else 400), then a breadth-first
// search from all of them at once (bounded: 10,000 objects, 20,000 relations, else 400) yields the
// ids of the objects that reach a target other than themselves; the group becomes the condition
// `<object id column> = any(<those ids>)` on the list's outer object row. Groups combine with AND.
//
// Use from the object list:
//   const { related, rest } = splitRelatedQuery(input.query);       // rest goes to parseListQuery
//   const conditions = await relatedObjectConditions(db, auth, related, 'o.id');
//   ... runList({ ..., where: [...visibility, ...conditions] })
import type { Db } from './sql.ts';
import { and, filterSql, type Fragment } from './list.ts';
import { objectWhere, requireClassPermission } from './authz.ts';
import { visibleObjectEdges } from './traversal.ts';
import type { Authority } from '../domain/authz.ts';
import type { ListSpec } from '../http/list-query.ts';
import { notFound } from '../http/errors.ts';
import { LIMITS, NearestStarts, isRelatedKey, parseRelatedGroups, workLimitError, type RelatedGroup } from '../domain/relations.ts';

/** Target-object fields of `related.<alias>.object.<field>` (alias `svc_t` is the target row). */
export const RELATED_TARGET_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'svc_t.id' },
    name: { type: 'text', column: 'svc_t.name' },
    description: { type: 'text', column: 'svc_t.description' },
    collection_id: { type: 'integer', column: 'svc_t.collection_id' },
    created_at: { type: 'timestamp', column: 'svc_t.created_at' },
    updated_at: { type: 'timestamp', column: 'svc_t.updated_at' },
    revision: { type: 'integer', column: 'svc_t.revision' },
    json_data: { type: 'json', column: 'svc_t.json_data' },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

/** Splits a list query into its `related.*` keys and everything else. */
export function splitRelatedQuery(query: Record<string, unknown>): { related: Record<string, unknown>; rest: Record<string, unknown> } {
  const related: Record<string, unknown> = {};
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(query)) (isRelatedKey(k) ? related : rest)[k] = v;
  return { related, rest };
}

/** Resolves the group's class selector: 404 unknown, 403 without ReadClass (or scoped out). */
async function resolveTargetClass(db: Db, auth: Authority, g: RelatedGroup): Promise<number> {
  let id: number;
  if ('id' in g.classSelector) {
    id = g.classSelector.id;
  } else {
    const [row] = await db<{ id: number }[]>`select id from classes where name = ${g.classSelector.name}::text`;
    if (!row) throw notFound(`class "${g.classSelector.name}" of related group "${g.alias}"`);
    id = row.id;
  }
  await requireClassPermission(db, auth, id, 'ReadClass');
  return id;
}

/** Readable objects of the class matching every filter of the group (at most LIMITS.targets, else 400). */
async function findTargets(db: Db, auth: Authority, classId: number, g: RelatedGroup): Promise<number[]> {
  const rows = await db<{ id: number }[]>`
    select svc_t.id from objects svc_t
    where svc_t.class_id = ${classId}::int
      and ${objectWhere(db, auth, 'ReadObject', { id: 'svc_t.id', classId: 'svc_t.class_id', collectionId: 'svc_t.collection_id' })}
      and ${and(
        db,
        g.filters.map((f) => filterSql(db, f)),
      )}
    order by svc_t.id
    limit ${LIMITS.targets + 1}`;
  if (rows.length > LIMITS.targets) throw workLimitError(`${LIMITS.targets} target objects in related group "${g.alias}"`);
  return rows.map((r) => r.id);
}

/** The ids of the objects that satisfy one related group. */
export async function relatedGroupMatches(db: Db, auth: Authority, g: RelatedGroup): Promise<number[]> {
  const classId = await resolveTargetClass(db, auth, g);
  const targets = await findTargets(db, auth, classId, g);
  if (targets.length === 0) return [];
  const search = new NearestStarts(targets);
  while (search.depth < g.depth) {
    const frontier = search.frontier;
    if (frontier.length === 0) break;
    search.step(await visibleObjectEdges(db, auth, frontier));
  }
  return search.matches();
}

/**
 * Conditions on the outer object row (its id column, e.g. 'o.id') for every `related.*` key of
 * `query` (other keys are ignored): one fragment per group, all to be ANDed. 400 for malformed
 * keys or values and beyond the work limits; 404/403 for the target class.
 */
export async function relatedObjectConditions(
  db: Db,
  auth: Authority,
  query: Record<string, unknown>,
  objectIdColumn = 'o.id',
): Promise<Fragment[]> {
  const groups = parseRelatedGroups(query, RELATED_TARGET_SPEC);
  const out: Fragment[] = [];
  for (const g of groups) {
    const ids = await relatedGroupMatches(db, auth, g);
    out.push(ids.length === 0 ? (db`false` as Fragment) : (db`${db(objectIdColumn)} = any(${ids}::int[])` as Fragment));
  }
  return out;
}
