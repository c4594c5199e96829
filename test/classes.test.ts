import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { ALL_CLASS_OBJECT, collection, createClass, createObject, eventsOf, principalWith, type Cls } from './class-fixtures.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const SCHEMA = {
  type: 'object',
  properties: { cpu: { type: 'integer', minimum: 1 }, host: { $ref: '#/$defs/host' } },
  required: ['cpu'],
  $defs: { host: { type: 'string', format: 'hostname' } },
};

describe('createClass', () => {
  it('createClass 201 returns the expanded class with Location, ETag and a created event', async () => {
    const cid = await collection(t);
    const name = uniq('class');
    const res = await t.request('POST', '/api/v1/classes', {
      body: { name, collection_id: cid, description: 'd', json_schema: SCHEMA, validate_schema: true },
    });
    expect(res.status, res.text).toBe(201);
    const body = res.body as { id: number; name: string; collection: { id: number }; revision: number; json_schema: unknown };
    expect(body).toMatchObject({ name, description: 'd', validate_schema: true, revision: 1, collection: { id: cid } });
    expect(body.json_schema).toEqual(SCHEMA);
    expect(res.headers.get('location')).toBe(`/api/v1/classes/${body.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.class\./);
    const ev = await eventsOf(t, 'class', body.id);
    expect(ev.map((e) => e.action)).toEqual(['created']);
    expect(ev[0]!.collection_id).toBe(cid);
    // the event's snapshot (built before the insert) is the class as stored, and so is the answer
    const stored = await t.request('GET', `/api/v1/classes/${body.id}`);
    expect(stored.body).toEqual(body);
    const { collection: _, ...plain } = stored.body as Record<string, unknown>;
    expect(ev[0]!.after).toEqual({ ...plain, collection_id: cid });
  });

  it('createClass 400 for an invalid schema, a remote $ref, a foreign $schema and validate_schema without a schema', async () => {
    const cid = await collection(t);
    for (const json_schema of [
      { type: 'object', propertiez: {} },
      { type: 'nonsense' },
      { properties: { a: { $ref: 'https://example.com/s.json' } } },
      { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' },
      { type: 'string', format: 'no-such-format' },
      [1, 2],
    ]) {
      const res = await t.request('POST', '/api/v1/classes', { body: { name: uniq('class'), collection_id: cid, json_schema } });
      expect(res.status, JSON.stringify(json_schema)).toBe(400);
    }
    const res = await t.request('POST', '/api/v1/classes', { body: { name: uniq('class'), collection_id: cid, validate_schema: true } });
    expect(res.status).toBe(400);
    const unknown = await t.request('POST', '/api/v1/classes', { body: { name: uniq('class'), collection_id: cid, extra: 1 } });
    expect(unknown.status).toBe(400);
  });

  it('createClass 403 without CreateClass, 404 for a missing collection, 409 for a duplicate name', async () => {
    const cid = await collection(t);
    const reader = await principalWith(t, [[cid, ['ReadClass']]]);
    const denied = await t.request('POST', '/api/v1/classes', { token: reader.token, body: { name: uniq('class'), collection_id: cid } });
    expect(denied.status).toBe(403);
    const missing = await t.request('POST', '/api/v1/classes', { body: { name: uniq('class'), collection_id: 2_000_000_000 } });
    expect(missing.status).toBe(404);
    const cls = await createClass(t, cid);
    const dup = await t.request('POST', '/api/v1/classes', { body: { name: cls.name, collection_id: await collection(t) } });
    expect(dup.status).toBe(409);
    expect((dup.body as { message: string }).message).toMatch(/already exists/);
  });

  it('createClass 201 for a holder of CreateClass, including on a child collection (grants inherit)', async () => {
    const parent = await collection(t);
    const child = await collection(t, parent);
    const creator = await principalWith(t, [[parent, ['CreateClass', 'ReadClass']]]);
    await createClass(t, child, {}, creator.token);
  });
});

describe('listClasses', () => {
  it('listClasses 200 shows only readable classes, with totals after authorization', async () => {
    const a = await collection(t);
    const b = await collection(t);
    const ca = await createClass(t, a);
    await createClass(t, b);
    const user = await principalWith(t, [[a, ['ReadClass']]]);
    const res = await t.request('GET', '/api/v1/classes', { token: user.token, query: { collection_id: `${a},${b}` } });
    expect(res.status, res.text).toBe(200);
    const rows = res.body as { id: number; collection: { id: number } }[];
    expect(rows.map((r) => r.id)).toEqual([ca.id]);
    expect(rows[0]!.collection.id).toBe(a);
    expect(res.headers.get('x-total-count')).toBe('1');
  });

  it('listClasses 200 filters by collections alias, validate_schema, json_schema, name and permissions; pages with a cursor', async () => {
    const cid = await collection(t);
    const plain = await createClass(t, cid);
    const validated = await createClass(t, cid, { json_schema: SCHEMA, validate_schema: true });
    const flagged = await createClass(t, cid, { json_schema: { type: 'object', title: 'flagged' } });
    const q = (query: Record<string, string | number>) => t.request('GET', '/api/v1/classes', { query: { collections: cid, ...query } });
    const ids = (r: { body: unknown }) => (r.body as { id: number }[]).map((x) => x.id);
    expect(ids(await q({}))).toEqual([plain.id, validated.id, flagged.id]);
    expect(ids(await q({ validate_schema: 'true' }))).toEqual([validated.id]);
    expect(ids(await q({ json_schema: 'title=flagged' }))).toEqual([flagged.id]);
    expect(ids(await q({ json_schema__has_key: 'properties=cpu' }))).toEqual([validated.id]);
    expect(ids(await q({ name: plain.name }))).toEqual([plain.id]);
    expect(ids(await q({ sort: '-id' }))).toEqual([flagged.id, validated.id, plain.id]);
    expect(ids(await q({ permissions: 'DeleteClass' }))).toHaveLength(3);

    const first = await q({ limit: 2 });
    expect(ids(first)).toEqual([plain.id, validated.id]);
    expect(first.headers.get('x-page-limit')).toBe('2');
    const next = await q({ limit: 2, cursor: first.headers.get('x-next-cursor')! });
    expect(ids(next)).toEqual([flagged.id]);
    expect(next.headers.get('x-next-cursor')).toBeNull();

    const reader = await principalWith(t, [[cid, ['ReadClass']]]);
    const narrowed = await t.request('GET', '/api/v1/classes', {
      token: reader.token,
      query: { collections: cid, permissions: 'DeleteClass' },
    });
    expect(ids(narrowed)).toEqual([]);
    expect(narrowed.headers.get('x-total-count')).toBe('0');
  });

  it('listClasses 400 for an unknown filter, an unknown operator, a bad permission name and a bad cursor', async () => {
    const queries: Record<string, string>[] = [
      { nope: '1' },
      { name__gt: 'x' },
      { permissions: 'Nope' },
      { cursor: 'garbage' },
      { sort: 'json_schema' },
    ];
    for (const query of queries) {
      const res = await t.request('GET', '/api/v1/classes', { query });
      expect(res.status, JSON.stringify(query)).toBe(400);
    }
  });

  it('listClasses honours token scopes: a class entry covers that class only', async () => {
    const cid = await collection(t);
    const c1 = await createClass(t, cid);
    await createClass(t, cid);
    const user = await principalWith(t, [[cid, ['ReadClass']]], { scope: { resources: [{ kind: 'class', id: c1.id }] } });
    const res = await t.request('GET', '/api/v1/classes', { token: user.token, query: { collections: cid } });
    expect((res.body as { id: number }[]).map((r) => r.id)).toEqual([c1.id]);
    expect(res.headers.get('x-total-count')).toBe('1');
  });

  it('listClasses 401 without a token', async () => {
    const res = await t.request('GET', '/api/v1/classes', { token: null });
    expect(res.status).toBe(401);
  });
});

describe('getClass and getClassByName', () => {
  it('getClass 200 expanded with ETag; 404 missing; 403 without ReadClass; 400 for a non-integer id', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const res = await t.request('GET', `/api/v1/classes/${cls.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: cls.id, collection: { id: cid } });
    expect(res.headers.get('etag')).toBeTruthy();
    expect((await t.request('GET', '/api/v1/classes/2000000000')).status).toBe(404);
    const other = await principalWith(t, [[await collection(t), ['ReadClass']]]);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}`, { token: other.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/classes/abc')).status).toBe(400);
  });

  it('getClassByName 200 plain by default and expanded with include=collection; numeric-looking names are names', async () => {
    const cid = await collection(t);
    const numeric = String(900_000_000 + Math.floor(Math.random() * 99_999_999));
    const cls = await createClass(t, cid, { name: numeric });
    const plain = await t.request('GET', `/api/v1/classes/by-name/${numeric}`);
    expect(plain.status, plain.text).toBe(200);
    expect(plain.body).toMatchObject({ id: cls.id, name: numeric, collection_id: cid });
    expect(plain.body).not.toHaveProperty('collection');
    const expanded = await t.request('GET', `/api/v1/classes/by-name/${numeric}`, { query: { include: 'collection' } });
    expect(expanded.body).toMatchObject({ id: cls.id, collection: { id: cid } });
    expect(plain.headers.get('etag')).toBe(expanded.headers.get('etag'));
  });

  it('getClassByName 404 for an unknown name and 403 without ReadClass', async () => {
    expect((await t.request('GET', `/api/v1/classes/by-name/${uniq('none')}`)).status).toBe(404);
    const cls = await createClass(t, await collection(t));
    const other = await principalWith(t, [[await collection(t), ['ReadClass']]]);
    expect((await t.request('GET', `/api/v1/classes/by-name/${cls.name}`, { token: other.token })).status).toBe(403);
  });
});

describe('updateClass and updateClassByName', () => {
  it('updateClass 200 renames with a revision bump and an updated event; an identical update is a no-op', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const name = uniq('renamed');
    const res = await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { name, description: 'new' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ name, description: 'new', revision: 2, collection: { id: cid } });
    const same = await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { name, description: 'new' } });
    expect(same.status).toBe(200);
    expect(same.body).toEqual(res.body);
    expect((same.body as Cls).revision).toBe(2);
    expect(same.headers.get('etag')).toBe(res.headers.get('etag'));
    const ev = await eventsOf(t, 'class', cls.id);
    expect(ev.map((e) => [e.action, e.before_revision, e.after_revision])).toEqual([
      ['created', null, 1],
      ['updated', 1, 2],
    ]);
    // the event's snapshot (built before the update) is the class as stored
    const { collection: _, ...plain } = res.body as Record<string, unknown>;
    expect(ev[1]!.after).toEqual({ ...plain, collection_id: cid });
  });

  it('updateClass 412 with a stale If-Match and 200 with the current one; 400 for a weak validator', async () => {
    const cls = await createClass(t, await collection(t));
    const get = await t.request('GET', `/api/v1/classes/${cls.id}`);
    const etag = get.headers.get('etag')!;
    const ok = await t.request('PATCH', `/api/v1/classes/${cls.id}`, { headers: { 'if-match': etag }, body: { description: 'x' } });
    expect(ok.status).toBe(200);
    const stale = await t.request('PATCH', `/api/v1/classes/${cls.id}`, { headers: { 'if-match': etag }, body: { description: 'y' } });
    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ reason: 'stale_resource' });
    expect(stale.headers.get('etag')).toBe(ok.headers.get('etag'));
    const weak = await t.request('PATCH', `/api/v1/classes/${cls.id}`, {
      headers: { 'if-match': `W/${etag}` },
      body: { description: 'z' },
    });
    expect(weak.status).toBe(400);
  });

  it('updateClass 409 for a taken name, 400 for validation without a schema or an invalid schema, 404 missing, 403 without UpdateClass', async () => {
    const cid = await collection(t);
    const a = await createClass(t, cid);
    const b = await createClass(t, cid);
    expect((await t.request('PATCH', `/api/v1/classes/${a.id}`, { body: { name: b.name } })).status).toBe(409);
    expect((await t.request('PATCH', `/api/v1/classes/${a.id}`, { body: { validate_schema: true } })).status).toBe(400);
    expect((await t.request('PATCH', `/api/v1/classes/${a.id}`, { body: { json_schema: { type: 'object', bogus: true } } })).status).toBe(
      400,
    );
    expect((await t.request('PATCH', '/api/v1/classes/2000000000', { body: { description: 'x' } })).status).toBe(404);
    const reader = await principalWith(t, [[cid, ['ReadClass']]]);
    expect((await t.request('PATCH', `/api/v1/classes/${a.id}`, { token: reader.token, body: { description: 'x' } })).status).toBe(403);
  });

  it('updateClass 409 when turning validation on would leave stored objects invalid, listing them; 200 once they are valid', async () => {
    const cls = await createClass(t, await collection(t), { json_schema: SCHEMA });
    const good = await createObject(t, cls.id, { cpu: 2 });
    const bad = await createObject(t, cls.id, { cpu: 'many' });
    const refused = await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { validate_schema: true } });
    expect(refused.status, refused.text).toBe(409);
    const body = refused.body as { reason: string; details: { path: string; message: string }[] };
    expect(body.reason).toBe('existing_objects_invalid');
    expect(body.details.map((d) => d.path)).toEqual([`objects/${bad.id}`]);
    expect(body.details[0]!.message).toContain(bad.name);
    expect(((await t.request('GET', `/api/v1/classes/${cls.id}`)).body as { validate_schema: boolean }).validate_schema).toBe(false);

    // A schema change while validating is checked the same way.
    await t.request('PATCH', `/api/v1/classes/${cls.id}/${bad.id}`, { body: { json_data: { cpu: 3 } } });
    const on = await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { validate_schema: true } });
    expect(on.status, on.text).toBe(200);
    const stricter = await t.request('PATCH', `/api/v1/classes/${cls.id}`, {
      body: { json_schema: { ...SCHEMA, properties: { ...SCHEMA.properties, cpu: { type: 'integer', minimum: 3 } } } },
    });
    expect(stricter.status).toBe(409);
    expect((stricter.body as { details: { path: string }[] }).details.map((d) => d.path)).toEqual([`objects/${good.id}`]);
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { json_schema: null } })).status).toBe(400);
    const off = await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { json_schema: null, validate_schema: false } });
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({ json_schema: null, validate_schema: false });
  });

  it('updateClass moves the class and its objects; needs CreateClass on the target (403) that must exist (404)', async () => {
    const from = await collection(t);
    const to = await collection(t);
    const cls = await createClass(t, from);
    const obj = await createObject(t, cls.id, { a: 1 });
    const mover = await principalWith(t, [
      [from, ['ReadClass', 'UpdateClass']],
      [to, ['ReadClass']],
    ]);
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { token: mover.token, body: { collection_id: to } })).status).toBe(403);
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { collection_id: 2_000_000_000 } })).status).toBe(404);
    const moved = await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { collection_id: to } });
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({ collection: { id: to } });
    const o = await t.request('GET', `/api/v1/classes/${cls.id}/${obj.id}`);
    expect(o.body).toMatchObject({ collection_id: to, revision: 2 });
    const ev = await eventsOf(t, 'object', obj.id);
    expect(ev.at(-1)).toMatchObject({ action: 'updated', collection_id: to, metadata: { cause: 'class_moved' } });
  });

  it('updateClassByName 200, then 404 under the old name', async () => {
    const cls = await createClass(t, await collection(t));
    const name = uniq('renamed');
    const res = await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}`, { body: { name } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: cls.id, name });
    expect((await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}`, { body: { description: 'x' } })).status).toBe(404);
  });
});

describe('deleteClass and deleteClassByName', () => {
  it('deleteClass 204 deletes the objects and their relations, with an event for each', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const other = await createClass(t, cid);
    const o1 = await createObject(t, cls.id, { a: 1 });
    const o2 = await createObject(t, other.id, { a: 2 });
    const [cr] = await t.deps.sql<{ id: number }[]>`
      insert into class_relations (from_class_id, to_class_id) values (${cls.id}, ${other.id}) returning id`;
    const [or] = await t.deps.sql<{ id: number }[]>`
      insert into object_relations (class_relation_id, from_object_id, to_object_id) values (${cr!.id}, ${o1.id}, ${o2.id}) returning id`;
    const res = await t.request('DELETE', `/api/v1/classes/${cls.id}`);
    expect(res.status).toBe(204);
    expect(res.headers.get('etag')).toBeTruthy();
    expect((await t.request('GET', `/api/v1/classes/${cls.id}`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/${other.id}/${o2.id}`)).status).toBe(200);
    expect((await eventsOf(t, 'class', cls.id)).at(-1)!.action).toBe('deleted');
    expect((await eventsOf(t, 'object', o1.id)).at(-1)).toMatchObject({ action: 'deleted', metadata: { cause: 'class_deleted' } });
    expect((await eventsOf(t, 'object_relation', or!.id)).at(-1)).toMatchObject({
      action: 'deleted',
      metadata: { cause: 'class_deleted', class_id: cls.id },
    });
    expect((await eventsOf(t, 'class_relation', cr!.id)).at(-1)).toMatchObject({
      action: 'deleted',
      metadata: { cause: 'class_deleted', class_id: cls.id },
    });
    const summaries = await t.deps.sql<{ summary: string }[]>`
      select summary from events where (entity_type, entity_id) in (('object_relation', ${or!.id}::int), ('class_relation', ${cr!.id}::int))
      order by entity_type desc`;
    expect(summaries.map((r) => r.summary)).toEqual([
      `object relation ${or!.id} deleted with class ${cls.name}`,
      `class relation ${cr!.id} deleted with class ${cls.name}`,
    ]);
    const left = await t.deps.sql`
      select 1 from object_relations where id = ${or!.id} union all select 1 from class_relations where id = ${cr!.id}`;
    expect(left).toHaveLength(0);
  });

  it('deleteClass 412 stale, 403 without DeleteClass, 404 missing', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const stale = await t.request('DELETE', `/api/v1/classes/${cls.id}`, { headers: { 'if-match': '"svc-v1.class.xx.99"' } });
    expect(stale.status).toBe(412);
    const reader = await principalWith(t, [[cid, ['ReadClass']]]);
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}`, { token: reader.token })).status).toBe(403);
    expect((await t.request('DELETE', '/api/v1/classes/2000000000')).status).toBe(404);
  });

  it('deleteClassByName 204 and 404 for an unknown name', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const user = await principalWith(t, [[cid, ALL_CLASS_OBJECT]]);
    expect((await t.request('DELETE', `/api/v1/classes/by-name/${cls.name}`, { token: user.token })).status).toBe(204);
    expect((await t.request('DELETE', `/api/v1/classes/by-name/${cls.name}`)).status).toBe(404);
  });
});
