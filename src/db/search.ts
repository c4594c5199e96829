// Search execution: structured search (expression → SQL through the list query language's
// filterSql; keyset pages and totals through the targets' list queries, i.e. runList) and
// plain-text search. Visibility comes from src/db/authz.ts fragments (and the audit module), so
// totals and the complement of `not` stay inside the caller's authorized universe. Related
// predicates reuse the object list's related-group traversal (src/db/related-filters.ts).
import type { Db } from './sql.ts';
import { and, filterSql, matchedIds, or, textLike, type Fragment } from './list.ts';
import { translatePgError } from './pg-errors.ts';
import { RELATED_TARGET_SPEC, relatedGroupCondition } from './related-filters.ts';
import { LOWER_INDEXED, targetSql, type SearchResult } from './search-targets.ts';
import { substringKey } from './substring-stats.ts';
import type { AuditCollections } from './audit.ts';
import type { JsonTexts } from '../domain/json-text.ts';
import { ApiError } from '../domain/errors.ts';
import type { Filter, ListSpec, ParsedList, SortKey } from '../domain/list-query.ts';
import type { Authority } from '../domain/authz.ts';
import type { PlainKind, PlanNode, PlannedPredicate, SearchPlan } from '../domain/search.ts';

type RelatedNode = Extract<PlanNode, { op: 'related' }>;

export interface SearchPage {
  results: SearchResult[];
  /** Sort values of the last row when more rows follow (to sign into the next cursor). */
  nextValues: unknown[] | null;
  total: number | null;
}

/** A planned predicate as a list-language Filter over the target's columns. */
export function predicateFilter(p: PlannedPredicate, spec: ListSpec): Filter {
  const def = spec.fields[p.field];
  if (!def) throw new Error(`search field ${p.field} has no column`);
  return { field: p.field, def, op: p.op, negate: false, values: p.values, path: p.path };
}

/** Two-valued: a predicate that is unknown (null column, missing path) is false. */
export function predicateSql(db: Db, p: PlannedPredicate, spec: ListSpec): Fragment {
  return db`coalesce((${filterSql(db, predicateFilter(p, spec))}), false)` as Fragment;
}

function exprSql(db: Db, n: PlanNode, spec: ListSpec, related: (n: RelatedNode) => Fragment): Fragment {
  switch (n.op) {
    case 'and':
      return and(
        db,
        n.args.map((a) => exprSql(db, a, spec, related)),
      );
    case 'or':
      return or(
        db,
        n.args.map((a) => exprSql(db, a, spec, related)),
      );
    case 'not':
      // every leaf is coalesced to true/false, so this is the exact complement within the universe
      return db`not (${exprSql(db, n.arg, spec, related)})` as Fragment;
    case 'field':
      return predicateSql(db, n.predicate, spec);
    case 'related':
      return related(n);
  }
}

function parsedFor(sort: SortKey[], limit: number, after: unknown[] | null, includeTotal: boolean): ParsedList {
  return { filters: [], sort, limit, cursor: after, includeTotal, extras: {}, signature: () => '' };
}

/** The sort values inside runList's cursor (base64url JSON {v, s}); they are re-signed by the caller. */
function listCursorValues(cursor: string | null): unknown[] | null {
  if (!cursor) return null;
  const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { v: unknown[] };
  return parsed.v;
}

/** Database errors of a search statement: malformed values (bad regex, bad pattern) are 400, work bounds 400 "narrow". */
export function searchError(err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    if (code === '2201B')
      return new ApiError('bad_request', 'invalid regular expression in a regex predicate', { reason: 'invalid_search' });
    if (code.startsWith('22'))
      return new ApiError('bad_request', 'a value of the search is malformed or out of range', { reason: 'invalid_search' });
    if (code === '57014' || code.startsWith('53') || code.startsWith('54')) {
      // svc_work_limit() (related predicates) names the bound it hit; other cancellations stay generic
      const message = (err as { message?: unknown }).message;
      const text =
        typeof message === 'string' && message.startsWith('the query exceeds the work limit')
          ? message
          : 'the search needs too much work; narrow the query';
      return new ApiError('bad_request', text, { reason: 'search_work_limit' });
    }
  }
  return translatePgError(err);
}

/** A related predicate: the object list's related-group condition (src/db/related-filters.ts), reused. */
function relatedCondition(db: Db, auth: Authority, n: RelatedNode, classId: number): Fragment {
  return relatedGroupCondition(
    db,
    auth,
    {
      alias: `related${n.index}`,
      classSelector: { id: classId },
      depth: n.depth,
      filters: n.filters.map((p) => predicateFilter(p, RELATED_TARGET_SPEC)),
    },
    'o.id',
  );
}

