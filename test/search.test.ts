import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { insertToken, type TokenScopeValue } from '../src/db/tokens.ts';
import { appendEvent } from '../src/db/events.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import { tokenCache } from '../src/services/token-cache.ts';
import { withProxiedApp } from './holding-proxy.ts';

// Fixtures: collections, groups, grants and memberships go through their endpoints; users,
// service accounts, tokens, classes, objects and relations are inserted into their tables
// (their endpoints need credential approvals or are being built).

let t: TestApp;
/** An instance on the same database with its token cache on (see search()). */
let cached: TestApp;
let P: string;
const ids = {} as Record<
  'alpha' | 'beta' | 'gamma' | 'delta' | 'server' | 'room' | 'secret' | 'srv1' | 'srv2' | 'srv3' | 'srvHidden' | 'room1' | 'room2' | 'sec1',
  number
>;
let userToken: string; // member of group G: Read* and ReadAudit on alpha (inherited by beta)
let userId: number;
let groupId: number;

async function api(method: string, path: string, body?: unknown, token?: string) {
  const res = await t.request(method, path, { body, token });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.body as Record<string, unknown>;
}

async function tokenFor(principalId: number, scope: TokenScopeValue | null = null): Promise<string> {
  const raw = newRawToken();
  await insertToken(t.deps.sql, { principalId, hash: hashToken(t.deps.tokenKey, raw), expiresAt: new Date(Date.now() + 3600_000), scope });
  return raw;
}

async function human(name: string): Promise<number> {
  const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values ('human', ${name}) returning id`;
  await t.deps.sql`insert into users (principal_id, email, proper_name) values (${p!.id}, ${name + '@example.org'}, ${'Proper ' + name})`;
  return p!.id;
}

async function serviceAccount(name: string, ownerGroupId: number): Promise<number> {
  const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values ('service_account', ${name}) returning id`;
  await t.deps.sql`insert into service_accounts (principal_id, description, owner_group_id) values (${p!.id}, 'sa', ${ownerGroupId})`;
  return p!.id;
}

async function collection(name: string, parent: number | null = null, description = ''): Promise<number> {
  const body = await api('POST', '/api/v1/collections', { name, description, ...(parent ? { parent_collection_id: parent } : {}) });
  return body.id as number;
}

async function cls(name: string, collectionId: number, schema: unknown = null, description = ''): Promise<number> {
  const [k] = await t.deps.sql<{ id: number }[]>`
    insert into classes (name, description, collection_id, json_schema, validate_schema)
    values (${name}, ${description}, ${collectionId}, ${schema === null ? null : t.deps.sql.json(schema as never)}, ${schema !== null})
    returning id`;
  return k!.id;
}

async function obj(name: string, classId: number, collectionId: number, data: unknown, description = ''): Promise<number> {
  const [o] = await t.deps.sql<{ id: number }[]>`
    insert into objects (name, description, collection_id, class_id, json_data)
    values (${name}, ${description}, ${collectionId}, ${classId}, ${t.deps.sql.json(data as never)}) returning id`;
  return o!.id;
}

async function relate(fromClass: number, toClass: number, from: number, to: number): Promise<void> {
  const [cr] = await t.deps.sql<{ id: number }[]>`
    insert into class_relations (from_class_id, to_class_id) values (${fromClass}, ${toClass})
    on conflict (from_class_id, to_class_id) do update set updated_at = class_relations.updated_at returning id`;
  await t.deps.sql`insert into object_relations (class_relation_id, from_object_id, to_object_id) values (${cr!.id}, ${from}, ${to})`;
}

interface SearchBody {
  version: number;
  results: { kind: string; resource: Record<string, unknown> }[];
  next: string | null;
  total: number | null;
}

/**
 * A structured search. With a caller's token, the same search also goes to a second instance whose
 * token cache is on (emptied first, as fixtures are made beside it), where the caller's statements
 * test its grants as values (Authority.grants) instead of reading them: it must answer the same.
 */
async function search(body: unknown, token?: string | null) {
  const res = await t.request('POST', '/api/v1/search', { body, token });
  if (token) {
    tokenCache(cached.deps).clear();
    const again = await cached.request('POST', '/api/v1/search', { body, token });
    expect(again.status, again.text).toBe(res.status);
    expect(again.text).toBe(res.text);
  }
  return res;
}

async function names(body: unknown, token?: string): Promise<string[]> {
  const res = await search(body, token);
  expect(res.status, res.text).toBe(200);
  return (res.body as SearchBody).results.map((r) => r.resource.name as string);
}

const field = (f: string, operator: string, value?: unknown, path?: string) => ({
  op: 'field',
  predicate: { field: f, operator, ...(value === undefined ? {} : { value }), ...(path ? { path } : {}) },
});
const prefixed = () => field('name', 'startswith', P);
const objectsOf = (classId: number, filter: unknown, extra: Record<string, unknown> = {}) => ({
  version: 1,
  target: { kind: 'object', class: { id: classId } },
  filter,
  ...extra,
});

