import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, createClass, createObject, eventsOf, principalWith, type Obj } from './class-fixtures.ts';
import { tokenFor } from './iam-fixtures.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

interface Field {
  id: number;
  key: string;
  revision: number;
  visibility: string;
  owner_user_id: number | null;
}

const ids = (r: { body: unknown }) => (r.body as { id: number }[]).map((x) => x.id);

async function shared(
  classId: number,
  key: string,
  type: string,
  paths: string[],
  resultType: string,
  extra: Record<string, unknown> = {},
) {
  const res = await t.request('POST', `/api/v1/classes/${classId}/computed-fields`, {
    body: { key, operation: { type, paths }, result_type: resultType, ...extra },
  });
  expect(res.status, res.text).toBe(201);
  return res.body as Field;
}

describe('shared computed fields', () => {
  it('createClassComputedField 201 with defaults, Location, ETag and a created event', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const res = await t.request('POST', `/api/v1/classes/${cls.id}/computed-fields`, {
      body: { key: 'total', operation: { type: 'sum', paths: ['/a', '/b/0'] }, result_type: 'number' },
    });
    expect(res.status, res.text).toBe(201);
    const f = res.body as Field;
    expect(f).toMatchObject({
      class_id: cls.id,
      key: 'total',
      label: 'total',
      description: '',
      enabled: true,
      visibility: 'shared',
      owner_user_id: null,
      operation: { type: 'sum', paths: ['/a', '/b/0'] },
      revision: 1,
    });
    expect(res.headers.get('location')).toBe(`/api/v1/classes/${cls.id}/computed-fields/${f.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.computed_field\./);
    expect((await eventsOf(t, 'computed_field', f.id)).map((e) => [e.action, e.collection_id])).toEqual([['created', cid]]);
  });

  it('createClassComputedField 400 for bad pointers, impossible result types, a mismatched class_id and bad keys', async () => {
    const cls = await createClass(t, await collection(t));
    const bodies = [
      { key: 'a', operation: { type: 'sum', paths: ['a'] }, result_type: 'number' },
      { key: 'a', operation: { type: 'sum', paths: ['/a'] }, result_type: 'string' },
      { key: 'a', operation: { type: 'all_present', paths: ['/a'] }, result_type: 'integer' },
      { key: 'a', operation: { type: 'sum', paths: [] }, result_type: 'number' },
      { key: 'Bad', operation: { type: 'sum', paths: ['/a'] }, result_type: 'number' },
      { key: 'a', operation: { type: 'median', paths: ['/a'] }, result_type: 'number' },
      { key: 'a', class_id: cls.id + 1, operation: { type: 'sum', paths: ['/a'] }, result_type: 'number' },
    ];
    for (const body of bodies) {
      const res = await t.request('POST', `/api/v1/classes/${cls.id}/computed-fields`, { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
  });

  it('createClassComputedField 409 for a duplicate key and a 33rd field; 403 without UpdateCollection; 404 missing class', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    await shared(cls.id, 'k0', 'first_non_null', ['/a'], 'string');
    const dup = await t.request('POST', `/api/v1/classes/${cls.id}/computed-fields`, {
      body: { key: 'k0', operation: { type: 'any_present', paths: ['/a'] }, result_type: 'boolean' },
    });
    expect(dup.status).toBe(409);
    for (let i = 1; i < 32; i++) await shared(cls.id, `k${i}`, 'any_present', ['/a'], 'boolean');
    const over = await t.request('POST', `/api/v1/classes/${cls.id}/computed-fields`, {
      body: { key: 'k32', operation: { type: 'any_present', paths: ['/a'] }, result_type: 'boolean' },
    });
    expect(over.status).toBe(409);
    const user = await principalWith(t, [[cid, ['ReadClass', 'UpdateClass']]]);
    const denied = await t.request('POST', `/api/v1/classes/${cls.id}/computed-fields`, {
      token: user.token,
      body: { key: 'x', operation: { type: 'any_present', paths: ['/a'] }, result_type: 'boolean' },
    });
    expect(denied.status).toBe(403);
    const missing = await t.request('POST', '/api/v1/classes/2000000000/computed-fields', {
      body: { key: 'x', operation: { type: 'any_present', paths: ['/a'] }, result_type: 'boolean' },
    });
    expect(missing.status).toBe(404);
  });

  it('listClassComputedFields and getClassComputedField 200 with ReadClass; 403 without; 404 for a field of another class', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const other = await createClass(t, cid);
    const a = await shared(cls.id, 'a', 'count_present', ['/a'], 'integer');
    const b = await shared(cls.id, 'b', 'any_present', ['/a'], 'boolean', { enabled: false });
    const reader = await principalWith(t, [[cid, ['ReadClass']]]);
    const list = await t.request('GET', `/api/v1/classes/${cls.id}/computed-fields`, { token: reader.token });
    expect(list.status).toBe(200);
    expect(ids(list)).toEqual([a.id, b.id]);
    expect(list.headers.get('x-total-count')).toBe('2');
    expect(ids(await t.request('GET', `/api/v1/classes/${cls.id}/computed-fields`, { query: { enabled: 'false' } }))).toEqual([b.id]);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/computed-fields`, { query: { nope: 'x' } })).status).toBe(400);
    const get = await t.request('GET', `/api/v1/classes/${cls.id}/computed-fields/${a.id}`, { token: reader.token });
    expect(get.status).toBe(200);
    expect(get.body).toMatchObject({ id: a.id, key: 'a' });
    expect((await t.request('GET', `/api/v1/classes/${other.id}/computed-fields/${a.id}`)).status).toBe(404);
    const stranger = await principalWith(t, [[await collection(t), ['ReadClass']]]);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/computed-fields`, { token: stranger.token })).status).toBe(403);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/computed-fields/${a.id}`, { token: stranger.token })).status).toBe(403);
  });

  it('updateClassComputedField 200, no-op, 412 stale, 400 invalid, 403 without UpdateCollection, 404 wrong class', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const f = await shared(cls.id, 'x', 'first_non_null', ['/a'], 'string');
    const res = await t.request('PATCH', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`, { body: { label: 'X', enabled: false } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ label: 'X', enabled: false, revision: 2 });
    const same = await t.request('PATCH', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`, {
      body: { label: 'X', operation: { type: 'first_non_null', paths: ['/a'] } },
    });
    expect((same.body as Field).revision).toBe(2);
    expect((await eventsOf(t, 'computed_field', f.id)).map((e) => e.action)).toEqual(['created', 'updated']);
    const stale = await t.request('PATCH', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`, {
      headers: { 'if-match': '"svc-v1.computed_field.AA.1"' },
      body: { label: 'Y' },
    });
    expect(stale.status).toBe(412);
    expect(
      (
        await t.request('PATCH', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`, {
          body: { result_type: 'boolean', operation: { type: 'sum', paths: ['/a'] } },
        })
      ).status,
    ).toBe(400);
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`, { body: { key: 'y' } })).status).toBe(400);
    const user = await principalWith(t, [[cid, ['ReadClass', 'UpdateClass']]]);
    expect(
      (await t.request('PATCH', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`, { token: user.token, body: { label: 'Z' } })).status,
    ).toBe(403);
    const other = await createClass(t, cid);
    expect((await t.request('PATCH', `/api/v1/classes/${other.id}/computed-fields/${f.id}`, { body: { label: 'Z' } })).status).toBe(404);
  });

  it('deleteClassComputedField 204 with an event; 404 afterwards; 403 without UpdateCollection', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const f = await shared(cls.id, 'x', 'any_present', ['/a'], 'boolean');
    const user = await principalWith(t, [[cid, ['ReadClass']]]);
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`, { token: user.token })).status).toBe(403);
    expect(
      (await t.request('DELETE', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`, { headers: { 'if-match': '"x"' } })).status,
    ).toBe(412);
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`)).status).toBe(204);
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/computed-fields/${f.id}`)).status).toBe(404);
    expect((await eventsOf(t, 'computed_field', f.id)).map((e) => e.action)).toEqual(['created', 'deleted']);
  });
});

