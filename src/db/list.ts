// Turns a ParsedList (src/domain/list-query.ts) into SQL: filters, keyset pagination over the sort
// keys plus the id tie-breaker (so pages survive concurrent inserts), and the exact total.
// Visibility is the caller's `where` fragments, so totals are computed after authorization.
//
// Use in a handler:
//   const spec: ListSpec = { fields: { id: {type: 'integer', column: 'c.id'}, name: {type: 'text', column: 'c.name'}, ... },
//                            defaultSort: [{ field: 'id', desc: false }], extraParams: ['permissions'] };
//   const parsed = parseListQuery(input.query, spec);            // 400 on bad input
//   const page = await runList<Row>(db, { from: db`collections c`, select: db`c.id, c.name, ...`,
//                                         where: [visibilityFragment], parsed, spec });
//   return listReply(page, page.rows.map(toWire));              // src/http/paging.ts: X-Page-Limit, X-Next-Cursor, X-Total-Count
// Bind timestamps as text and cast in SQL (${iso}::text::timestamptz): postgres.js serializes
// timestamptz parameters through JS Date and drops microseconds.
import type postgres from 'postgres';
import { listPoolOf, nameOf, partOf, type Db, type TransactionSql } from './sql.ts';
import { patternKey, substringKey } from './substring-stats.ts';
import { prefixUpperBound, sortsByCodePoint } from './text-order.ts';
import { finalFor, isTx, notFinal, withTx, type Final } from './tx.ts';
import { encodeCursor, type FieldDef, type Filter, type ListSpec, type ParsedList, type SortKey } from '../domain/list-query.ts';

export type Fragment = postgres.PendingQuery<postgres.Row[]>;

export interface ListPage<T> {
  rows: T[];
  nextCursor: string | null;
  total: number | null;
  limit: number;
}

export interface ListOptions {
  /** The FROM clause (with joins), e.g. partOf(db)`collections c`. */
  from: Fragment;
  /** The select list, e.g. partOf(db)`c.id, c.name`. */
  select: Fragment;
  /** Extra conditions (visibility, path scoping), ANDed with the filters. */
  where?: Fragment[];
  parsed: ParsedList;
  spec: ListSpec;
  /**
   * Whether the page is planned for its values at every execution: by default when it has filters.
   * True also without filters (the caller's `where` carries values that matter); false when the
   * caller knows one plan serves every value (a prepared statement may then keep its generic plan).
   */
  planForValues?: boolean;
  /**
   * The plain columns `select` is computed from, over the same alias (`select` may convert them,
   * e.g. jsonb to text). When every sort key is a plain column, the page is selected as these in a
   * subquery and `select` is computed over its rows only: PostgreSQL computes a select list below
   * a Sort, for every row it sorts, so a plan that sorts many matches (a bitmap scan) would convert
   * each of them to keep 100.
   */
  plain?: { columns: Fragment; alias: string };
  /**
   * Every caller of this list reads named members of the rows into objects of its own (a view), so
   * the rows keep their sort-key columns (`__k0`, ...). Removing a property from a row as the
   * driver built it, even its last one, turns the row into a dictionary for V8: ~1.2 µs per row
   * for the delete (a 100-row object page spent 100–140 µs in it) and slower reads of every member
   * after.
   */
  viewed?: boolean;
  /**
   * When `db` is a transaction whose owner ends it with this list: the wrapper of its final
   * statement (finalFor), so COMMIT goes out with the page (and its count) instead of after it.
   */
  final?: Final;
}

/** AND of fragments (true when empty). */
export function and(db: Db, parts: Fragment[]): Fragment {
  if (parts.length === 0) return partOf(db)`true`;
  return parts.slice(1).reduce((acc, p) => partOf(db)`${acc} and (${p})` as Fragment, partOf(db)`(${parts[0]!})` as Fragment);
}

export function or(db: Db, parts: Fragment[]): Fragment {
  if (parts.length === 0) return partOf(db)`false`;
  return parts.slice(1).reduce((acc, p) => partOf(db)`${acc} or (${p})` as Fragment, partOf(db)`(${parts[0]!})` as Fragment);
}

