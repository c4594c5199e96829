// The list query language (contract.md section 3), parsed without SQL. src/db/list.ts turns a
// ParsedList into SQL. Grammar:
//   field=value            means field__equals=value
//   field__<op>=value      an operator; field__not_<op>=value negates it
//   json_data__<op>=a,b=v  a JSON path (comma-separated segments), then the value after '='
//   sort=a,b.desc,-c       at most 8 fields, each once; an id tie-breaker is appended
//   limit (1..250, default 100, larger clamped; 0 or negative is 400), cursor, include_total
// A filter may be repeated; all filters combine with AND. Unknown fields or operators are 400; at
// most 64 filters.
import { hash } from 'node:crypto';
import { badRequest } from './errors.ts';

export type FieldType = 'integer' | 'text' | 'timestamp' | 'boolean' | 'json';

/** The string-matching operators of text fields and JSON paths. */
const TEXT_MATCH = ['equals', 'iequals', 'contains', 'icontains', 'startswith', 'istartswith', 'endswith', 'iendswith', 'like', 'regex'];

export const OPERATORS: Record<FieldType, readonly string[]> = {
  text: [...TEXT_MATCH, 'in', 'is_null'],
  integer: ['equals', 'in', 'gt', 'gte', 'lt', 'lte', 'between', 'is_null'],
  timestamp: ['equals', 'in', 'gt', 'gte', 'lt', 'lte', 'between', 'is_null'],
  boolean: ['equals', 'is_null'],
  json: [
    ...TEXT_MATCH,
    'gt',
    'gte',
    'lt',
    'lte',
    'between',
    'within_network',
    'contains_network',
    'contains_ip',
    'overlaps_network',
    'inet_equals',
    'in',
    'all',
    'array_length',
    'has_key',
    'is_null',
  ],
};

export interface FieldDef {
  type: FieldType;
  /** SQL column reference, e.g. "c.name" (quoted as an identifier). */
  column: string;
  /**
   * Optional SQL expression used instead of `column` (e.g. a computed value); receives the
   * db handle and returns a postgres.js fragment. `column` then only names the field in errors.
   */
  expr?: (db: never) => unknown;
  /** Defaults: sortable unless json. */
  sortable?: boolean;
  filterable?: boolean;
  /** For text fields with a fixed set of values (validated). */
  values?: readonly string[];
  /**
   * The value is never null (a NOT NULL column, reached through inner joins only). Keyset pages
   * over such keys become index ranges instead of null-aware OR conditions (src/db/list.ts).
   */
  notNull?: boolean;
  /**
   * A trigram index on lower(column) holds the column's statistics in lowercase (objects' names and
   * descriptions, migrations/0240): case-insensitive matches are written `lower(c) LIKE lower(p)`,
   * which it serves and PostgreSQL estimates without lowercasing every histogram bound (src/db/list.ts).
   */
  lowerIndexed?: boolean;
}

export interface ListSpec {
  fields: Record<string, FieldDef>;
  /** Alternative names for fields (e.g. collections → collection_id). */
  aliases?: Record<string, string>;
  /** Default order before the id tie-breaker, e.g. [{field: 'id', desc: false}]. */
  defaultSort: SortKey[];
  /** The tie-breaker field (default "id"); must be a unique integer field of `fields`. */
  idField?: string;
  /** Query parameters the handler reads itself (e.g. include, state, permissions). */
  extraParams?: readonly string[];
  /**
   * Fields whose value no two rows of the list share (an object's name among the objects of its
   * class: every object list is of one class). A list sorted by one is ordered by the sort keys up
   * to it only: the keys after it (the id tie-breaker) cannot change the order, and ordered by them
   * too PostgreSQL sorts the rows an index already gives in order (an incremental sort of groups of
   * one row). The cursor keeps every key.
   */
  uniqueFields?: readonly string[];
}

export interface SortKey {
  field: string;
  desc: boolean;
}

export type Scalar = string | number | boolean;

export interface Filter {
  field: string;
  def: FieldDef;
  op: string;
  negate: boolean;
  /** Parsed values: one for most operators, several for in/between/all. */
  values: Scalar[];
  /** JSON path segments (json fields only). */
  path: string[];
}

