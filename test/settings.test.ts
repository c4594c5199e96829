import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.ts';
import {
  addMember,
  adminGroupId,
  createGroup,
  createHuman,
  createServiceAccount,
  eventsOf,
  scopedTokenFor,
  tokenFor,
} from './iam-fixtures.ts';

let t: TestApp;
let adminId: number;

beforeAll(async () => {
  t = await startTestApp();
  const [a] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
  adminId = a!.id;
});
afterAll(async () => {
  await t.close();
});

const ME = '/api/v1/iam/me/settings';
const of = (id: number) => `/api/v1/iam/principals/${id}/settings`;
const MiB = 1024 * 1024;
const JSON_PATCH = 'application/json-patch+json';
const MERGE = 'application/merge-patch+json';

type Doc = { revision: number; settings: Record<string, unknown> };

/** A fresh human with its own document. */
async function person() {
  return createHuman(t);
}

function patch(token: string, body: unknown, contentType: string, path = ME, headers: Record<string, string> = {}) {
  return t.request('PATCH', path, { token, body, contentType, headers });
}

const nest = (n: number): unknown => (n === 0 ? 1 : { a: nest(n - 1) });

describe('getMySettings', () => {
  it('getMySettings 200 is {} at revision 1 with an ETag, for humans, service accounts and scoped tokens', async () => {
    const u = await person();
    const res = await t.request('GET', ME, { token: u.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ revision: 1, settings: {} });
    expect(res.headers.get('etag')).toBe(`"svc-v1.settings.${Buffer.from(String(u.id)).toString('base64url')}.1"`);
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    expect((await t.request('GET', ME, { token: await tokenFor(t, sa.id) })).status).toBe(200);
    expect((await t.request('GET', ME, { token: await scopedTokenFor(t, u.id) })).status).toBe(200);
  });

  it('getMySettings 401 without a token', async () => {
    expect((await t.request('GET', ME, { token: null })).status).toBe(401);
  });

  it('settings are not part of the user representation', async () => {
    const u = await person();
    await t.request('PUT', ME, { token: u.token, body: { theme: 'dark' } });
    const user = await t.request('GET', `/api/v1/iam/users/${u.id}`);
    expect(user.body).not.toHaveProperty('settings');
    expect(JSON.stringify(user.body)).not.toContain('dark');
  });
});

describe('replaceMySettings', () => {
  it('replaceMySettings 200 replaces the whole document, keeps nested nulls, advances the revision and records the event', async () => {
    const u = await person();
    await t.request('PUT', ME, { token: u.token, body: { old: true } });
    const doc = { theme: 'dark', layout: { columns: [1, 2], hidden: null }, n: 1.5 };
    const res = await t.request('PUT', ME, { token: u.token, body: doc });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ revision: 3, settings: doc });
    expect(res.headers.get('etag')).toMatch(/\.3"$/);
    const ev = (await eventsOf(t, 'principal', u.id)).at(-1)!;
    expect(ev).toMatchObject({
      action: 'updated',
      before: { settings: { old: true } },
      after: { settings: doc },
      before_revision: 2,
      after_revision: 3,
      actor_user_id: u.id,
    });
  });

  it('replaceMySettings 200 no-op for an equal document (any member order): no revision change, no event', async () => {
    const u = await person();
    const first = await t.request('PUT', ME, { token: u.token, body: { a: 1, b: { c: [1, 2] } } });
    const n = (await eventsOf(t, 'principal', u.id)).length;
    const again = await t.request('PUT', ME, { token: u.token, body: { b: { c: [1, 2] }, a: 1.0 } });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect((await eventsOf(t, 'principal', u.id)).length).toBe(n);
  });

  it('replaceMySettings 400 for a non-object root, over 2 MiB, or over 64 nested containers', async () => {
    const u = await person();
    for (const body of [[1, 2], 'text', 3]) {
      expect((await t.request('PUT', ME, { token: u.token, body })).status).toBe(400);
    }
    expect((await t.request('PUT', ME, { token: u.token, body: { s: 'x'.repeat(2 * MiB) } })).status).toBe(400);
    expect((await t.request('PUT', ME, { token: u.token, body: { v: nest(64) } })).status).toBe(400);
    expect((await t.request('PUT', ME, { token: u.token, body: { v: nest(63) } })).status).toBe(200);
    expect((await t.request('PUT', ME, { token: u.token, rawBody: '{"a":' })).status).toBe(400);
  });

  it('replaceMySettings 412 with a stale If-Match and the current ETag; 200 with the current one; 400 weak', async () => {
    const u = await person();
    const cur = await t.request('GET', ME, { token: u.token });
    const etag = cur.headers.get('etag')!;
    expect((await t.request('PUT', ME, { token: u.token, body: { a: 1 }, headers: { 'if-match': etag } })).status).toBe(200);
    const stale = await t.request('PUT', ME, { token: u.token, body: { a: 2 }, headers: { 'if-match': etag } });
    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ reason: 'stale_resource' });
    expect(stale.headers.get('etag')).toMatch(/\.2"$/);
    expect((await t.request('PUT', ME, { token: u.token, body: { a: 2 }, headers: { 'if-match': `W/${etag}` } })).status).toBe(400);
    expect((await t.request('PUT', ME, { token: u.token, body: { a: 2 }, headers: { 'if-match': '*' } })).status).toBe(200);
  });

  it('replaceMySettings 401 without a token', async () => {
    expect((await t.request('PUT', ME, { token: null, body: {} })).status).toBe(401);
  });
});

