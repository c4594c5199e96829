// The template engine shared by remote targets, event sinks and export templates: liquidjs
// (Jinja-style {{ }} / {% %}), no filesystem, bounded by SVC_EXPORT_TEMPLATE_FUEL (rendered nodes)
// and SVC_EXPORT_TEMPLATE_RECURSION_LIMIT (block nesting).
import { Context, Liquid, type Template } from 'liquidjs';

export interface TemplateLimits {
  /** Template nodes rendered per render (SVC_EXPORT_TEMPLATE_FUEL). */
  fuel: number;
  /** Block nesting depth (SVC_EXPORT_TEMPLATE_RECURSION_LIMIT). */
  recursionLimit: number;
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
    if (err instanceof TemplateError) throw err;
    throw new TemplateError(`template syntax error: ${(err as Error).message.split('\n')[0]}`);
  }
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
    if (err instanceof TemplateError) throw err;
    const inner = (err as { originalError?: unknown }).originalError;
    if (inner instanceof TemplateError) throw inner;
    throw new TemplateError(`template rendering failed: ${(err as Error).message.split('\n')[0]}`);
  }
}

/** Renders one template with the shared bounds; any failure is a TemplateError. */
export function renderTemplate(source: string, scope: Record<string, unknown>, limits: TemplateLimits): string {
  const tpl = compileTemplate(source, limits);
  return renderWith(engine, tpl, newContext(scope, engine, limits, MAX_RENDERED_OUTPUT));
}
