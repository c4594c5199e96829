// A schema-driven fuzz of every operation in openapi.yaml: for a fixed seed, requests with valid,
// invalid and hostile values (NUL characters, malformed percent-encoding, huge strings, JSON nested
// thousands deep, wrong types, bodies that are not UTF-8, odd headers) in bodies, queries, paths
// and headers. Every response must be declared and match openapi.yaml (test/contract-check.ts),
// and none may be a 5xx. It runs on a database of its own, so destructive requests of an
// administrator touch nothing of the other test files.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openapiDocument } from '../src/http/openapi.ts';
import { SchemaRegistry } from '../src/http/schemas.ts';
import { closeLoginLimiter } from '../src/services/login-limiter.ts';
import { ADMIN_PASSWORD, listen, startTestApp, uniq, type TestApp } from './helpers.ts';
import { checkResponse } from './contract-check.ts';
import { createDatabase, type OwnDatabase } from './db-fixtures.ts';

const SEED = 0x5eed_0007;
const REQUESTS_PER_OPERATION = 12;
const DEEP = 5000;

type Json = Record<string, unknown>;
const doc = openapiDocument() as unknown as Json;

/** mulberry32: small, fast and the same on every machine. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p: number) => next() < p,
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
  };
}
const r = rng(SEED);

function at(pointer: string): unknown {
  let cur: unknown = doc;
  for (const raw of pointer.replace(/^#/, '').split('/').slice(1)) {
    cur = (cur as Json | undefined)?.[raw.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return cur;
}

function deref<T = Json>(obj: unknown): T {
  let cur = obj as Json;
  for (let i = 0; i < 10 && cur && typeof cur.$ref === 'string'; i++) cur = at(cur.$ref) as Json;
  return cur as T;
}

// ---- values ------------------------------------------------------------------------------------

const HOSTILE_STRINGS = [
  '\u0000',
  'a\u0000b',
  '%',
  '%zz',
  '%00',
  '\ud800',
  'x\udfffy',
  '\uffff',
  'ü'.repeat(4000),
  '😀'.repeat(1000),
  'x'.repeat(70_000),
  "' or 1=1 --",
  '{{ 7 * 7 }}{% for x in y %}',
  '../../etc/passwd',
  '\u202e\r\n\t',
  ' ',
  '',
  '-1',
  '9'.repeat(40),
  '1e400',
  'NaN',
  'null',
  '__proto__',
  'constructor',
  '<script>alert(1)</script>',
  'a,b,,c=d=e',
  'json_data__gte=x',
];
const WRONG_TYPES: unknown[] = [null, true, 0, -1, 1.5, 2 ** 53, 'text', [], {}, [1, 'a'], { a: { b: null } }];
const DEEP_MARK = '\u0001deep\u0001';
const BAD_UTF8_MARK = '\u0001badutf8\u0001';
const BAD_UTF8 = [Buffer.from([0xff, 0xfe]), Buffer.from([0xc3, 0x28]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xc0, 0xaf])];

/** Seeded rows the generator refers to, by kind. */
const pools: Record<string, (number | string)[]> = {};

const ID_KINDS: Record<string, string> = {
  collection_id: 'collection',
  parent_collection_id: 'collection',
  class_id: 'class',
  svc_class_id: 'class',
  from_class_id: 'class',
  to_class_id: 'class',
  object_id: 'object',
  from_object_id: 'object',
  to_object_id: 'object',
  group_id: 'group',
  owner_group_id: 'group',
  principal_id: 'principal',
  user_id: 'principal',
  template_id: 'template',
  sink_id: 'sink',
  class_relation_id: 'classRelation',
  class_name: 'className',
  object_name: 'objectName',
};
const SEGMENT_KINDS: Record<string, string> = {
  groups: 'group',
  users: 'principal',
  'service-accounts': 'principal',
  collections: 'collection',
  classes: 'class',
};

