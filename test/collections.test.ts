import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, startTestApp, uniq, type TestApp } from './helpers.ts';
import { insertToken, type TokenScopeValue } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import { PERMISSIONS, type Permission } from '../src/domain/authz.ts';

// Identity fixtures straight in SQL, so these tests depend only on the collection endpoints.
let t: TestApp;

async function group(grants: [number, Permission[]][] = []): Promise<number> {
  const [g] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
  for (const [cid, ps] of grants) await grant(cid, g!.id, ps);
  return g!.id;
}

async function grant(cid: number, gid: number, ps: Permission[]): Promise<void> {
  await t.deps.sql`insert into collection_permissions (collection_id, group_id, permission)
    select ${cid}, ${gid}, p from unnest(${ps}::text[]) p on conflict do nothing`;
}

/** A human in the given groups, with a token (optionally scoped). */
async function user(groups: number[], scope: TokenScopeValue | null = null): Promise<{ id: number; token: string }> {
  const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values ('human', ${uniq('u')}) returning id`;
  await t.deps.sql`insert into users (principal_id) values (${p!.id})`;
  for (const g of groups) await t.deps.sql`insert into group_members (group_id, principal_id) values (${g}, ${p!.id})`;
  const raw = newRawToken();
  await insertToken(t.deps.sql, {
    principalId: p!.id,
    hash: hashToken(t.deps.tokenKey, raw),
    expiresAt: new Date(Date.now() + 3600_000),
    scope,
  });
  return { id: p!.id, token: raw };
}

async function adminScoped(scope: TokenScopeValue): Promise<string> {
  const [a] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
  const raw = newRawToken();
  await insertToken(t.deps.sql, {
    principalId: a!.id,
    hash: hashToken(t.deps.tokenKey, raw),
    expiresAt: new Date(Date.now() + 3600_000),
    scope,
  });
  return raw;
}

interface Coll {
  id: number;
  name: string;
  description: string;
  parent_collection_id: number | null;
  created_at: string;
  updated_at: string;
  revision: number;
}

async function create(body: Record<string, unknown> = {}, token?: string): Promise<Coll> {
  const res = await t.request('POST', '/api/v1/collections', { body: { name: uniq('c'), ...body }, token });
  expect(res.status, res.text).toBe(201);
  return res.body as Coll;
}

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

describe('createCollection', () => {
  it('createCollection 201 top-level by an admin, with Location, ETag and a created event', async () => {
    const name = uniq('top');
    const res = await t.request('POST', '/api/v1/collections', { body: { name, description: 'd' } });
    expect(res.status).toBe(201);
    const c = res.body as Coll;
    expect(c).toMatchObject({ name, description: 'd', parent_collection_id: null, revision: 1 });
    expect(res.headers.get('location')).toBe(`/api/v1/collections/${c.id}`);
    expect(res.headers.get('etag')).toBe(`"svc-v1.collection.${Buffer.from(String(c.id)).toString('base64url')}.1"`);
    const ev = await eventsOf(t, 'collection', c.id);
    expect(ev.map((e) => e.action)).toEqual(['created']);
    expect(ev[0]!.collection_id).toBe(c.id);
  });

  it('createCollection 201 child by a DelegateCollection holder; description defaults to empty', async () => {
    const parent = await create();
    const u = await user([await group([[parent.id, ['DelegateCollection']]])]);
    const child = await create({ parent_collection_id: parent.id }, u.token);
    expect(child.parent_collection_id).toBe(parent.id);
    expect(child.description).toBe('');
  });

  it('createCollection 201 with group_id grants every permission, one permission.granted event each', async () => {
    const g = await group();
    const c = await create({ group_id: g });
    const res = await t.request('GET', `/api/v1/collections/${c.id}/permissions/group/${g}`);
    expect(res.body).toEqual([...PERMISSIONS]);
    const granted = await t.deps
      .sql`select 1 from events where entity_type = 'permission' and action = 'granted' and collection_id = ${c.id}`;
    expect(granted.length).toBe(PERMISSIONS.length);
  });

  it('createCollection 400 for a missing or empty name and unknown members', async () => {
    for (const body of [{}, { name: '' }, { name: 'x', extra: 1 }, { name: 'x'.repeat(256) }]) {
      const res = await t.request('POST', '/api/v1/collections', { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
  });

  it('createCollection 401 without a token', async () => {
    expect((await t.request('POST', '/api/v1/collections', { token: null, body: { name: 'x' } })).status).toBe(401);
  });

  it('createCollection 403 top-level for a non-admin, a scoped admin, or a child without DelegateCollection', async () => {
    const parent = await create();
    const reader = await user([await group([[parent.id, ['ReadCollection', 'UpdateCollection']]])]);
    expect((await t.request('POST', '/api/v1/collections', { token: reader.token, body: { name: uniq() } })).status).toBe(403);
    const child = await t.request('POST', '/api/v1/collections', {
      token: reader.token,
      body: { name: uniq(), parent_collection_id: parent.id },
    });
    expect(child.status).toBe(403);
    const scoped = await adminScoped({ resources: [{ kind: 'collection', id: parent.id }] });
    expect((await t.request('POST', '/api/v1/collections', { token: scoped, body: { name: uniq() } })).status).toBe(403);
    // ... but inside its scope the scoped admin may create children
    expect(
      (await t.request('POST', '/api/v1/collections', { token: scoped, body: { name: uniq(), parent_collection_id: parent.id } })).status,
    ).toBe(201);
  });

  it('createCollection 404 for a missing parent or group', async () => {
    expect((await t.request('POST', '/api/v1/collections', { body: { name: uniq(), parent_collection_id: 2_000_000_000 } })).status).toBe(
      404,
    );
    expect((await t.request('POST', '/api/v1/collections', { body: { name: uniq(), group_id: 2_000_000_000 } })).status).toBe(404);
  });

  it('createCollection 409 for a duplicate name among siblings (top-level included), fine elsewhere', async () => {
    const name = uniq('dup');
    await create({ name });
    const again = await t.request('POST', '/api/v1/collections', { body: { name } });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: 'Conflict' });
    const parent = await create();
    await create({ name, parent_collection_id: parent.id });
    expect((await t.request('POST', '/api/v1/collections', { body: { name, parent_collection_id: parent.id } })).status).toBe(409);
  });
});

describe('getCollection', () => {
  it('getCollection 200 with ETag for a reader (also through inheritance)', async () => {
    const parent = await create();
    const child = await create({ parent_collection_id: parent.id });
    const u = await user([await group([[parent.id, ['ReadCollection']]])]);
    const res = await t.request('GET', `/api/v1/collections/${child.id}`, { token: u.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(child);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.collection\.[A-Za-z0-9_-]+\.1"$/);
  });

  it('getCollection 400 for a malformed id, 403 without ReadCollection, 404 when missing', async () => {
    const c = await create();
    expect((await t.request('GET', '/api/v1/collections/abc')).status).toBe(400);
    expect((await t.request('GET', '/api/v1/collections/0')).status).toBe(400);
    const u = await user([await group()]);
    expect((await t.request('GET', `/api/v1/collections/${c.id}`, { token: u.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/collections/2000000000')).status).toBe(404);
  });
});

describe('listCollections', () => {
  it('listCollections 200 shows only readable collections, with exact totals', async () => {
    const a = await create();
    const b = await create({ parent_collection_id: a.id });
    await create();
    const u = await user([await group([[a.id, ['ReadCollection']]])]);
    const res = await t.request('GET', '/api/v1/collections', { token: u.token });
    expect(res.status).toBe(200);
    expect((res.body as Coll[]).map((c) => c.id)).toEqual([a.id, b.id]);
    expect(res.headers.get('x-total-count')).toBe('2');
    expect(res.headers.get('x-page-limit')).toBe('100');
    expect(res.headers.get('x-next-cursor')).toBeNull();
  });

  it('listCollections 200 pages with a cursor, filters and sorts', async () => {
    const parent = await create();
    const names = ['b', 'a', 'c'].map((n) => `${n}-${uniq()}`);
    for (const name of names) await create({ name, parent_collection_id: parent.id });
    const q = { parent_collection_id: parent.id, sort: '-name', limit: 2 };
    const p1 = await t.request('GET', '/api/v1/collections', { query: q });
    expect(p1.status).toBe(200);
    expect(p1.headers.get('x-total-count')).toBe('3');
    const cursor = p1.headers.get('x-next-cursor');
    expect(cursor).toBeTruthy();
    const p2 = await t.request('GET', '/api/v1/collections', { query: { ...q, cursor: cursor! } });
    const got = [...(p1.body as Coll[]), ...(p2.body as Coll[])].map((c) => c.name);
    expect(got).toEqual([...names].sort().reverse());
    expect(p2.headers.get('x-next-cursor')).toBeNull();
    const byName = await t.request('GET', '/api/v1/collections', { query: { name: names[0]!, include_total: false } });
    expect((byName.body as Coll[]).map((c) => c.name)).toEqual([names[0]]);
    expect(byName.headers.get('x-total-count')).toBeNull();
    const top = await t.request('GET', '/api/v1/collections', { query: { parent_collection_id__is_null: true, id: parent.id } });
    expect((top.body as Coll[]).map((c) => c.id)).toEqual([parent.id]);
  });

  it('listCollections 200 with permissions= narrows to collections where the caller holds it', async () => {
    const a = await create();
    const b = await create();
    const u = await user([
      await group([
        [a.id, ['ReadCollection', 'UpdateCollection']],
        [b.id, ['ReadCollection']],
      ]),
    ]);
    const all = await t.request('GET', '/api/v1/collections', { token: u.token });
    expect((all.body as Coll[]).map((c) => c.id)).toEqual([a.id, b.id]);
    const upd = await t.request('GET', '/api/v1/collections', { token: u.token, query: { permissions: 'UpdateCollection' } });
    expect((upd.body as Coll[]).map((c) => c.id)).toEqual([a.id]);
    expect(upd.headers.get('x-total-count')).toBe('1');
  });

  it('listCollections 200 for a scoped token lists only its collection entries', async () => {
    const a = await create();
    const b = await create({ parent_collection_id: a.id });
    const g = await group([[a.id, ['ReadCollection']]]);
    const u = await user([g], { resources: [{ kind: 'collection', id: b.id }] });
    const res = await t.request('GET', '/api/v1/collections', { token: u.token });
    expect((res.body as Coll[]).map((c) => c.id)).toEqual([b.id]);
    expect(res.headers.get('x-total-count')).toBe('1');
  });

  it('listCollections 400 for an unknown filter, an unknown permission, a bad limit or a foreign cursor', async () => {
    expect((await t.request('GET', '/api/v1/collections', { query: { colour: 'red' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/collections', { query: { permissions: 'Fly' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/collections', { query: { limit: 0 } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/collections', { query: { cursor: 'garbage' } })).status).toBe(400);
  });

  it('listCollections 401 without a token', async () => {
    expect((await t.request('GET', '/api/v1/collections', { token: null })).status).toBe(401);
  });
});

describe('updateCollection', () => {
  it('updateCollection 200 changes name and description, bumps the revision and records before/after', async () => {
    const c = await create();
    const name = uniq('renamed');
    const res = await t.request('PATCH', `/api/v1/collections/${c.id}`, { body: { name, description: 'new' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: c.id, name, description: 'new', revision: 2 });
    expect(res.headers.get('etag')).toContain('.2"');
    const ev = await eventsOf(t, 'collection', c.id);
    expect(ev.map((e) => e.action)).toEqual(['created', 'updated']);
    expect(ev[1]!.before).toMatchObject({ name: c.name, revision: 1 });
    expect(ev[1]!.after).toMatchObject({ name, revision: 2 });
    // the answer and the event's snapshot are the row as stored (built before the write, not read after it)
    const stored = await t.request('GET', `/api/v1/collections/${c.id}`);
    expect(stored.body).toEqual(res.body);
    expect(ev[1]!.after).toEqual(res.body);
  });

  it('createCollection 201 answers the row as stored, and its created event holds the same', async () => {
    const parent = await create();
    const c = await create({ parent_collection_id: parent.id, description: 'd' });
    expect((await t.request('GET', `/api/v1/collections/${c.id}`)).body).toEqual(c);
    expect((await eventsOf(t, 'collection', c.id))[0]!.after).toEqual(c);
  });

  it('updateCollection 200 no-op for identical values or an empty body: no revision, no event', async () => {
    const c = await create({ description: 'same' });
    for (const body of [{}, { name: c.name, description: 'same' }]) {
      const res = await t.request('PATCH', `/api/v1/collections/${c.id}`, { body });
      expect(res.status).toBe(200);
      expect(res.body).toEqual(c);
    }
    expect((await eventsOf(t, 'collection', c.id)).map((e) => e.action)).toEqual(['created']);
  });

  it('updateCollection 412 for a stale If-Match with the current ETag; 200 with the current one; 400 for a weak one', async () => {
    const c = await create();
    const current = (await t.request('GET', `/api/v1/collections/${c.id}`)).headers.get('etag')!;
    const ok = await t.request('PATCH', `/api/v1/collections/${c.id}`, { body: { description: 'x' }, headers: { 'if-match': current } });
    expect(ok.status).toBe(200);
    const stale = await t.request('PATCH', `/api/v1/collections/${c.id}`, { body: { description: 'y' }, headers: { 'if-match': current } });
    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ reason: 'stale_resource' });
    expect(stale.headers.get('etag')).toBe(ok.headers.get('etag'));
    const weak = await t.request('PATCH', `/api/v1/collections/${c.id}`, {
      body: { description: 'y' },
      headers: { 'if-match': `W/${current}` },
    });
    expect(weak.status).toBe(400);
  });

  it('updateCollection 409 when the new name is taken by a sibling', async () => {
    const parent = await create();
    const a = await create({ parent_collection_id: parent.id });
    const b = await create({ parent_collection_id: parent.id });
    expect((await t.request('PATCH', `/api/v1/collections/${b.id}`, { body: { name: a.name } })).status).toBe(409);
  });

  it('updateCollection 403 without UpdateCollection, 404 when missing, 400 for an empty name', async () => {
    const c = await create();
    const reader = await user([await group([[c.id, ['ReadCollection']]])]);
    expect((await t.request('PATCH', `/api/v1/collections/${c.id}`, { token: reader.token, body: { name: 'x' } })).status).toBe(403);
    expect((await t.request('PATCH', '/api/v1/collections/2000000000', { body: { name: 'x' } })).status).toBe(404);
    expect((await t.request('PATCH', `/api/v1/collections/${c.id}`, { body: { name: '' } })).status).toBe(400);
  });
});

describe('deleteCollection', () => {
  it('deleteCollection 204 removes it and its grants (recorded as revoked)', async () => {
    const g = await group();
    const c = await create({ group_id: g });
    const res = await t.request('DELETE', `/api/v1/collections/${c.id}`);
    expect(res.status).toBe(204);
    expect((await t.request('GET', `/api/v1/collections/${c.id}`)).status).toBe(404);
    const left = await t.deps.sql`select 1 from collection_permissions where collection_id = ${c.id}`;
    expect(left.length).toBe(0);
    const revoked = await t.deps
      .sql`select 1 from events where entity_type = 'permission' and action = 'revoked' and collection_id = ${c.id}`;
    expect(revoked.length).toBe(PERMISSIONS.length);
    expect((await eventsOf(t, 'collection', c.id)).map((e) => e.action)).toEqual(['created', 'deleted']);
  });

  it('createCollection with group_id and deleteCollection record each grant with its row: granted with the collection, revoked with it, group by group', async () => {
    const g1 = await group();
    const c = await create({ group_id: g1 });
    const g2 = await group([[c.id, ['ReadCollection', 'ReadAudit']]]);
    const grants = async (action: string) =>
      t.deps.sql<
        { entity_id: number; entity_name: string; before: Record<string, unknown> | null; after: Record<string, unknown> | null }[]
      >`
        select entity_id, entity_name, before, after from events
        where entity_type = 'permission' and action = ${action} and collection_id = ${c.id} order by id`;
    const granted = await grants('granted');
    expect(granted.slice(0, PERMISSIONS.length).map((e) => [e.entity_id, e.entity_name])).toEqual(PERMISSIONS.map((p) => [g1, p]));
    for (const e of granted.slice(0, PERMISSIONS.length)) {
      expect(e.after).toEqual({ collection_id: c.id, group_id: g1, permission: e.entity_name, created_at: c.created_at });
    }
    const rows = await t.deps.sql<{ group_id: number; permission: string; created_at: Date }[]>`
      select group_id, permission, created_at from collection_permissions where collection_id = ${c.id}`;
    expect(rows.length).toBe(PERMISSIONS.length + 2);
    for (const r of rows.filter((r) => r.group_id === g1)) expect(r.created_at.toISOString()).toBe(c.created_at);
    expect((await t.request('DELETE', `/api/v1/collections/${c.id}`)).status).toBe(204);
    const revoked = await grants('revoked');
    expect(revoked.map((e) => [e.entity_id, e.entity_name])).toEqual([
      ...PERMISSIONS.map((p) => [g1, p]),
      [g2, 'ReadCollection'],
      [g2, 'ReadAudit'],
    ]);
    const created = new Map(rows.map((r) => [`${r.group_id}:${r.permission}`, r.created_at.toISOString()]));
    for (const e of revoked) {
      expect(e.before).toEqual({
        collection_id: c.id,
        group_id: e.entity_id,
        permission: e.entity_name,
        created_at: created.get(`${e.entity_id}:${e.entity_name}`),
      });
    }
  });

  it('deleteCollection 409 while it has a child collection, a class, a remote target or an event subscription', async () => {
    const parent = await create();
    await create({ parent_collection_id: parent.id });
    const res = await t.request('DELETE', `/api/v1/collections/${parent.id}`);
    expect(res.status).toBe(409);
    expect((res.body as { message: string }).message).toContain('child');
    const withClass = await create();
    await t.deps.sql`insert into classes (name, collection_id) values (${uniq('k')}, ${withClass.id})`;
    const res2 = await t.request('DELETE', `/api/v1/collections/${withClass.id}`);
    expect(res2.status).toBe(409);
    expect((res2.body as { message: string }).message).toContain('class');
    const withTarget = await create();
    await t.deps.sql`insert into remote_targets (collection_id, name, method, url_template, allowed_subject_types)
      values (${withTarget.id}, 'rt', 'get', 'https://example.test/', '{collection}')`;
    const res3 = await t.request('DELETE', `/api/v1/collections/${withTarget.id}`);
    expect(res3.status).toBe(409);
    expect((res3.body as { message: string }).message).toContain('remote target');
    const withSubscription = await create();
    const [sink] = await t.deps.sql<{ id: number }[]>`
      insert into event_sinks (name, kind, config) values (${uniq('sink')}, 'webhook', '{}'::jsonb) returning id`;
    await t.deps.sql`insert into event_subscriptions (collection_id, sink_id, name, entity_types, actions)
      values (${withSubscription.id}, ${sink!.id}, ${uniq('sub')}, '{object}', '{created}')`;
    const res4 = await t.request('DELETE', `/api/v1/collections/${withSubscription.id}`);
    expect(res4.status).toBe(409);
    expect((res4.body as { message: string }).message).toContain('1 event subscription(s)');
  });

  it('deleteCollection 403 without DeleteCollection, 404 when missing, 412 for a stale If-Match', async () => {
    const c = await create();
    const u = await user([await group([[c.id, ['ReadCollection', 'UpdateCollection']]])]);
    expect((await t.request('DELETE', `/api/v1/collections/${c.id}`, { token: u.token })).status).toBe(403);
    expect((await t.request('DELETE', '/api/v1/collections/2000000000')).status).toBe(404);
    const stale = `"svc-v1.collection.${Buffer.from(String(c.id)).toString('base64url')}.7"`;
    const res = await t.request('DELETE', `/api/v1/collections/${c.id}`, { headers: { 'if-match': stale } });
    expect(res.status).toBe(412);
    expect((await t.request('GET', `/api/v1/collections/${c.id}`)).status).toBe(200);
  });
});

describe('updateCollectionParent', () => {
  it('updateCollectionParent 200 moves; inherited grants follow the new ancestry', async () => {
    const from = await create();
    const to = await create();
    const c = await create({ parent_collection_id: from.id });
    const toReader = await user([await group([[to.id, ['ReadCollection']]])]);
    expect((await t.request('GET', `/api/v1/collections/${c.id}`, { token: toReader.token })).status).toBe(403);
    const res = await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { body: { parent_collection_id: to.id } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: c.id, parent_collection_id: to.id, revision: 2 });
    expect((await t.request('GET', `/api/v1/collections/${c.id}`, { token: toReader.token })).status).toBe(200);
    const ev = await eventsOf(t, 'collection', c.id);
    expect(ev.map((e) => e.action)).toEqual(['created', 'updated']);
    expect(ev[1]!.after).toMatchObject({ parent_collection_id: to.id });
  });

  it('updateCollectionParent 200 to the current parent is a no-op', async () => {
    const p = await create();
    const c = await create({ parent_collection_id: p.id });
    const res = await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { body: { parent_collection_id: p.id } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(c);
    expect((await eventsOf(t, 'collection', c.id)).length).toBe(1);
  });

  it('updateCollectionParent 200 to and from the top level for an admin', async () => {
    const p = await create();
    const c = await create({ parent_collection_id: p.id });
    const up = await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { body: { parent_collection_id: null } });
    expect(up.status).toBe(200);
    expect((up.body as Coll).parent_collection_id).toBeNull();
    const down = await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { body: { parent_collection_id: p.id } });
    expect((down.body as Coll).parent_collection_id).toBe(p.id);
  });

  it('updateCollectionParent 400 below itself or a descendant', async () => {
    const a = await create();
    const b = await create({ parent_collection_id: a.id });
    const c = await create({ parent_collection_id: b.id });
    for (const target of [a.id, c.id]) {
      const res = await t.request('PUT', `/api/v1/collections/${a.id}/parent`, { body: { parent_collection_id: target } });
      expect(res.status, String(target)).toBe(400);
    }
    expect((await t.request('PUT', `/api/v1/collections/${a.id}/parent`, { body: {} })).status).toBe(400);
  });

  it('updateCollectionParent 403 without DelegateCollection on both parents or UpdateCollection here', async () => {
    const from = await create();
    const to = await create();
    const c = await create({ parent_collection_id: from.id });
    const onlyFrom = await user([await group([[from.id, ['UpdateCollection', 'DelegateCollection']]])]);
    const body = { parent_collection_id: to.id };
    expect((await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { token: onlyFrom.token, body })).status).toBe(403);
    const both = await user([
      await group([
        [from.id, ['DelegateCollection']],
        [to.id, ['DelegateCollection']],
      ]),
    ]);
    expect((await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { token: both.token, body })).status).toBe(403);
    const full = await user([
      await group([
        [from.id, ['UpdateCollection', 'DelegateCollection']],
        [to.id, ['DelegateCollection']],
      ]),
    ]);
    expect((await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { token: full.token, body })).status).toBe(200);
    // moving to the top level needs an administrator
    const res = await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { token: full.token, body: { parent_collection_id: null } });
    expect(res.status).toBe(403);
  });

  it('updateCollectionParent 404 for a missing collection or new parent, 409 for a name taken there, 412 when stale', async () => {
    const to = await create();
    const c = await create({ parent_collection_id: (await create()).id });
    expect((await t.request('PUT', '/api/v1/collections/2000000000/parent', { body: { parent_collection_id: to.id } })).status).toBe(404);
    expect((await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { body: { parent_collection_id: 2_000_000_000 } })).status).toBe(
      404,
    );
    await create({ name: c.name, parent_collection_id: to.id });
    expect((await t.request('PUT', `/api/v1/collections/${c.id}/parent`, { body: { parent_collection_id: to.id } })).status).toBe(409);
    const stale = `"svc-v1.collection.${Buffer.from(String(c.id)).toString('base64url')}.9"`;
    const res = await t.request('PUT', `/api/v1/collections/${c.id}/parent`, {
      body: { parent_collection_id: null },
      headers: { 'if-match': stale },
    });
    expect(res.status).toBe(412);
  });
});

describe('listCollectionChildren and listCollectionAncestors', () => {
  it('listCollectionChildren 200 lists direct children only, filtered by visibility', async () => {
    const p = await create();
    const a = await create({ parent_collection_id: p.id });
    const b = await create({ parent_collection_id: p.id });
    await create({ parent_collection_id: a.id });
    const res = await t.request('GET', `/api/v1/collections/${p.id}/children`);
    expect(res.status).toBe(200);
    expect((res.body as Coll[]).map((c) => c.id)).toEqual([a.id, b.id]);
    expect(res.headers.get('x-total-count')).toBe('2');
    const scoped = await adminScoped({
      resources: [
        { kind: 'collection', id: p.id },
        { kind: 'collection', id: b.id },
      ],
    });
    const only = await t.request('GET', `/api/v1/collections/${p.id}/children`, { token: scoped });
    expect((only.body as Coll[]).map((c) => c.id)).toEqual([b.id]);
  });

  it('listCollectionChildren 403 without ReadCollection, 404 when missing', async () => {
    const p = await create();
    const u = await user([await group()]);
    expect((await t.request('GET', `/api/v1/collections/${p.id}/children`, { token: u.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/collections/2000000000/children')).status).toBe(404);
    // the check answers before a bad query's 400, though both go out together
    const bad = { sort: 'no_such_field' };
    expect((await t.request('GET', `/api/v1/collections/${p.id}/children`, { token: u.token, query: bad })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/collections/2000000000/children', { token: u.token, query: bad })).status).toBe(404);
    expect((await t.request('GET', '/api/v1/collections/2000000000/children', { query: bad })).status).toBe(404);
    expect((await t.request('GET', `/api/v1/collections/${p.id}/children`, { query: bad })).status).toBe(400);
  });

  it('listCollectionAncestors 200 nearest first, paged, omitting unreadable ancestors', async () => {
    const a = await create();
    const b = await create({ parent_collection_id: a.id });
    const c = await create({ parent_collection_id: b.id });
    const d = await create({ parent_collection_id: c.id });
    const res = await t.request('GET', `/api/v1/collections/${d.id}/ancestors`);
    expect(res.status).toBe(200);
    expect((res.body as Coll[]).map((x) => x.id)).toEqual([c.id, b.id, a.id]);
    const p1 = await t.request('GET', `/api/v1/collections/${d.id}/ancestors`, { query: { limit: 2 } });
    expect((p1.body as Coll[]).map((x) => x.id)).toEqual([c.id, b.id]);
    expect(p1.headers.get('x-total-count')).toBe('3');
    const p2 = await t.request('GET', `/api/v1/collections/${d.id}/ancestors`, {
      query: { limit: 2, cursor: p1.headers.get('x-next-cursor')! },
    });
    expect((p2.body as Coll[]).map((x) => x.id)).toEqual([a.id]);
    const midReader = await user([await group([[b.id, ['ReadCollection']]])]);
    const partial = await t.request('GET', `/api/v1/collections/${d.id}/ancestors`, { token: midReader.token });
    expect((partial.body as Coll[]).map((x) => x.id)).toEqual([c.id, b.id]);
    expect((await t.request('GET', `/api/v1/collections/${a.id}/ancestors`)).body).toEqual([]);
  });

  it('listCollectionAncestors 403 without ReadCollection, 404 when missing', async () => {
    const a = await create();
    const u = await user([await group()]);
    expect((await t.request('GET', `/api/v1/collections/${a.id}/ancestors`, { token: u.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/collections/2000000000/ancestors')).status).toBe(404);
  });
});
