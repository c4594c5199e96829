// Object aggregates: SQL only (parsing and cursor rules are src/domain/aggregates.ts). One
// statement groups the readable, filtered objects of a class by up to three dimensions (each a
// state rank and a jsonb value), computes the measures, and pages the groups by keyset.
import type { Db } from './sql.ts';
import { and, type Fragment } from './list.ts';
import type { ComputedDef } from '../domain/computed.ts';
import { evalExpr } from './computed-fields.ts';
import type { AggregateRequest, FieldRef } from '../domain/aggregates.ts';
import type { Authority } from '../domain/authz.ts';
import { classWhere, collectionWhere, objectWhere } from './authz.ts';

export interface AggregateQuery {
  req: AggregateRequest;
  /** Computed definitions by `computed.<visibility>.<key>`, for the refs of req. */
  computed: Map<string, ComputedDef>;
  /** Visibility, path scoping and filters on the objects table `o`. */
  where: Fragment[];
  /** Cursor values after which to continue (see encodeAggregateCursor), or null. */
  after: unknown[] | null;
  limit: number;
}

export interface AggregateGroup {
  ranks: number[];
  values: unknown[];
  /** The values' exact jsonb text, for the cursor. */
  texts: string[];
  count: number;
  measures: { value: string | null; contributing: number }[];
}

function join(db: Db, parts: Fragment[]): Fragment {
  return parts.reduce((acc, p) => db`${acc}, ${p}` as Fragment);
}

function id(db: Db, name: string): Fragment {
  return db`${db(name)}` as Fragment;
}

/** The jsonb of a computed evaluation column of the inner query. */
function ceCol(db: Db, index: number): Fragment {
  return db`o.${db(`ce${index}`)}` as Fragment;
}