function kindOf(name: string, segmentBefore?: string): string | undefined {
  if (name === 'relation_id') return segmentBefore === 'classes' ? 'classRelation' : 'objectRelation';
  if (name === 'id' && segmentBefore) return SEGMENT_KINDS[segmentBefore];
  return ID_KINDS[name];
}

function sampleString(s: Json, name: string): string {
  if (s.format === 'date-time') return r.pick(['2026-01-02T03:04:05.000Z', '2030-12-31T23:59:59Z']);
  if (s.format === 'date') return '2026-01-02';
  if (s.format === 'email') return 'fuzz@example.com';
  if (s.format === 'uri' || /url/.test(name)) return r.pick(['https://example.com/hook', 'https://127.0.0.1:9/x']);
  const pool = pools[kindOf(name) ?? ''];
  if (pool?.length && r.chance(0.7)) return String(r.pick(pool));
  const min = typeof s.minLength === 'number' ? s.minLength : 0;
  const max = typeof s.maxLength === 'number' ? s.maxLength : 24;
  let v = `fz${r.int(0, 1e6).toString(36)}`;
  if (typeof s.pattern === 'string') {
    const re = new RegExp(s.pattern, 'u');
    v = [v, `fz_${r.int(0, 1e6)}`, `f${r.int(0, 1e6)}`, 'A1', 'ab.cd', 'a-b', '1', 'x'].find((c) => re.test(c)) ?? v;
  }
  while (v.length < min) v += 'x';
  return v.slice(0, Math.max(max, min));
}

function sampleInteger(s: Json, name: string): number {
  const pool = pools[kindOf(name) ?? ''];
  if (pool?.length && r.chance(0.8)) return Number(r.pick(pool));
  const lo = typeof s.minimum === 'number' ? s.minimum : 0;
  const hi = typeof s.maximum === 'number' ? s.maximum : lo + 100;
  return r.int(lo, Math.min(hi, lo + 1000));
}

/** A value of the schema, mostly valid (the generator does not solve every keyword). */
function gen(schemaIn: unknown, name = '', depth = 0): unknown {
  const s = deref(schemaIn ?? {});
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.enum)) return r.pick(s.enum);
  if (Array.isArray(s.examples) && s.examples.length && r.chance(0.3)) return r.pick(s.examples as unknown[]);
  if (Array.isArray(s.oneOf) || Array.isArray(s.anyOf)) return gen(r.pick((s.oneOf ?? s.anyOf) as unknown[]), name, depth + 1);
  if (Array.isArray(s.allOf)) {
    const parts = (s.allOf as unknown[]).map((p) => gen(p, name, depth + 1));
    return parts.every((p) => p && typeof p === 'object' && !Array.isArray(p)) ? Object.assign({}, ...parts) : parts.at(-1);
  }
  let type = s.type as string | string[] | undefined;
  if (Array.isArray(type)) type = r.pick(type);
  if (!type) type = s.properties ? 'object' : s.items ? 'array' : depth > 3 ? 'string' : r.pick(['object', 'string', 'integer']);
  if (depth > 8) return type === 'null' ? null : type === 'array' ? [] : type === 'object' ? {} : 'deep';
  switch (type) {
    case 'null':
      return null;
    case 'boolean':
      return r.chance(0.5);
    case 'integer':
      return sampleInteger(s, name);
    case 'number':
      return r.int(0, 1000) / 4;
    case 'string':
      return sampleString(s, name);
    case 'array': {
      const n = Math.max(typeof s.minItems === 'number' ? s.minItems : 0, r.int(0, 2));
      return Array.from({ length: Math.min(n, 8) }, () => gen(s.items, name, depth + 1));
    }
    default: {
      const out: Json = {};
      const required = new Set((s.required as string[] | undefined) ?? []);
      for (const [k, v] of Object.entries((s.properties as Json | undefined) ?? {})) {
        if (required.has(k) || r.chance(0.5)) out[k] = gen(v, k, depth + 1);
      }
      if (!s.properties && s.additionalProperties !== false && r.chance(0.6)) {
        out[`k${r.int(0, 99)}`] = gen(typeof s.additionalProperties === 'object' ? s.additionalProperties : {}, '', depth + 1);
      }
      return out;
    }
  }
}