describe('personal computed fields', () => {
  it('each audit snapshot is the field as the write answered it (created, updated, deleted), shared and personal', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const me = await principalWith(t, [[cid, ['ReadClass', 'UpdateCollection']]]);
    for (const base of [`/api/v1/classes/${cls.id}/computed-fields`, '/api/v1/iam/me/computed-fields']) {
      const created = await t.request('POST', base, {
        token: me.token,
        body: { class_id: cls.id, key: 'snap', operation: { type: 'sum', paths: ['/a', '/b'] }, result_type: 'number' },
      });
      expect(created.status, created.text).toBe(201);
      const id = (created.body as Field).id;
      const updated = await t.request('PATCH', `${base}/${id}`, {
        token: me.token,
        body: { label: 'L', operation: { type: 'max', paths: ['/c'] } },
      });
      expect(updated.status, updated.text).toBe(200);
      expect((await t.request('GET', `${base}/${id}`, { token: me.token })).body).toEqual(updated.body);
      expect((await t.request('DELETE', `${base}/${id}`, { token: me.token })).status).toBe(204);
      const evs = await eventsOf(t, 'computed_field', id);
      expect(evs.map((e) => [e.action, e.collection_id, e.before ?? null, e.after ?? null])).toEqual([
        ['created', cid, null, created.body],
        ['updated', cid, created.body, updated.body],
        ['deleted', cid, updated.body, null],
      ]);
    }
  });

  it('a shared field change needs the collection in a scoped token: the class alone is not enough (403)', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const me = await principalWith(t, [[cid, ['ReadClass', 'UpdateCollection']]]);
    const base = `/api/v1/classes/${cls.id}/computed-fields`;
    const body = { key: 'scoped', operation: { type: 'sum', paths: ['/a'] }, result_type: 'number' };
    const classOnly = await tokenFor(t, me.id, { resources: [{ kind: 'class', id: cls.id }] });
    expect((await t.request('POST', base, { token: classOnly, body })).status).toBe(403);
    const collectionToo = await tokenFor(t, me.id, { resources: [{ kind: 'collection', id: cid }] });
    const made = await t.request('POST', base, { token: collectionToo, body });
    expect(made.status, made.text).toBe(201);
    const path = `${base}/${(made.body as Field).id}`;
    expect((await t.request('PATCH', path, { token: classOnly, body: { label: 'x' } })).status).toBe(403);
    expect((await t.request('DELETE', path, { token: classOnly })).status).toBe(403);
    expect((await t.request('DELETE', path, { token: collectionToo })).status).toBe(204);
  });

  it('createMyComputedField 201 for a human with ReadClass; list, get, update, delete are owner-only', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const me = await principalWith(t, [[cid, ['ReadClass']]]);
    const other = await principalWith(t, [[cid, ['ReadClass']]]);
    const res = await t.request('POST', '/api/v1/iam/me/computed-fields', {
      token: me.token,
      body: { class_id: cls.id, key: 'mine', operation: { type: 'max', paths: ['/a', '/b'] }, result_type: 'number' },
    });
    expect(res.status, res.text).toBe(201);
    const f = res.body as Field;
    expect(f).toMatchObject({ visibility: 'personal', owner_user_id: me.id, class_id: cls.id });
    expect(res.headers.get('location')).toBe(`/api/v1/iam/me/computed-fields/${f.id}`);
    const list = await t.request('GET', '/api/v1/iam/me/computed-fields', { token: me.token, query: { class_id: cls.id } });
    expect(ids(list)).toEqual([f.id]);
    expect(ids(await t.request('GET', '/api/v1/iam/me/computed-fields', { token: other.token, query: { class_id: cls.id } }))).toEqual([]);
    expect((await t.request('GET', `/api/v1/iam/me/computed-fields/${f.id}`, { token: me.token })).status).toBe(200);
    expect((await t.request('GET', `/api/v1/iam/me/computed-fields/${f.id}`, { token: other.token })).status).toBe(404);
    const upd = await t.request('PATCH', `/api/v1/iam/me/computed-fields/${f.id}`, { token: me.token, body: { description: 'd' } });
    expect(upd.body).toMatchObject({ description: 'd', revision: 2 });
    expect(
      (await t.request('PATCH', `/api/v1/iam/me/computed-fields/${f.id}`, { token: other.token, body: { description: 'x' } })).status,
    ).toBe(404);
    expect(
      (
        await t.request('PATCH', `/api/v1/iam/me/computed-fields/${f.id}`, {
          token: me.token,
          headers: { 'if-match': '"x"' },
          body: { description: 'x' },
        })
      ).status,
    ).toBe(412);
    expect((await t.request('DELETE', `/api/v1/iam/me/computed-fields/${f.id}`, { token: other.token })).status).toBe(404);
    expect((await t.request('DELETE', `/api/v1/iam/me/computed-fields/${f.id}`, { token: me.token })).status).toBe(204);
    expect((await t.request('GET', `/api/v1/iam/me/computed-fields/${f.id}`, { token: me.token })).status).toBe(404);
  });

  it('createMyComputedField 400 without class_id, 404 missing class, 403 without ReadClass, 409 duplicate key and a 17th field', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const me = await principalWith(t, [[cid, ['ReadClass']]]);
    const body = (key: string, classId: number | undefined = cls.id) => ({
      class_id: classId,
      key,
      operation: { type: 'any_present', paths: ['/a'] },
      result_type: 'boolean',
    });
    const post = (b: unknown, token = me.token) => t.request('POST', '/api/v1/iam/me/computed-fields', { token, body: b });
    expect((await post({ key: 'a', operation: { type: 'any_present', paths: ['/a'] }, result_type: 'boolean' })).status).toBe(400);
    expect((await post(body('a', 2_000_000_000))).status).toBe(404);
    const stranger = await principalWith(t, [[await collection(t), ['ReadClass']]]);
    expect((await post(body('a'), stranger.token)).status).toBe(403);
    for (let i = 0; i < 16; i++) expect((await post(body(`p${i}`))).status).toBe(201);
    expect((await post(body('p0'))).status).toBe(409);
    expect((await post(body('p16'))).status).toBe(409);
  });

  it('personal computed-field operations 403 for service accounts', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const sa = await principalWith(t, [[cid, ['ReadClass']]], { kind: 'service_account' });
    expect((await t.request('GET', '/api/v1/iam/me/computed-fields', { token: sa.token })).status).toBe(403);
    const res = await t.request('POST', '/api/v1/iam/me/computed-fields', {
      token: sa.token,
      body: { class_id: cls.id, key: 'a', operation: { type: 'any_present', paths: ['/a'] }, result_type: 'boolean' },
    });
    expect(res.status).toBe(403);
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const r = await t.request(method, '/api/v1/iam/me/computed-fields/1', { token: sa.token, body: method === 'PATCH' ? {} : undefined });
      expect(r.status, method).toBe(403);
    }
  });
});