beforeAll(async () => {
  t = await startTestApp();
  cached = await startTestApp({ SVC_TOKEN_CACHE_SIZE: 10000 });
  P = uniq('srch');
  ids.alpha = await collection(`${P}-alpha`, null, 'Production racks');
  ids.beta = await collection(`${P}-beta`, ids.alpha, 'child of alpha');
  ids.gamma = await collection(`${P}-gamma`, null, 'lab');
  ids.delta = await collection(`${P}-delta`, null, 'spare');
  groupId = (await api('POST', '/api/v1/iam/groups', { name: `${P}-g` })).id as number;
  await api('PUT', `/api/v1/collections/${ids.alpha}/permissions/group/${groupId}`, [
    'ReadCollection',
    'ReadClass',
    'ReadObject',
    'ReadObjectRelation',
    'ReadAudit',
  ]);
  userId = await human(`${P}-user`);
  await api('POST', `/api/v1/iam/groups/${groupId}/members/${userId}`);
  userToken = await tokenFor(userId);

  ids.server = await cls(`${P}-Server`, ids.alpha, { title: `${P}-schema-marker`, type: 'object' }, 'rack servers');
  ids.room = await cls(`${P}-Room`, ids.alpha);
  ids.secret = await cls(`${P}-Secret`, ids.gamma);
  ids.srv1 = await obj(`${P}-srv1`, ids.server, ids.alpha, {
    cpu: 4,
    ip: '10.0.0.5',
    net: '10.0.0.0/24',
    tags: ['a', 'b'],
    status: 'active',
    seen: '2026-01-02T03:04:05Z',
    nested: { x: `hello ${P}-needle` },
  });
  ids.srv2 = await obj(`${P}-srv2`, ids.server, ids.alpha, { cpu: 8, ip: '192.168.1.9', tags: ['a'], status: 'retired' }, 'production box');
  ids.srv3 = await obj(`${P}-srv3`, ids.server, ids.alpha, { cpu: 'lots', note: null });
  ids.room1 = await obj(`${P}-room1`, ids.room, ids.alpha, { status: 'retired' });
  ids.room2 = await obj(`${P}-room2`, ids.room, ids.alpha, { status: 'open' });
  ids.sec1 = await obj(`${P}-sec1`, ids.secret, ids.gamma, { status: 'retired' });
  ids.srvHidden = await obj(`${P}-srv4`, ids.server, ids.gamma, { cpu: 4 }); // a Server in a collection G cannot read
  await relate(ids.server, ids.room, ids.srv1, ids.room1);
  await relate(ids.server, ids.room, ids.srv2, ids.room2);
  await relate(ids.server, ids.server, ids.srv3, ids.srv1);
  await relate(ids.server, ids.secret, ids.srv2, ids.sec1);
  await relate(ids.server, ids.room, ids.srvHidden, ids.room2);
});

afterAll(async () => {
  await t.close();
  await cached.close();
});

describe('searchStructured: collections, sorting, paging and totals', () => {
  it('searchStructured 200: filter, sort desc, paging with X-Next-Cursor and totals', async () => {
    const body = { version: 1, target: { kind: 'collection' }, filter: prefixed(), sort: [{ field: 'name', direction: 'desc' }], limit: 2 };
    const first = await search({ ...body, include_total: true });
    expect(first.status, first.text).toBe(200);
    const b1 = first.body as SearchBody;
    expect(b1.version).toBe(1);
    expect(b1.results.map((r) => r.resource.name)).toEqual([`${P}-gamma`, `${P}-delta`]);
    expect(b1.results[0]!.kind).toBe('collection');
    expect(b1.total).toBe(4);
    expect(first.headers.get('x-total-count')).toBe('4');
    expect(first.headers.get('x-page-limit')).toBe('2');
    expect(b1.next).toBeTruthy();
    expect(first.headers.get('x-next-cursor')).toBe(b1.next);

    const second = await search({ ...body, cursor: b1.next });
    expect(second.status, second.text).toBe(200);
    const b2 = second.body as SearchBody;
    expect(b2.results.map((r) => r.resource.name)).toEqual([`${P}-beta`, `${P}-alpha`]);
    expect(b2.next).toBeNull();
    expect(b2.total).toBeNull();
    expect(second.headers.get('x-next-cursor')).toBeNull();
    expect(second.headers.get('x-total-count')).toBeNull();
  });

  it('searchStructured 200: default order is id ascending; filter null matches all visible', async () => {
    const res = await search({ version: 1, target: { kind: 'collection' }, filter: null, limit: 1000 }, userToken);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-page-limit')).toBe('250');
    expect((res.body as SearchBody).results.map((r) => r.resource.id)).toEqual([ids.alpha, ids.beta]);
  });

  it('searchStructured 400: a cursor is bound to the request and the token, and cannot be forged', async () => {
    const body = { version: 1, target: { kind: 'collection' }, filter: prefixed(), limit: 1 };
    const res = await search(body);
    const next = (res.body as SearchBody).next!;
    expect(next).toBeTruthy();
    expect((await search({ ...body, cursor: next })).status).toBe(200);
    expect((await search({ ...body, cursor: next, include_total: true })).status).toBe(200);
    expect((await search({ ...body, cursor: next, limit: 2 })).status).toBe(400);
    expect((await search({ ...body, cursor: next, sort: [{ field: 'name' }] })).status).toBe(400);
    expect((await search({ ...body, cursor: next, filter: field('name', 'startswith', `${P}-a`) })).status).toBe(400);
    expect((await search({ ...body, cursor: next, target: { kind: 'class' } })).status).toBe(400);
    const [adminRow] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
    const otherAdminToken = await tokenFor(adminRow!.id);
    const reused = await search({ ...body, cursor: next }, otherAdminToken);
    expect(reused.status).toBe(400);
    expect((reused.body as { message: string }).message).toMatch(/cursor/);
    const [payload, mac] = next.split('.');
    const forged = Buffer.from(JSON.stringify([999999])).toString('base64url');
    expect((await search({ ...body, cursor: `${forged}.${mac}` })).status).toBe(400);
    expect((await search({ ...body, cursor: `${payload}.AAAA` })).status).toBe(400);
    expect((await search({ ...body, cursor: 'garbage' })).status).toBe(400);
  });

  it('searchStructured 400: a token revision change invalidates cursors', async () => {
    const uid = await human(uniq('rev'));
    await api('POST', `/api/v1/iam/groups/${groupId}/members/${uid}`);
    const tok = await tokenFor(uid);
    const body = { version: 1, target: { kind: 'collection' }, limit: 1 };
    const next = ((await search(body, tok)).body as SearchBody).next!;
    expect((await search({ ...body, cursor: next }, tok)).status).toBe(200);
    await t.deps.sql`update tokens set revision = revision + 1 where principal_id = ${uid}`;
    expect((await search({ ...body, cursor: next }, tok)).status).toBe(400);
  });

  it('searchStructured 200: not is the exact complement within the visible universe', async () => {
    const all = await names({ version: 1, target: { kind: 'collection' }, filter: prefixed() }, userToken);
    expect(all).toEqual([`${P}-alpha`, `${P}-beta`]);
    const notAlpha = await names(
      { version: 1, target: { kind: 'collection' }, filter: { op: 'not', arg: field('name', 'equals', `${P}-alpha`) } },
      userToken,
    );
    expect(notAlpha).toEqual([`${P}-beta`]);
    // and/or and not over the admin's universe
    const mixed = await names({
      version: 1,
      target: { kind: 'collection' },
      filter: {
        op: 'and',
        args: [
          prefixed(),
          {
            op: 'or',
            args: [field('description', 'icontains', 'PRODUCTION'), { op: 'not', arg: field('name', 'iendswith', 'A') }],
          },
        ],
      },
    });
    expect(mixed).toEqual([`${P}-alpha`]);
  });

  it('searchStructured 200: timestamps, integer lists and ranges on collection fields', async () => {
    const now = new Date().toISOString();
    expect(
      await names({
        version: 1,
        target: { kind: 'collection' },
        filter: { op: 'and', args: [prefixed(), field('created_at', 'gt', now)] },
      }),
    ).toEqual([]);
    expect(
      await names({
        version: 1,
        target: { kind: 'collection' },
        filter: { op: 'and', args: [prefixed(), field('created_at', 'lte', now)] },
      }),
    ).toHaveLength(4);
    expect(await names({ version: 1, target: { kind: 'collection' }, filter: field('id', 'in', [ids.gamma, ids.beta]) })).toEqual([
      `${P}-beta`,
      `${P}-gamma`,
    ]);
    expect(await names({ version: 1, target: { kind: 'collection' }, filter: field('id', 'between', [ids.alpha, ids.beta]) })).toEqual([
      `${P}-alpha`,
      `${P}-beta`,
    ]);
    expect(
      await names({
        version: 1,
        target: { kind: 'collection' },
        filter: { op: 'and', args: [prefixed(), field('revision', 'equals', 1)] },
      }),
    ).toHaveLength(4);
  });
});