/** Every place in a JSON value (container members and array items), as key paths. */
function places(v: unknown, path: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(path);
  if (Array.isArray(v)) v.forEach((x, i) => places(x, [...path, i], out));
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) places(x, [...path, k], out);
  return out;
}

function setAt(root: unknown, path: (string | number)[], value: unknown): unknown {
  if (path.length === 0) return value;
  let cur = root as Json;
  for (const k of path.slice(0, -1)) cur = cur[k as string] as Json;
  cur[path.at(-1) as string] = value;
  return root;
}

function hostileValue(): unknown {
  const roll = r.next();
  if (roll < 0.55) return r.pick(HOSTILE_STRINGS);
  if (roll < 0.8) return r.pick(WRONG_TYPES);
  if (roll < 0.9) return DEEP_MARK;
  return BAD_UTF8_MARK;
}

/** Replaces one place (or adds a member) with a hostile value. */
function mutate(value: unknown): unknown {
  const target = r.pick(places(value));
  const container = target.reduce<unknown>((v, k) => (v as Json)[k as string], value);
  if (container && typeof container === 'object' && !Array.isArray(container) && r.chance(0.3)) {
    (container as Json)[r.pick(['extra', '__proto__', 'a\u0000b', 'name'])] = hostileValue();
    return value;
  }
  return setAt(value, target, hostileValue());
}

/** JSON text with the deep and invalid-UTF-8 markers expanded, as bytes. */
function encodeBody(value: unknown): Buffer {
  const text = JSON.stringify(value) ?? 'null';
  const deep = (n: number) => (r.chance(0.5) ? '['.repeat(n) + ']'.repeat(n) : '{"a":'.repeat(n) + '1' + '}'.repeat(n));
  const withDeep = text.split(JSON.stringify(DEEP_MARK)).join(deep(r.pick([DEEP, 81, 200])));
  const parts = withDeep.split(BAD_UTF8_MARK.replace(/\u0001/g, '\\u0001'));
  return Buffer.concat(parts.flatMap((p, i) => (i === 0 ? [Buffer.from(p)] : [r.pick(BAD_UTF8), Buffer.from(p)])));
}

// ---- operations --------------------------------------------------------------------------------

interface Param {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  schema: Json;
  required?: boolean;
}

const registry = new SchemaRegistry();

/** Bodies an operation accepted (2xx), by operationId: the starting points of valid and mutated bodies. */
const corpus = new Map<string, unknown[]>();

function remember(operationId: string, body: unknown): void {
  const list = corpus.get(operationId) ?? [];
  if (list.length < 6) corpus.set(operationId, [...list, structuredClone(body)]);
}

/**
 * A body that satisfies the operation's schema: an accepted one with a fresh name, or a generated
 * one when one of a few tries validates (else the last try).
 */
function validBody(op: Operation): unknown {
  const b = op.body!;
  const known = corpus.get(op.operationId);
  if (known?.length && r.chance(0.6)) {
    const v = structuredClone(r.pick(known)) as Json;
    if (v && typeof v === 'object' && typeof v.name === 'string') v.name = uniq('fz');
    return v;
  }
  const validate = registry.validatorAt(b.pointer);
  let v: unknown;
  for (let i = 0; i < 6; i++) {
    v = gen(b.schema);
    if (validate(v)) return v;
  }
  return v;
}

interface Operation {
  operationId: string;
  method: string;
  path: string;
  params: Param[];
  body?: { required: boolean; types: string[]; schema: unknown; pointer: string };
  filterFields: string[];
}

