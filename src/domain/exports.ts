// Export templates and exports: pure rules (no SQL, no HTTP). The template document and its
// validation, list query strings (`query`, `default_query`), export scopes and limits, and the
// shapes of an export's output (the JSON envelope and the template context).
import { Buffer } from 'node:buffer';
import { badRequest, type ErrorDetail } from './errors.ts';
import { compileExportTemplate, MAX_TEMPLATE_SOURCE, type CompiledExportTemplate, type TemplateLimits } from './templates.ts';
import { canonicalJson } from './canonical-json.ts';

export const TEMPLATE_KINDS = ['export', 'fragment'] as const;
export type TemplateKind = (typeof TEMPLATE_KINDS)[number];

export const CONTENT_TYPES = ['text/plain', 'text/html', 'text/csv', 'application/json'] as const;
export type ContentType = (typeof CONTENT_TYPES)[number];

export const MAX_NAME = 255;
export const MAX_QUERY = 8192;
/** Query parameters in one `query` / `default_query` (the list endpoints allow 128). */
export const MAX_QUERY_PARAMS = 128;

/** The stored, user-controlled members of an export template. */
export interface TemplateFields {
  collection_id: number;
  name: string;
  description: string;
  kind: TemplateKind;
  content_type: ContentType;
  template: string;
  default_query: string | null;
}

interface NewBody {
  collection_id: number;
  name: string;
  description?: string;
  kind?: TemplateKind;
  content_type?: ContentType;
  template: string;
  default_query?: string | null;
}

export type PatchBody = Partial<NewBody>;

export function templateFieldsFromNew(body: NewBody): TemplateFields {
  return {
    collection_id: body.collection_id,
    name: body.name,
    description: body.description ?? '',
    kind: body.kind ?? 'export',
    content_type: body.content_type ?? 'text/plain',
    template: body.template,
    default_query: body.default_query ?? null,
  };
}

/** The template after a partial update: omitted members unchanged; default_query null clears it. */
export function applyTemplatePatch(before: TemplateFields, patch: PatchBody): TemplateFields {
  const has = (k: keyof PatchBody) => Object.prototype.hasOwnProperty.call(patch, k) && patch[k] !== undefined;
  return {
    collection_id: has('collection_id') ? patch.collection_id! : before.collection_id,
    name: has('name') ? patch.name! : before.name,
    description: has('description') ? patch.description! : before.description,
    kind: has('kind') ? patch.kind! : before.kind,
    content_type: has('content_type') ? patch.content_type! : before.content_type,
    template: has('template') ? patch.template! : before.template,
    default_query: Object.prototype.hasOwnProperty.call(patch, 'default_query') ? (patch.default_query ?? null) : before.default_query,
  };
}

export function sameTemplateFields(a: TemplateFields, b: TemplateFields): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/**
 * Every rule that needs no database: name, template syntax (tags, filters, nesting, include
 * form) and the default query's form. 400 with details listing every problem. Returns the parsed
 * template (its includes are checked against the database by the caller).
 */
export function validateTemplateFields(f: TemplateFields, limits: TemplateLimits): CompiledExportTemplate {
  const details: ErrorDetail[] = [];
  const bad = (path: string, message: string) => details.push({ path: `body.${path}`, message });
  if (f.name.trim() === '' || f.name.length > MAX_NAME) bad('name', `must be 1 to ${MAX_NAME} characters and not blank`);
  if (f.description.length > 10_000) bad('description', 'must be at most 10000 characters');
  let compiled: CompiledExportTemplate | undefined;
  if (f.template.length > MAX_TEMPLATE_SOURCE) bad('template', `must be at most ${MAX_TEMPLATE_SOURCE} characters`);
  else {
    try {
      compiled = compileExportTemplate(f.template, limits);
    } catch (err) {
      bad('template', (err as Error).message);
    }
  }
  if (f.default_query !== null) {
    try {
      parseQueryString(f.default_query, 'body.default_query');
    } catch (err) {
      bad('default_query', (err as Error).message);
    }
  }
  if (details.length || !compiled) throw badRequest('the export template is invalid', details);
  return compiled;
}

// ---- query strings ---------------------------------------------------------------------------

const PAGING_PARAMS = ['limit', 'cursor', 'include_total'];

/**
 * A list query string (`name__contains=web&sort=name`) as the query object the list parsers take.
 * A repeated key becomes an array (a repeated filter is one more AND condition). Paging
 * parameters are not allowed: the export pages itself.
 */