describe('patchMySettings with JSON Merge Patch', () => {
  it('patchMySettings 200 merges objects, removes keys on null, replaces arrays, starts from {} in non-objects', async () => {
    const u = await person();
    await t.request('PUT', ME, { token: u.token, body: { a: { b: 1, c: 2 }, list: [1, 2], s: 'x', keep: true } });
    const res = await patch(u.token, { a: { c: null, d: 3 }, list: [9], s: { nested: true }, gone: null }, MERGE);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ revision: 3, settings: { a: { b: 1, d: 3 }, list: [9], s: { nested: true }, keep: true } });
    const viaJson = await patch(u.token, { keep: null }, 'application/json');
    expect(viaJson.status).toBe(200);
    expect((viaJson.body as Doc).settings).not.toHaveProperty('keep');
    expect((await eventsOf(t, 'principal', u.id)).at(-1)).toMatchObject({ metadata: { operation: 'merge_patch' } });
  });

  it('patchMySettings 200 no-op merge: no revision change, no event', async () => {
    const u = await person();
    await t.request('PUT', ME, { token: u.token, body: { a: 1 } });
    const n = (await eventsOf(t, 'principal', u.id)).length;
    const res = await patch(u.token, { a: 1, missing: null }, MERGE);
    expect(res.body).toEqual({ revision: 2, settings: { a: 1 } });
    expect((await eventsOf(t, 'principal', u.id)).length).toBe(n);
  });

  it('patchMySettings 400 for a non-object merge patch or a result over the limits; 415 for another media type', async () => {
    const u = await person();
    expect((await patch(u.token, [1], MERGE)).status).toBe(400);
    expect((await patch(u.token, { v: nest(64) }, MERGE)).status).toBe(400);
    expect((await patch(u.token, { s: 'y'.repeat(2 * MiB) }, 'application/json')).status).toBe(400);
    const res = await t.request('PATCH', ME, { token: u.token, rawBody: 'a=1', contentType: 'text/plain' });
    expect(res.status).toBe(415);
  });
});