describe('searchStructured: validation', () => {
  const base = { version: 1, target: { kind: 'collection' } };
  const cases: [string, unknown][] = [
    ['unknown top-level member', { ...base, extra: 1 }],
    ['unknown target member', { version: 1, target: { kind: 'collection', x: 1 } }],
    ['unknown predicate member', { ...base, filter: { op: 'field', predicate: { field: 'name', operator: 'equals', value: 'x', y: 1 } } }],
    ['unknown sort member', { ...base, sort: [{ field: 'id', direction: 'asc', z: 1 }] }],
    ['version 2', { ...base, version: 2 }],
    ['unknown target', { version: 1, target: { kind: 'widget' } }],
    ['field of another target', { ...base, filter: field('json_data', 'has_key', 'a', 'x') }],
    ['operator not applicable', { ...base, filter: field('name', 'gt', 'a') }],
    ['operator on boolean', { version: 1, target: { kind: 'class' }, filter: field('validate_schema', 'in', [true]) }],
    ['is_null with a value', { ...base, filter: field('name', 'is_null', true) }],
    ['missing value', { ...base, filter: field('name', 'equals') }],
    ['path on a non-JSON field', { ...base, filter: field('name', 'equals', 'x', 'a.b') }],
    ['JSON field without path', { version: 1, target: { kind: 'object' }, filter: field('json_data', 'equals', 'x') }],
    ['JSON is_null without path', { version: 1, target: { kind: 'class' }, filter: field('json_schema', 'is_null') }],
    ['bad path', { version: 1, target: { kind: 'object' }, filter: field('json_data', 'equals', 'x', 'a..b') }],
    ['between with one bound', { ...base, filter: field('id', 'between', [1]) }],
    ['array for equals', { ...base, filter: field('name', 'equals', ['a', 'b']) }],
    ['comma inside an array string', { ...base, filter: field('name', 'in', ['a,b']) }],
    ['nested array', { ...base, filter: field('name', 'in', [['a']]) }],
    ['null value', { ...base, filter: field('name', 'equals', null) }],
    ['object value', { ...base, filter: field('name', 'equals', { a: 1 }) }],
    [
      'more than 50 values',
      {
        ...base,
        filter: field(
          'id',
          'in',
          Array.from({ length: 51 }, (_, i) => i + 1),
        ),
      },
    ],
    ['string for an integer', { ...base, filter: field('id', 'equals', 'abc') }],
    ['bad timestamp', { ...base, filter: field('created_at', 'gt', 'yesterday') }],
    ['number for text', { ...base, filter: field('name', 'equals', 5) }],
    ['bad network', { version: 1, target: { kind: 'object' }, filter: field('json_data', 'within_network', '10.0.0.0/99', 'ip') }],
    ['and with one argument', { ...base, filter: { op: 'and', args: [prefixed()] } }],
    ['class on a collection target', { version: 1, target: { kind: 'collection', class: { id: 1 } } }],
    ['class selector with both members', { version: 1, target: { kind: 'object', class: { id: 1, name: 'x' } } }],
    ['related on a collection target', { ...base, filter: { op: 'related', predicate: { class: { name: 'x' } } } }],
    [
      'related depth 11',
      { version: 1, target: { kind: 'object' }, filter: { op: 'related', predicate: { class: { name: 'x' }, depth: 11 } } },
    ],
    ['unknown sort field', { ...base, sort: [{ field: 'email' }] }],
    ['duplicate sort field', { ...base, sort: [{ field: 'id' }, { field: 'id', direction: 'desc' }] }],
    ['unsortable field', { version: 1, target: { kind: 'class' }, sort: [{ field: 'validate_schema' }] }],
    ['limit 0', { ...base, limit: 0 }],
    ['empty cursor', { ...base, cursor: '' }],
  ];
  it.each(cases)('searchStructured 400: %s', async (_name, body) => {
    const res = await search(body);
    expect(res.status, res.text).toBe(400);
    expect((res.body as { error: string }).error).toBe('Bad Request');
  });

  const nest = (depth: number): unknown => (depth === 1 ? prefixed() : { op: 'not', arg: nest(depth - 1) });
  it('searchStructured: nesting depth 8 is allowed, 9 is 400', async () => {
    expect((await search({ ...base, filter: nest(8) })).status).toBe(200);
    expect((await search({ ...base, filter: nest(9) })).status).toBe(400);
  });

  it('searchStructured: 32 field predicates are allowed, 33 are 400; more than 64 nodes are 400', async () => {
    const preds = (n: number) => Array.from({ length: n }, (_, i) => field('id', 'gt', -i));
    expect((await search({ ...base, filter: { op: 'and', args: preds(32) } })).status).toBe(200);
    expect((await search({ ...base, filter: { op: 'and', args: preds(33) } })).status).toBe(400);
    // 65 nodes with only 16 field predicates: or(not(not(not(field)))) ×16 = 1 + 16×4
    const deep = (i: number) => ({ op: 'not', arg: { op: 'not', arg: { op: 'not', arg: field('id', 'gt', -i) } } });
    expect((await search({ ...base, filter: { op: 'or', args: Array.from({ length: 15 }, (_, i) => deep(i)) } })).status).toBe(200);
    expect((await search({ ...base, filter: { op: 'or', args: Array.from({ length: 16 }, (_, i) => deep(i)) } })).status).toBe(400);
  });

  it('searchStructured: more than 4 related predicates are 400', async () => {
    const rel = { op: 'related', predicate: { class: { id: ids.room } } };
    const body = (n: number) => ({ version: 1, target: { kind: 'object' }, filter: { op: 'or', args: Array(n).fill(rel) } });
    expect((await search(body(4))).status).toBe(200);
    expect((await search(body(5))).status).toBe(400);
  });

  it('searchStructured 413: a body over 64 KiB', async () => {
    const res = await search({ ...base, filter: field('name', 'equals', 'x'.repeat(70_000)) });
    expect(res.status, res.text).toBe(413);
  });

  it('searchStructured 415: a content type other than application/json', async () => {
    const res = await t.request('POST', '/api/v1/search', { rawBody: JSON.stringify(base), contentType: 'text/plain' });
    expect(res.status, res.text).toBe(415);
  });

  it('searchStructured 400: malformed JSON', async () => {
    const res = await t.request('POST', '/api/v1/search', { rawBody: '{"version":', contentType: 'application/json' });
    expect(res.status).toBe(400);
  });

  it('searchStructured 400: an invalid regular expression is a 400, never a 500', async () => {
    const res = await search({ ...base, filter: field('name', 'regex', '(') });
    expect(res.status, res.text).toBe(400);
    const ok = await names({ ...base, filter: { op: 'and', args: [prefixed(), field('name', 'regex', '-(alpha|beta)$')] } });
    expect(ok).toEqual([`${P}-alpha`, `${P}-beta`]);
  });

  it('searchStructured 400: a sort value too large for a reusable cursor', async () => {
    const big = 'd'.repeat(5000);
    await collection(`${P}-big1`, null, big);
    await collection(`${P}-big2`, null, big);
    const res = await search({
      ...base,
      filter: field('name', 'startswith', `${P}-big`),
      sort: [{ field: 'description' }],
      limit: 1,
    });
    expect(res.status, res.text).toBe(400);
  });

  it('searchStructured 401 without a token', async () => {
    expect((await t.request('POST', '/api/v1/search', { body: base, token: null })).status).toBe(401);
  });
});

