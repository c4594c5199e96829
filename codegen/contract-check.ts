// The breaking-change check of `make check` (make contract-check): openapi.yaml against the last
// released contract, contract/released/openapi.yaml (see its README). Fails when a client written
// against the released contract could break and info.version is still the released one.
//
// Compared per operation (method and path template, parameter names in the path ignored: only their
// position is on the wire), with every $ref resolved, so renaming or moving a component is not a
// change; what counts is the shape each request and response has. Breaking:
// - an operation, a response status, a response media type or a response header removed;
// - a parameter or request body removed, made required, or newly required; a request media type
//   removed; a parameter's style/explode changed;
// - in a request schema: a member removed or made required, an enum value removed, a type no longer
//   accepted, a constraint tightened (length, size, range, pattern, additionalProperties);
// - in a response schema: a member removed or no longer required, a type added (e.g. null).
// Not breaking: new operations, optional parameters and members, new response statuses, headers
// and members, enum values added to a response (clients tolerate unknown values), descriptions,
// examples, component names.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

type Json = Record<string, unknown>;
type Direction = 'request' | 'response';
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;

interface Doc {
  info?: { version?: string };
  paths?: Record<string, Json>;
  components?: Json;
}

/** Resolves local `#/...` references (one level at a time, any depth of chain). */
function resolver(doc: Doc): (x: unknown) => Json | undefined {
  return (x) => {
    let cur = x as Json | undefined;
    for (let hops = 0; cur && typeof cur === 'object' && typeof cur.$ref === 'string' && hops < 64; hops++) {
      const ref = cur.$ref as string;
      if (!ref.startsWith('#/')) throw new Error(`external $ref ${ref} is not supported`);
      let target: unknown = doc;
      for (const raw of ref.slice(2).split('/')) {
        const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
        target = (target as Json | undefined)?.[key];
      }
      cur = target as Json | undefined;
    }
    return cur;
  };
}

const asArray = (x: unknown): string[] => (Array.isArray(x) ? (x as string[]) : x === undefined ? [] : [x as string]);
const normPath = (p: string) => p.replace(/\{[^}]+\}/g, '{}');

export class ContractComparison {
  readonly problems: string[] = [];
  private readonly rb: (x: unknown) => Json | undefined;
  private readonly ra: (x: unknown) => Json | undefined;
  private readonly seen = new Set<string>();
  private readonly ids = new WeakMap<object, number>();
  private nextId = 1;

  constructor(
    readonly before: Doc,
    readonly after: Doc,
  ) {
    this.rb = resolver(before);
    this.ra = resolver(after);
  }

  private id(o: object): number {
    let n = this.ids.get(o);
    if (n === undefined) this.ids.set(o, (n = this.nextId++));
    return n;
  }

  private report(where: string, what: string): void {
    this.problems.push(`${where}: ${what}`);
  }

  run(): string[] {
    const ops = (doc: Doc) => {
      const out = new Map<string, { path: string; item: Json; op: Json }>();
      for (const [path, item] of Object.entries(doc.paths ?? {})) {
        for (const m of METHODS) if (item[m]) out.set(`${m.toUpperCase()} ${normPath(path)}`, { path, item, op: item[m] as Json });
      }
      return out;
    };
    const after = ops(this.after);
    for (const [key, b] of ops(this.before)) {
      const a = after.get(key);
      const where = `${key.split(' ')[0]} ${b.path}`;
      if (!a) this.report(where, 'operation removed');
      else this.operation(where, b, a);
    }
    return this.problems;
  }

  private params(r: (x: unknown) => Json | undefined, path: string, item: Json, op: Json): Map<string, Json> {
    const out = new Map<string, Json>();
    const pathNames = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
    for (const raw of [...((item.parameters as unknown[]) ?? []), ...((op.parameters as unknown[]) ?? [])]) {
      const p = r(raw);
      if (!p) continue;
      const name = p.name as string;
      const key =
        p.in === 'path'
          ? `path parameter #${pathNames.indexOf(name) + 1}`
          : p.in === 'header'
            ? `header ${name.toLowerCase()}`
            : `${String(p.in)} parameter ${name}`;
      out.set(key, p);
    }
    return out;
  }