export async function runAggregate(db: Db, q: AggregateQuery): Promise<AggregateGroup[]> {
  const computedNames = [
    ...new Set(
      [...q.req.dimensions.map((d) => d.ref), ...q.req.measures.map((m) => m.ref)]
        .filter((r): r is Extract<FieldRef, { kind: 'computed' }> => r.kind === 'computed')
        .map((r) => r.name),
    ),
  ];
  const ceIndex = new Map(computedNames.map((n, i) => [n, i]));
  const evals = computedNames.map((n, i) => db`${evalExpr(db, q.computed.get(n)!, 'o.json_data')} as ${db(`ce${i}`)}` as Fragment);
  const innerCols = join(db, [db`o.name, o.description, o.collection_id, o.created_at, o.updated_at, o.json_data` as Fragment, ...evals]);

  const dimCols: Fragment[] = [];
  q.req.dimensions.forEach((d, i) => {
    let rank: Fragment;
    let value: Fragment;
    const ref = d.ref;
    if (ref.kind === 'column') {
      rank = db`0` as Fragment;
      value =
        ref.column === 'created_at' || ref.column === 'updated_at'
          ? (db`to_jsonb(to_char(${db(`o.${ref.column}`)} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))` as Fragment)
          : (db`to_jsonb(${db(`o.${ref.column}`)})` as Fragment);
    } else if (ref.kind === 'json') {
      const x = db`(o.json_data #> ${ref.path}::text[])` as Fragment;
      rank = db`(case when ${x} is null then 2 when jsonb_typeof(${x}) = 'null' then 1 else 0 end)` as Fragment;
      value = db`(case when ${x} is null or jsonb_typeof(${x}) = 'null' then 'null'::jsonb else ${x} end)` as Fragment;
    } else {
      const e = ceCol(db, ceIndex.get(ref.name)!);
      rank = db`(case when ${e} ? 'e' then 3 when coalesce(jsonb_typeof(${e} -> 'v'), 'null') = 'null' then 1 else 0 end)` as Fragment;
      value =
        db`(case when ${e} ? 'e' or coalesce(jsonb_typeof(${e} -> 'v'), 'null') = 'null' then 'null'::jsonb else ${e} -> 'v' end)` as Fragment;
    }
    dimCols.push(db`${rank} as ${db(`r${i}`)}, ${value} as ${db(`v${i}`)}` as Fragment);
  });
  const measureCols = q.req.measures.map((m, j) => {
    const x =
      m.ref.kind === 'json'
        ? (db`(o.json_data #> ${m.ref.path}::text[])` as Fragment)
        : (db`(case when not (${ceCol(db, ceIndex.get(m.ref.name)!)} ? 'e') then ${ceCol(db, ceIndex.get(m.ref.name)!)} -> 'v' end)` as Fragment);
    return db`(case when jsonb_typeof(${x}) = 'number' then (${x})::numeric end) as ${db(`m${j}`)}` as Fragment;
  });
  const rowCols = [...dimCols, ...measureCols];
  const rows = db`
    select ${rowCols.length ? join(db, rowCols) : (db`1 as one` as Fragment)}
    from (select ${innerCols} from objects o where ${and(db, q.where)}) o` as Fragment;

  const groupKeys = q.req.dimensions.flatMap((_, i) => [id(db, `r${i}`), id(db, `v${i}`)]);
  const aggs = q.req.measures.map((m, j) => {
    const col = id(db, `m${j}`);
    const fn =
      m.operation === 'sum'
        ? db`sum(${col})`
        : m.operation === 'average'
          ? db`avg(${col})`
          : m.operation === 'min'
            ? db`min(${col})`
            : db`max(${col})`;
    return db`${fn}::text as ${db(`a${j}`)}, count(${col})::int as ${db(`c${j}`)}` as Fragment;
  });
  const grouped = db`
    select ${join(db, [...groupKeys, ...aggs, db`count(*)::int as n` as Fragment])}
    from (${rows}) s
    ${groupKeys.length ? db`group by ${join(db, groupKeys)}` : db``}` as Fragment;

  const desc = q.req.sort === 'dimensions.desc';
  const byCount = q.req.sort.startsWith('object_count');
  const countDesc = q.req.sort === 'object_count.desc';
  const gKeys = q.req.dimensions.flatMap((_, i) => [db`g.${db(`r${i}`)}` as Fragment, db`g.${db(`v${i}`)}` as Fragment]);
  const order: Fragment[] = [];
  if (byCount) order.push((countDesc ? db`g.n desc` : db`g.n asc`) as Fragment);
  for (const k of gKeys) order.push((desc ? db`${k} desc` : db`${k} asc`) as Fragment);

  let keyset: Fragment = db`true` as Fragment;
  if (q.after && gKeys.length) {
    const vals = byCount ? q.after.slice(1) : q.after;
    const cursorKeys = q.req.dimensions.flatMap((_, i) => [
      db`${Number(vals[2 * i])}::int` as Fragment,
      db`${String(vals[2 * i + 1])}::text::jsonb` as Fragment,
    ]);
    const dimsAfter = (
      desc ? db`(${join(db, gKeys)}) < (${join(db, cursorKeys)})` : db`(${join(db, gKeys)}) > (${join(db, cursorKeys)})`
    ) as Fragment;
    if (byCount) {
      const n = Number(q.after[0]);
      keyset = (
        countDesc
          ? db`(g.n < ${n}::int or (g.n = ${n}::int and ${dimsAfter}))`
          : db`(g.n > ${n}::int or (g.n = ${n}::int and ${dimsAfter}))`
      ) as Fragment;
    } else {
      keyset = dimsAfter;
    }
  }
  const textCols = q.req.dimensions.map((_, i) => db`g.${db(`v${i}`)}::text as ${db(`t${i}`)}` as Fragment);
  const outCols = [
    ...gKeys,
    ...textCols,
    ...q.req.measures.flatMap((_, j) => [db`g.${db(`a${j}`)}` as Fragment, db`g.${db(`c${j}`)}` as Fragment]),
    db`g.n` as Fragment,
  ];
  const result = (await db`
    select ${join(db, outCols)}
    from (${grouped}) g
    where ${keyset}
    ${order.length ? db`order by ${join(db, order)}` : db``}
    limit ${q.limit + 1}`) as unknown as Record<string, unknown>[];

  return result.map((r) => ({
    ranks: q.req.dimensions.map((_, i) => Number(r[`r${i}`])),
    values: q.req.dimensions.map((_, i) => r[`v${i}`]),
    texts: q.req.dimensions.map((_, i) => String(r[`t${i}`])),
    count: Number(r.n),
    measures: q.req.measures.map((_, j) => ({ value: (r[`a${j}`] as string | null) ?? null, contributing: Number(r[`c${j}`]) })),
  }));
}

export interface MetaCounts {
  total_collections: number;
  total_classes: number;
  total_objects: number;
  objects_per_class: { svc_class_id: number; count: number }[];
}

/**
 * Counts of what the caller can read: collections with ReadCollection, classes with ReadClass,
 * objects with ReadObject (grants and token scope, in SQL). For an unscoped administrator that
 * is everything.
 */
export async function metaCounts(db: Db, auth: Authority): Promise<MetaCounts> {
  const [totals] = await db<{ collections: number; classes: number; objects: number }[]>`
    select
      (select count(*)::int from collections c where ${collectionWhere(db, auth, 'ReadCollection', { id: 'c.id' })}) as collections,
      (select count(*)::int from classes k where ${classWhere(db, auth, 'ReadClass', { id: 'k.id', collectionId: 'k.collection_id' })}) as classes,
      (select count(*)::int from objects o where ${objectWhere(db, auth, 'ReadObject')}) as objects`;
  const perClass = await db<{ svc_class_id: number; count: number }[]>`
    select o.class_id as svc_class_id, count(*)::int as count
    from objects o where ${objectWhere(db, auth, 'ReadObject')}
    group by o.class_id order by o.class_id`;
  return {
    total_collections: totals!.collections,
    total_classes: totals!.classes,
    total_objects: totals!.objects,
    objects_per_class: perClass.map((r) => ({ svc_class_id: r.svc_class_id, count: r.count })),
  };
}