/** A column as SQL: its quoted name (a postgres.js identifier), which a template takes as it takes a fragment. */
function col(db: Db, column: string): Fragment {
  return nameOf(db, column) as unknown as Fragment;
}

/** The SQL of a field: its expression when it has one, else its column. */
function fieldSql(db: Db, def: FieldDef): Fragment {
  return def.expr ? (def.expr(db as never) as Fragment) : col(db, def.column);
}

/** SQL for one filter. */
export function filterSql(db: Db, f: Filter): Fragment {
  const positive = f.def.type === 'json' ? jsonFilter(db, f) : columnFilter(db, f);
  return f.negate ? (partOf(db)`not coalesce((${positive}), false)` as Fragment) : positive;
}

/** s as a LIKE pattern that matches it literally (backslash is LIKE's default escape). */
export function likeEscape(s: string): string {
  return s.replace(/[\\%_]/g, (m) => '\\' + m);
}

/** Text with no letter and nothing beyond ASCII: digits, punctuation, spaces. */
const CASELESS_ASCII = /^[\x00-\x40\x5b-\x60\x7b-\x7f]*$/;

/**
 * `c LIKE` the pattern of strings that contain, start or end with `text` literally; `caseInsensitive`,
 * whatever the case of their letters:
 * - a text with no letter and nothing beyond ASCII (a fragment of a number, an address, an id) is
 *   matched with LIKE, which matches the same strings: lowercasing a string changes only its letters
 *   (and turns letters into letters), so it neither makes nor breaks a match of such characters;
 * - on a column whose lowercase has a trigram index (`lowerIndexed`), `lower(c) LIKE lower(pattern)`
 *   (ILIKE as PostgreSQL defines it: both sides lowercased, then matched), which that index serves;
 * - otherwise ILIKE.
 * PostgreSQL estimates an ILIKE by lowercasing the pattern and each histogram bound of the column to
 * test them, ~0.65 ms of planning a column at the 1,001 bounds of objects' names and descriptions
 * (migrations/0230); LIKE tests the bounds as they are, and those of lower(c) were stored lowercased.
 */
export function textLike(
  db: Db,
  c: Fragment,
  text: string,
  at: 'contains' | 'startswith' | 'endswith',
  caseInsensitive = false,
  lowerIndexed = false,
): Fragment {
  const literal = likeEscape(text);
  const pattern = at === 'startswith' ? literal + '%' : at === 'endswith' ? '%' + literal : '%' + literal + '%';
  if (!caseInsensitive || CASELESS_ASCII.test(text)) return partOf(db)`${c} like ${pattern}::text` as Fragment;
  return (lowerIndexed ? partOf(db)`lower(${c}) like lower(${pattern}::text)` : partOf(db)`${c} ilike ${pattern}::text`) as Fragment;
}

function columnFilter(db: Db, f: Filter): Fragment {
  const c = fieldSql(db, f.def);
  const v = f.values;
  const one = () => typed(db, f.def.type, v[0]);
  switch (f.op) {
    case 'is_null':
      return (v[0] ? partOf(db)`${c} is null` : partOf(db)`${c} is not null`) as Fragment;
    case 'equals':
      if (v.length > 1) return inList(db, f, c);
      return partOf(db)`${c} = ${one()}` as Fragment;
    case 'in':
      return inList(db, f, c);
    case 'gt':
      return partOf(db)`${c} > ${one()}` as Fragment;
    case 'gte':
      return partOf(db)`${c} >= ${one()}` as Fragment;
    case 'lt':
      return partOf(db)`${c} < ${one()}` as Fragment;
    case 'lte':
      return partOf(db)`${c} <= ${one()}` as Fragment;
    case 'between':
      return partOf(db)`${c} between ${typed(db, f.def.type, v[0])} and ${typed(db, f.def.type, v[1])}` as Fragment;
    default:
      return f.def.lowerIndexed && SUBSTRING_OPS.has(f.op)
        ? substringFilter(db, f.def.column, f.op, String(v[0]))
        : textOp(db, c, f.op, String(v[0]), false);
  }
}

/**
 * `idColumn = any(array(select svc_s.id from objects svc_s where <match>))`: the ids the trigram
 * index finds for `match` (written over alias svc_s) first, then the rows by id, in id order. The
 * walk in id order is then not a plan PostgreSQL can choose for the match.
 */