  private operation(where: string, b: { path: string; item: Json; op: Json }, a: { path: string; item: Json; op: Json }): void {
    // Parameters.
    const pb = this.params(this.rb, b.path, b.item, b.op);
    const pa = this.params(this.ra, a.path, a.item, a.op);
    for (const [key, p] of pb) {
      const q = pa.get(key);
      if (!q) {
        this.report(where, `${key} removed`);
        continue;
      }
      if (q.required && !p.required) this.report(where, `${key} made required`);
      if ((q.style ?? null) !== (p.style ?? null) || (q.explode ?? null) !== (p.explode ?? null))
        this.report(where, `${key} serialization (style/explode) changed`);
      this.schema(`${where}: ${key}`, p.schema, q.schema, 'request');
    }
    for (const [key, q] of pa) if (!pb.has(key) && q.required) this.report(where, `new required ${key}`);

    // Request body.
    const bb = this.rb(b.op.requestBody);
    const ba = this.ra(a.op.requestBody);
    if (bb && !ba) this.report(where, 'request body removed');
    if (ba?.required && !bb?.required) this.report(where, bb ? 'request body made required' : 'new required request body');
    if (bb && ba) this.content(`${where}: request body`, bb.content, ba.content, 'request');

    // Responses.
    const resb = (b.op.responses ?? {}) as Json;
    const resa = (a.op.responses ?? {}) as Json;
    for (const [status, raw] of Object.entries(resb)) {
      const rb = this.rb(raw);
      const ra = this.ra(resa[status]);
      const at = `${where}: response ${status}`;
      if (!ra) {
        this.report(at, 'removed');
        continue;
      }
      if (!rb) continue;
      this.content(at, rb.content, ra.content, 'response');
      const hb = (rb.headers ?? {}) as Json;
      const ha = Object.fromEntries(Object.entries((ra.headers ?? {}) as Json).map(([k, v]) => [k.toLowerCase(), v]));
      for (const [name, raw2] of Object.entries(hb)) {
        const h = this.rb(raw2);
        const g = this.ra(ha[name.toLowerCase()]);
        if (!g) this.report(at, `header ${name} removed`);
        else {
          if (h?.required && !g.required) this.report(at, `header ${name} no longer required`);
          this.schema(`${at}: header ${name}`, h?.schema, g.schema, 'response');
        }
      }
    }
  }

  private content(where: string, cb: unknown, ca: unknown, dir: Direction): void {
    const b = (cb ?? {}) as Record<string, Json>;
    const a = (ca ?? {}) as Record<string, Json>;
    for (const [type, mb] of Object.entries(b)) {
      const ma = a[type];
      if (!ma) this.report(where, `media type ${type} removed`);
      else this.schema(`${where} (${type})`, mb.schema, ma.schema, dir);
    }
  }

  /** A schema with references resolved and allOf parts merged into one object view. */
  private flat(x: unknown, r: (x: unknown) => Json | undefined, depth = 0): Json | undefined {
    const s = r(x);
    if (!s || !Array.isArray(s.allOf) || depth > 16) return s;
    const merged: Json = { ...s, allOf: undefined };
    const props: Json = { ...((s.properties as Json) ?? {}) };
    const required = new Set(asArray(s.required));
    for (const part of s.allOf as unknown[]) {
      const p = this.flat(part, r, depth + 1) ?? {};
      Object.assign(props, (p.properties as Json) ?? {});
      for (const k of asArray(p.required)) required.add(k);
      for (const k of ['type', 'enum', 'items', 'additionalProperties', 'anyOf', 'oneOf'] as const)
        if (merged[k] === undefined && p[k] !== undefined) merged[k] = p[k];
    }
    merged.properties = props;
    merged.required = [...required];
    return merged;
  }

