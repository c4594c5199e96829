/**
 * RFC 6902 JSON Patch and RFC 6901 JSON Pointer, with the work limits of the specification
 * (settings documents; objects' json_data reuses them). Pure: no I/O, no HTTP.
 *
 * applyJsonPatch(document, patch) never mutates its inputs: it works on a private copy and
 * returns the result, or throws JsonPatchError:
 *   kind 'invalid_patch'    malformed operation or pointer            → 400
 *   kind 'limit_exceeded'   a size, count, depth or work limit        → 400
 *   kind 'invalid_result'   result root not an object (when required) → 400
 *   kind 'operation_failed' an operation cannot apply or `test` fails → 409
 */
import { ERROR_STATUS } from './errors.ts';

export interface JsonPatchLimits {
  /** Largest document before and after the patch, in UTF-8 JSON bytes. */
  maxDocumentBytes: number;
  maxOperations: number;
  /** Segments of one `path` or `from` pointer. */
  maxPointerSegments: number;
  /** Nested containers (objects and arrays) of any value; the root container is depth 1. */
  maxDepth: number;
  /** Cumulative bytes copied and compared over the whole patch. */
  maxWorkBytes: number;
}

/**
 * Nested containers of one stored JSON value (settings documents, object data); the root container
 * is depth 1. Request bodies are bounded by it too (src/http/input.ts MAX_BODY_DEPTH).
 */
export const MAX_JSON_DEPTH = 64;

export const JSON_PATCH_LIMITS: Readonly<JsonPatchLimits> = Object.freeze({
  maxDocumentBytes: 2 * 1024 * 1024,
  maxOperations: 1000,
  maxPointerSegments: 128,
  maxDepth: MAX_JSON_DEPTH,
  maxWorkBytes: 32 * 1024 * 1024,
});

export type JsonPatchErrorKind = 'invalid_patch' | 'limit_exceeded' | 'invalid_result' | 'operation_failed';

/** The error kind each failure maps to (the caller builds the ApiError). */
export const JSON_PATCH_ERROR_KIND: Readonly<Record<JsonPatchErrorKind, 'bad_request' | 'conflict'>> = Object.freeze({
  invalid_patch: 'bad_request',
  limit_exceeded: 'bad_request',
  invalid_result: 'bad_request',
  operation_failed: 'conflict',
});

export class JsonPatchError extends Error {
  readonly kind: JsonPatchErrorKind;
  /** Index of the failing operation, when one failed. */
  readonly operationIndex: number | null;

  constructor(kind: JsonPatchErrorKind, message: string, operationIndex: number | null = null) {
    super(operationIndex === null ? message : `operation ${operationIndex}: ${message}`);
    this.kind = kind;
    this.operationIndex = operationIndex;
  }

  get errorKind(): 'bad_request' | 'conflict' {
    return JSON_PATCH_ERROR_KIND[this.kind];
  }

  get status(): number {
    return ERROR_STATUS[this.errorKind];
  }
}

export type JsonPatchOp =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'move' | 'copy'; from: string; path: string };

export interface ApplyOptions {
  limits?: Partial<JsonPatchLimits>;
  /** Require the result root to be a JSON object (settings documents). Default true. */
  requireObjectRoot?: boolean;
}

type Container = Record<string, unknown> | unknown[];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isContainer = (v: unknown): v is Container => typeof v === 'object' && v !== null;
const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);
const ARRAY_INDEX = /^(0|[1-9][0-9]*)$/;