export function matchedIds(db: Db, idColumn: Fragment, match: Fragment): Fragment {
  return db`${idColumn} = any(array(select svc_s.id from objects svc_s where ${match}))` as Fragment;
}

/** The text operators a trigram index serves (startswith: the b-tree's range). */
const SUBSTRING_OPS = new Set(['contains', 'icontains', 'endswith', 'iendswith', 'istartswith', 'like', 'regex']);

/**
 * A substring filter on an objects' column with trigram indexes (`alias.name`, `alias.description`):
 * as textOp writes it, or, where the statistics say it is rare (src/db/substring-stats.ts), through
 * the ids the trigram index finds for a text every match holds (substringKey, patternKey): in a
 * large table PostgreSQL would otherwise look for a rare text by reading the class in id order, and
 * pg_trgm reads a regular expression's trigrams unreliably. When that text is not the filter's whole
 * text (a word of it, a text a pattern requires), the filter itself is then tested on those rows.
 */
export function substringFilter(db: Db, column: string, op: string, text: string): Fragment {
  const [alias, name] = column.split('.') as [string, 'name' | 'description'];
  const own = () => textOp(db, col(db, column), op, text, true);
  const isPattern = op === 'like' || op === 'regex';
  const key = isPattern ? patternKey(db, name, op, text) : substringKey(db, [name], text);
  if (key === undefined) return own();
  const ids = col(db, `${alias}.id`);
  if (!isPattern && key === text) return matchedIds(db, ids, textOp(db, col(db, `svc_s.${name}`), op, text, true));
  const holding = textLike(db, col(db, `svc_s.${name}`), key, 'contains', op.startsWith('i'), true);
  return partOf(db)`${matchedIds(db, ids, holding)} and ${own()}` as Fragment;
}

function inList(db: Db, f: Filter, c: Fragment): Fragment {
  switch (f.def.type) {
    case 'integer':
      return partOf(db)`${c} = any(${f.values.map(Number)}::bigint[])` as Fragment;
    case 'timestamp':
      return partOf(db)`${c} = any(${f.values.map(String)}::text[]::timestamptz[])` as Fragment;
    default:
      return partOf(db)`${c} = any(${f.values.map(String)}::text[])` as Fragment;
  }
}

function textOp(db: Db, c: Fragment, op: string, v: string, lowerIndexed: boolean): Fragment {
  switch (op) {
    case 'equals':
      return partOf(db)`${c} = ${v}::text` as Fragment;
    case 'iequals':
      return partOf(db)`lower(${c}) = lower(${v}::text)` as Fragment;
    // LIKE / ILIKE rather than strpos: a trigram index can answer them (migrations/0190); ILIKE
    // compares lower() of both sides, as the lower()-based match did.
    case 'contains':
      return textLike(db, c, v, 'contains');
    case 'icontains':
      return textLike(db, c, v, 'contains', true, lowerIndexed);
    case 'startswith': {
      // In code-point order the strings with a prefix are exactly a range, which the ordinary b-tree
      // indexes serve in order (the LIKE beside it would only make the planner underestimate).
      const upper = v && sortsByCodePoint(db) ? prefixUpperBound(v) : null;
      return (upper === null ? textLike(db, c, v, 'startswith') : partOf(db)`(${c} >= ${v}::text and ${c} < ${upper}::text)`) as Fragment;
    }
    case 'istartswith':
      return textLike(db, c, v, 'startswith', true, lowerIndexed);
    case 'endswith':
      return textLike(db, c, v, 'endswith');
    case 'iendswith':
      return textLike(db, c, v, 'endswith', true, lowerIndexed);
    case 'like':
      return partOf(db)`${c} like ${v}::text` as Fragment;
    case 'regex':
      return partOf(db)`${c} ~ ${v}::text` as Fragment;
    default:
      throw new Error(`unhandled text operator ${op}`);
  }
}