/** One page of a structured search (and its total when asked). */
export async function runStructuredSearch(
  db: Db,
  auth: Authority,
  plan: SearchPlan,
  opts: {
    classId: number | null;
    relatedClassIds: number[];
    after: unknown[] | null;
    /** Objects' json_data and events' JSON passed through as the database's text (targetSql). */
    texts?: JsonTexts;
    auditCollections?: AuditCollections;
  },
): Promise<SearchPage> {
  const t = targetSql(db, auth, plan.kind, { classId: opts.classId, texts: opts.texts, auditCollections: opts.auditCollections });
  const where = [...t.where];
  if (plan.filter) where.push(exprSql(db, plan.filter, t.spec, (n) => relatedCondition(db, auth, n, opts.relatedClassIds[n.index]!)));
  try {
    const page = await t.list(parsedFor(plan.sort, plan.limit, opts.after, plan.includeTotal), where);
    return { results: page.rows.map(t.result), nextValues: listCursorValues(page.nextCursor), total: page.total };
  } catch (err) {
    throw searchError(err);
  }
}

// ---------------------------------------------------------------------------------------------
// Plain-text search: case-insensitive substring match on names and descriptions (plus class
// schema text and object JSON string values when opted in), id order, one keyset page per kind,
// through the same target queries and visibility as structured search.

const PLAIN_SORT: SortKey[] = [{ field: 'id', desc: false }];

/** What JSON text writes escaped: a quote, a backslash, a control character. */
const JSON_ESCAPED = /["\\\u0000-\u001f]/;

/** Case-insensitive substring match (a trigram index on objects' names and descriptions serves it). */
function contains(db: Db, column: string, q: string, lowerIndexed = LOWER_INDEXED.has(column)): Fragment {
  return textLike(db, db`${db(column)}` as Fragment, q, 'contains', true, lowerIndexed);
}

function plainMatch(db: Db, kind: PlainKind, q: string, opts: { searchClassSchema: boolean; searchObjectData: boolean }): Fragment {
  const alias = kind === 'collection' ? 'c' : kind === 'class' ? 'k' : 'o';
  const key = kind === 'object' && !opts.searchObjectData ? substringKey(db, ['name', 'description'], q) : undefined;
  if (key !== undefined) {
    // rare in both columns: the ids both trigram indexes find for a rare word of q (then q is matched
    // on those rows), or, in a large table, for q itself; then the rows by id (src/db/substring-stats.ts)
    const holding = matchedIds(
      db,
      db`o.id` as Fragment,
      or(db, [contains(db, 'svc_s.name', key, true), contains(db, 'svc_s.description', key, true)]),
    );
    if (key === q) return holding;
    return and(db, [holding, or(db, [contains(db, 'o.name', q), contains(db, 'o.description', q)])]);
  }
  const text = [contains(db, `${alias}.name`, q), contains(db, `${alias}.description`, q)];
  if (kind === 'class' && opts.searchClassSchema) {
    // the schema document's text, keys included; a class without a schema does not match
    text.push(db`coalesce(${textLike(db, db`k.json_schema::text` as Fragment, q, 'contains', true)}, false)` as Fragment);
  }
  if (kind === 'object' && opts.searchObjectData) {
    const value = db`exists (select 1 from jsonb_path_query(o.json_data, 'strict $.**') as svc_v (value)
        where jsonb_typeof(svc_v.value) = 'string' and strpos(lower(svc_v.value #>> '{}'), lower(${q}::text)) > 0)` as Fragment;
    // The document's JSON text writes a string value as it is but for what JSON escapes (a quote,
    // a backslash, a control character): for a q without those, a value holding q puts q in the
    // text, so testing the text first (a few µs less than walking the values) passes over every
    // document whose text cannot match, and walks only the others.
    text.push(JSON_ESCAPED.test(q) ? value : (db`(strpos(lower(o.json_data::text), lower(${q}::text)) > 0 and ${value})` as Fragment));
  }
  return or(db, text);
}

export async function runPlainSearch(
  db: Db,
  auth: Authority,
  kind: PlainKind,
  opts: { q: string; limit: number; after: unknown[] | null; searchClassSchema: boolean; searchObjectData: boolean; texts?: JsonTexts },
): Promise<SearchPage> {
  const t = targetSql(db, auth, kind, { classId: null, texts: opts.texts });
  try {
    const page = await t.list(parsedFor(PLAIN_SORT, opts.limit, opts.after, false), [...t.where, plainMatch(db, kind, opts.q, opts)]);
    return { results: page.rows.map(t.result), nextValues: listCursorValues(page.nextCursor), total: null };
  } catch (err) {
    throw searchError(err);
  }
}