/** Sets an own data property; never invokes the `__proto__` setter. */
export function defineMember(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * The own enumerable members of `a`, then of `b` (a later one replacing an earlier one in place), in
 * an object of a literal: what `{ ...a, ...b }` makes, but an own `__proto__` member of parsed JSON
 * stays a member (Object.assign would set the prototype), and without the new hidden class per call
 * that V8 builds for members after a spread (eslint.config.js).
 */
export function mergeMembers<A extends object, B extends object = object>(a: A | null | undefined, b?: B | null): A & B {
  const out: Record<string, unknown> = {};
  for (const s of [a, b]) {
    if (s === null || s === undefined) continue;
    for (const k of Object.keys(s)) {
      const v: unknown = (s as Record<string, unknown>)[k];
      if (k === '__proto__') defineMember(out, k, v);
      else out[k] = v;
    }
  }
  return out as A & B;
}

/** Counts bytes of work and fails once the budget is spent. */
class WorkMeter {
  private used = 0;
  constructor(private readonly max: number) {}
  add(bytes: number, opIndex: number | null): void {
    this.used += bytes;
    if (this.used > this.max) {
      throw new JsonPatchError('limit_exceeded', `the patch needs more than ${this.max} bytes of work`, opIndex);
    }
  }
}

export interface JsonMeasure {
  /** UTF-8 bytes of the compact JSON serialization. */
  bytes: number;
  /** Nested containers; 0 for a scalar. */
  depth: number;
}

/**
 * Size and nesting of a JSON value. Stops early (depth maxDepth + 1) rather than recursing
 * without bound, so a hostile value cannot exhaust the stack.
 */
export function measureJson(value: unknown, maxDepth = JSON_PATCH_LIMITS.maxDepth): JsonMeasure {
  const depth = depthOf(value, maxDepth + 1);
  if (depth > maxDepth) return { bytes: Number.POSITIVE_INFINITY, depth };
  const text = JSON.stringify(value);
  return { bytes: text === undefined ? 0 : Buffer.byteLength(text, 'utf8'), depth };
}

function depthOf(value: unknown, cap: number): number {
  if (!isContainer(value)) return 0;
  if (cap <= 1) return 1;
  let max = 0;
  const items = Array.isArray(value) ? value : Object.values(value);
  for (const v of items) {
    if (!isContainer(v)) continue;
    const d = depthOf(v, cap - 1);
    if (d > max) max = d;
    if (max >= cap - 1) break;
  }
  return 1 + max;
}

/** Checks a whole document (before or after) against the size and depth limits. */
export function checkDocumentLimits(value: unknown, what: string, limits: Partial<JsonPatchLimits> = {}): JsonMeasure {
  const l = mergeMembers(JSON_PATCH_LIMITS, limits);
  const m = measureJson(value, l.maxDepth);
  if (m.depth > l.maxDepth) throw new JsonPatchError('limit_exceeded', `${what} nests more than ${l.maxDepth} containers`);
  if (m.bytes > l.maxDocumentBytes) throw new JsonPatchError('limit_exceeded', `${what} is larger than ${l.maxDocumentBytes} bytes`);
  return m;
}

/** Parses an RFC 6901 pointer into unescaped reference tokens. */
export function parsePointer(pointer: string, maxSegments = JSON_PATCH_LIMITS.maxPointerSegments): string[] {
  if (pointer === '') return [];
  if (pointer[0] !== '/')
    throw new JsonPatchError('invalid_patch', `"${truncate(pointer)}" is not a JSON pointer (it must start with "/")`);
  const raw = pointer.slice(1).split('/');
  if (raw.length > maxSegments) {
    throw new JsonPatchError('limit_exceeded', `a JSON pointer has more than ${maxSegments} segments`);
  }
  return raw.map((s) => {
    if (/~(?![01])/.test(s)) throw new JsonPatchError('invalid_patch', `"${truncate(pointer)}" has an invalid "~" escape`);
    return s.replace(/~1/g, '/').replace(/~0/g, '~');
  });
}

function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** Deep equality of JSON values: objects by member set, arrays in order, numbers by value. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number') return a === b || (Number.isNaN(a) && Number.isNaN(b));
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    for (const k of ka) if (!hasOwn(b, k) || !jsonEqual(a[k], b[k])) return false;
    return true;
  }
  return false;
}

/** A deep copy of a JSON value with plain own members (no prototype tricks). */
export function cloneJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => cloneJson(v)) as T;
  if (isObject(value)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value)) defineMember(out, k, cloneJson(value[k]));
    return out as T;
  }
  return value;
}