/** The JSON values a filter value s stands for, as `equals`/`in` and `all` read it (as JSON text). */
function jsonForms(s: string, op: string): string[] {
  return [
    JSON.stringify(s),
    // a number as written, without the leading zeros JSON does not allow (`007` is 7, as ::numeric reads it)
    ...(/^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(s) ? [s.replace(/^(-?)0+(?=\d)/, '$1')] : []),
    ...(s === 'true' || s === 'false' ? [s] : []),
    ...(op !== 'all' && s === 'null' ? ['null'] : []),
  ];
}

/** Whether a json_data filter may add a containment test (its path names members only). */
function containable(f: Filter): boolean {
  return f.def.column === 'o.json_data' && f.path.length > 0 && !f.path.some((seg) => /^-?\d+$/.test(seg));
}

/**
 * The contained document of a json_data filter that is a containment test and nothing else
 * (jsonFilter's `indexed`: `equals` of a value that can only be a JSON string, `all` of such
 * values), as a JSON value (objects without a prototype, so any member name is a plain member);
 * undefined for any other filter.
 */
function containedDocument(f: Filter): unknown {
  if (f.negate || f.def.type !== 'json' || !containable(f) || (f.op !== 'equals' && f.op !== 'all')) return undefined;
  const values = (f.op === 'equals' ? f.values.slice(0, 1) : f.values).map((v) => jsonForms(String(v), f.op));
  if (values.length === 0 || values.some((forms) => forms.length !== 1)) return undefined;
  const leaves = values.map((forms) => JSON.parse(forms[0]!) as unknown);
  return f.path.reduceRight<unknown>(
    (inner, seg) => {
      const o = Object.create(null) as Record<string, unknown>;
      o[seg] = inner;
      return o;
    },
    f.op === 'all' ? leaves : leaves[0],
  );
}

const CONFLICT = Symbol('conflict');

/**
 * One document that contains exactly what `a` and `b` both contain, or CONFLICT where they cannot
 * be one (a string against another value, an array against an object): objects merge member by
 * member, arrays join (an array contains another when it contains each of its members).
 */
function mergeContained(a: unknown, b: unknown): unknown {
  if (Array.isArray(a) && Array.isArray(b)) return [...(a as unknown[]), ...(b as unknown[])];
  const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
  if (isObject(a) && isObject(b)) {
    const out = Object.create(null) as Record<string, unknown>;
    for (const k of Object.keys(a)) out[k] = a[k];
    for (const k of Object.keys(b)) {
      if (!Object.prototype.hasOwnProperty.call(out, k)) {
        out[k] = b[k];
        continue;
      }
      const m = mergeContained(out[k], b[k]);
      if (m === CONFLICT) return CONFLICT;
      out[k] = m;
    }
    return out;
  }
  return typeof a === 'string' && a === b ? a : CONFLICT;
}

/**
 * SQL for the filters of one list, each as filterSql makes it, except that the json_data filters
 * that are containment tests alone go into as few contained documents as they can
 * (`json_data__equals=env=prod&json_data__equals=role=db` → `json_data @> {"env":"prod","role":"db"}`).
 * The result is the same. PostgreSQL estimates one document as a whole against its statistics;
 * separately estimated tests multiply, and the product of two common values that rarely occur
 * together can make it walk the class in id order for a page that has few rows or none (as
 * json_data__all's values did, before they became one document: 951 ms against 4 ms at 1M objects).
 */
export function filtersSql(db: Db, filters: Filter[]): Fragment[] {
  const out: Fragment[] = [];
  const docs: unknown[] = [];
  for (const f of filters) {
    const doc = containedDocument(f);
    if (doc === undefined) {
      out.push(filterSql(db, f));
      continue;
    }
    let placed = false;
    for (let i = 0; i < docs.length && !placed; i++) {
      const m = mergeContained(docs[i], doc);
      if (m !== CONFLICT) {
        docs[i] = m;
        placed = true;
      }
    }
    if (!placed) docs.push(doc);
  }
  for (const doc of docs) out.push(partOf(db)`(o.json_data @> ${JSON.stringify(doc)}::text::jsonb)` as Fragment);
  return out;
}

/**
 * JSON path filters. A missing path or a value that cannot be converted never matches and is
 * never an error (the svc_try_* functions return null instead of failing).
 */