describe('searchStructured: classes and objects', () => {
  it('searchStructured 200: class target in expanded form; json_schema and validate_schema predicates', async () => {
    const res = await search({
      version: 1,
      target: { kind: 'class' },
      filter: {
        op: 'and',
        args: [field('json_schema', 'equals', `${P}-schema-marker`, 'title'), field('validate_schema', 'equals', true)],
      },
    });
    expect(res.status, res.text).toBe(200);
    const [r] = (res.body as SearchBody).results;
    expect(r!.kind).toBe('class');
    expect(r!.resource).toMatchObject({ id: ids.server, name: `${P}-Server`, validate_schema: true, json_schema: { type: 'object' } });
    expect((r!.resource.collection as { id: number }).id).toBe(ids.alpha);
    expect(
      await names({
        version: 1,
        target: { kind: 'class' },
        filter: { op: 'and', args: [prefixed(), field('validate_schema', 'equals', false)] },
      }),
    ).toEqual([`${P}-Room`, `${P}-Secret`]);
    expect(await names({ version: 1, target: { kind: 'class' }, filter: prefixed() }, userToken)).toEqual([`${P}-Server`, `${P}-Room`]);
  });

  it('searchStructured 200: object target with a class selector by name or id', async () => {
    const byName = await search({ version: 1, target: { kind: 'object', class: { name: `${P}-Server` } }, include_total: true });
    expect(byName.status, byName.text).toBe(200);
    const body = byName.body as SearchBody;
    expect(body.total).toBe(4);
    expect(body.results[0]!.resource).toMatchObject({
      id: ids.srv1,
      svc_class_id: ids.server,
      collection_id: ids.alpha,
      json_data: { cpu: 4 },
    });
    expect(await names(objectsOf(ids.server, null), userToken)).toEqual([`${P}-srv1`, `${P}-srv2`, `${P}-srv3`]);
  });

  it('searchStructured 404/403: unresolved or unreadable class selectors', async () => {
    expect((await search({ version: 1, target: { kind: 'object', class: { name: `${P}-Nope` } } })).status).toBe(404);
    expect((await search({ version: 1, target: { kind: 'object', class: { id: 2_000_000_000 } } })).status).toBe(404);
    expect((await search({ version: 1, target: { kind: 'object', class: { id: ids.secret } } }, userToken)).status).toBe(403);
  });

  it('searchStructured 200: JSON path operators; missing paths and unconvertible values never match', async () => {
    const q = async (filter: unknown) => names(objectsOf(ids.server, filter));
    expect(await q(field('json_data', 'equals', 4, 'cpu'))).toEqual([`${P}-srv1`, `${P}-srv4`]);
    expect(await q(field('json_data', 'gte', 5, 'cpu'))).toEqual([`${P}-srv2`]);
    expect(await q(field('json_data', 'between', [3, 8], 'cpu'))).toEqual([`${P}-srv1`, `${P}-srv2`, `${P}-srv4`]);
    expect(await q(field('json_data', 'in', ['lots', 8], 'cpu'))).toEqual([`${P}-srv2`, `${P}-srv3`]);
    expect(await q({ op: 'not', arg: field('json_data', 'gte', 5, 'cpu') })).toEqual([`${P}-srv1`, `${P}-srv3`, `${P}-srv4`]);
    expect(await q(field('json_data', 'within_network', '10.0.0.0/8', 'ip'))).toEqual([`${P}-srv1`]);
    expect(await q(field('json_data', 'contains_ip', '10.0.0.77', 'net'))).toEqual([`${P}-srv1`]);
    expect(await q(field('json_data', 'inet_equals', '192.168.1.9', 'ip'))).toEqual([`${P}-srv2`]);
    expect(await q(field('json_data', 'within_network', '10.0.0.0/8', 'cpu'))).toEqual([]);
    expect(await q(field('json_data', 'all', ['a', 'b'], 'tags'))).toEqual([`${P}-srv1`]);
    expect(await q(field('json_data', 'array_length', 1, 'tags'))).toEqual([`${P}-srv2`]);
    expect(await q(field('json_data', 'has_key', 'x', 'nested'))).toEqual([`${P}-srv1`]);
    expect(await q(field('json_data', 'icontains', 'NEEDLE', 'nested.x'))).toEqual([`${P}-srv1`]);
    expect(await q(field('json_data', 'gt', '2026-01-01', 'seen'))).toEqual([`${P}-srv1`]);
    expect(await q(field('json_data', 'is_null', undefined, 'note'))).toEqual([`${P}-srv1`, `${P}-srv2`, `${P}-srv3`, `${P}-srv4`]);
    expect(await q({ op: 'not', arg: field('json_data', 'is_null', undefined, 'status') })).toEqual([`${P}-srv1`, `${P}-srv2`]);
    expect(await q(field('json_data', 'equals', 'x', 'missing.path'))).toEqual([]);
  });

  it('searchStructured 200: JSON path segments may hold any characters but dots (hyphens, spaces); empty segments are 400', async () => {
    const col = await collection(`${P}-keys`);
    const k = await cls(`${P}-nic`, col);
    await obj(`${P}-nic1`, k, col, { 'mac-address': '00:11:22:33:44:55', 'port name': { 'link-speed': 10 } });
    await obj(`${P}-nic2`, k, col, { 'mac-address': '66:77:88:99:aa:bb' });
    const q = async (filter: unknown) => names(objectsOf(k, filter));
    expect(await q(field('json_data', 'equals', '00:11:22:33:44:55', 'mac-address'))).toEqual([`${P}-nic1`]);
    expect(await q(field('json_data', 'gte', 10, 'port name.link-speed'))).toEqual([`${P}-nic1`]);
    for (const path of ['a..b', '.a', 'a.', 'a\u0001b']) {
      const res = await t.request('POST', '/api/v1/search', {
        body: { version: 1, target: { kind: 'object', class: { id: k } }, filter: field('json_data', 'equals', 1, path) },
      });
      expect(res.status, path).toBe(400);
    }
  });

  it('searchStructured 200: object text and integer fields, sorted', async () => {
    expect(
      await names(
        objectsOf(
          ids.server,
          { op: 'or', args: [field('description', 'icontains', 'production'), field('id', 'equals', ids.srv3)] },
          {
            sort: [{ field: 'name', direction: 'desc' }],
          },
        ),
      ),
    ).toEqual([`${P}-srv3`, `${P}-srv2`]);
    expect(await names({ version: 1, target: { kind: 'object' }, filter: field('collection_id', 'equals', ids.gamma) }, userToken)).toEqual(
      [],
    );
  });
});