function operations(): Operation[] {
  const out: Operation[] = [];
  for (const [path, itemIn] of Object.entries(doc.paths as Json)) {
    const item = itemIn as Json;
    const shared = ((item.parameters as unknown[] | undefined) ?? []).map((p) => deref<Param>(p));
    for (const method of ['get', 'put', 'post', 'delete', 'patch']) {
      const op = item[method] as Json | undefined;
      if (!op) continue;
      const own = ((op.parameters as unknown[] | undefined) ?? []).map((p) => deref<Param>(p));
      const names = new Set(own.map((p) => `${p.in}:${p.name}`));
      const rbRef = (op.requestBody as Json | undefined)?.$ref as string | undefined;
      const rb = op.requestBody ? deref(op.requestBody) : undefined;
      const content = (rb?.content ?? {}) as Record<string, { schema?: unknown }>;
      const firstType = Object.keys(content)[0] ?? '';
      const esc = (x: string) => x.replace(/~/g, '~0').replace(/\//g, '~1');
      const rbPointer = rbRef ? rbRef.replace(/^#/, '') : `/paths/${esc(path)}/${method}/requestBody`;
      out.push({
        operationId: op.operationId as string,
        method,
        path,
        params: [...shared.filter((p) => !names.has(`${p.in}:${p.name}`)), ...own],
        body: rb
          ? {
              required: Boolean(rb.required),
              types: Object.keys(content),
              schema: content[firstType]?.schema,
              pointer: `${rbPointer}/content/${esc(firstType)}/schema`,
            }
          : undefined,
        filterFields: filterFields(op),
      });
    }
  }
  return out;
}

const HOSTILE_SEGMENTS = [
  '0',
  '-1',
  'abc',
  '1.5',
  '2147483648',
  '%',
  '%zz',
  '%00',
  'a%00b',
  '%E0%A4%A',
  '%C3%28',
  '%2F',
  '%2e%2e',
  encodeURIComponent('ü'.repeat(4000)),
  encodeURIComponent('😀'.repeat(1000)),
  encodeURIComponent("' or 1=1 --"),
];

type Mode = 'valid' | 'path' | 'query' | 'body' | 'header' | 'raw';

function pickMode(): Mode {
  const roll = r.next();
  return roll < 0.45 ? 'valid' : roll < 0.57 ? 'path' : roll < 0.7 ? 'query' : roll < 0.88 ? 'body' : roll < 0.95 ? 'header' : 'raw';
}

function pathValue(p: Param, segmentBefore: string, hostile: boolean): string {
  const kind = kindOf(p.name, segmentBefore);
  if (!hostile) {
    if (kind && pools[kind]?.length && r.chance(0.85)) return encodeURIComponent(String(r.pick(pools[kind])));
    const s = deref(p.schema);
    return s.type === 'integer' ? '2147483647' : encodeURIComponent(String(gen(s, p.name)));
  }
  return r.pick(HOSTILE_SEGMENTS);
}

const FILTER_FIELDS = [
  'id',
  'name',
  'description',
  'created_at',
  'revision',
  'json_data',
  'kind',
  'nope',
  'computed.shared.x',
  'related.a.b',
];
const EVENT_FIELDS = [
  'event_id',
  'entity_type',
  'entity_id',
  'entity_name',
  'action',
  'actor_kind',
  'request_id',
  'correlation_id',
  'occurred_at',
];

/** The filter fields an operation's description names (e.g. "Filters: id, name, ..."), or common ones. */
function filterFields(op: Json): string[] {
  const text = String(op.description ?? '').replace(/\n/g, ' ');
  const at = text.search(/Filters|filters:/);
  const found =
    at < 0 ? [] : (text.slice(at, at + 500).match(/`?\b[a-z][a-z0-9_]*(\.[a-z_]+)*\b`?/g) ?? []).map((w) => w.replace(/`/g, ''));
  const fields = found.filter(
    (w) =>
      ![
        'filters',
        'field',
        'value',
        'op',
        'not_',
        'as',
        'and',
        'or',
        'the',
        'with',
        'all',
        'one',
        'each',
        'of',
        'alias',
        'e',
        'g',
      ].includes(w),
  );
  return [
    ...new Set([...fields.slice(0, 20), 'id', 'name', 'created_at', ...(String(op.operationId).includes('Events') ? EVENT_FIELDS : [])]),
  ];
}

function validFilter(field: string): [string, string] {
  if (field === 'id' || field.endsWith('_id') || field === 'revision')
    return r.pick([
      [field, '1-1000'],
      [`${field}__not_equals`, '2'],
      [`${field}__gte`, '1'],
    ]);
  if (field.endsWith('_at')) return [`${field}__${r.pick(['gte', 'lt', 'not_equals'])}`, r.pick(['2020-01-01', '2026-01-02T03:04:05Z'])];
  if (['enabled', 'validate_schema', 'active', 'expired'].includes(field)) return [field, r.pick(['true', 'false'])];
  if (field === 'json_data' || field === 'json_schema')
    return [`${field}__${r.pick(['gte', 'has_key', 'is_null', 'contains'])}`, r.pick(['n=1', 'a', 's=x'])];
  return r.pick([
    [`${field}__contains`, 'f'],
    [`${field}__not_equals`, 'x'],
    [`${field}__in`, 'a,b'],
    [field, 'fz'],
  ]);
}
const FILTER_OPS = ['', '__contains', '__not_equals', '__in', '__gt', '__between', '__regex', '__is_null', '__has_key', '__bogus'];
const FILTER_VALUES = ['a', '1', '1,2,5-9', '2026-01-02', 'true', 'a,b=c', 'x=1', '1-99999', ...HOSTILE_STRINGS.slice(0, 12)];

function queryValue(p: Param, hostile: boolean): string {
  const s = deref(p.schema);
  if (!hostile) {
    if (p.name === 'sort') return r.pick(['id', '-id', 'created_at', 'name.desc']);
    if (p.name === 'limit') return String(r.int(1, 300));
    if (/RFC 3339/.test(String((p as Param & { description?: string }).description ?? '')))
      return r.pick(['2020-01-02', '2026-01-02T03:04:05Z']);
    const v = gen(s, p.name);
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
  return String(r.pick([...HOSTILE_STRINGS.slice(0, 12), '0', '-5', '251', 'true', 'yes', '1,2', 'x'.repeat(5000)]));
}

const IF_MATCH = [
  'W/"x"',
  '"svc-v1.object.AQ.99"',
  '"svc-v1.x.AQ.1"',
  'garbage',
  Array.from({ length: 9 }, (_, i) => `"e${i}"`).join(', '),
  '""',
];

interface Built {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** The JSON value of a body built unmutated. */
  json?: unknown;
  correlationId?: string;
}

function build(op: Operation, token: string): Built {
  const mode = pickMode();
  const segs = op.path.split('/');
  const hostileParam = mode === 'path' ? r.pick(op.params.filter((p) => p.in === 'path').map((p) => p.name)) : undefined;
  const path = segs
    .map((seg, i) => {
      const m = /^\{(.+)\}$/.exec(seg);
      if (!m) return seg;
      const p = op.params.find((x) => x.in === 'path' && x.name === m[1]);
      return p ? pathValue(p, segs[i - 1] ?? '', p.name === hostileParam) : seg;
    })
    .join('/');
  const query = new URLSearchParams();
  const headers: Record<string, string> = {};
  for (const p of op.params) {
    if (p.in === 'query') {
      const s = deref(p.schema);
      if (s.type === 'object') {
        for (let i = r.int(0, 2); i > 0; i--) {
          if (mode === 'query') {
            const key = r.pick([...FILTER_FIELDS, ...op.filterFields]) + r.pick(FILTER_OPS);
            query.append(key, r.pick(FILTER_VALUES));
            if (r.chance(0.3)) query.append(key, r.pick(FILTER_VALUES));
          } else {
            const [key, value] = validFilter(r.pick(op.filterFields));
            query.append(key, value);
            if (r.chance(0.3)) query.append(key, validFilter(key.split('__')[0]!)[1]);
          }
        }
      } else if (p.required || (p.name !== 'cursor' && r.chance(0.25)) || (mode === 'query' && r.chance(0.3))) {
        const hostile = mode === 'query' && r.chance(0.5);
        query.append(p.name, queryValue(p, hostile));
        if (hostile && r.chance(0.1)) query.append(p.name, queryValue(p, false));
      }
    } else if (p.in === 'header' && p.name.toLowerCase() !== 'x-correlation-id' && (p.required || r.chance(0.5))) {
      // X-Correlation-ID (declared on every operation) is chosen below, where its echo is checked.
      const ifMatch = p.name.toLowerCase() === 'if-match';
      headers[p.name.toLowerCase()] =
        mode === 'header'
          ? ifMatch
            ? r.pick(IF_MATCH)
            : r.pick(['fz-1', 'x'.repeat(300), ' ', 'a b', '"q"', '-'])
          : ifMatch
            ? r.pick(['*', '"svc-v1.x.AQ.99"'])
            : `fz-${r.int(0, 1e6)}`;
    }
  }
  if (mode === 'query' && r.chance(0.05)) query.append('a\u0000b', '1');
  headers.authorization = `Bearer ${token}`;
  // Each logout that succeeds costs a new login (a deliberately slow password hash): fewer of them.
  if (op.path.startsWith('/api/v0/auth/logout') && r.chance(0.6)) headers.authorization = 'Bearer revoked-or-never-issued';
  if (mode === 'header' && r.chance(0.4)) {
    headers.authorization = r.pick(['Bearer', 'Bearer x', 'Basic YTpi', `Bearer ${token}x`, 'bearer  ' + token]);
  }
  let correlationId: string | undefined;
  if (r.chance(0.3)) {
    correlationId = r.pick(['fuzz-1', 'a.b:c_d-e', 'x'.repeat(128)]);
    headers['x-correlation-id'] = correlationId;
  } else if (mode === 'header' && r.chance(0.3)) {
    headers['x-correlation-id'] = r.pick(['bad id', 'x'.repeat(129), '']);
  }
  let body: Buffer | undefined;
  let json: unknown;
  if (op.body && (op.body.required || r.chance(0.8))) {
    if (mode === 'raw') {
      body = r.pick([
        Buffer.from(''),
        Buffer.from('{'),
        Buffer.from('null'),
        Buffer.from('[]'),
        Buffer.from('"\\u0000"'),
        Buffer.from('{"a":"\\ud800"}'),
        Buffer.from('{"name":"x","name":"y"}'),
        Buffer.concat([Buffer.from('{"name":"'), r.pick(BAD_UTF8), Buffer.from('"}')]),
        Buffer.from('\ufeff{}'),
        Buffer.from('['.repeat(DEEP)),
        Buffer.from(`{"s":"${'x'.repeat(1 << 20)}"}`),
      ]);
    } else {
      json = validBody(op);
      body = encodeBody(mode === 'body' ? mutate(structuredClone(json)) : json);
      if (mode === 'body') json = undefined;
    }
    headers['content-type'] =
      mode === 'header' && r.chance(0.5)
        ? r.pick(['text/plain', 'application/json; charset=utf-8', 'application/x-www-form-urlencoded', 'application/merge-patch+json', ''])
        : r.pick(op.body.types);
    if (headers['content-type'] === '') delete headers['content-type'];
  } else if (mode === 'raw') {
    body = Buffer.from('{"unexpected":true}');
    headers['content-type'] = 'application/json';
  }
  const qs = query.toString();
  return {
    url: `http://fuzz.local${path}${qs ? `?${qs}` : ''}`,
    method: op.method.toUpperCase(),
    headers,
    body: op.method === 'get' ? undefined : body,
    json,
    correlationId,
  };
}

// ---- the run -----------------------------------------------------------------------------------

let t: TestApp;
let db: OwnDatabase | undefined;
let token = '';

async function freshAdminToken(): Promise<string> {
  // The fuzz's own failed logins may have locked the test client's address: start the limiter anew.
  await closeLoginLimiter(t.deps);
  return t.login('admin', ADMIN_PASSWORD);
}

async function seed(): Promise<void> {
  const post = async (path: string, body: unknown) => {
    const res = await t.request('POST', path, { body, token });
    if (res.status !== 201) throw new Error(`seeding ${path}: ${res.status} ${res.text}`);
    remember(res.operationId, body);
    return res.body as Json;
  };
  const c1 = await post('/api/v1/collections', { name: uniq('fz') });
  const c2 = await post('/api/v1/collections', { name: uniq('fz'), parent_collection_id: c1.id });
  const k1 = await post('/api/v1/classes', {
    name: uniq('fzclass'),
    collection_id: c1.id,
    json_schema: { type: 'object', properties: { n: { type: 'integer' } } },
  });
  const k2 = await post('/api/v1/classes', { name: uniq('fzclass'), collection_id: c2.id });
  const o1 = await post(`/api/v1/classes/${String(k1.id)}/objects`, { name: uniq('fzobj'), json_data: { n: 1, s: 'x', a: [1, 2] } });
  const o2 = await post(`/api/v1/classes/${String(k2.id)}/objects`, { name: uniq('fzobj'), json_data: {} });
  const cr = await post('/api/v1/relations/classes', { from_class_id: k1.id, to_class_id: k2.id });
  const or = await post('/api/v1/relations/objects', { class_relation_id: cr.id, from_object_id: o1.id, to_object_id: o2.id });
  const g = await post('/api/v1/iam/groups', { name: uniq('fzgroup') });
  const sa = await post('/api/v1/iam/service-accounts', { name: uniq('fzsa'), owner_group_id: g.id });
  const tpl = await post('/api/v1/export-templates', { collection_id: c1.id, name: uniq('fztpl'), template: '{{ items | size }}' });
  const sink = await post('/api/v1/event-sinks', {
    name: uniq('fzsink'),
    kind: 'webhook',
    config: { headers: { 'X-Team': 'ops' }, timeout_ms: 5000 },
    delivery_policy: { min_interval_ms: 250 },
  });
  Object.assign(pools, {
    collection: [c1.id, c2.id],
    class: [k1.id, k2.id],
    object: [o1.id, o2.id],
    classRelation: [cr.id],
    objectRelation: [or.id],
    group: [g.id],
    principal: [sa.id],
    template: [tpl.id],
    sink: [sink.id],
    className: [k1.name, k2.name],
    objectName: [o1.name, o2.name],
  });
}

beforeAll(async () => {
  // A database of its own, migrated like the shared one.
  db = await createDatabase('svc_fuzz', { migrate: true });
  t = await startTestApp({ SVC_DATABASE_URL: db.url });
  token = t.adminToken;
  await seed();
}, 120_000);

afterAll(async () => {
  await t?.close();
  await db?.drop();
});

interface Finding {
  operationId: string;
  status: number;
  problem: string;
  request: string;
}

function describeRequest(b: Built): string {
  const body = b.body ? b.body.toString('utf8').slice(0, 160) : '';
  return `${b.method} ${b.url.slice(0, 200)} ${JSON.stringify(b.headers).slice(0, 200)} ${body}`;
}

describe('fuzz: every operation of openapi.yaml', () => {
  it('answers valid, invalid and hostile requests without 5xx, with declared statuses and bodies', async () => {
    const ops = operations();
    expect(ops.length).toBeGreaterThan(150);
    const findings = new Map<string, Finding>();
    let sent = 0;
    for (let round = 0; round < REQUESTS_PER_OPERATION; round++) {
      // Deletions of the fuzz remove seeded rows; fresh ones keep later requests reaching real data.
      if (round > 0 && round % 2 === 0) await seed();
      for (const op of ops) {
        const b = build(op, token);
        const res = await t.app.fetch(new Request(b.url, { method: b.method, headers: b.headers, body: b.body && new Uint8Array(b.body) }));
        const text = await res.text();
        sent++;
        const note = (problem: string) => {
          const key = `${op.operationId} ${res.status} ${problem.slice(0, 120)}`;
          if (!findings.has(key))
            findings.set(key, { operationId: op.operationId, status: res.status, problem, request: describeRequest(b) });
        };
        if (res.status >= 500) note(`5xx: ${text.slice(0, 200)}`);
        try {
          checkResponse(b.method, new URL(b.url).pathname, res.status, res.headers, text);
        } catch (err) {
          note((err as Error).message.slice(0, 600));
        }
        if (b.correlationId && res.headers.get('x-correlation-id') !== b.correlationId) note('X-Correlation-ID not echoed');
        if (res.status < 300 && b.json !== undefined) remember(op.operationId, b.json);
        // Logout operations may revoke the token the fuzz works with.
        if (op.path.startsWith('/api/v0/auth/logout') || res.status === 401) {
          const check = await t.request('GET', '/api/v0/auth/validate', { token });
          if (check.status === 401) token = await freshAdminToken();
        }
      }
    }
    expect(sent).toBe(ops.length * REQUESTS_PER_OPERATION);
    const list = [...findings.values()];
    expect(list, JSON.stringify(list.slice(0, 40), null, 1)).toEqual([]);
  }, 240_000);
});

// ---- Node's HTTP layer -------------------------------------------------------------------------

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

async function rawExchange(port: number, data: Buffer | string): Promise<RawResponse> {
  const text = await new Promise<string>((ok, fail) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(data));
    let buf = Buffer.alloc(0);
    socket.on('data', (d: Buffer) => (buf = Buffer.concat([buf, d])));
    socket.on('close', () => ok(buf.toString('utf8')));
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' && buf.length ? ok(buf.toString('utf8')) : fail(err)));
  });
  const [head = '', ...rest] = text.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') };
}

describe('fuzz: requests refused before the app (a real listening server)', () => {
  const errorSchema = new SchemaRegistry().validatorAt('/components/schemas/ErrorResponse');

  it('every refusal of the HTTP layer carries the JSON error body (414, 431, 400, 413)', async () => {
    const { port, close } = await listen(t);
    const auth = `Authorization: Bearer ${token}\r\n`;
    const tail = `Host: 127.0.0.1\r\n${auth}Connection: close\r\n\r\n`;
    const cases: [string, Buffer | string, number][] = [
      ['request line too long', `GET /api/v1/classes/by-name/${encodeURIComponent('ü'.repeat(4000))} HTTP/1.1\r\n${tail}`, 414],
      ['header fields too large', `GET /healthz HTTP/1.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n${tail}`, 431],
      ['not a request line', 'GARBAGE\r\n\r\n', 400],
      ['a bad HTTP version', 'GET / HTTP/9.9\r\n\r\n', 400],
      ['NUL in a header value', Buffer.from(`GET /healthz HTTP/1.1\r\nX-A: a\u0000b\r\n${tail}`, 'latin1'), 400],
      ['a backslash in the path', `GET /api\\v1/collections HTTP/1.1\r\n${tail}`, 400],
      [
        'a bad chunk size',
        `POST /api/v1/collections HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n${tail}zz\r\n`,
        400,
      ],
      ['1,000 emoji in a path segment', `GET /api/v1/classes/by-name/${encodeURIComponent('😀'.repeat(1000))} HTTP/1.1\r\n${tail}`, 404],
      ['malformed percent-encoding in a path segment', `GET /api/v1/classes/by-name/%zz HTTP/1.1\r\n${tail}`, 400],
      [
        'a body over the limit',
        `POST /api/v1/collections HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: ${t.deps.config.SVC_BODY_LIMIT_BYTES + 1}\r\n${tail}`,
        413,
      ],
    ];
    try {
      for (const [what, data, status] of cases) {
        const res = await rawExchange(port, data);
        expect(res.status, what).toBe(status);
        expect(res.headers['content-type'], what).toBe('application/json');
        expect(res.headers['x-request-id'], what).toBeTruthy();
        const body = JSON.parse(res.body) as unknown;
        expect(errorSchema(body), `${what}: ${res.body}`).toBe(true);
      }
    } finally {
      await close();
    }
  });
});
