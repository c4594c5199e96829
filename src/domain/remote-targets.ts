// Remote targets: pure rules (no SQL, no HTTP). The target document and its validation, the
// invoke subject, the template context and the rendering of one call (engine: ./templates.ts).
import { badRequest, type ErrorDetail } from './errors.ts';
import { HEADER_NAME, isTransportHeader, OutboundError, parseOutboundUrl } from './outbound.ts';
import { compileTemplate, renderTemplate, TemplateError, type TemplateLimits } from './templates.ts';

// The engine lives in ./templates.ts; these names stay importable from here.
export { compileTemplate, renderTemplate, TemplateError, type TemplateLimits } from './templates.ts';

export const SUBJECT_TYPES = ['collection', 'class', 'object', 'class_relation', 'object_relation'] as const;
export type SubjectType = (typeof SUBJECT_TYPES)[number];

export const METHODS = ['get', 'post', 'patch', 'delete'] as const;
export type Method = (typeof METHODS)[number];

export type AuthConfig =
  { type: 'none' } | { type: 'bearer_secret'; secret: string } | { type: 'api_key_header'; header: string; secret: string };

/** The stored, user-controlled members of a target. */
export interface TargetFields {
  collection_id: number;
  class_id: number | null;
  name: string;
  description: string;
  method: Method;
  url_template: string;
  headers_template: Record<string, string>;
  body_template: string | null;
  auth_config: AuthConfig;
  allowed_subject_types: SubjectType[];
  timeout_ms: number;
  enabled: boolean;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
export const SECRET_ALIAS = /^[A-Za-z0-9_]+$/;
/** Where a template tag opens (output or statement). */
const TEMPLATE_TAG = /\{\{|\{%/;

// Size bounds of the stored templates (ours): they keep rows and rendering work small.
export const MAX_URL_TEMPLATE = 8192;
export const MAX_HEADER_TEMPLATES = 64;
export const MAX_HEADER_TEMPLATE = 8192;
export const MAX_BODY_TEMPLATE = 1_048_576;
export const MAX_NAME = 255;
/** Rendered output bounds: URL and each header value; the body is bounded by the engine's memory limit. */
export const MAX_RENDERED_URL = 8192;

// ---- the target document --------------------------------------------------------------------

interface NewBody {
  collection_id: number;
  class_id?: number | null;
  name: string;
  description: string;
  method: Method;
  url_template: string;
  headers_template?: Record<string, string>;
  body_template?: string | null;
  auth_config?: AuthConfig;
  allowed_subject_types: SubjectType[];
  timeout_ms?: number;
  enabled?: boolean;
}

export type PatchBody = Partial<NewBody>;

export function fieldsFromNew(body: NewBody): TargetFields {
  return {
    collection_id: body.collection_id,
    class_id: body.class_id ?? null,
    name: body.name,
    description: body.description,
    method: body.method,
    url_template: body.url_template,
    headers_template: body.headers_template ?? {},
    body_template: body.body_template ?? null,
    auth_config: body.auth_config ?? { type: 'none' },
    allowed_subject_types: body.allowed_subject_types,
    timeout_ms: body.timeout_ms ?? DEFAULT_TIMEOUT_MS,
    enabled: body.enabled ?? true,
  };
}

/** The target after a partial update (omitted members unchanged; body_template/class_id null clear). */
export function applyPatch(before: TargetFields, patch: PatchBody): TargetFields {
  const has = (k: keyof PatchBody) => Object.prototype.hasOwnProperty.call(patch, k) && patch[k] !== undefined;
  return {
    collection_id: has('collection_id') ? patch.collection_id! : before.collection_id,
    class_id: Object.prototype.hasOwnProperty.call(patch, 'class_id') && patch.class_id !== undefined ? patch.class_id : before.class_id,
    name: has('name') ? patch.name! : before.name,
    description: has('description') ? patch.description! : before.description,
    method: has('method') ? patch.method! : before.method,
    url_template: has('url_template') ? patch.url_template! : before.url_template,
    headers_template: has('headers_template') ? patch.headers_template! : before.headers_template,
    body_template:
      Object.prototype.hasOwnProperty.call(patch, 'body_template') && patch.body_template !== undefined
        ? patch.body_template
        : before.body_template,
    auth_config: has('auth_config') ? patch.auth_config! : before.auth_config,
    allowed_subject_types: has('allowed_subject_types') ? patch.allowed_subject_types! : before.allowed_subject_types,
    timeout_ms: has('timeout_ms') ? patch.timeout_ms! : before.timeout_ms,
    enabled: has('enabled') ? patch.enabled! : before.enabled,
  };
}

/** JSON with object keys sorted, for change detection. */
function canonical(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v ?? null);
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
    .join(',')}}`;
}

export function sameFields(a: TargetFields, b: TargetFields): boolean {
  return canonical(a) === canonical(b);
}

/**
 * Every rule that needs no database: names, methods, subject types and the class_id presence rule,
 * header names, auth config, templates (syntax, tags, nesting) and the literal-URL rule. The class
 * belonging to collection_id is checked by the caller. 400 with details listing every problem.
 */
export function validateTarget(t: TargetFields, limits: TemplateLimits): void {
  const details: ErrorDetail[] = [];
  const bad = (path: string, message: string) => details.push({ path: `body.${path}`, message });

  if (t.name.trim() === '' || t.name.length > MAX_NAME) bad('name', `must be 1 to ${MAX_NAME} characters and not blank`);
  if (!METHODS.includes(t.method)) bad('method', `must be one of ${METHODS.join(', ')}`);
  if (!Number.isInteger(t.timeout_ms) || t.timeout_ms <= 0) bad('timeout_ms', 'must be an integer greater than zero');

  const types = t.allowed_subject_types;
  if (types.length === 0) bad('allowed_subject_types', 'must not be empty');
  if (new Set(types).size !== types.length) bad('allowed_subject_types', 'must not contain duplicates');
  for (const s of types) if (!SUBJECT_TYPES.includes(s)) bad('allowed_subject_types', `unknown subject type ${JSON.stringify(s)}`);
  if (types.includes('object') && t.class_id === null) bad('class_id', 'is required when allowed_subject_types contains object');
  if (!types.includes('object') && t.class_id !== null)
    bad('class_id', 'must be null or omitted unless allowed_subject_types contains object');

  // Headers
  const names = Object.keys(t.headers_template);
  if (names.length > MAX_HEADER_TEMPLATES) bad('headers_template', `at most ${MAX_HEADER_TEMPLATES} headers`);
  const lower = new Set<string>();
  for (const name of names) {
    const l = name.toLowerCase();
    if (!HEADER_NAME.test(name)) bad(`headers_template.${name}`, 'is not a valid header name');
    else if (isTransportHeader(l)) bad(`headers_template.${name}`, 'is controlled by the transport and cannot be set');
    if (lower.has(l)) bad(`headers_template.${name}`, 'is given twice (header names are case-insensitive)');
    lower.add(l);
    const value = t.headers_template[name]!;
    if (typeof value !== 'string') bad(`headers_template.${name}`, 'must be a string template');
    else if (value.length > MAX_HEADER_TEMPLATE) bad(`headers_template.${name}`, `must be at most ${MAX_HEADER_TEMPLATE} characters`);
    else templateProblem(value, limits, `headers_template.${name}`, bad);
  }

  // Auth
  const auth = t.auth_config;
  if (auth.type === 'bearer_secret' || auth.type === 'api_key_header') {
    if (!SECRET_ALIAS.test(auth.secret)) bad('auth_config.secret', 'a secret alias has only letters, digits and underscores');
  }
  if (auth.type === 'bearer_secret' && lower.has('authorization')) {
    bad('headers_template.Authorization', 'conflicts with auth_config bearer_secret, which sets Authorization');
  }
  if (auth.type === 'api_key_header') {
    const h = auth.header.toLowerCase();
    if (!HEADER_NAME.test(auth.header)) bad('auth_config.header', 'is not a valid header name');
    else if (isTransportHeader(h)) bad('auth_config.header', 'is controlled by the transport and cannot carry an API key');
    if (lower.has(h)) bad(`headers_template.${auth.header}`, 'conflicts with the auth_config api_key_header header');
  }

  // URL
  if (t.url_template.length > MAX_URL_TEMPLATE) bad('url_template', `must be at most ${MAX_URL_TEMPLATE} characters`);
  else if (!templateProblem(t.url_template, limits, 'url_template', bad)) {
    const tag = t.url_template.search(TEMPLATE_TAG);
    const literal = tag < 0 ? t.url_template : t.url_template.slice(0, tag);
    let urlOk = true;
    if (tag < 0) {
      try {
        parseOutboundUrl(literal.trim());
      } catch (err) {
        urlOk = false;
        bad('url_template', err instanceof OutboundError ? err.message.replace('the destination URL', 'the URL') : 'is not a valid URL');
      }
    } else {
      const scheme = /^\s*([A-Za-z][A-Za-z0-9+.-]*):/.exec(literal);
      if (scheme && scheme[1]!.toLowerCase() !== 'https') {
        urlOk = false;
        bad('url_template', 'the URL must use https');
      }
    }
    if (urlOk && auth.type !== 'none' && literalOrigin(t.url_template) === null) {
      bad(
        'url_template',
        'must start with a literal https origin (scheme, host and port with no template tag before the first /, ? or #) ' +
          'when auth_config names a secret: a secret is sent only to the origins approved for it',
      );
    }
  }

  // Body
  if (t.body_template !== null) {
    if (t.body_template.length > MAX_BODY_TEMPLATE) bad('body_template', `must be at most ${MAX_BODY_TEMPLATE} characters`);
    else templateProblem(t.body_template, limits, 'body_template', bad);
    if (!lower.has('content-type')) bad('headers_template', 'Content-Type must be set in headers_template when body_template is set');
  }

  if (details.length) throw badRequest('the remote target is invalid', details);
}

function templateProblem(source: string, limits: TemplateLimits, path: string, bad: (path: string, message: string) => void): boolean {
  try {
    compileTemplate(source, limits);
    return false;
  } catch (err) {
    bad(path, (err as Error).message);
    return true;
  }
}

// ---- approved origins of secret aliases ----------------------------------------------------
//
// A secret alias is sent only to the origins an operator approved for it beside its value
// (src/sinks/secrets.ts reads them). A target that names a secret must therefore have a URL whose
// origin is literal (no template tag before the authority ends), checked when the target is
// written; the worker checks the rendered URL again right before it resolves the secret.

/** The normalized origin (`https://host[:port]`) of an absolute https URL, or null. */
export function originOf(url: string): string | null {
  try {
    return parseOutboundUrl(url).origin;
  } catch {
    return null;
  }
}

/**
 * The origin a URL template always renders to: its scheme, host and port must come before any
 * template tag and be followed by a literal `/`, `?`, `#` or backslash (or the template must have no tag
 * at all). null when a tag can change the origin or the literal part is not an https URL.
 */
export function literalOrigin(urlTemplate: string): string | null {
  const tag = urlTemplate.search(TEMPLATE_TAG);
  if (tag < 0) return originOf(urlTemplate.trim());
  const authority = /^\s*(https:\/\/[^/?#\\]*)[/?#\\]/i.exec(urlTemplate.slice(0, tag));
  return authority ? originOf(`${authority[1]!}/`) : null;
}

/**
 * The origins of an approval list (entries separated by commas or new lines; blank entries and
 * lines starting with # are ignored). Each entry is an https origin (`https://host[:port]`, a
 * trailing `/` allowed); entries with a path, query, fragment or user information never match.
 */
export function parseApprovedOrigins(text: string): string[] {
  const out = new Set<string>();
  for (const raw of text.split(/[,\r\n]+/)) {
    const entry = raw.trim();
    if (entry === '' || entry.startsWith('#')) continue;
    let url: URL;
    try {
      url = parseOutboundUrl(entry);
    } catch {
      continue;
    }
    if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || /[?#]/.test(entry)) continue;
    out.add(url.origin);
  }
  return [...out];
}

// ---- the invoke subject ---------------------------------------------------------------------

export type Subject =
  | { type: 'collection' | 'class' | 'class_relation' | 'object_relation'; id: number }
  | { type: 'object'; class_id: number; object_id: number };

/** Checks the member combination of an invoke subject (400 otherwise). */
export function parseSubject(raw: { type: SubjectType; id?: number; class_id?: number; object_id?: number }): Subject {
  const members = Object.keys(raw)
    .filter((k) => k !== 'type' && (raw as Record<string, unknown>)[k] !== undefined)
    .sort()
    .join(',');
  if (raw.type === 'object') {
    if (members !== 'class_id,object_id') {
      throw badRequest('an object subject carries exactly class_id and object_id', [
        { path: 'body.subject', message: 'unsupported subject combination' },
      ]);
    }
    return { type: 'object', class_id: raw.class_id!, object_id: raw.object_id! };
  }
  if (members !== 'id') {
    throw badRequest(`a ${raw.type} subject carries exactly id`, [{ path: 'body.subject', message: 'unsupported subject combination' }]);
  }
  return { type: raw.type, id: raw.id! };
}

export function subjectId(s: Subject): number {
  return s.type === 'object' ? s.object_id : s.id;
}

// ---- template context and rendering ---------------------------------------------------------

/** The members of the template context per subject type (resources as plain JSON). */
export interface SubjectContext {
  subject_type: SubjectType;
  /** The subject resource itself. */
  subject: Record<string, unknown>;
  collection?: Record<string, unknown>;
  class?: Record<string, unknown>;
  object?: Record<string, unknown>;
  class_relation?: Record<string, unknown>;
  object_relation?: Record<string, unknown>;
  from_class?: Record<string, unknown>;
  to_class?: Record<string, unknown>;
  from_object?: Record<string, unknown>;
  to_object?: Record<string, unknown>;
  collections?: Record<string, unknown>[];
  /** Collections the subject belongs to (the target's collection must be one of them). */
  collectionIds: number[];
}

export function templateScope(subject: SubjectContext, parameters: unknown, bodyOverride: unknown): Record<string, unknown> {
  const { collectionIds: _ids, ...rest } = subject;
  // JSON round trip: plain data only (dates as RFC 3339 strings), nothing with a prototype.
  const scope = Object.assign({}, rest, { parameters: parameters ?? {}, body_override: bodyOverride ?? {} });
  return JSON.parse(JSON.stringify(scope)) as Record<string, unknown>;
}

export interface RenderedCall {
  method: Method;
  url: string;
  headers: Record<string, string>;
  /** null = no body (get/delete without body_template); '' = empty body. */
  body: string | null;
}

const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Renders URL, header values and body. TemplateError on any template or output problem. */
export function renderCall(
  t: Pick<TargetFields, 'method' | 'url_template' | 'headers_template' | 'body_template'>,
  scope: Record<string, unknown>,
  limits: TemplateLimits,
): RenderedCall {
  const url = renderTemplate(t.url_template, scope, limits).trim();
  if (url.length > MAX_RENDERED_URL) throw new TemplateError(`the rendered URL is longer than ${MAX_RENDERED_URL} characters`);
  const headers: Record<string, string> = {};
  for (const [name, tpl] of Object.entries(t.headers_template)) {
    const value = renderTemplate(tpl, scope, limits);
    if (!HEADER_VALUE.test(value) || value.length > MAX_HEADER_TEMPLATE) {
      throw new TemplateError(`the rendered value of header ${name} is not a valid header value`);
    }
    headers[name] = value;
  }
  let body: string | null = null;
  if (t.body_template !== null) body = renderTemplate(t.body_template, scope, limits);
  else if (t.method === 'post' || t.method === 'patch') body = '';
  return { method: t.method, url, headers, body };
}