/** Validates the shape of a patch (the HTTP layer also does, but callers may come from elsewhere). */
function parseOperations(patch: unknown, limits: JsonPatchLimits): JsonPatchOp[] {
  if (!Array.isArray(patch)) throw new JsonPatchError('invalid_patch', 'a JSON Patch must be an array of operations');
  if (patch.length > limits.maxOperations) {
    throw new JsonPatchError('limit_exceeded', `a JSON Patch may hold at most ${limits.maxOperations} operations`);
  }
  return patch.map((raw, i): JsonPatchOp => {
    if (!isObject(raw)) throw new JsonPatchError('invalid_patch', 'an operation must be an object', i);
    const { op, path, from } = raw;
    if (typeof path !== 'string') throw new JsonPatchError('invalid_patch', '"path" must be a string', i);
    switch (op) {
      case 'add':
      case 'replace':
      case 'test':
        if (!hasOwn(raw, 'value')) throw new JsonPatchError('invalid_patch', `"${op}" needs a "value"`, i);
        return { op, path, value: raw.value };
      case 'remove':
        return { op, path };
      case 'move':
      case 'copy':
        if (typeof from !== 'string') throw new JsonPatchError('invalid_patch', `"${op}" needs a "from" pointer`, i);
        return { op, from, path };
      default:
        throw new JsonPatchError('invalid_patch', `unknown operation "${String(op)}"`, i);
    }
  });
}

interface Location {
  parent: Container;
  key: string;
}

/**
 * Applies an RFC 6902 patch atomically: either every operation applies and the result is
 * returned, or a JsonPatchError is thrown and the inputs are untouched.
 */