export function parseQueryString(raw: string, path = 'body.query'): Record<string, string | string[]> {
  if (raw.length > MAX_QUERY) throw badRequest(`the query must be at most ${MAX_QUERY} characters`, [{ path, message: 'too long' }]);
  const text = raw.startsWith('?') ? raw.slice(1) : raw;
  const out: Record<string, string | string[]> = {};
  let count = 0;
  for (const [k, v] of new URLSearchParams(text)) {
    if (k === '') throw badRequest('the query has a parameter without a name', [{ path, message: 'empty parameter name' }]);
    if (PAGING_PARAMS.includes(k)) {
      throw badRequest(`${k} is not allowed in an export query (exports page themselves; use limits.max_items)`, [
        { path, message: `${k} is not allowed` },
      ]);
    }
    if (++count > MAX_QUERY_PARAMS)
      throw badRequest(`the query has more than ${MAX_QUERY_PARAMS} parameters`, [{ path, message: 'too many' }]);
    // Percent-decoding can produce what the request boundary refused in the body itself.
    if (k.includes('\u0000') || v.includes('\u0000')) {
      throw badRequest('the query must not contain the NUL character (%00)', [{ path, message: 'must not contain %00' }]);
    }
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

// ---- scope and limits ------------------------------------------------------------------------

export const SCOPE_KINDS = [
  'collections',
  'classes',
  'objects_in_class',
  'class_relations',
  'object_relations',
  'related_objects',
] as const;
export type ScopeKind = (typeof SCOPE_KINDS)[number];

export type ExportScope =
  | { kind: 'collections' | 'classes' | 'class_relations' | 'object_relations' }
  | { kind: 'objects_in_class'; class_id: number }
  | { kind: 'related_objects'; class_id: number; object_id: number };

/** The scope of a stored request (the contract validated it at submission; this re-checks the shape). */
export function parseScope(raw: unknown): ExportScope {
  const s = raw as { kind?: unknown; class_id?: unknown; object_id?: unknown } | null;
  const id = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 1;
  if (s && typeof s === 'object') {
    switch (s.kind) {
      case 'collections':
      case 'classes':
      case 'class_relations':
      case 'object_relations':
        return { kind: s.kind };
      case 'objects_in_class':
        if (id(s.class_id)) return { kind: s.kind, class_id: s.class_id as number };
        break;
      case 'related_objects':
        if (id(s.class_id) && id(s.object_id)) return { kind: s.kind, class_id: s.class_id as number, object_id: s.object_id as number };
        break;
    }
  }
  throw badRequest('the export scope is invalid', [{ path: 'body.scope', message: 'unsupported scope' }]);
}

/** Rows exported when limits.max_items is omitted, and the most any export returns (larger values are clamped). */
export const DEFAULT_MAX_ITEMS = 10_000;
export const MAX_ITEMS = 100_000;
/** Output bytes allowed when limits.max_output_bytes is omitted, and the largest value accepted (above: 400). */
export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1_048_576;
export const MAX_OUTPUT_BYTES = 64 * 1_048_576;

export interface ResolvedLimits {
  maxItems: number;
  maxOutputBytes: number;
  /** Warnings to report with the output (e.g. a clamped max_items). */
  warnings: string[];
}

export function resolveLimits(raw: { max_items?: number; max_output_bytes?: number } | undefined | null): ResolvedLimits {
  const warnings: string[] = [];
  let maxItems = raw?.max_items ?? DEFAULT_MAX_ITEMS;
  if (maxItems > MAX_ITEMS) {
    warnings.push(`limits.max_items ${maxItems} was clamped to the server maximum ${MAX_ITEMS}`);
    maxItems = MAX_ITEMS;
  }
  const maxOutputBytes = raw?.max_output_bytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (maxOutputBytes > MAX_OUTPUT_BYTES) {
    throw badRequest(`limits.max_output_bytes must be at most ${MAX_OUTPUT_BYTES}`, [
      { path: 'body.limits.max_output_bytes', message: `at most ${MAX_OUTPUT_BYTES}` },
    ]);
  }
  return { maxItems, maxOutputBytes, warnings };
}

// ---- output ----------------------------------------------------------------------------------

export interface ExportMeta {
  count: number;
  truncated: boolean;
}

/**
 * The JSON output of an export without a template (components.schemas.ExportOutput), written page
 * by page: each page is serialized once and only its UTF-8 bytes are kept, so an export holds
 * about its output size instead of its rows. The pieces joined are the bytes of
 * JSON.stringify({ items, meta, warnings }).
 */
export class JsonOutputWriter {
  private readonly chunks: Buffer[] = [];
  /** Items written so far. */
  count = 0;
  /** UTF-8 bytes of the items so far, counting one separator each (the early output-size check). */
  itemBytes = 0;

  add(items: readonly unknown[]): void {
    if (items.length === 0) return;
    // "[a,b]" without its brackets (after a comma when items precede): the items and their separators
    const json = JSON.stringify(items);
    const chunk = Buffer.from((this.count > 0 ? ',' : '') + json.slice(1, -1), 'utf8');
    this.chunks.push(chunk);
    this.itemBytes += chunk.length + (this.count > 0 ? 0 : 1);
    this.count += items.length;
  }

  /** The whole output as pieces in order (store or concatenate them); the writer is spent afterwards. */
  finish(meta: ExportMeta, warnings: string[]): Buffer[] {
    const head = Buffer.from('{"items":[', 'utf8');
    const tail = Buffer.from(`],"meta":${JSON.stringify(meta)},"warnings":${JSON.stringify(warnings)}}`, 'utf8');
    const pieces = [head, ...this.chunks, tail];
    this.chunks.length = 0;
    return pieces;
  }
}

/** Object rows carry their data as `data` in the template context too (the contract's context name). */
export function templateItem(kind: ScopeKind, item: Record<string, unknown>): Record<string, unknown> {
  return kind === 'objects_in_class' || kind === 'related_objects' ? Object.assign({}, item, { data: item.json_data }) : item;
}

/**
 * One row as the template context holds it, converted when its page is read so the rows
 * themselves need not be kept. JSON round trip: dates become RFC 3339 strings and nothing with a
 * prototype reaches the template.
 */
export function templateContextItem(kind: ScopeKind, item: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(JSON.stringify(templateItem(kind, item))) as Record<string, unknown>;
}

/** The context of an export template: items (from templateContextItem), meta, warnings and the scope (plain JSON only). */
export function exportTemplateScope(
  items: Record<string, unknown>[],
  meta: ExportMeta,
  warnings: string[],
  scope: ExportScope,
): Record<string, unknown> {
  const rest = JSON.parse(JSON.stringify({ meta, warnings, scope: { ...scope } })) as Record<string, unknown>;
  return { items, ...rest };
}
