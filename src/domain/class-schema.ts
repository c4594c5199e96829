/**
 * Class JSON schemas: JSON Schema 2020-12 documents with local `#...` references only, compiled
 * in ajv's strict mode so that an invalid or ambiguous schema is refused when it is saved (400),
 * never when an object is written. Compiled validators are cached by the schema's text.
 * Pure: no I/O, no HTTP beyond the ApiError it throws.
 */
import { createHash } from 'node:crypto';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { ApiError, badRequest, type ErrorDetail } from './errors.ts';
import { jsonEqual } from './json-patch.ts';
import { canonicalJson } from './canonical-json.ts';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (a: Ajv2020) => Ajv2020;

const CACHE_MAX = 200;
const cache = new Map<string, ValidateFunction>();
/** At most this many validation messages are reported per object. */
export const MAX_SCHEMA_DETAILS = 20;

/** Every `$ref` / `$dynamicRef` member below `node` that does not start with '#'. */
function nonLocalRefs(node: unknown, path: string, out: ErrorDetail[]): void {
  if (out.length >= 10) return;
  if (Array.isArray(node)) {
    node.forEach((v, i) => nonLocalRefs(v, `${path}/${i}`, out));
    return;
  }
  if (node === null || typeof node !== 'object') return;
  for (const [k, v] of Object.entries(node as Record<string, unknown>)) {
    const here = `${path}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    if ((k === '$ref' || k === '$dynamicRef') && (typeof v !== 'string' || !v.startsWith('#'))) {
      out.push({ path: `json_schema${here}`, message: 'only local references starting with "#" are allowed' });
    }
    nonLocalRefs(v, here, out);
  }
}

/**
 * Checks and compiles a class schema; 400 with details when it is not a valid JSON Schema
 * 2020-12 document with local references only. Returns the validator.
 */
export function compileClassSchema(schema: unknown): ValidateFunction {
  if (typeof schema !== 'boolean' && (schema === null || typeof schema !== 'object' || Array.isArray(schema))) {
    throw badRequest('json_schema must be a JSON Schema object (or a boolean schema)', [
      { path: 'json_schema', message: 'must be an object or a boolean' },
    ]);
  }
  const text = JSON.stringify(schema);
  const key = createHash('sha256').update(text).digest('base64url');
  const hit = cache.get(key);
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const refs: ErrorDetail[] = [];
  nonLocalRefs(schema, '', refs);
  if (refs.length) throw badRequest('json_schema may only use local "#..." references', refs);
  if (typeof schema === 'object' && schema !== null) {
    const declared = (schema as Record<string, unknown>).$schema;
    if (declared !== undefined && declared !== 'https://json-schema.org/draft/2020-12/schema') {
      throw badRequest('json_schema must be a JSON Schema 2020-12 document', [
        { path: 'json_schema/$schema', message: 'must be "https://json-schema.org/draft/2020-12/schema" or omitted' },
      ]);
    }
  }
  // A fresh instance per schema: schemas with the same $id never collide, and nothing is fetched.
  // Strict schema mode refuses unknown keywords, unknown formats and ignored keywords; the type
  // heuristics (strictTypes, strictTuples, strictRequired) stay off because schemas they flag
  // are valid 2020-12 documents.
  const ajv = new Ajv2020({
    strict: true,
    strictTypes: false,
    strictTuples: false,
    strictRequired: false,
    allErrors: true,
    validateFormats: true,
    logger: false,
  });
  addFormats(ajv);
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(schema as object);
  } catch (err) {
    const message = err instanceof Error ? err.message : 'invalid schema';
    throw new ApiError('bad_request', `json_schema is not a valid JSON Schema 2020-12 document: ${message.slice(0, 300)}`, {
      reason: 'invalid_json_schema',
      details: [{ path: 'json_schema', message: message.slice(0, 300) }],
    });
  }
  cache.set(key, validate);
  if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value!);
  return validate;
}

/** Validation messages of `data` against a compiled class schema (empty when valid). Paths are RFC 6901 pointers into json_data. */
export function schemaErrors(validate: ValidateFunction, data: unknown): ErrorDetail[] {
  if (validate(data)) return [];
  return (validate.errors ?? []).slice(0, MAX_SCHEMA_DETAILS).map((e) => {
    let message = e.message ?? 'is invalid';
    const p = e.params as Record<string, unknown>;
    if (e.keyword === 'additionalProperties') message = `unknown member "${String(p.additionalProperty)}"`;
    if (e.keyword === 'required') message = `missing required member "${String(p.missingProperty)}"`;
    return { path: e.instancePath || '/', message };
  });
}

/** The 400 for object data failing its class schema. */
export function schemaValidationFailed(details: ErrorDetail[]): ApiError {
  return new ApiError('bad_request', 'json_data does not match the class JSON schema', { reason: 'schema_validation_failed', details });
}

/** Throws schemaValidationFailed when `data` does not match. */
export function assertMatchesSchema(validate: ValidateFunction, data: unknown): void {
  const details = schemaErrors(validate, data);
  if (details.length) throw schemaValidationFailed(details);
}

/** Throws schemaValidationFailed when the class validates its objects and `data` does not match its schema. */
export function assertFitsClass(cls: { validate_schema: boolean; json_schema: unknown }, data: unknown): void {
  if (cls.validate_schema && cls.json_schema !== null && cls.json_schema !== undefined) {
    assertMatchesSchema(compileClassSchema(cls.json_schema), data);
  }
}

/** How many failing objects a refused schema change lists (in the 409 and in its audit record). */
export const INVALID_SAMPLE = 10;
/** How many violation categories an object_validation event lists. */
export const MAX_VIOLATIONS = 10;

/**
 * A safe category of one schema violation: the ajv keyword and the RFC 6901 pointer of the failing
 * place in json_data. Never the value itself (audit documents hold identities, not object data).
 */
export interface Violation {
  keyword: string;
  instance_path: string;
}

/** Stable identity of a schema document: SHA-256 of its canonical JSON (key order does not matter). */
export function schemaDigest(schema: unknown): string | null {
  if (schema === null || schema === undefined) return null;
  return `sha256:${createHash('sha256').update(canonicalJson(schema)).digest('hex')}`;
}

interface Check {
  ok: boolean;
  violations: Violation[];
  first: ErrorDetail | null;
}

function check(validate: ValidateFunction | null, data: unknown): Check {
  if (validate === null) return { ok: true, violations: [], first: null };
  const details = schemaErrors(validate, data);
  if (details.length === 0) return { ok: true, violations: [], first: null };
  // schemaErrors ran the validator last, so validate.errors belongs to `data`.
  const violations = (validate.errors ?? [])
    .slice(0, MAX_VIOLATIONS)
    .map((e) => ({ keyword: e.keyword, instance_path: e.instancePath || '/' }));
  return { ok: false, violations, first: details[0]! };
}

/** Whether `data` matches `schema` (no schema: nothing to violate), with the safe violation categories. */
export function complianceOf(schema: unknown, data: unknown): { compliant: boolean; violations: Violation[] } {
  const c = check(schema === null || schema === undefined ? null : compileClassSchema(schema), data);
  return { compliant: c.ok, violations: c.violations };
}

/** An object whose compliance with its class schema changes, or that fails a refused change. */
export interface ObjectCompliance {
  id: number;
  name: string;
  compliant: boolean;
  violations: Violation[];
}

/** What a schema change does to the stored objects of a class. */
export interface SchemaImpact {
  /** Objects read (0 when the change needs no check). */
  checked: number;
  /** Objects whose compliance (match of json_data against the schema; no schema = compliant) flips. */
  flips: ObjectCompliance[];
}

export const NO_IMPACT: SchemaImpact = { checked: 0, flips: [] };

/** The 409 of a schema change refused because stored objects do not match the schema it would enforce. */
export class ExistingObjectsInvalid extends ApiError {
  constructor(
    readonly checked: number,
    readonly failing: number,
    readonly sample: ObjectCompliance[],
    details: ErrorDetail[],
  ) {
    super('conflict', `${failing} existing object(s) of the class do not match the new schema; fix them or leave validation off`, {
      reason: 'existing_objects_invalid',
      guidance: `update or delete the listed objects (details hold at most ${INVALID_SAMPLE}), then retry`,
      details,
    });
  }
}

/** Whether a change of a class's schema configuration needs its stored objects read. */
export function schemaChangeNeedsCheck(
  before: { json_schema: unknown; validate_schema: boolean },
  next: { json_schema: unknown; validate_schema: boolean },
): boolean {
  const schemaChanged = !jsonEqual(next.json_schema ?? null, before.json_schema ?? null);
  return schemaChanged || (next.validate_schema && !before.validate_schema);
}

/**
 * Reads every object of the class (`objects`, in the caller's transaction: object writes
 * share-lock the class, which the caller holds for update, so none can slip in) against the
 * previous and the next schema. When the next configuration enforces validation and any object
 * fails, throws ExistingObjectsInvalid (409) with the failing count and the first failures;
 * otherwise returns the objects whose compliance flips.
 */
export async function assessSchemaChange(
  objects: AsyncIterable<readonly { id: number; name: string; json_data: unknown }[]>,
  before: { json_schema: unknown },
  next: { json_schema: unknown; validate_schema: boolean },
): Promise<SchemaImpact> {
  const nextSchema = next.json_schema ?? null;
  const prevSchema = before.json_schema ?? null;
  const nextValidate = nextSchema === null ? null : compileClassSchema(nextSchema);
  const same = jsonEqual(prevSchema, nextSchema);
  const prevValidate = same || prevSchema === null ? null : compileClassSchema(prevSchema);
  const enforce = next.validate_schema && nextValidate !== null;
  const sample: ObjectCompliance[] = [];
  const details: ErrorDetail[] = [];
  const flips: ObjectCompliance[] = [];
  let checked = 0;
  let failing = 0;
  for await (const batch of objects) {
    for (const o of batch) {
      checked++;
      const now = check(nextValidate, o.json_data);
      if (enforce && !now.ok) {
        failing++;
        if (sample.length < INVALID_SAMPLE) {
          sample.push({ id: o.id, name: o.name, compliant: false, violations: now.violations });
          details.push({ path: `objects/${o.id}`, message: `object ${o.name}: ${now.first!.path} ${now.first!.message}` });
        }
        continue;
      }
      if (same || failing > 0) continue;
      const was = check(prevValidate, o.json_data);
      if (was.ok !== now.ok) flips.push({ id: o.id, name: o.name, compliant: now.ok, violations: now.violations });
    }
  }
  if (failing > 0) throw new ExistingObjectsInvalid(checked, failing, sample, details);
  return { checked, flips };
}
