// The template engine shared by remote targets, event sinks and export templates: liquidjs
// (Jinja-style {{ }} / {% %}), no filesystem, bounded by SVC_EXPORT_TEMPLATE_FUEL (rendered nodes,
// shared by a template and everything it includes) and SVC_EXPORT_TEMPLATE_RECURSION_LIMIT (block
// nesting of one source, and the depth of fragment includes).
//
// Two engines: the plain one (remote targets, sinks) has no include tags at all; the export one
// adds `{% include 'name', key: value %}` (shared scope) and `{% render 'name', key: value %}`
// (isolated scope: only the arguments), whose names are static strings resolved from fragments
// the caller loaded from the database beforehand (renderExportTemplate's `fragments`). Nothing
// reads the filesystem.
//
// Filters: Liquid's own plus the Jinja names users write (tojson, default/d, length/count, lower,
// upper, join, replace, trim) with Jinja's semantics, in either call form: `x | join(", ")` (Jinja,
// keyword arguments as `name=value`) or `x | join: ", "` (Liquid, `name: value`).
import {
  Context,
  Hash,
  Liquid,
  Tag,
  Tokenizer,
  toValue,
  type Emitter,
  type FilterImplOptions,
  type TagToken,
  type Template,
  type TopLevelToken,
} from 'liquidjs';

export interface TemplateLimits {
  /** Template nodes rendered per render (SVC_EXPORT_TEMPLATE_FUEL). */
  fuel: number;
  /** Block nesting depth (SVC_EXPORT_TEMPLATE_RECURSION_LIMIT). */
  recursionLimit: number;
}

/** The configured limits (SVC_EXPORT_TEMPLATE_FUEL, SVC_EXPORT_TEMPLATE_RECURSION_LIMIT). */
export function templateLimits(config: { SVC_EXPORT_TEMPLATE_FUEL: number; SVC_EXPORT_TEMPLATE_RECURSION_LIMIT: number }): TemplateLimits {
  return { fuel: config.SVC_EXPORT_TEMPLATE_FUEL, recursionLimit: config.SVC_EXPORT_TEMPLATE_RECURSION_LIMIT };
}

/** Largest template source the parser accepts. */
export const MAX_TEMPLATE_SOURCE = 1_048_576;
/** Default bound of one render's output (memory used while rendering). */
export const MAX_RENDERED_OUTPUT = 4 * 1_048_576;

export class TemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateError';
  }
}

// Tags that reach files or other templates are removed: nothing here may read the filesystem.
const REMOVED_TAGS = ['include', 'render', 'layout', 'block'];
const BLOCK_OPEN = new Set(['if', 'unless', 'for', 'case', 'capture', 'tablerow', 'comment', 'raw']);

// Jinja's call form of filter arguments. liquidjs reads arguments only as `name: a, b`; Jinja
// writes `name(a, b)` and `name(key=value)`. Every liquidjs parse (output, tag arguments, assign)
// reads a filter through Tokenizer.prototype.readFilter, so the call form is added there, once.
// `(` after a filter name is a syntax error in Liquid, so no template that parsed before changes.
type FilterToken = NonNullable<ReturnType<Tokenizer['readFilter']>>;
type FilterArgs = FilterToken['args'];
type FilterThis = ThisParameterType<Extract<FilterImplOptions, (...args: never[]) => unknown>>;