function jsonFilter(db: Db, f: Filter): Fragment {
  const x = partOf(db)`(${fieldSql(db, f.def)} #> ${f.path}::text[])` as Fragment;
  const txt = partOf(db)`(${x} #>> '{}')` as Fragment;
  const isString = partOf(db)`jsonb_typeof(${x}) = 'string'` as Fragment;
  const isNumber = partOf(db)`jsonb_typeof(${x}) = 'number'` as Fragment;
  const v = f.values.map(String);
  const first = v[0] ?? '';
  const numeric = (s: string) => /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(s);
  const equalsOne = (s: string): Fragment => {
    const parts: Fragment[] = [partOf(db)`(${isString} and ${txt} = ${s}::text)` as Fragment];
    if (numeric(s)) parts.push(partOf(db)`(case when ${isNumber} then (${x})::numeric end) = ${s}::numeric` as Fragment);
    if (s === 'true' || s === 'false') parts.push(partOf(db)`${x} = ${s}::jsonb` as Fragment);
    if (s === 'null') parts.push(partOf(db)`jsonb_typeof(${x}) = 'null'` as Fragment);
    return or(db, parts);
  };
  const ordered = (cmp: (a: Fragment, b: Fragment) => Fragment): Fragment => {
    if (numeric(first))
      return cmp(partOf(db)`(case when ${isNumber} then (${x})::numeric end)` as Fragment, partOf(db)`${first}::numeric` as Fragment);
    return cmp(partOf(db)`(case when ${isString} then ${txt} end)` as Fragment, partOf(db)`${first}::text` as Fragment);
  };
  // The exact conditions below cannot use the GIN (jsonb_path_ops) index of objects.json_data; a
  // containment test beside them can, and it holds whenever they do, so the result is the same.
  // (A path with an array index is left alone: containment would read that step as a member name.)
  const indexed = (exact: Fragment, leaves: (s: string) => string[]): Fragment => {
    if (!containable(f)) return exact;
    // The contained document as JSON text, a parameter the planner sees as a constant (a list with
    // filters is planned for its values): it can then estimate the test and choose the GIN index.
    const nest = (leaf: string) => f.path.reduceRight((inner, seg) => `{${JSON.stringify(seg)}:${inner}}`, leaf);
    const contains = (s: string) =>
      or(
        db,
        leaves(s).map((leaf) => partOf(db)`o.json_data @> ${nest(leaf)}::text::jsonb` as Fragment),
      );
    // `all`: the values that stand for one JSON value each go into one contained document (`{"a":
    // ["x","y"]}` holds exactly where `{"a":["x"]}` and `{"a":["y"]}` both do), which PostgreSQL
    // estimates as a whole against its statistics; as a product of separately estimated tests it
    // guessed several hundred matches of two values that never occur together at 1M objects, and
    // walked the class in id order for a page that had none (950 ms instead of 4 ms).
    const containsAll = (): Fragment => {
      const single: string[] = [];
      const parts: Fragment[] = [];
      for (const s of v) {
        const forms = scalars(s);
        if (forms.length === 1) single.push(forms[0]!);
        else parts.push(contains(s));
      }
      if (single.length > 0) parts.unshift(partOf(db)`o.json_data @> ${nest(`[${single.join(',')}]`)}::text::jsonb` as Fragment);
      return and(db, parts);
    };
    const needed = f.op === 'in' ? or(db, v.map(contains)) : f.op === 'all' ? containsAll() : contains(first);
    // Values that stand only for a JSON string (not a number, boolean or null): containment of a
    // string leaf under member names is the exact condition itself (`{"a":["s"]}` does not contain
    // `{"a":"s"}`, nor `{"a":"s"}` `{"a":["s"]}`), so it stands alone, and the planner estimates the
    // one condition it can read instead of multiplying it with an opaque one.
    if (v.every((s) => scalars(s).length === 1)) return needed;
    return partOf(db)`(${exact} and ${needed})` as Fragment;
  };
  const scalars = (s: string): string[] => jsonForms(s, f.op);
  switch (f.op) {
    case 'is_null':
      return (
        f.values[0]
          ? partOf(db)`(${x} is null or jsonb_typeof(${x}) = 'null')`
          : partOf(db)`(${x} is not null and jsonb_typeof(${x}) <> 'null')`
      ) as Fragment;
    case 'equals':
      return indexed(equalsOne(first), scalars);
    case 'in':
      return indexed(or(db, v.map(equalsOne)), scalars);
    case 'gt':
      return ordered((a, b) => partOf(db)`${a} > ${b}` as Fragment);
    case 'gte':
      return ordered((a, b) => partOf(db)`${a} >= ${b}` as Fragment);
    case 'lt':
      return ordered((a, b) => partOf(db)`${a} < ${b}` as Fragment);
    case 'lte':
      return ordered((a, b) => partOf(db)`${a} <= ${b}` as Fragment);
    case 'between': {
      const [lo, hi] = [v[0]!, v[1]!];
      if (numeric(lo) && numeric(hi))
        return partOf(db)`(case when ${isNumber} then (${x})::numeric end) between ${lo}::numeric and ${hi}::numeric` as Fragment;
      return partOf(db)`(case when ${isString} then ${txt} end) between ${lo}::text and ${hi}::text` as Fragment;
    }
    case 'has_key':
      return partOf(db)`(jsonb_typeof(${x}) = 'object' and ${x} ? ${first}::text)` as Fragment;
    case 'array_length':
      return partOf(db)`(jsonb_typeof(${x}) = 'array' and jsonb_array_length(${x}) = ${Number(first)}::int)` as Fragment;
    case 'all':
      return indexed(
        partOf(db)`(jsonb_typeof(${x}) = 'array' and ${and(
          db,
          v.map((s) => {
            const alts: Fragment[] = [partOf(db)`${x} @> jsonb_build_array(${s}::text)` as Fragment];
            if (numeric(s)) alts.push(partOf(db)`${x} @> jsonb_build_array(${s}::numeric)` as Fragment);
            if (s === 'true' || s === 'false') alts.push(partOf(db)`${x} @> jsonb_build_array(${s === 'true'}::boolean)` as Fragment);
            return or(db, alts);
          }),
        )})` as Fragment,
        (s) => scalars(s).map((leaf) => `[${leaf}]`),
      );
    case 'within_network':
      return partOf(db)`(${isString} and svc_try_inet(${txt}) <<= svc_try_inet(${first}::text))` as Fragment;
    case 'contains_network':
      return partOf(db)`(${isString} and svc_try_inet(${txt}) >>= svc_try_inet(${first}::text))` as Fragment;
    case 'contains_ip':
      return partOf(db)`(${isString} and svc_try_inet(${txt}) >>= svc_try_inet(${first}::text))` as Fragment;
    case 'overlaps_network':
      return partOf(db)`(${isString} and svc_try_inet(${txt}) && svc_try_inet(${first}::text))` as Fragment;
    case 'inet_equals':
      return partOf(db)`(${isString} and svc_try_inet(${txt}) = svc_try_inet(${first}::text))` as Fragment;
    default:
      return partOf(db)`(${isString} and ${textOp(db, txt, f.op, first, false)})` as Fragment;
  }
}