describe('searchStructured: scopes and IAM targets', () => {
  it('searchStructured 200: a resource-scoped token sees only its scope', async () => {
    const scoped = await tokenFor(userId, { resources: [{ kind: 'class', id: ids.room }] });
    expect(await names({ version: 1, target: { kind: 'collection' } }, scoped)).toEqual([]);
    expect(await names({ version: 1, target: { kind: 'class' }, filter: prefixed() }, scoped)).toEqual([`${P}-Room`]);
    expect(await names({ version: 1, target: { kind: 'object' }, filter: prefixed() }, scoped)).toEqual([`${P}-room1`, `${P}-room2`]);
    const permScoped = await tokenFor(userId, { permissions: ['ReadCollection'] });
    expect(await names({ version: 1, target: { kind: 'object' }, filter: prefixed() }, permScoped)).toEqual([]);
    expect(await names({ version: 1, target: { kind: 'collection' }, filter: prefixed() }, permScoped)).toEqual([
      `${P}-alpha`,
      `${P}-beta`,
    ]);
  });

  it('searchStructured 403: user target for non-admins, IAM targets for scoped tokens and service accounts', async () => {
    expect((await search({ version: 1, target: { kind: 'user' } }, userToken)).status).toBe(403);
    const [adminRow] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
    const scopedAdmin = await tokenFor(adminRow!.id, { permissions: ['ReadCollection'] });
    for (const kind of ['user', 'group', 'service_account']) {
      expect((await search({ version: 1, target: { kind } }, scopedAdmin)).status).toBe(403);
    }
    const sa = await serviceAccount(uniq('sa'), groupId);
    await api('POST', `/api/v1/iam/groups/${groupId}/members/${sa}`);
    const saToken = await tokenFor(sa);
    for (const kind of ['user', 'group', 'service_account']) {
      expect((await search({ version: 1, target: { kind } }, saToken)).status).toBe(403);
    }
    expect((await search({ version: 1, target: { kind: 'collection' }, filter: prefixed() }, saToken)).status).toBe(200);
  });

  it('searchStructured 200: user, group and service_account targets', async () => {
    const users = await search({ version: 1, target: { kind: 'user' }, filter: field('name', 'equals', `${P}-user`) });
    expect(users.status, users.text).toBe(200);
    expect((users.body as SearchBody).results).toEqual([
      {
        kind: 'user',
        resource: expect.objectContaining({ id: userId, email: `${P}-user@example.org`, proper_name: `Proper ${P}-user` }),
      },
    ]);
    const groups = await names({ version: 1, target: { kind: 'group' }, filter: field('name', 'startswith', P) }, userToken);
    expect(groups).toEqual([`${P}-g`]);
    const otherGroup = (await api('POST', '/api/v1/iam/groups', { name: `${P}-other` })).id as number;
    const mine = await serviceAccount(`${P}-sa-mine`, groupId);
    await serviceAccount(`${P}-sa-theirs`, otherGroup);
    const sas = { version: 1, target: { kind: 'service_account' }, filter: field('name', 'startswith', `${P}-sa-`) };
    expect(await names(sas, userToken)).toEqual([`${P}-sa-mine`]);
    expect(await names(sas)).toEqual([`${P}-sa-mine`, `${P}-sa-theirs`]);
    const res = await search({ ...sas, filter: { op: 'and', args: [sas.filter, field('owner_group_id', 'equals', groupId)] } });
    expect((res.body as SearchBody).results[0]).toEqual({
      kind: 'service_account',
      resource: expect.objectContaining({ id: mine, disabled_at: null }),
    });
  });
});