export interface ParsedList {
  filters: Filter[];
  sort: SortKey[];
  limit: number;
  cursor: unknown[] | null;
  includeTotal: boolean;
  extras: Record<string, string>;
  /**
   * Binds cursors to this exact query (filters and sort). A function, computed on first call: only a
   * request that reads or writes a cursor needs it (most pages of one row, or of the last rows, do not).
   */
  signature: () => string;
}

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 250;
const RESERVED = new Set(['limit', 'cursor', 'sort', 'include_total']);

/** Parses limit: absent → default; above MAX_LIMIT → clamped; 0 or negative → 400. */
export function parseLimit(raw: unknown, fallback = DEFAULT_LIMIT): number {
  if (raw === undefined || raw === null || raw === '') return fallback;
  const n = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isInteger(n)) throw badRequest('limit must be an integer');
  if (n < 1) throw badRequest('limit must be at least 1');
  return Math.min(n, MAX_LIMIT);
}

function one(query: Record<string, unknown>, key: string): string | undefined {
  const v = query[key];
  if (v === undefined || v === null) return undefined;
  if (Array.isArray(v)) throw badRequest(`query parameter ${key} may be given only once`);
  return String(v);
}

export function parseListQuery(query: Record<string, unknown>, spec: ListSpec): ParsedList {
  const extras: Record<string, string> = {};
  const filters: Filter[] = [];
  for (const [key, raw] of Object.entries(query)) {
    if (RESERVED.has(key)) continue;
    if (spec.extraParams?.includes(key)) {
      const v = one(query, key);
      if (v !== undefined) extras[key] = v;
      continue;
    }
    // A repeated filter is one more condition: all filters combine with AND.
    for (const value of Array.isArray(raw) ? raw : [raw]) {
      filters.push(parseFilter(key, String(value), spec));
      if (filters.length > 64) throw badRequest('too many filters (at most 64)');
    }
  }
  const sort = parseSort(one(query, 'sort'), spec);
  const limit = parseLimit(query.limit);
  const includeTotal = parseBool(query.include_total, true, 'include_total');
  let computed: string | undefined;
  const signature = () =>
    (computed ??= hash(
      'sha256',
      JSON.stringify({ f: filters.map((f) => [f.field, f.op, f.negate, f.values, f.path]).sort(), s: sort }),
      'base64url',
    ).slice(0, 16));
  const cursorRaw = one(query, 'cursor');
  const cursor = cursorRaw === undefined ? null : decodeCursor(cursorRaw, signature(), sort, spec);
  return { filters, sort, limit, cursor, includeTotal, extras, signature };
}

function parseBool(raw: unknown, fallback: boolean, name: string): boolean {
  if (raw === undefined || raw === null || raw === '') return fallback;
  if (raw === true || raw === 'true') return true;
  if (raw === false || raw === 'false') return false;
  throw badRequest(`${name} must be true or false`);
}

function resolveField(name: string, spec: ListSpec): [string, FieldDef] {
  // own members only: a name such as `constructor` or `__proto__` is no field of any list
  const real = (spec.aliases && Object.hasOwn(spec.aliases, name) ? spec.aliases[name] : undefined) ?? name;
  const def = Object.hasOwn(spec.fields, real) ? spec.fields[real] : undefined;
  if (!def) throw badRequest(`unknown filter or sort field "${name}"`, [{ path: `query.${name}`, message: 'unknown field' }]);
  return [real, def];
}