function sortExpr(db: Db, spec: ListSpec, key: SortKey): { expr: Fragment; type: string } {
  const def = spec.fields[key.field]!;
  return { expr: fieldSql(db, def), type: def.type };
}

/**
 * Keyset condition "row comes after the cursor", nulls sorting last in ascending order.
 * When every key is never null and all share one direction it is one row comparison, which
 * PostgreSQL turns into an index range; otherwise the general OR form, led by a redundant bound on
 * a never-null first key so that an index scan can still start at the cursor.
 */
function afterCursor(db: Db, spec: ListSpec, sort: SortKey[], values: unknown[]): Fragment {
  const keys = sort.map((k, i) => {
    const s = sortExpr(db, spec, k);
    return { expr: s.expr, type: s.type, desc: k.desc, notNull: spec.fields[k.field]!.notNull === true, v: values[i] };
  });
  const known = keys.every((k) => k.notNull && k.v !== null && k.v !== undefined);
  if (known && keys.every((k) => k.desc === keys[0]!.desc)) {
    const exprs = keys.map((k) => k.expr).reduce((acc, p) => partOf(db)`${acc}, ${p}` as Fragment);
    const vals = keys.map((k) => typed(db, k.type, k.v)).reduce((acc, p) => partOf(db)`${acc}, ${p}` as Fragment);
    return (keys[0]!.desc ? partOf(db)`(${exprs}) < (${vals})` : partOf(db)`(${exprs}) > (${vals})`) as Fragment;
  }
  const alternatives: Fragment[] = [];
  for (let i = 0; i < keys.length; i++) {
    const eqs = keys
      .slice(0, i)
      .map((k) => (k.v === null ? partOf(db)`${k.expr} is null` : partOf(db)`${k.expr} = ${typed(db, k.type, k.v)}`) as Fragment);
    const { expr, type, v, desc, notNull } = keys[i]!;
    let step: Fragment;
    if (!desc) {
      // ascending, nulls last: after v come larger values, then nulls; nothing comes after null
      if (v === null) step = partOf(db)`false` as Fragment;
      else
        step = (
          notNull ? partOf(db)`${expr} > ${typed(db, type, v)}` : partOf(db)`(${expr} > ${typed(db, type, v)} or ${expr} is null)`
        ) as Fragment;
    } else {
      // descending, nulls first: after null come all non-nulls; after v come smaller values
      step = (v === null ? partOf(db)`${expr} is not null` : partOf(db)`${expr} < ${typed(db, type, v)}`) as Fragment;
    }
    alternatives.push(and(db, [...eqs, step]));
  }
  const general = or(db, alternatives);
  const lead = keys[0]!;
  if (!lead.notNull || lead.v === null) return general;
  const bound = (
    lead.desc ? partOf(db)`${lead.expr} <= ${typed(db, lead.type, lead.v)}` : partOf(db)`${lead.expr} >= ${typed(db, lead.type, lead.v)}`
  ) as Fragment;
  return and(db, [bound, general]);
}