export function applyJsonPatch(document: unknown, patch: unknown, options: ApplyOptions = {}): unknown {
  const limits: JsonPatchLimits = mergeMembers(JSON_PATCH_LIMITS, options.limits);
  const requireObjectRoot = options.requireObjectRoot ?? true;
  const ops = parseOperations(patch, limits);
  const docSize = checkDocumentLimits(document, 'the document', limits);
  // The patch itself is bounded by the work budget (its bytes count), not by the document size.
  const patchSize = checkDocumentLimits(patch, 'the patch', { maxDepth: limits.maxDepth + 2, maxDocumentBytes: limits.maxWorkBytes });
  const work = new WorkMeter(limits.maxWorkBytes);
  work.add(docSize.bytes + patchSize.bytes, null);

  // A wrapper holds the root so that "" can be replaced like any other member.
  const holder: Record<string, unknown> = {};
  defineMember(holder, 'root', cloneJson(document));

  const resolveParent = (tokens: string[], i: number, forAdd: boolean): Location => {
    let parent: Container = holder;
    let key = 'root';
    for (let s = 0; s < tokens.length; s++) {
      const node: unknown = Array.isArray(parent) ? parent[Number(key)] : parent[key];
      if (!isContainer(node)) throw new JsonPatchError('operation_failed', 'the path does not exist', i);
      const token = tokens[s]!;
      if (Array.isArray(node)) {
        const last = s === tokens.length - 1;
        if (token === '-' && last && forAdd) {
          key = String(node.length);
        } else {
          if (!ARRAY_INDEX.test(token)) throw new JsonPatchError('operation_failed', `"${truncate(token)}" is not an array index`, i);
          const idx = Number(token);
          const bound = last && forAdd ? node.length : node.length - 1;
          if (idx > bound) throw new JsonPatchError('operation_failed', `array index ${token} is out of bounds`, i);
          key = token;
        }
      } else {
        if (s < tokens.length - 1 && !hasOwn(node, token)) throw new JsonPatchError('operation_failed', 'the path does not exist', i);
        key = token;
      }
      parent = node;
    }
    return { parent, key };
  };

  const exists = (loc: Location): boolean =>
    Array.isArray(loc.parent) ? Number(loc.key) < loc.parent.length : hasOwn(loc.parent, loc.key);
  const read = (loc: Location): unknown => (Array.isArray(loc.parent) ? loc.parent[Number(loc.key)] : loc.parent[loc.key]);

  const insert = (loc: Location, value: unknown): void => {
    if (Array.isArray(loc.parent)) {
      work.add(8 * (loc.parent.length - Number(loc.key)), null);
      loc.parent.splice(Number(loc.key), 0, value);
    } else defineMember(loc.parent, loc.key, value);
  };
  const replace = (loc: Location, value: unknown): void => {
    if (Array.isArray(loc.parent)) loc.parent[Number(loc.key)] = value;
    else defineMember(loc.parent, loc.key, value);
  };
  const removeAt = (loc: Location): unknown => {
    const value = read(loc);
    if (Array.isArray(loc.parent)) {
      work.add(8 * (loc.parent.length - Number(loc.key)), null);
      loc.parent.splice(Number(loc.key), 1);
    } else delete loc.parent[loc.key];
    return value;
  };

  ops.forEach((op, i) => {
    const path = parsePointer(op.path, limits.maxPointerSegments);
    switch (op.op) {
      case 'add': {
        const loc = resolveParent(path, i, true);
        work.add(sizeOf(op.value, limits, i), i);
        insert(loc, cloneJson(op.value));
        break;
      }
      case 'replace': {
        const loc = resolveParent(path, i, false);
        if (!exists(loc)) throw new JsonPatchError('operation_failed', 'the path does not exist', i);
        work.add(sizeOf(op.value, limits, i), i);
        replace(loc, cloneJson(op.value));
        break;
      }
      case 'remove': {
        if (path.length === 0) throw new JsonPatchError('operation_failed', 'the document root cannot be removed', i);
        const loc = resolveParent(path, i, false);
        if (!exists(loc)) throw new JsonPatchError('operation_failed', 'the path does not exist', i);
        removeAt(loc);
        break;
      }
      case 'test': {
        const loc = resolveParent(path, i, false);
        if (!exists(loc)) throw new JsonPatchError('operation_failed', 'test failed: the path does not exist', i);
        const current = read(loc);
        work.add(sizeOf(op.value, limits, i) + sizeOf(current, limits, i), i);
        if (!jsonEqual(current, op.value)) throw new JsonPatchError('operation_failed', 'test failed: the value differs', i);
        break;
      }
      case 'move': {
        const from = parsePointer(op.from, limits.maxPointerSegments);
        if (from.length < path.length && from.every((t, k) => t === path[k])) {
          throw new JsonPatchError('operation_failed', 'a value cannot be moved into one of its own children', i);
        }
        const src = resolveParent(from, i, false);
        if (!exists(src)) throw new JsonPatchError('operation_failed', 'the "from" path does not exist', i);
        if (from.length === path.length && from.every((t, k) => t === path[k])) break;
        const value = removeAt(src);
        const dst = resolveParent(path, i, true);
        insert(dst, value);
        break;
      }
      case 'copy': {
        const from = parsePointer(op.from, limits.maxPointerSegments);
        const src = resolveParent(from, i, false);
        if (!exists(src)) throw new JsonPatchError('operation_failed', 'the "from" path does not exist', i);
        const value = read(src);
        work.add(sizeOf(value, limits, i), i);
        const dst = resolveParent(path, i, true);
        insert(dst, cloneJson(value));
        break;
      }
    }
  });

  const result = holder.root;
  if (requireObjectRoot && !isObject(result)) {
    throw new JsonPatchError('invalid_result', 'the patched document must have a JSON object at its root');
  }
  checkDocumentLimits(result, 'the patched document', limits);
  return result;
}

/** Bytes of a value for the work meter; also stops values nested too deeply to measure safely. */
function sizeOf(value: unknown, limits: JsonPatchLimits, opIndex: number): number {
  const m = measureJson(value, limits.maxDepth);
  if (m.depth > limits.maxDepth)
    throw new JsonPatchError('limit_exceeded', `a value nests more than ${limits.maxDepth} containers`, opIndex);
  return m.bytes;
}