const FilterTokenClass = new Tokenizer('x | f').readFilteredValue().filters[0]!.constructor as new (
  name: string,
  args: FilterArgs,
  input: string,
  begin: number,
  end: number,
  file?: string,
) => FilterToken;
const JINJA_CALL = Symbol.for('svc.templates.jinjaFilterCall');
const KEYWORD = /([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)/y;

/** The Jinja filters: parameter names (after the value) and how many are required. */
const JINJA_PARAMS: Record<string, { params: readonly string[]; required: number }> = {
  tojson: { params: ['indent'], required: 0 },
  default: { params: ['default_value', 'boolean'], required: 0 },
  d: { params: ['default_value', 'boolean'], required: 0 },
  length: { params: [], required: 0 },
  count: { params: [], required: 0 },
  lower: { params: [], required: 0 },
  upper: { params: [], required: 0 },
  join: { params: ['d', 'attribute'], required: 0 },
  replace: { params: ['old', 'new', 'count'], required: 2 },
  trim: { params: ['chars'], required: 0 },
};

/** Checks a call of one of the Jinja filters against its parameters (at parse time). */
function checkFilterCall(token: FilterToken): void {
  const spec = JINJA_PARAMS[token.name];
  if (!spec) return;
  const given = new Set<string>();
  let keywords = false;
  for (const arg of token.args) {
    let name: string | undefined;
    if (Array.isArray(arg)) {
      keywords = true;
      name = arg[0] ?? '';
      if (!spec.params.includes(name)) throw new TemplateError(`filter ${token.name} has no argument ${name}`);
    } else {
      if (keywords) throw new TemplateError(`filter ${token.name}: a positional argument follows a keyword argument`);
      name = spec.params[given.size];
      if (name === undefined) {
        throw new TemplateError(`filter ${token.name} takes at most ${spec.params.length} argument${spec.params.length === 1 ? '' : 's'}`);
      }
    }
    if (given.has(name)) throw new TemplateError(`filter ${token.name} got argument ${name} twice`);
    given.add(name);
  }
  for (const name of spec.params.slice(0, spec.required)) {
    if (!given.has(name)) throw new TemplateError(`filter ${token.name} needs the argument ${name}`);
  }
}

function readFilterJinjaOrLiquid(this: Tokenizer, readLiquid: () => FilterToken | null): FilterToken | null {
  const start = this.p;
  this.skipBlank();
  if (this.peek() === '|') {
    this.p++;
    const name = this.readIdentifier();
    this.skipBlank();
    if (name.size() > 0 && this.peek() === '(') {
      this.p++;
      const args: FilterArgs = [];
      for (;;) {
        this.skipBlank();
        if (this.end()) throw this.error(`expected ")" after the arguments of filter ${name.getText()}`);
        if (this.peek() === ')') break;
        KEYWORD.lastIndex = this.p;
        const kw = KEYWORD.exec(this.input);
        let key: string | undefined;
        if (kw && KEYWORD.lastIndex <= this.N) {
          key = kw[1];
          this.p = KEYWORD.lastIndex;
        }
        const value = this.readValue();
        if (!value) throw this.error(`expected an argument of filter ${name.getText()}`);
        args.push(key === undefined ? value : [key, value]);
        this.skipBlank();
        if (this.peek() === ',') this.p++;
        else if (this.peek() !== ')') throw this.error(`expected "," or ")" in the arguments of filter ${name.getText()}`);
      }
      this.p++;
      const token = new FilterTokenClass(name.getText(), args, this.input, name.begin, this.p, this.file);
      checkFilterCall(token);
      return token;
    }
  }
  this.p = start;
  const token = readLiquid.call(this);
  if (token) checkFilterCall(token);
  return token;
}

{
  const proto = Tokenizer.prototype as Tokenizer & { [JINJA_CALL]?: true };
  if (!proto[JINJA_CALL]) {
    const readLiquid = proto.readFilter;
    proto.readFilter = function (this: Tokenizer) {
      return readFilterJinjaOrLiquid.call(this, readLiquid);
    };
    proto[JINJA_CALL] = true;
  }
}

/** Binds a filter's evaluated arguments to its parameter names (keyword arguments come as [key, value]). */
function bindArgs(self: FilterThis, argv: unknown[]): Map<string, unknown> {
  const params = JINJA_PARAMS[self.token.name]?.params ?? [];
  const bound = new Map<string, unknown>();
  argv.forEach((value, i) => {
    if (Array.isArray(self.token.args[i])) {
      const [key, v] = value as [string, unknown];
      bound.set(key, v);
    } else {
      bound.set(params[i] ?? '', value);
    }
  });
  return bound;
}

/** Text of a value as the Jinja filters see it: nothing for null and missing, JSON for lists and objects. */
function text(value: unknown): string {
  const v = toValue(value) as unknown;
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'object') return JSON.stringify(v) ?? '';
  return String(v as number | boolean | bigint);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Jinja (Python) truth: none, false, 0, '' and empty lists and objects are false. */
function jinjaTruthy(value: unknown): boolean {
  const v = toValue(value) as unknown;
  if (v === undefined || v === null || v === false || v === 0 || v === '' || Number.isNaN(v)) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (isPlainObject(v)) return Object.keys(v).length > 0;
  return true;
}

/** The items Jinja iterates: a list's items, a string's characters, an object's keys; none for null. */
function iterableItems(filter: string, value: unknown): unknown[] {
  const v = toValue(value) as unknown;
  if (v === undefined || v === null) return [];
  if (Array.isArray(v)) return v;
  if (typeof v === 'string') return Array.from(v);
  if (isPlainObject(v)) return Object.keys(v);
  throw new TemplateError(`filter ${filter} needs a list, string or object, not ${typeof v}`);
}

/** An item's attribute by a dotted path (`a.b`, list indexes as numbers), own members only. */
function attribute(item: unknown, path: string): unknown {
  let v = item;
  for (const part of path.split('.')) {
    if (Array.isArray(v) && /^\d+$/.test(part)) v = v[Number(part)];
    else if (isPlainObject(v) && Object.prototype.hasOwnProperty.call(v, part)) v = v[part];
    else return undefined;
  }
  return v;
}

function integerArg(filter: string, name: string, value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new TemplateError(`filter ${filter}: ${name} must be an integer`);
  return value;
}

// Jinja's tojson escapes <, >, & and ' so the JSON can sit inside HTML; it stays valid JSON.
const HTML_UNSAFE_IN_JSON: Record<string, string> = { '<': '\\u003c', '>': '\\u003e', '&': '\\u0026', "'": '\\u0027' };

const JINJA_FILTERS: Record<string, FilterImplOptions> = {
  tojson(this: FilterThis, value: unknown, ...argv: unknown[]) {
    const indent = integerArg('tojson', 'indent', bindArgs(this, argv).get('indent'));
    if (indent !== undefined && indent < 0) throw new TemplateError('filter tojson: indent must not be negative');
    const v = toValue(value) as unknown;
    const json = JSON.stringify(v === undefined ? null : v, null, indent) ?? 'null';
    this.context.memoryLimit.use(json.length);
    return json.replace(/[<>&']/g, (c) => HTML_UNSAFE_IN_JSON[c]!);
  },
  default: jinjaDefault,
  d: jinjaDefault,
  length: jinjaLength,
  count: jinjaLength,
  lower(this: FilterThis, value: unknown) {
    const s = text(value);
    this.context.memoryLimit.use(s.length);
    return s.toLowerCase();
  },
  upper(this: FilterThis, value: unknown) {
    const s = text(value);
    this.context.memoryLimit.use(s.length);
    return s.toUpperCase();
  },
  join(this: FilterThis, value: unknown, ...argv: unknown[]) {
    const args = bindArgs(this, argv);
    const sep = text(args.get('d'));
    const attr = args.get('attribute');
    let items = iterableItems('join', value);
    if (attr !== undefined && attr !== null) items = items.map((item) => attribute(item, text(attr)));
    const parts = items.map(text);
    this.context.memoryLimit.use(parts.reduce((n, p) => n + p.length, sep.length * Math.max(parts.length - 1, 0)));
    return parts.join(sep);
  },
  replace(this: FilterThis, value: unknown, ...argv: unknown[]) {
    const args = bindArgs(this, argv);
    const s = text(value);
    const old = text(args.get('old'));
    const by = text(args.get('new'));
    const count = integerArg('replace', 'count', args.get('count'));
    // Python's str.replace: an empty `old` matches before every character and at the end.
    const parts = old === '' ? ['', ...Array.from(s), ''] : s.split(old);
    const n = count === undefined || count < 0 ? parts.length - 1 : Math.min(count, parts.length - 1);
    this.context.memoryLimit.use(s.length + n * Math.max(by.length - old.length, 0));
    const rest = parts.slice(n + 1);
    return parts.slice(0, n + 1).join(by) + (rest.length > 0 ? old + rest.join(old) : '');
  },
  trim(this: FilterThis, value: unknown, ...argv: unknown[]) {
    const s = text(value);
    this.context.memoryLimit.use(s.length);
    const chars = bindArgs(this, argv).get('chars');
    if (chars === undefined || chars === null) return s.trim();
    const set = new Set(Array.from(text(chars)));
    const cs = Array.from(s);
    let a = 0;
    let b = cs.length;
    while (a < b && set.has(cs[a]!)) a++;
    while (b > a && set.has(cs[b - 1]!)) b--;
    return cs.slice(a, b).join('');
  },
};

function jinjaDefault(this: FilterThis, value: unknown, ...argv: unknown[]): unknown {
  const args = bindArgs(this, argv);
  const fallback = args.get('default_value') ?? '';
  if (value === undefined) return fallback;
  if (jinjaTruthy(args.get('boolean')) && !jinjaTruthy(value)) return fallback;
  return value;
}

function jinjaLength(this: FilterThis, value: unknown): number {
  const v = toValue(value) as unknown;
  if (v === undefined || v === null) return 0;
  if (typeof v === 'string') return Array.from(v).length;
  if (Array.isArray(v)) return v.length;
  if (isPlainObject(v)) return Object.keys(v).length;
  throw new TemplateError(`filter ${this.token.name} needs a list, string or object, not ${typeof v}`);
}

function makeEngine(): Liquid {
  const engine = new Liquid({
    strictVariables: false,
    strictFilters: true,
    ownPropertyOnly: true,
    templates: {},
    relativeReference: false,
    dynamicPartials: false,
    jsTruthy: false,
    cache: false,
    outputEscape: undefined,
    parseLimit: MAX_TEMPLATE_SOURCE + 1024,
  });
  const tags = engine.tags as Record<string, unknown>;
  for (const t of REMOVED_TAGS) delete tags[t];
  delete tags.liquid; // the multi-statement form would hide tags from the nesting check
  for (const [name, impl] of Object.entries(JINJA_FILTERS)) engine.registerFilter(name, impl);
  return engine;
}

const engine = makeEngine();

/** Fragment names may be at most this long (the name rule of export templates). */
export const MAX_FRAGMENT_NAME = 255;

const FRAGMENTS = 'svc_fragments';
const INCLUDE_DEPTH = 'svc_include_depth';

/** Include names met while parsing (set only during compileExportTemplate; parsing is synchronous). */
let collecting: Set<string> | null = null;

/** Resolves fragment names at render time (all sources were loaded before rendering started). */
export interface FragmentSource {
  /** The parsed fragment, or undefined when there is no fragment of that name. */
  get(name: string): Template[] | undefined;
  /** Include depth bound (SVC_EXPORT_TEMPLATE_RECURSION_LIMIT). */
  depthLimit: number;
}

function includeTag(isolated: boolean) {
  const tagName = isolated ? 'render' : 'include';
  return class FragmentTag extends Tag {
    private readonly fragment: string;
    private readonly args: Hash;
    constructor(token: TagToken, remain: TopLevelToken[], liquid: Liquid) {
      super(token, remain, liquid);
      const m = /^\s*(?:'([^'\r\n]*)'|"([^"\r\n]*)")\s*(?:,\s*([\s\S]*))?$/.exec(token.args);
      const name = m ? (m[1] ?? m[2] ?? '') : '';
      if (!m || name.trim() === '' || name.length > MAX_FRAGMENT_NAME) {
        throw new TemplateError(`${tagName} takes a quoted fragment name, then optional key: value arguments`);
      }
      this.fragment = name;
      this.args = new Hash(m[3] ?? '');
      for (const [k, v] of Object.entries(this.args.hash)) {
        if (v === undefined) throw new TemplateError(`${tagName} argument ${k} needs a value (key: value)`);
      }
      collecting?.add(name);
    }
    *render(ctx: Context, emitter: Emitter): Generator<unknown, void, unknown> {
      const source = ctx.getRegister(FRAGMENTS) as FragmentSource | undefined;
      if (!source) throw new TemplateError('fragment includes are not available here');
      const depth = (ctx.getRegister(INCLUDE_DEPTH) as number | undefined) ?? 0;
      if (depth >= source.depthLimit) throw new TemplateError(`fragment includes nest deeper than ${source.depthLimit}`);
      const templates = source.get(this.fragment);
      if (!templates) throw new TemplateError(`there is no fragment named ${JSON.stringify(this.fragment)} in this collection`);
      const args = (yield this.args.render(ctx)) as Record<string, unknown>;
      if (isolated) {
        const child = ctx.spawn(args);
        child.setRegister(FRAGMENTS, source);
        child.setRegister(INCLUDE_DEPTH, depth + 1);
        yield this.liquid.renderer.renderTemplates(templates, child, emitter);
      } else {
        ctx.setRegister(INCLUDE_DEPTH, depth + 1);
        ctx.push(args);
        try {
          yield this.liquid.renderer.renderTemplates(templates, ctx, emitter);
        } finally {
          ctx.pop();
          ctx.setRegister(INCLUDE_DEPTH, depth);
        }
      }
    }
  };
}

function makeExportEngine(): Liquid {
  const e = makeEngine();
  e.registerTag('include', includeTag(false));
  e.registerTag('render', includeTag(true));
  return e;
}

const exportEngine = makeExportEngine();

/** Block nesting depth of a template source (tag names only; good enough for a bound). */
function nestingDepth(source: string): number {
  let depth = 0;
  let max = 0;
  for (const m of source.matchAll(/\{%-?\s*([A-Za-z_#]+)/g)) {
    const tag = m[1]!;
    if (BLOCK_OPEN.has(tag)) max = Math.max(max, ++depth);
    else if (tag.startsWith('end')) depth = Math.max(0, depth - 1);
  }
  return max;
}

function parseWith(e: Liquid, source: string, limits: TemplateLimits): Template[] {
  if (nestingDepth(source) > limits.recursionLimit) {
    throw new TemplateError(`the template nests blocks deeper than ${limits.recursionLimit}`);
  }
  try {
    return e.parse(source);
  } catch (err) {
    const te = templateErrorIn(err);
    if (te) throw te;
    throw new TemplateError(`template syntax error: ${(err as Error).message.split('\n')[0]}`);
  }
}

/** A TemplateError thrown inside liquidjs comes back wrapped (originalError), possibly more than once. */
function templateErrorIn(err: unknown): TemplateError | undefined {
  let e: unknown = err;
  for (let i = 0; i < 8 && e; i++) {
    if (e instanceof TemplateError) return e;
    e = (e as { originalError?: unknown }).originalError;
  }
  return undefined;
}

/** Parses a template (syntax, known tags and filters, nesting bound). */
export function compileTemplate(source: string, limits: TemplateLimits): Template[] {
  return parseWith(engine, source, limits);
}

/** Counts rendered template nodes (liquidjs checks its render limit once per node) against the fuel. */
class FuelLimiter {
  private used = 0;
  constructor(private readonly fuel: number) {}
  use(): void {}
  check(): void {
    if (++this.used > this.fuel) throw new TemplateError(`template rendering ran out of fuel (${this.fuel} steps)`);
  }
}

class MemoryLimiter {
  private used = 0;
  constructor(private readonly limit: number) {}
  use(n: number): void {
    if (+n > 0) {
      this.used += +n;
      if (this.used > this.limit) throw new TemplateError('template rendering used too much memory');
    }
  }
  check(): void {}
}

function newContext(scope: Record<string, unknown>, e: Liquid, limits: TemplateLimits, maxOutput: number): Context {
  return new Context(scope, e.options, {}, {
    renderLimit: new FuelLimiter(limits.fuel) as never,
    memoryLimit: new MemoryLimiter(maxOutput) as never,
  } as never);
}

function renderWith(e: Liquid, tpl: Template[], ctx: Context): string {
  try {
    const out = e.renderSync(tpl, ctx) as unknown;
    return typeof out === 'string' ? out : String(out ?? '');
  } catch (err) {
    const te = templateErrorIn(err);
    if (te) throw te;
    if (err instanceof RangeError) throw new TemplateError('template rendering recursed too deeply');
    throw new TemplateError(`template rendering failed: ${(err as Error).message.split('\n')[0]}`);
  }
}

/** Renders one template with the shared bounds; any failure is a TemplateError. */
export function renderTemplate(source: string, scope: Record<string, unknown>, limits: TemplateLimits): string {
  const tpl = compileTemplate(source, limits);
  return renderWith(engine, tpl, newContext(scope, engine, limits, MAX_RENDERED_OUTPUT));
}

/** A parsed export template or fragment and the fragment names it includes (directly). */
export interface CompiledExportTemplate {
  templates: Template[];
  includes: string[];
}

/** Parses an export template or fragment: the plain rules plus include/render of fragments. */
export function compileExportTemplate(source: string, limits: TemplateLimits): CompiledExportTemplate {
  const names = new Set<string>();
  collecting = names;
  try {
    return { templates: parseWith(exportEngine, source, limits), includes: [...names] };
  } finally {
    collecting = null;
  }
}

/**
 * Renders a parsed export template. `fragments` holds the parsed fragments of the template's
 * collection by name (everything the template can reach); `maxOutput` bounds the memory of the
 * render (the caller checks the output size itself). Any failure is a TemplateError.
 */
export function renderExportTemplate(
  templates: Template[],
  scope: Record<string, unknown>,
  fragments: ReadonlyMap<string, Template[]>,
  limits: TemplateLimits,
  maxOutput: number,
): string {
  const ctx = newContext(scope, exportEngine, limits, maxOutput);
  const source: FragmentSource = { get: (name) => fragments.get(name), depthLimit: limits.recursionLimit };
  ctx.setRegister(FRAGMENTS, source);
  ctx.setRegister(INCLUDE_DEPTH, 0);
  return renderWith(exportEngine, templates, ctx);
}