describe('searchStructured: audit events', () => {
  it('searchStructured 200: audit visibility, redaction of related-only events, default order newest first', async () => {
    const related = await appendEvent(
      t.deps.sql,
      { kind: 'system', principalId: null, principalName: null },
      {
        entityType: 'collection',
        entityId: ids.delta,
        entityName: `${P}-audit-related`,
        collectionId: ids.delta,
        relatedCollectionIds: [ids.beta],
        action: 'updated',
        before: { secret: 'before' },
        after: { secret: 'after' },
      },
    );
    await appendEvent(
      t.deps.sql,
      { kind: 'system', principalId: null, principalName: null },
      {
        entityType: 'event_sink',
        entityId: 1,
        entityName: `${P}-audit-global`,
        action: 'updated',
      },
    );
    const direct = await appendEvent(
      t.deps.sql,
      { kind: 'system', principalId: null, principalName: null },
      {
        entityType: 'collection',
        entityId: ids.alpha,
        entityName: `${P}-audit-direct`,
        collectionId: ids.alpha,
        action: 'updated',
        after: { name: 'x' },
      },
    );
    const body = { version: 1, target: { kind: 'audit_event' }, filter: field('entity_name', 'startswith', `${P}-audit-`) };
    const asUser = await search(body, userToken);
    expect(asUser.status, asUser.text).toBe(200);
    const results = (asUser.body as SearchBody).results;
    expect(results.map((r) => r.resource.entity_name)).toEqual([`${P}-audit-direct`, `${P}-audit-related`]);
    expect(results[0]!.resource).toMatchObject({ id: direct.id, after: { name: 'x' } });
    expect(results[1]!.resource).toMatchObject({
      id: related.id,
      before: null,
      after: null,
      metadata: { related_collection_ids: [ids.beta] },
    });
    const asAdmin = await search(body);
    const adminResults = (asAdmin.body as SearchBody).results;
    expect(adminResults.map((r) => r.resource.entity_name)).toEqual([`${P}-audit-direct`, `${P}-audit-global`, `${P}-audit-related`]);
    expect(adminResults[2]!.resource.after).toEqual({ secret: 'after' });
    const meta = await search({
      version: 1,
      target: { kind: 'audit_event' },
      filter: {
        op: 'and',
        args: [field('metadata', 'equals', ids.beta, 'related_collection_ids.0'), field('action', 'equals', 'updated')],
      },
      sort: [{ field: 'id', direction: 'asc' }],
    });
    expect((meta.body as SearchBody).results.map((r) => r.resource.id)).toContain(related.id);
    expect((await search({ ...body, sort: [{ field: 'action' }] })).status).toBe(400);
  });

  it('searchStructured 200: audit events page newest first across cursors', async () => {
    const body = { version: 1, target: { kind: 'audit_event' }, filter: field('entity_name', 'startswith', `${P}-audit-`), limit: 2 };
    const first = (await search(body)).body as SearchBody;
    const second = (await search({ ...body, cursor: first.next })).body as SearchBody;
    const all = [...first.results, ...second.results].map((r) => r.resource.id as number);
    expect(all).toHaveLength(3);
    expect([...all].sort((a, b) => b - a)).toEqual(all);
  });
});