describe('patchMySettings with JSON Patch', () => {
  it('patchMySettings 200 applies add, remove, replace, move, copy and test in order', async () => {
    const u = await person();
    await t.request('PUT', ME, { token: u.token, body: { a: { b: [1, 2] }, n: 1 } });
    const res = await patch(
      u.token,
      [
        { op: 'test', path: '/n', value: 1.0 },
        { op: 'test', path: '/a', value: { b: [1, 2] } },
        { op: 'add', path: '/a/b/-', value: 3 },
        { op: 'replace', path: '/n', value: 'two' },
        { op: 'copy', from: '/a/b', path: '/copy' },
        { op: 'move', from: '/a', path: '/moved' },
        { op: 'remove', path: '/copy/0' },
        { op: 'add', path: '/x~1y', value: null },
      ],
      JSON_PATCH,
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ revision: 3, settings: { moved: { b: [1, 2, 3] }, n: 'two', copy: [2, 3], 'x/y': null } });
    expect((await eventsOf(t, 'principal', u.id)).at(-1)).toMatchObject({
      after_revision: 3,
      metadata: { operation: 'json_patch' },
      after: { settings: { n: 'two' } },
    });
  });

  it('patchMySettings 409 for a failed test or a missing path, rolling back every operation', async () => {
    const u = await person();
    await t.request('PUT', ME, { token: u.token, body: { a: 1 } });
    const n = (await eventsOf(t, 'principal', u.id)).length;
    for (const ops of [
      [
        { op: 'add', path: '/b', value: 2 },
        { op: 'test', path: '/a', value: 2 },
      ],
      [
        { op: 'remove', path: '/a' },
        { op: 'replace', path: '/missing', value: 1 },
      ],
      [{ op: 'add', path: '/no/such/parent', value: 1 }],
    ]) {
      const res = await patch(u.token, ops, JSON_PATCH);
      expect(res.status, JSON.stringify(ops)).toBe(409);
      expect(res.body).toMatchObject({ reason: 'operation_failed' });
    }
    expect((await t.request('GET', ME, { token: u.token })).body).toEqual({ revision: 2, settings: { a: 1 } });
    expect((await eventsOf(t, 'principal', u.id)).length).toBe(n);
  });

  it('patchMySettings 200 no-op JSON Patch (only tests): no revision change, no event', async () => {
    const u = await person();
    await t.request('PUT', ME, { token: u.token, body: { a: [1, { b: 2 }] } });
    const n = (await eventsOf(t, 'principal', u.id)).length;
    const res = await patch(u.token, [{ op: 'test', path: '/a', value: [1, { b: 2 }] }], JSON_PATCH);
    expect(res.body).toEqual({ revision: 2, settings: { a: [1, { b: 2 }] } });
    expect((await eventsOf(t, 'principal', u.id)).length).toBe(n);
  });

  it('patchMySettings 400 for a result root that is not an object and for malformed operations', async () => {
    const u = await person();
    const root = await patch(u.token, [{ op: 'replace', path: '', value: [1] }], JSON_PATCH);
    expect(root.status).toBe(400);
    expect(root.body).toMatchObject({ reason: 'invalid_result' });
    expect((await patch(u.token, [{ op: 'jump', path: '/a' }], JSON_PATCH)).status).toBe(400);
    expect((await patch(u.token, [{ op: 'add', path: '/a' }], JSON_PATCH)).status).toBe(400);
    expect((await patch(u.token, [{ op: 'copy', path: '/a' }], JSON_PATCH)).status).toBe(400);
    expect((await patch(u.token, [{ op: 'add', path: 'a', value: 1 }], JSON_PATCH)).status).toBe(400);
    expect((await patch(u.token, { op: 'add', path: '/a', value: 1 }, JSON_PATCH)).status).toBe(400);
  });

  it('patchMySettings limit: 1,000 operations pass, 1,001 are 400', async () => {
    const u = await person();
    const ops = Array.from({ length: 1000 }, (_, i) => ({ op: 'add', path: `/k${i}`, value: i }));
    const ok = await patch(u.token, ops, JSON_PATCH);
    expect(ok.status).toBe(200);
    expect(Object.keys((ok.body as Doc).settings)).toHaveLength(1000);
    const tooMany = await patch(u.token, [...ops, { op: 'remove', path: '/k0' }], JSON_PATCH);
    expect(tooMany.status).toBe(400);
  });

  it('patchMySettings limit: 128 pointer segments pass, 129 are 400 (path and from)', async () => {
    const u = await person();
    const deep = '/a'.repeat(128);
    const ok = await patch(u.token, [{ op: 'test', path: deep, value: 1 }], JSON_PATCH);
    expect(ok.status).toBe(409); // a valid pointer to a path that does not exist
    const res = await patch(u.token, [{ op: 'add', path: '/a'.repeat(129), value: 1 }], JSON_PATCH);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ reason: 'limit_exceeded' });
    const from = await patch(u.token, [{ op: 'copy', from: '/a'.repeat(129), path: '/b' }], JSON_PATCH);
    expect(from.status).toBe(400);
  });

  it('patchMySettings limit: 64 nested containers pass, 65 are 400', async () => {
    const u = await person();
    expect((await patch(u.token, [{ op: 'add', path: '/v', value: nest(63) }], JSON_PATCH)).status).toBe(200);
    const res = await patch(u.token, [{ op: 'add', path: '/w', value: nest(64) }], JSON_PATCH);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ reason: 'limit_exceeded' });
  });

  it('patchMySettings limit: a result over 2 MiB is 400 and a document near 2 MiB still patches', async () => {
    const u = await person();
    const half = 'h'.repeat(0.9 * MiB);
    expect((await t.request('PUT', ME, { token: u.token, body: { a: half } })).status).toBe(200);
    const res = await patch(
      u.token,
      [
        { op: 'copy', from: '/a', path: '/b' },
        { op: 'copy', from: '/a', path: '/c' },
      ],
      JSON_PATCH,
    );
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ reason: 'limit_exceeded' });
    expect((await patch(u.token, [{ op: 'copy', from: '/a', path: '/b' }], JSON_PATCH)).status).toBe(200);
  });

  it('patchMySettings limit: over 32 MiB of cumulative work is 400 even though the result is small', async () => {
    const u = await person();
    const big = 'w'.repeat(1.9 * MiB);
    expect((await t.request('PUT', ME, { token: u.token, body: { a: big } })).status).toBe(200);
    const ops: unknown[] = [];
    // 17 copies of 1.9 MiB (plus the document) exceed 32 MiB; 16 stay within it.
    for (let i = 0; i < 17; i++) ops.push({ op: 'copy', from: '/a', path: '/b' }, { op: 'remove', path: '/b' });
    const res = await patch(u.token, ops, JSON_PATCH);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ reason: 'limit_exceeded' });
    expect((await t.request('GET', ME, { token: u.token })).body).toMatchObject({ revision: 2 });
    expect((await patch(u.token, ops.slice(0, 30), JSON_PATCH)).status).toBe(200);
  });

  it('patchMySettings 412 for a stale If-Match', async () => {
    const u = await person();
    const res = await patch(u.token, [{ op: 'add', path: '/a', value: 1 }], JSON_PATCH, ME, { 'if-match': '"svc-v1.settings.MQ.9"' });
    expect(res.status).toBe(412);
  });

  it('concurrent patches are serialized by the principal lock: none is lost', async () => {
    const u = await person();
    await t.request('PUT', ME, { token: u.token, body: { list: [] } });
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => patch(u.token, [{ op: 'add', path: '/list/-', value: i }], JSON_PATCH)),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    const final = (await t.request('GET', ME, { token: u.token })).body as Doc;
    expect(final.revision).toBe(10);
    expect((final.settings.list as number[]).sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });
});