function typed(db: Db, type: string, v: unknown): Fragment {
  switch (type) {
    case 'integer':
      return partOf(db)`${v as number}::bigint` as Fragment;
    case 'timestamp':
      return partOf(db)`${String(v)}::text::timestamptz` as Fragment;
    case 'boolean':
      return partOf(db)`${v as boolean}::boolean` as Fragment;
    default:
      return partOf(db)`${String(v)}::text` as Fragment;
  }
}

/** The ORDER BY of a sort: its keys up to the first of the spec's unique fields (ListSpec.uniqueFields). */
function orderBy(db: Db, spec: ListSpec, sort: SortKey[]): Fragment {
  const unique = spec.uniqueFields ? sort.findIndex((k) => spec.uniqueFields!.includes(k.field)) : -1;
  return commaSeparated(
    db,
    (unique < 0 ? sort : sort.slice(0, unique + 1)).map((k) => {
      const { expr } = sortExpr(db, spec, k);
      return (k.desc ? partOf(db)`${expr} desc nulls first` : partOf(db)`${expr} asc nulls last`) as Fragment;
    }),
  );
}

/** Fragments joined by commas (at least one). */
function commaSeparated(db: Db, parts: Fragment[]): Fragment {
  return parts.reduce((acc, p) => partOf(db)`${acc}, ${p}` as Fragment);
}

/** Whether runList selects a page given `plain` over its plain rows: when no sort key is an expression. */
export function selectsOverPlain(parsed: ParsedList, spec: ListSpec): boolean {
  return parsed.sort.every((k) => !spec.fields[k.field]!.expr);
}

/**
 * Runs a list query: one page (limit + 1 rows to know whether more follow) and the total. When a
 * total is asked for, a count(*) runs beside the page query, in the same round trip (another pooled
 * connection, or pipelined in a transaction); a first page that holds every match is its own count
 * and leaves the count's answer unread.
 */