  /**
   * Compares one schema position. `request`: the new schema must accept every value the old one
   * did; `response`: it must produce only values the old one described.
   */
  schema(where: string, xb: unknown, xa: unknown, dir: Direction): void {
    if (xb === undefined || xa === undefined) {
      if (xb !== undefined && dir === 'request') return; // new schema absent: anything accepted
      if (xa !== undefined && dir === 'request') this.report(where, 'now constrained by a schema');
      return;
    }
    const rawB = this.rb(xb);
    const rawA = this.ra(xa);
    if (!rawB || !rawA || typeof rawB !== 'object' || typeof rawA !== 'object') return;
    // Each pair of schemas once per direction (recursive schemas; one report for a shared component).
    const key = `${dir}:${this.id(rawB)}:${this.id(rawA)}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    const b = this.flat(rawB, this.rb)!;
    const a = this.flat(rawA, this.ra)!;

    // Types: the wider side must include every type of the narrower (integer within number).
    const [wide, narrow] = dir === 'request' ? [a, b] : [b, a];
    const tw = asArray(wide.type);
    const tn = asArray(narrow.type);
    if (tw.length) {
      if (!tn.length && !narrow.anyOf && !narrow.oneOf && !narrow.enum && narrow.const === undefined)
        this.report(where, dir === 'request' ? 'type narrowed' : 'type widened');
      for (const t of tn) {
        if (!tw.includes(t) && !(t === 'integer' && tw.includes('number')))
          this.report(where, dir === 'request' ? `type ${t} no longer accepted` : `type ${t} added`);
      }
    }

    // Enums: in a request every old value stays accepted.
    if (dir === 'request' && Array.isArray(a.enum)) {
      if (!Array.isArray(b.enum)) this.report(where, 'now restricted to an enum');
      else
        for (const v of b.enum as unknown[])
          if (!(a.enum as unknown[]).some((w) => JSON.stringify(w) === JSON.stringify(v)))
            this.report(where, `enum value ${JSON.stringify(v)} removed`);
    }
    if (dir === 'request' && a.const !== undefined && JSON.stringify(a.const) !== JSON.stringify(b.const))
      this.report(where, 'const changed');

    if (dir === 'request') this.constraints(where, b, a);

    // Members.
    const propsB = (b.properties ?? {}) as Json;
    const propsA = (a.properties ?? {}) as Json;
    const reqB = new Set(asArray(b.required));
    const reqA = new Set(asArray(a.required));
    for (const [name, sb] of Object.entries(propsB)) {
      const at = `${where}.${name}`;
      if (!(name in propsA)) {
        // A response member may not go; a request member only where the new schema is free-form.
        if (dir === 'response' || a.properties !== undefined || a.additionalProperties === false) this.report(at, `${dir} member removed`);
        continue;
      }
      if (dir === 'request' && reqA.has(name) && !reqB.has(name)) this.report(at, 'made required');
      if (dir === 'response' && reqB.has(name) && !reqA.has(name)) this.report(at, 'no longer required (may be absent)');
      this.schema(at, sb, propsA[name], dir);
    }
    if (dir === 'request')
      for (const name of reqA) if (!reqB.has(name) && !(name in propsB)) this.report(`${where}.${name}`, 'new required member');
    if (dir === 'request' && a.additionalProperties === false && b.additionalProperties !== false)
      this.report(where, 'no longer accepts other members (additionalProperties: false)');
    if (typeof b.additionalProperties === 'object' && typeof a.additionalProperties === 'object')
      this.schema(`${where}.*`, b.additionalProperties, a.additionalProperties, dir);
    if (b.items !== undefined && a.items !== undefined) this.schema(`${where}[]`, b.items, a.items, dir);

    // Alternatives, by position.
    for (const k of ['oneOf', 'anyOf'] as const) {
      const lb = (b[k] as unknown[] | undefined) ?? [];
      const la = (a[k] as unknown[] | undefined) ?? [];
      if (!lb.length || !la.length) continue;
      if (dir === 'request' && la.length < lb.length) this.report(where, `${k} alternative removed`);
      if (dir === 'response' && la.length > lb.length) this.report(where, `${k} alternative added`);
      for (let i = 0; i < Math.min(lb.length, la.length); i++) this.schema(`${where} (${k} #${i + 1})`, lb[i], la[i], dir);
    }
  }

  private constraints(where: string, b: Json, a: Json): void {
    const num = (x: unknown) => (typeof x === 'number' ? x : undefined);
    for (const k of ['maxLength', 'maxItems', 'maxProperties', 'maximum', 'exclusiveMaximum'] as const) {
      const vb = num(b[k]);
      const va = num(a[k]);
      if (va !== undefined && (vb === undefined || va < vb)) this.report(where, `${k} tightened (${vb ?? 'none'} → ${va})`);
    }
    for (const k of ['minLength', 'minItems', 'minProperties', 'minimum', 'exclusiveMinimum'] as const) {
      const vb = num(b[k]);
      const va = num(a[k]);
      if (va !== undefined && (vb === undefined || va > vb)) this.report(where, `${k} tightened (${vb ?? 'none'} → ${va})`);
    }
    if (a.pattern !== undefined && a.pattern !== b.pattern) this.report(where, `pattern ${b.pattern === undefined ? 'added' : 'changed'}`);
    if (a.format !== undefined && a.format !== b.format) this.report(where, `format ${b.format === undefined ? 'added' : 'changed'}`);
  }
}

/** Breaking changes from `before` to `after` (an empty list when there are none). */
export function breakingChanges(before: Doc, after: Doc): string[] {
  return new ContractComparison(before, after).run();
}

/** The verdict of `make contract-check`: ok unless something breaks and the version is unchanged. */
export function verdict(before: Doc, after: Doc): { ok: boolean; problems: string[]; versionChanged: boolean } {
  const problems = breakingChanges(before, after);
  const versionChanged = before.info?.version !== after.info?.version;
  return { ok: problems.length === 0 || versionChanged, problems, versionChanged };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const released = YAML.parse(readFileSync(join(root, 'contract', 'released', 'openapi.yaml'), 'utf8')) as Doc;
  const current = YAML.parse(readFileSync(join(root, 'openapi.yaml'), 'utf8')) as Doc;
  const { ok, problems } = verdict(released, current);
  const v = (d: Doc) => d.info?.version ?? '?';
  if (!problems.length) {
    console.log(`contract-check: no breaking change against the released contract ${v(released)}`);
  } else if (ok) {
    console.log(`contract-check: ${problems.length} breaking change(s) against ${v(released)}, released as ${v(current)}:`);
    for (const p of problems) console.log(`  ${p}`);
  } else {
    console.error(`contract-check: breaking changes against the released contract ${v(released)} (info.version unchanged):`);
    for (const p of problems) console.error(`  ${p}`);
    console.error('Make the change additive, or change info.version (and contract/released/ when it is released).');
  }
  process.exit(ok ? 0 : 1);
}