export function parseFilter(key: string, raw: string, spec: ListSpec): Filter {
  // `<field>__<operator>`; a name that starts with `__` has no field before its operator, and is
  // refused whole (`__proto__` is an unknown field "__proto__", not "")
  const idx = key.indexOf('__');
  const name = idx <= 0 ? key : key.slice(0, idx);
  let op = idx <= 0 ? 'equals' : key.slice(idx + 2);
  const [field, def] = resolveField(name, spec);
  if (def.filterable === false) throw badRequest(`field "${name}" cannot be filtered`);
  let negate = false;
  if (op.startsWith('not_')) {
    negate = true;
    op = op.slice(4);
  }
  if (!OPERATORS[def.type].includes(op)) {
    throw badRequest(`operator "${op}" is not supported for ${def.type} field "${name}"`, [
      { path: `query.${key}`, message: 'unknown operator' },
    ]);
  }
  const bad = (why: string) => badRequest(`invalid value for ${key}: ${why}`, [{ path: `query.${key}`, message: why }]);
  let path: string[] = [];
  let valueText = raw;
  if (def.type === 'json') {
    const eq = raw.indexOf('=');
    const pathText = op === 'is_null' ? (eq < 0 ? raw : raw.slice(0, eq)) : eq < 0 ? '' : raw.slice(0, eq);
    if (op !== 'is_null' && eq < 0) throw bad('expected <path,segments>=<value>');
    path = pathText.split(',').map((s) => s.trim());
    if (path.length === 0 || path.some((s) => s === '') || path.length > 32)
      throw bad('the JSON path must have 1 to 32 non-empty segments');
    valueText = op === 'is_null' ? (eq < 0 ? 'true' : raw.slice(eq + 1)) : raw.slice(eq + 1);
  }
  const values = parseValues(def, op, valueText, bad);
  return { field, def, op, negate, values, path };
}

function parseValues(def: FieldDef, op: string, text: string, bad: (why: string) => Error): Scalar[] {
  if (op === 'is_null') {
    if (text !== 'true' && text !== 'false') throw bad('is_null takes true or false');
    return [text === 'true'];
  }
  const multi = op === 'in' || op === 'between' || op === 'all' || (def.type === 'integer' && op === 'equals');
  const parts = multi ? text.split(',').map((s) => s.trim()) : [text];
  if (parts.some((p) => p === '') && def.type !== 'text' && def.type !== 'json') throw bad('empty value');
  let values: Scalar[] = [];
  switch (def.type) {
    case 'integer':
      for (const p of parts) {
        const range = /^(-?\d+)-(-?\d+)$/.exec(p);
        if (range && (op === 'equals' || op === 'in')) {
          const lo = Number(range[1]);
          const hi = Number(range[2]);
          if (hi < lo || hi - lo >= 1024) throw bad('a range must be ascending and at most 1,024 values');
          for (let i = lo; i <= hi; i++) values.push(i);
        } else {
          if (!/^-?\d+$/.test(p)) throw bad('expected an integer');
          const n = Number(p);
          if (!Number.isSafeInteger(n) || Math.abs(n) > 2 ** 31 - 1) throw bad('integer out of range');
          values.push(n);
        }
        if (values.length > 1024) throw bad('at most 1,024 values after expansion');
      }
      break;
    case 'timestamp':
      values = parts.map((p) => {
        const iso = parseTimestamp(p);
        if (!iso) throw bad('expected an RFC 3339 timestamp or YYYY-MM-DD');
        return iso;
      });
      break;
    case 'boolean':
      if (text !== 'true' && text !== 'false') throw bad('expected true or false');
      values = [text === 'true'];
      break;
    case 'text':
      if (def.values) for (const p of parts) if (!def.values.includes(p)) throw bad(`must be one of ${def.values.join(', ')}`);
      values = parts;
      break;
    case 'json':
      if (op === 'array_length') {
        if (!/^\d+$/.test(text)) throw bad('array_length takes a non-negative integer');
        values = [Number(text)];
      } else {
        values = parts;
      }
      break;
  }
  if (op === 'like') {
    const problem = likePatternProblem(String(values[0]));
    if (problem) throw bad(problem);
  }
  if (op === 'between' && values.length !== 2) throw bad('between takes two values: lo,hi');
  if ((op === 'in' || op === 'all') && (values.length < 1 || values.length > 1024)) throw bad('expected 1 to 1,024 values');
  return values;
}

/**
 * Why PostgreSQL would refuse a LIKE pattern, or undefined: one that ends in its escape character
 * (a backslash not itself escaped). PostgreSQL finds out only when a match reaches that end, so such
 * a pattern would fail on some data and not on other; it is refused before any is read.
 */
export function likePatternProblem(pattern: string): string | undefined {
  let trailing = 0;
  while (trailing < pattern.length && pattern[pattern.length - 1 - trailing] === '\\') trailing++;
  return trailing % 2 === 1 ? 'a LIKE pattern must not end with the escape character \\ (write \\\\ for a backslash)' : undefined;
}