describe('computed values on objects', () => {
  async function setup() {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    await shared(cls.id, 'total', 'sum', ['/cpu', '/extra'], 'number');
    await shared(cls.id, 'first', 'first_non_null', ['/nick', '/name'], 'string');
    await shared(cls.id, 'count', 'count_present', ['/cpu', '/extra', '/name'], 'integer');
    await shared(cls.id, 'same', 'all_present_and_equal', ['/cpu', '/extra'], 'boolean');
    await shared(cls.id, 'off', 'any_present', ['/cpu'], 'boolean', { enabled: false });
    const a = await createObject(t, cls.id, { cpu: 2, extra: 2, name: 'alpha' });
    const b = await createObject(t, cls.id, { cpu: 10.5, nick: 'bee' });
    const c = await createObject(t, cls.id, { cpu: 'lots', name: 'gamma' });
    const d = await createObject(t, cls.id, {});
    return { cid, cls, a, b, c, d };
  }

  it('include=computed evaluates every enabled field, with per-object errors', async () => {
    const { cls, a, c } = await setup();
    const res = await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query: { include: 'computed' } });
    expect(res.status, res.text).toBe(200);
    const rows = res.body as (Obj & { computed: { shared: { values: Record<string, unknown>; errors: Record<string, string> } } })[];
    const ra = rows.find((r) => r.id === a.id)!;
    expect(ra.computed.shared).toEqual({ values: { total: 4, first: 'alpha', count: 3, same: true }, errors: {} });
    const rc = rows.find((r) => r.id === c.id)!;
    expect(rc.computed.shared.values).toMatchObject({ total: null, first: 'gamma', count: 2, same: false });
    expect(rc.computed.shared.errors.total).toMatch(/not a number/);
    const one = await t.request('GET', `/api/v1/classes/${cls.id}/${a.id}`, { query: { include: 'computed' } });
    expect((one.body as typeof ra).computed.shared.values.total).toBe(4);
  });

  it('listObjects filters and sorts on computed values; failed values never match; disabled fields are 400', async () => {
    const { cls, a, b, c, d } = await setup();
    const q = (query: Record<string, string>) => t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query });
    expect(ids(await q({ 'computed.shared.total__gt': '3' }))).toEqual([a.id, b.id]);
    expect(ids(await q({ 'computed.shared.total': '10.5' }))).toEqual([b.id]);
    expect(ids(await q({ 'computed.shared.first__startswith': 'g' }))).toEqual([c.id]);
    expect(ids(await q({ 'computed.shared.same': 'true' }))).toEqual([a.id]);
    expect(ids(await q({ 'computed.shared.total__is_null': 'true' }))).toEqual([d.id]);
    expect(ids(await q({ 'computed.shared.total__not_gt': '3' }))).toEqual([d.id]);
    expect(ids(await q({ sort: '-computed.shared.total' }))).toEqual([d.id, c.id, b.id, a.id]);
    expect(ids(await q({ sort: 'computed.shared.count,-id' }))).toEqual([d.id, b.id, c.id, a.id]);
    expect(ids(await q({ sort: 'computed.shared.first' }))).toEqual([a.id, b.id, c.id, d.id]);
    const page1 = await q({ sort: 'computed.shared.total', limit: '1' });
    const page2 = await q({ sort: 'computed.shared.total', limit: '1', cursor: page1.headers.get('x-next-cursor')! });
    expect([...ids(page1), ...ids(page2)]).toEqual([a.id, b.id]);
    expect((await q({ 'computed.shared.off': 'true' })).status).toBe(400);
    expect((await q({ sort: 'computed.shared.total,name,id' })).status).toBe(400);
    expect((await q({ 'computed.personal.total': '1' })).status).toBe(400);
  });

  it('personal fields appear only for their owner; service accounts get personal null', async () => {
    const { cid, cls, a } = await setup();
    const me = await principalWith(t, [[cid, ['ReadClass', 'ReadObject']]]);
    const res = await t.request('POST', '/api/v1/iam/me/computed-fields', {
      token: me.token,
      body: { class_id: cls.id, key: 'mine', operation: { type: 'first_non_null', paths: ['/cpu'] }, result_type: 'integer' },
    });
    expect(res.status).toBe(201);
    const mine = await t.request('GET', `/api/v1/classes/${cls.id}/objects`, {
      token: me.token,
      query: { include: 'computed', 'computed.personal.mine__gte': '1' },
    });
    expect(mine.status, mine.text).toBe(200);
    const rows = mine.body as { id: number; computed: { personal: { values: Record<string, unknown> } } }[];
    expect(rows.map((r) => r.id)).toEqual([a.id]);
    expect(rows[0]!.computed.personal.values).toEqual({ mine: 2 });
    const other = await principalWith(t, [[cid, ['ReadClass', 'ReadObject']]]);
    expect(
      (await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { token: other.token, query: { 'computed.personal.mine': '2' } }))
        .status,
    ).toBe(400);
    const sa = await principalWith(t, [[cid, ['ReadClass', 'ReadObject']]], { kind: 'service_account' });
    const saRes = await t.request('GET', `/api/v1/classes/${cls.id}/${a.id}`, { token: sa.token, query: { include: 'computed' } });
    expect((saRes.body as { computed: { personal: unknown } }).computed.personal).toBeNull();
  });

  it('deleting a class deletes its computed fields with events', async () => {
    const cls = await createClass(t, await collection(t));
    const f = await shared(cls.id, uniq('k').replace('-', '_'), 'any_present', ['/a'], 'boolean');
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}`)).status).toBe(204);
    expect((await eventsOf(t, 'computed_field', f.id)).map((e) => e.action)).toEqual(['created', 'deleted']);
  });
});