describe('resetMySettings', () => {
  it('resetMySettings 200 resets to {} with an event; resetting {} again is a no-op', async () => {
    const u = await person();
    await t.request('PUT', ME, { token: u.token, body: { a: 1 } });
    const res = await t.request('DELETE', ME, { token: u.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ revision: 3, settings: {} });
    expect((await eventsOf(t, 'principal', u.id)).at(-1)).toMatchObject({ before: { settings: { a: 1 } }, after: { settings: {} } });
    const n = (await eventsOf(t, 'principal', u.id)).length;
    const again = await t.request('DELETE', ME, { token: u.token });
    expect(again.body).toEqual({ revision: 3, settings: {} });
    expect((await eventsOf(t, 'principal', u.id)).length).toBe(n);
  });

  it('resetMySettings 412 for a stale If-Match, 401 without a token', async () => {
    const u = await person();
    expect((await t.request('DELETE', ME, { token: u.token, headers: { 'if-match': '"svc-v1.settings.MQ.9"' } })).status).toBe(412);
    expect((await t.request('DELETE', ME, { token: null })).status).toBe(401);
  });
});

describe('principal settings routes', () => {
  it('self access through the principal route works for every valid token', async () => {
    const u = await person();
    const scoped = await scopedTokenFor(t, u.id);
    expect((await t.request('PUT', of(u.id), { token: scoped, body: { a: 1 } })).status).toBe(200);
    expect((await t.request('GET', of(u.id), { token: scoped })).body).toEqual({ revision: 2, settings: { a: 1 } });
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await patch(saToken, { b: 2 }, MERGE, of(sa.id))).status).toBe(200);
    expect((await t.request('DELETE', of(sa.id), { token: saToken })).body).toEqual({ revision: 3, settings: {} });
  });

  it('getPrincipalSettings, replacePrincipalSettings, patchPrincipalSettings, resetPrincipalSettings 200 for an unscoped admin on another principal', async () => {
    const u = await person();
    expect((await t.request('PUT', of(u.id), { body: { by: 'admin' } })).body).toEqual({ revision: 2, settings: { by: 'admin' } });
    expect((await patch(t.adminToken, [{ op: 'add', path: '/x', value: 1 }], JSON_PATCH, of(u.id))).body).toEqual({
      revision: 3,
      settings: { by: 'admin', x: 1 },
    });
    const got = await t.request('GET', of(u.id));
    expect(got.status).toBe(200);
    expect(got.headers.get('etag')).toMatch(/\.3"$/);
    expect((await eventsOf(t, 'principal', u.id)).at(-1)).toMatchObject({ actor_user_id: adminId });
    expect((await t.request('DELETE', of(u.id))).body).toEqual({ revision: 4, settings: {} });
    expect((await t.request('GET', ME, { token: u.token })).body).toEqual({ revision: 4, settings: {} });
  });

  it('cross-principal access is 404 for a non-admin, a scoped admin token and a service account in the admin group', async () => {
    const victim = await person();
    await t.request('PUT', of(victim.id), { body: { secret: 'kept' } });
    const other = await person();
    const scopedAdmin = await scopedTokenFor(t, adminId);
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    await addMember(t, await adminGroupId(t), sa.id);
    const saToken = await tokenFor(t, sa.id);
    for (const token of [other.token, scopedAdmin, saToken]) {
      const get = await t.request('GET', of(victim.id), { token });
      expect(get.status).toBe(404);
      expect(JSON.stringify(get.body)).not.toContain('kept');
      expect((await t.request('PUT', of(victim.id), { token, body: {} })).status).toBe(404);
      expect((await patch(token, { a: 1 }, MERGE, of(victim.id))).status).toBe(404);
      expect((await t.request('DELETE', of(victim.id), { token })).status).toBe(404);
    }
    expect((await t.request('GET', of(victim.id))).body).toEqual({ revision: 2, settings: { secret: 'kept' } });
  });

  it('principal settings 404 for an unknown principal, 400 for a bad id', async () => {
    expect((await t.request('GET', of(999999))).status).toBe(404);
    expect((await t.request('PUT', of(999999), { body: {} })).status).toBe(404);
    expect((await patch(t.adminToken, { a: 1 }, MERGE, of(999999))).status).toBe(404);
    expect((await t.request('DELETE', of(999999))).status).toBe(404);
    expect((await t.request('GET', '/api/v1/iam/principals/0/settings')).status).toBe(400);
  });
});