describe('searchStructured: JSON as the database wrote it', () => {
  /** The `result` events' resources and the `done` event of a searchStructuredStream body. */
  function streamed(text: string): { results: unknown[]; done: Record<string, unknown> } {
    const events = text
      .split('\n\n')
      .filter((block) => block.trim() !== '')
      .map((block) => {
        const lines = block.split('\n');
        expect(lines).toHaveLength(2); // an event line and one data line
        return { event: lines[0]!.slice('event: '.length), data: JSON.parse(lines[1]!.slice('data: '.length)) as Record<string, unknown> };
      });
    return {
      results: events.filter((e) => e.event === 'result').map((e) => e.data),
      done: events.find((e) => e.event === 'done')!.data,
    };
  }

  it("searchStructured 200 and its stream: an object's json_data is the database's text (1.50 stays 1.50)", async () => {
    const json_data = { s: 'line 1\nline 2 "quoted" \\ back \u2028', n: 1.5, a: [1, { b: null }, 'é'], e: {} };
    const id = await obj(`${P}-jsontext`, ids.secret, ids.gamma, json_data);
    // numeric 1.50 kept as written by the database, which a value parsed in JavaScript would not
    await t.deps.sql`update objects set json_data = jsonb_set(json_data, '{n}', '1.50'::jsonb) where id = ${id}`;
    const body = objectsOf(ids.secret, field('name', 'equals', `${P}-jsontext`));
    const res = await search(body);
    expect(res.status, res.text).toBe(200);
    expect(res.text).toContain('"n": 1.50');
    const results = (res.body as SearchBody).results;
    const shown = await t.request('GET', `/api/v1/classes/${ids.secret}/${id}`);
    expect(results).toEqual([{ kind: 'object', resource: shown.body }]);
    expect(results[0]!.resource.json_data).toEqual(json_data);
    const stream = await t.request('POST', '/api/v1/search/stream', { body });
    expect(stream.status, stream.text).toBe(200);
    expect(stream.text).toContain('"n": 1.50');
    const { results: events, done } = streamed(stream.text);
    expect(events).toEqual(results);
    expect(done).toMatchObject({ next: null, total: (res.body as SearchBody).total });
  });

  it("searchStructured 200 and its stream: an audit event's JSON is the database's text, for a non-administrator too", async () => {
    const event = await appendEvent(
      t.deps.sql,
      { kind: 'system', principalId: null, principalName: null },
      {
        entityType: 'collection',
        entityId: ids.alpha,
        entityName: `${P}-jsontext-event`,
        collectionId: ids.alpha,
        action: 'updated',
        before: { list: [1, 2], name: 'w' },
        after: { list: [1, 2, 3], name: 'x' },
      },
    );
    const body = { version: 1, target: { kind: 'audit_event' }, filter: field('entity_name', 'equals', `${P}-jsontext-event`) };
    for (const token of [undefined, userToken]) {
      const res = await search(body, token);
      expect(res.status, res.text).toBe(200);
      // jsonb's own text (a space after each colon and comma), not JSON.stringify's
      expect(res.text).toContain('"before":{"list": [1, 2], "name": "w"},"after":{"list": [1, 2, 3], "name": "x"}');
      const results = (res.body as SearchBody).results;
      const listed = await t.request('GET', '/api/v1/events', { query: { entity_name: `${P}-jsontext-event` }, token });
      expect(listed.status, listed.text).toBe(200);
      expect(results).toEqual((listed.body as unknown[]).map((resource) => ({ kind: 'audit_event', resource })));
      expect(results.map((r) => r.resource.id)).toEqual([event.id]);
      const stream = await t.request('POST', '/api/v1/search/stream', { body, token });
      expect(stream.status, stream.text).toBe(200);
      expect(stream.text).toContain('"after":{"list": [1, 2, 3], "name": "x"}');
      expect(streamed(stream.text).results).toEqual(results);
    }
  });
});

