/**
 * Object aggregates (spec, "Aggregate query"): parsing of group_by / aggregate / sort and the
 * replay-safe cursor. Pure: the SQL is src/db/aggregates.ts.
 *
 * Dimension states: `value` (a value is present), `null` (JSON null), `missing` (the JSON path
 * does not exist), `unavailable` (a computed value failed to evaluate). Rows are ordered by the
 * dimensions (state rank value < null < missing < unavailable, then the value in jsonb order),
 * or by object_count with the dimensions as tie-breaker. A cursor carries the last row's sort
 * values and is bound to the exact request (class, dimensions, measures, sort, filters).
 */
import { createHash } from 'node:crypto';
import { ApiError, badRequest } from './errors.ts';
import { decodeCursorValues, encodeCursor, MAX_CURSOR_CHARS } from './list-query.ts';

export const MAX_GROUP_BY = 3;
export const MAX_MEASURES = 4;

export const STATES = ['value', 'null', 'missing', 'unavailable'] as const;
export type DimensionState = (typeof STATES)[number];

export type FieldRef =
  | { kind: 'column'; column: 'name' | 'description' | 'collection_id' | 'created_at' | 'updated_at' }
  | { kind: 'json'; path: string[] }
  | { kind: 'computed'; name: string };

export interface Dimension {
  field: string;
  ref: FieldRef;
}

export type MeasureOp = 'sum' | 'average' | 'min' | 'max';

export interface Measure {
  operation: MeasureOp;
  field: string;
  ref: Extract<FieldRef, { kind: 'json' } | { kind: 'computed' }>;
}

export type AggregateSort = 'dimensions.asc' | 'dimensions.desc' | 'object_count.asc' | 'object_count.desc';

export interface AggregateRequest {
  dimensions: Dimension[];
  measures: Measure[];
  sort: AggregateSort;
}

const COLUMNS = new Set(['name', 'description', 'collection_id', 'created_at', 'updated_at']);

function list(raw: unknown): string[] {
  if (raw === undefined || raw === null) return [];
  return (Array.isArray(raw) ? raw : [raw]).map(String);
}

function parseRef(field: string, columns: boolean, param: string): FieldRef {
  if (columns && COLUMNS.has(field)) return { kind: 'column', column: field as Extract<FieldRef, { kind: 'column' }>['column'] };
  if (field.startsWith('json_data.')) {
    const path = field.slice('json_data.'.length).split(',');
    if (path.length > 32 || path.some((s) => s === '')) throw badRequest(`${param}: the JSON path must have 1 to 32 non-empty segments`);
    return { kind: 'json', path };
  }
  if (/^computed\.(shared|personal)\.[a-z][a-z0-9_]{0,63}$/.test(field)) return { kind: 'computed', name: field };
  throw badRequest(`${param}: unknown field "${field}"`, [{ path: `query.${param}`, message: 'unknown field' }]);
}

export function parseAggregateRequest(query: Record<string, unknown>): AggregateRequest {
  const groupBy = list(query.group_by);
  const aggregate = list(query.aggregate);
  if (groupBy.length === 0 && aggregate.length === 0) throw badRequest('at least one group_by or aggregate is required');
  if (groupBy.length > MAX_GROUP_BY) throw badRequest(`at most ${MAX_GROUP_BY} group_by dimensions`);
  if (aggregate.length > MAX_MEASURES) throw badRequest(`at most ${MAX_MEASURES} aggregate measures`);
  if (new Set(groupBy).size !== groupBy.length) throw badRequest('a group_by dimension is given twice');
  const dimensions = groupBy.map((field) => ({ field, ref: parseRef(field, true, 'group_by') }));
  const measures = aggregate.map((m): Measure => {
    const idx = m.indexOf(':');
    const op = idx < 0 ? '' : m.slice(0, idx);
    if (!['sum', 'average', 'min', 'max'].includes(op)) throw badRequest(`aggregate "${m}": expected <sum|average|min|max>:<field>`);
    const field = m.slice(idx + 1);
    return { operation: op as MeasureOp, field, ref: parseRef(field, false, 'aggregate') as Measure['ref'] };
  });
  const sort = (query.sort === undefined ? 'dimensions.asc' : String(query.sort)) as AggregateSort;
  if (!['dimensions.asc', 'dimensions.desc', 'object_count.asc', 'object_count.desc'].includes(sort)) {
    throw badRequest('sort must be dimensions.asc, dimensions.desc, object_count.asc or object_count.desc');
  }
  return { dimensions, measures, sort };
}

/** Binds a cursor to the request: class, dimensions, measures, sort and the filter signature. */
export function aggregateSignature(classId: number, req: AggregateRequest, filterSignature: string): string {
  return createHash('sha256')
    .update(
      JSON.stringify({
        c: classId,
        d: req.dimensions.map((d) => d.field),
        m: req.measures.map((m) => `${m.operation}:${m.field}`),
        s: req.sort,
        f: filterSignature,
      }),
    )
    .digest('base64url')
    .slice(0, 16);
}

/** Cursor values: [object_count?, rank0, value0, rank1, value1, ...]. */
export function encodeAggregateCursor(values: unknown[], signature: string): string {
  const cursor = encodeCursor(values, signature);
  // a page whose last row needs a longer cursor than decodeCursorValues accepts is 413 (not replay-safe)
  if (cursor.length > MAX_CURSOR_CHARS) {
    throw new ApiError(
      'payload_too_large',
      'a grouped value is too large for a replay-safe cursor; group by smaller values or lower the limit',
      {
        reason: 'aggregate_cursor_too_large',
      },
    );
  }
  return cursor;
}

export function decodeAggregateCursor(raw: string, signature: string, length: number): unknown[] {
  return decodeCursorValues(raw, signature, length, 'with the same request');
}