export async function runList<T extends Record<string, unknown>>(db: Db, opts: ListOptions): Promise<ListPage<T>> {
  const { parsed, spec } = opts;
  const conditions = [...(opts.where ?? []), ...filtersSql(db, parsed.filters)];
  const where = and(db, conditions);
  const page = parsed.cursor ? and(db, [where, afterCursor(db, spec, parsed.sort, parsed.cursor)]) : where;
  // The sort keys' values, selected as __k0, __k1, ... (the next page's cursor)
  const keyNames = parsed.sort.map((_, i) => `__k${i}`);
  const keys = commaSeparated(
    db,
    parsed.sort.map((k, i) => {
      const { expr, type } = sortExpr(db, spec, k);
      const name = nameOf(db, keyNames[i]!);
      return (type === 'timestamp' ? partOf(db)`(${expr})::text as ${name}` : partOf(db)`${expr} as ${name}`) as Fragment;
    }),
  );
  const order = orderBy(db, spec, parsed.sort);
  const count = (q: Db) => q`select count(*)::bigint as n from ${opts.from} where ${where}` as unknown as Promise<{ n: number }[]>;
  const plain = opts.plain && selectsOverPlain(parsed, spec) ? opts.plain : undefined;
  const pageOf = (q: Db, columns: Fragment) =>
    q`select ${columns}, ${keys} from ${opts.from} where ${page} order by ${order} limit ${parsed.limit + 1}` as Fragment;
  type Page = Promise<Record<string, unknown>[]>;
  const select = (q: Db): Page => {
    if (!plain) return pageOf(q, opts.select) as unknown as Page;
    const names = commaSeparated(
      db,
      keyNames.map((n) => nameOf(db, n) as unknown as Fragment),
    );
    return q`select ${opts.select}, ${names} from (${pageOf(db, plain.columns)}) ${nameOf(db, plain.alias)} order by ${order}` as unknown as Page;
  };
  let rows: Record<string, unknown>[];
  let counted: Promise<{ n: number }[]> | null = null;
  // Filters (or the caller's conditions: planForValues) make the best plan depend on their values (a
  // prefix, a JSON value, a substring, a set of collections), which a prepared statement's generic
  // plan does not know: such a page is planned for each execution instead.
  const planned = opts.planForValues ?? parsed.filters.length > 0;
  const list = planned ? listPoolOf(db) : undefined;
  if (!planned || list) {
    // One statement: on the pool, or on the list pool, whose sessions plan every statement for its
    // values. The count goes beside the page, on another connection, whenever a total is asked for:
    // a first page that turns out to hold every match did not need it, but then it counted no more
    // rows than the page read, and a first page that does not (the usual case) gets its total in the
    // page's round trip instead of one after it.
    const q = list ?? db;
    counted = parsed.includeTotal ? count(q) : null;
    counted?.catch(() => undefined); // awaited below; a failure of the page query comes first
    rows = await (list ? select(q) : (opts.final ?? notFinal)(select(q)));
  } else {
    // Without a list pool (or inside a transaction): in a transaction of its own that sets the mode,
    // whose statements all go out in one round trip (BEGIN, the setting, the page, the count when it
    // is needed, COMMIT).
    const run = async (tx: TransactionSql) => {
      const final = isTx(db) ? (opts.final ?? notFinal) : finalFor(db, tx);
      void tx`select set_config('plan_cache_mode', 'force_custom_plan', true)`.catch(() => undefined);
      const selected = select(tx);
      selected.catch(() => undefined); // sends it now (postgres.js queries start when first awaited); awaited by the caller
      // The count goes with the page (it may not be needed: a first page can show all; counting
      // few matches is cheap, and planned for the values it uses the same indexes as the page).
      if (parsed.includeTotal) {
        counted = final(count(tx));
        counted.catch(() => undefined); // awaited below
        return selected;
      }
      return final(selected);
    };
    rows = await withTx(db, run);
  }
  const more = rows.length > parsed.limit;
  if (more) rows.pop();
  let nextCursor: string | null = null;
  const last = rows.at(-1);
  if (more && last)
    nextCursor = encodeCursor(
      keyNames.map((n) => (last[n] ?? null) as unknown),
      parsed.signature(),
    );
  if (!opts.viewed) for (const r of rows) for (const n of keyNames) delete r[n];
  let total: number | null = null;
  if (parsed.includeTotal) {
    if (!parsed.cursor && !more) total = rows.length;
    else {
      const [c] = await (counted ?? count(db));
      total = Number(c?.n ?? 0);
    }
  }
  return { rows: rows as T[], nextCursor, total, limit: parsed.limit };
}