describe('searchStructured: related predicates', () => {
  const related = (classId: number, filters: unknown[] = [], depth?: number) => ({
    op: 'related',
    predicate: { class: { id: classId }, filters, ...(depth ? { depth } : {}) },
  });

  it('searchStructured 200: related objects matching filters, at depth 1 and 2, both directions', async () => {
    const retired = [{ field: 'json_data', path: 'status', operator: 'equals', value: 'retired' }];
    expect(await names(objectsOf(ids.server, related(ids.room, retired)))).toEqual([`${P}-srv1`]);
    expect(await names(objectsOf(ids.server, related(ids.room, retired, 2)))).toEqual([`${P}-srv1`, `${P}-srv3`]);
    expect(await names(objectsOf(ids.server, related(ids.room)))).toEqual([`${P}-srv1`, `${P}-srv2`, `${P}-srv4`]);
    expect(await names(objectsOf(ids.room, related(ids.server, [{ field: 'name', operator: 'endswith', value: 'srv2' }])))).toEqual([
      `${P}-room2`,
    ]);
    expect(await names(objectsOf(ids.server, { op: 'not', arg: related(ids.room, retired, 2) }))).toEqual([`${P}-srv2`, `${P}-srv4`]);
    const byName = await names(objectsOf(ids.server, { op: 'related', predicate: { class: { name: `${P}-Room` }, filters: retired } }));
    expect(byName).toEqual([`${P}-srv1`]);
  });

  it('searchStructured 200: hidden objects and relations never make a related predicate true', async () => {
    // srv2 relates to sec1 (a Secret in gamma): the admin sees it, the user cannot read the class (403)
    expect(await names(objectsOf(ids.server, related(ids.secret)))).toEqual([`${P}-srv2`]);
    expect((await search(objectsOf(ids.server, related(ids.secret)), userToken)).status).toBe(403);
    // room2 relates to srv2 (visible) and srv4 (hidden in gamma): the user only reaches srv2
    const srvNamed = (n: string) => related(ids.server, [{ field: 'name', operator: 'endswith', value: n }]);
    expect(await names(objectsOf(ids.room, srvNamed('srv4')))).toEqual([`${P}-room2`]);
    expect(await names(objectsOf(ids.room, srvNamed('srv4')), userToken)).toEqual([]);
    // without ReadObjectRelation, no relation is usable
    const uid = await human(uniq('norel'));
    const g2 = (await api('POST', '/api/v1/iam/groups', { name: uniq(`${P}-g2`) })).id as number;
    await api('PUT', `/api/v1/collections/${ids.alpha}/permissions/group/${g2}`, ['ReadClass', 'ReadObject']);
    await api('POST', `/api/v1/iam/groups/${g2}/members/${uid}`);
    const tok = await tokenFor(uid);
    expect(await names(objectsOf(ids.server, null), tok)).toEqual([`${P}-srv1`, `${P}-srv2`, `${P}-srv3`]);
    expect(await names(objectsOf(ids.server, related(ids.room)), tok)).toEqual([]);
  });

  it('searchStructured 400: a related predicate beyond the work bounds asks to narrow the query', async () => {
    const many = await cls(`${P}-Many`, ids.alpha);
    await t.deps.sql`
      insert into objects (name, collection_id, class_id, json_data)
      select 'm' || g, ${ids.alpha}, ${many}, '{}'::jsonb from generate_series(1, 1001) g`;
    const res = await search(objectsOf(ids.server, related(many)));
    expect(res.status, res.text).toBe(400);
    expect((res.body as { message: string }).message).toMatch(/narrow the query/);
  });

  it('searchStructured 404: an unresolved related class', async () => {
    const res = await search(objectsOf(ids.server, { op: 'related', predicate: { class: { name: `${P}-Nope` } } }));
    expect(res.status).toBe(404);
  });

  it("the target's and the related predicates' classes are read together: all on the wire before any answer", async () => {
    await withProxiedApp(t, async ({ app, proxy, get }) => {
      expect((await get('/api/v1/iam/me')).status).toBe(200);
      // three connections open (a connection's start-up waits for answers)
      const opened = await Promise.all([
        get(`/api/v1/classes/${ids.room}`),
        get('/api/v1/collections'),
        get(`/api/v1/classes/${ids.server}`),
      ]);
      expect(opened.map((r) => r.status)).toEqual([200, 200, 200]);
      const body = {
        version: 1,
        target: { kind: 'object', class: { name: `${P}-Server` } },
        filter: {
          op: 'and',
          args: [
            { op: 'related', predicate: { class: { name: `${P}-Room` } } },
            { op: 'related', predicate: { class: { name: `${P}-Secret` } } },
          ],
        },
      };
      proxy.hold();
      const reply = app.fetch(
        new Request('http://test.local/api/v1/search', {
          method: 'POST',
          headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }),
      );
      // every answer is held: the three reads (each a new statement on its connection, its text
      // sent first) can only all be on the wire if none waited for another
      await proxy.until(['from classes k', 'from classes k', 'from classes k']);
      proxy.release();
      const res = await reply;
      expect(res.status, await res.clone().text()).toBe(200);
      expect(((await res.json()) as SearchBody).results.map((r) => r.resource.name)).toEqual([`${P}-srv2`]);
    });
  });

  it('the first selector that fails is the answer: the target, then the related predicates in order', async () => {
    const named = (name: string) => ({ op: 'related', predicate: { class: { name } } });
    const unresolved = `${P}-Nope`;
    const status = async (body: unknown, token?: string) => {
      const res = await search(body, token);
      return [res.status, (res.body as { message?: string }).message ?? null];
    };
    const both = (a: unknown, b: unknown) => ({ op: 'and', args: [a, b] });
    const target = (cls: unknown, filter: unknown) => ({ version: 1, target: { kind: 'object', class: cls }, filter });
    // an unresolved target before an unreadable related class, and the other way round
    expect(await status(target({ name: unresolved }, related(ids.secret)), userToken)).toEqual([404, 'class not found']);
    expect(await status(target({ id: ids.secret }, named(unresolved)), userToken)).toEqual([403, expect.any(String)]);
    // among the related predicates, the first in the request
    expect(await status(target({ id: ids.server }, both(related(ids.secret), named(unresolved))), userToken)).toEqual([
      403,
      expect.any(String),
    ]);
    expect(await status(target({ id: ids.server }, both(named(unresolved), related(ids.secret))), userToken)).toEqual([
      404,
      'class not found',
    ]);
  });
});