/** RFC 3339 or YYYY-MM-DD (midnight UTC) → ISO string; undefined when invalid. */
export function parseTimestamp(s: string): string | undefined {
  const date = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (date) {
    const d = new Date(Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3])));
    return d.getUTCDate() === Number(date[3]) ? d.toISOString() : undefined;
  }
  if (!/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2})$/.test(s)) return undefined;
  const d = new Date(s.replace(' ', 'T'));
  return Number.isNaN(d.getTime()) ? undefined : s;
}

export function parseSort(raw: string | undefined, spec: ListSpec): SortKey[] {
  const idField = spec.idField ?? 'id';
  const keys: SortKey[] = [];
  if (raw !== undefined && raw.trim() !== '') {
    const parts = raw.split(',').map((s) => s.trim());
    if (parts.length > 8) throw badRequest('at most 8 sort fields');
    for (const p of parts) {
      let name = p;
      let desc = false;
      if (name.startsWith('-')) {
        desc = true;
        name = name.slice(1);
      } else if (name.endsWith('.desc')) {
        desc = true;
        name = name.slice(0, -5);
      } else if (name.endsWith('.asc')) {
        name = name.slice(0, -4);
      }
      const [field, def] = resolveField(name, spec);
      if (def.sortable === false || (def.sortable === undefined && def.type === 'json'))
        throw badRequest(`field "${name}" cannot be sorted`);
      if (keys.some((k) => k.field === field)) throw badRequest(`sort field "${name}" given twice`);
      keys.push({ field, desc });
    }
  } else {
    keys.push(...spec.defaultSort);
  }
  if (!keys.some((k) => k.field === idField)) keys.push({ field: idField, desc: keys.at(-1)?.desc ?? false });
  return keys;
}

/** Cursors are opaque: base64url JSON of the last row's sort values and the query signature. */
export function encodeCursor(values: unknown[], signature: string): string {
  return Buffer.from(JSON.stringify({ v: values, s: signature })).toString('base64url');
}

/** Longest cursor accepted (list and aggregate cursors). */
export const MAX_CURSOR_CHARS = 4096;

/**
 * The values of a cursor made by encodeCursor for this signature, exactly `length` of them; any
 * other text is a 400 whose message says what to pass back (`passBack`).
 */
export function decodeCursorValues(raw: string, signature: string, length: number, passBack: string): unknown[] {
  const invalid = () =>
    badRequest(`invalid cursor: pass back X-Next-Cursor unchanged ${passBack}`, [{ path: 'query.cursor', message: 'invalid cursor' }]);
  if (raw.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(raw)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  const c = parsed as { v?: unknown; s?: unknown };
  if (!c || typeof c !== 'object' || c.s !== signature || !Array.isArray(c.v) || c.v.length !== length) throw invalid();
  return c.v;
}

/**
 * The sort keys' values a cursor carries, each of its key's kind: what the page's statement binds
 * (db/list.ts afterCursor), so that a value crafted for another kind (a cursor's signature is no
 * secret) is this 400, not a statement the database refuses to plan.
 */
function decodeCursor(raw: string, signature: string, sort: SortKey[], spec: ListSpec): unknown[] {
  const values = decodeCursorValues(raw, signature, sort.length, 'with the same filters and sort');
  values.forEach((v, i) => {
    if (!cursorValueFits(spec.fields[sort[i]!.field]!.type, v))
      throw badRequest('invalid cursor: pass back X-Next-Cursor unchanged with the same filters and sort', [
        { path: 'query.cursor', message: 'invalid cursor' },
      ]);
  });
  return values;
}

/** A sort key's value as a page selects it: an integer (a bigint as its digits), a boolean, or text (a time as its text). */
function cursorValueFits(type: FieldType, v: unknown): boolean {
  if (v === null) return true;
  if (typeof v === 'string' && v.includes('\u0000')) return false;
  switch (type) {
    case 'integer':
      return (typeof v === 'number' && Number.isSafeInteger(v)) || (typeof v === 'string' && /^-?\d{1,19}$/.test(v));
    case 'boolean':
      return typeof v === 'boolean';
    case 'text':
    case 'timestamp':
      return typeof v === 'string';
    case 'json':
      return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
  }
}
