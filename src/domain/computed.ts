/**
 * Computed fields: named derivations over an object's json_data, evaluated in SQL by
 * svc_computed_eval() (migration 0030). This module holds the pure rules: operation and path
 * validation, the evaluation definition handed to SQL, and the split of evaluation results into
 * the wire's {values, errors}.
 *
 * Semantics (a value is "present" when the pointer resolves to a non-null JSON value):
 *   first_non_null          the first present value (null when none)
 *   sum, average, min, max  over the present values, which must all be numbers (a non-number is
 *                           an evaluation error); null when none is present
 *   all_present, any_present  booleans; count_present  the number of present values
 *   all_present_and_equal   every path present and all values equal (numbers by value)
 * The result must have the field's result_type (integer: an integral number within ±2^53-1),
 * else the object gets an evaluation error for that key. Errors are per object and never fail
 * a request.
 */
import { badRequest } from './errors.ts';
import { parsePointer, JsonPatchError } from './json-patch.ts';

export const COMPUTED_OPERATIONS = [
  'first_non_null',
  'sum',
  'average',
  'min',
  'max',
  'all_present',
  'any_present',
  'count_present',
  'all_present_and_equal',
] as const;
export type ComputedOperationType = (typeof COMPUTED_OPERATIONS)[number];

export const RESULT_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array'] as const;
export type ResultType = (typeof RESULT_TYPES)[number];

export const MAX_SHARED_PER_CLASS = 32;
export const MAX_PERSONAL_PER_CLASS = 16;
export const MAX_PATHS = 16;

export interface ComputedOperation {
  type: ComputedOperationType;
  paths: string[];
}

/** What evaluation needs of a definition. */
export interface ComputedDef {
  id: number;
  key: string;
  visibility: 'shared' | 'personal';
  operation: ComputedOperation;
  result_type: ResultType;
}

/** Result types an operation can ever produce; others are refused when the field is saved. */
const POSSIBLE: Record<ComputedOperationType, readonly ResultType[] | null> = {
  first_non_null: null,
  sum: ['number', 'integer'],
  average: ['number', 'integer'],
  min: ['number', 'integer'],
  max: ['number', 'integer'],
  all_present: ['boolean'],
  any_present: ['boolean'],
  count_present: ['integer', 'number'],
  all_present_and_equal: ['boolean'],
};

/** 400 unless the operation's paths are valid RFC 6901 pointers and the result type is possible. */
export function validateOperation(op: ComputedOperation, resultType: ResultType): void {
  if (op.paths.length < 1 || op.paths.length > MAX_PATHS) throw badRequest(`operation.paths takes 1 to ${MAX_PATHS} JSON pointers`);
  op.paths.forEach((p, i) => {
    try {
      parsePointer(p);
    } catch (err) {
      const why = err instanceof JsonPatchError ? err.message : 'invalid pointer';
      throw badRequest(`operation.paths[${i}] is not a valid JSON pointer: ${why}`, [{ path: `body.operation.paths.${i}`, message: why }]);
    }
  });
  const possible = POSSIBLE[op.type];
  if (possible && !possible.includes(resultType)) {
    throw badRequest(`operation ${op.type} produces ${possible.join(' or ')}, not ${resultType}`, [
      { path: 'body.result_type', message: `must be ${possible.join(' or ')} for ${op.type}` },
    ]);
  }
}

/** The JSON the SQL evaluator takes for one definition's paths. */
export function sqlPaths(op: ComputedOperation): { p: string; s: string[] }[] {
  return op.paths.map((p) => ({ p, s: parsePointer(p) }));
}

/** The JSON the SQL set evaluator takes: [{k, o, p, t}]. */
export function sqlDefs(defs: ComputedDef[]): { k: string; o: string; p: { p: string; s: string[] }[]; t: string }[] {
  return defs.map((d) => ({ k: d.key, o: d.operation.type, p: sqlPaths(d.operation), t: d.result_type }));
}

export interface ComputedValueSet {
  values: Record<string, unknown>;
  errors: Record<string, string>;
}

/** Splits {key: {v} | {e}} (svc_computed_eval_set) into the wire's {values, errors}. */
export function valueSet(defs: ComputedDef[], raw: unknown): ComputedValueSet {
  const r = (raw ?? {}) as Record<string, { v?: unknown; e?: string } | undefined>;
  const out: ComputedValueSet = { values: {}, errors: {} };
  for (const d of defs) {
    const cell = r[d.key];
    if (cell && typeof cell.e === 'string') {
      out.values[d.key] = null;
      out.errors[d.key] = cell.e;
    } else {
      out.values[d.key] = cell?.v ?? null;
    }
  }
  return out;
}

/** `computed.shared.<key>` / `computed.personal.<key>` → its parts, or null when the name is not of that form. */
export function parseComputedName(name: string): { visibility: 'shared' | 'personal'; key: string } | null {
  const m = /^computed\.(shared|personal)\.([^.]*)$/.exec(name);
  if (!m) return null;
  return { visibility: m[1] as 'shared' | 'personal', key: m[2]! };
}
