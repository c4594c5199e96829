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
import { Context, Hash, Liquid, Tag, type Emitter, type TagToken, type Template, type TopLevelToken } from 'liquidjs';

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
