import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { objectColsJsonText } from '../src/db/objects.ts';
import { listPoolOf } from '../src/db/sql.ts';
import { isoTime } from '../src/domain/wire.ts';
import {
  ALL_CLASS_OBJECT,
  collection,
  createClass,
  createObject,
  eventsOf,
  principalWith,
  type Obj,
  CPU_SCHEMA as SCHEMA,
} from './class-fixtures.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const ids = (r: { body: unknown }) => (r.body as { id: number }[]).map((x) => x.id);

describe('createObject and createObjectByClassName', () => {
  it('createObject 201 returns the object with Location, ETag and a created event', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const name = uniq('obj');
    const res = await t.request('POST', `/api/v1/classes/${cls.id}/objects`, { body: { name, json_data: { a: [1, 2] } } });
    expect(res.status, res.text).toBe(201);
    const o = res.body as Obj;
    expect(o).toMatchObject({ name, description: '', collection_id: cid, svc_class_id: cls.id, json_data: { a: [1, 2] }, revision: 1 });
    expect(Object.keys(o).sort()).toEqual(
      ['collection_id', 'created_at', 'description', 'id', 'json_data', 'name', 'revision', 'svc_class_id', 'updated_at'].sort(),
    );
    expect(res.headers.get('location')).toBe(`/api/v1/classes/${cls.id}/${o.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.object\./);
    expect((await eventsOf(t, 'object', o.id)).map((e) => [e.action, e.collection_id])).toEqual([['created', cid]]);
  });

  it('createObject 400 schema_validation_failed with details when the class validates', async () => {
    const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
    const res = await t.request('POST', `/api/v1/classes/${cls.id}/objects`, { body: { name: uniq('obj'), json_data: { cpu: 'x' } } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ reason: 'schema_validation_failed', details: [{ path: '/cpu' }] });
    const missing = await t.request('POST', `/api/v1/classes/${cls.id}/objects`, { body: { name: uniq('obj'), json_data: {} } });
    expect(missing.body).toMatchObject({ reason: 'schema_validation_failed', details: [{ path: '/' }] });
    await createObject(t, cls.id, { cpu: 4 });
  });

  it('createObject 400 without json_data, 403 without CreateObject, 404 for a missing class, 409 for a duplicate name', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    expect((await t.request('POST', `/api/v1/classes/${cls.id}/objects`, { body: { name: 'x' } })).status).toBe(400);
    const reader = await principalWith(t, [[cid, ['ReadClass', 'ReadObject']]]);
    const denied = await t.request('POST', `/api/v1/classes/${cls.id}/objects`, {
      token: reader.token,
      body: { name: 'x', json_data: {} },
    });
    expect(denied.status).toBe(403);
    expect((await t.request('POST', '/api/v1/classes/2000000000/objects', { body: { name: 'x', json_data: {} } })).status).toBe(404);
    const o = await createObject(t, cls.id, {});
    const dup = await t.request('POST', `/api/v1/classes/${cls.id}/objects`, { body: { name: o.name, json_data: {} } });
    expect(dup.status).toBe(409);
    // The same name in another class is fine.
    await createObject(t, (await createClass(t, cid)).id, {}, { name: o.name });
  });

  it('createObjectByClassName 201 and 404 for an unknown class name', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const user = await principalWith(t, [[cid, ['CreateObject']]]);
    const res = await t.request('POST', `/api/v1/classes/by-name/${cls.name}/objects`, {
      token: user.token,
      body: { name: uniq('obj'), json_data: null, description: 'd' },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ svc_class_id: cls.id, json_data: null, description: 'd' });
    const missing = await t.request('POST', `/api/v1/classes/by-name/${uniq('none')}/objects`, { body: { name: 'x', json_data: {} } });
    expect(missing.status).toBe(404);
  });
});

describe('getObject and getObjectByName', () => {
  it('getObject 200 with ETag; include=computed adds empty value sets; 404 under another class; 403 without ReadObject', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const other = await createClass(t, cid);
    const o = await createObject(t, cls.id, { a: 1 });
    const res = await t.request('GET', `/api/v1/classes/${cls.id}/${o.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: o.id, json_data: { a: 1 } });
    expect(res.body).not.toHaveProperty('computed');
    expect(res.headers.get('etag')).toBeTruthy();
    const withComputed = await t.request('GET', `/api/v1/classes/${cls.id}/${o.id}`, { query: { include: 'computed' } });
    expect((withComputed.body as { computed: unknown }).computed).toEqual({
      shared: { values: {}, errors: {} },
      personal: { values: {}, errors: {} },
    });
    expect((await t.request('GET', `/api/v1/classes/${other.id}/${o.id}`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/2000000000`)).status).toBe(404);
    const classOnly = await principalWith(t, [[cid, ['ReadClass']]]);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/${o.id}`, { token: classOnly.token })).status).toBe(403);
  });

  it('getObject: a service account gets personal null; an object-scoped token reads only that object', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const a = await createObject(t, cls.id, {});
    const b = await createObject(t, cls.id, {});
    const sa = await principalWith(t, [[cid, ['ReadObject']]], { kind: 'service_account' });
    const res = await t.request('GET', `/api/v1/classes/${cls.id}/${a.id}`, { token: sa.token, query: { include: 'computed' } });
    expect(res.status).toBe(200);
    expect((res.body as { computed: { personal: unknown } }).computed.personal).toBeNull();
    const scoped = await principalWith(t, [[cid, ['ReadObject', 'ReadClass']]], { scope: { resources: [{ kind: 'object', id: a.id }] } });
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/${a.id}`, { token: scoped.token })).status).toBe(200);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/${b.id}`, { token: scoped.token })).status).toBe(403);
  });

  it('getObjectByName 200; 404 for an unknown object, an unknown class, or the object under another class name', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const other = await createClass(t, cid);
    const o = await createObject(t, cls.id, { z: true });
    const res = await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects/by-name/${o.name}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: o.id, json_data: { z: true } });
    expect((await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects/by-name/${uniq('no')}`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/by-name/${uniq('no')}/objects/by-name/${o.name}`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/by-name/${other.name}/objects/by-name/${o.name}`)).status).toBe(404);
    const none = await principalWith(t, [[cid, ['ReadClass']]]);
    expect((await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects/by-name/${o.name}`, { token: none.token })).status).toBe(
      403,
    );
  });
});

describe('updateObject and updateObjectByName', () => {
  it('updateObject 200 replaces json_data with an updated event; an identical update is a no-op', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, { a: 1, b: 2 });
    const res = await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { body: { json_data: { c: 3 }, description: 'd' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ json_data: { c: 3 }, description: 'd', revision: 2 });
    const same = await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { body: { json_data: { c: 3.0 }, name: o.name } });
    expect((same.body as Obj).revision).toBe(2);
    const ev = await eventsOf(t, 'object', o.id);
    expect(ev.map((e) => e.action)).toEqual(['created', 'updated']);
    expect(ev[1]).toMatchObject({
      before: { json_data: { a: 1, b: 2 } },
      after: { json_data: { c: 3 } },
      before_revision: 1,
      after_revision: 2,
    });
  });

  it('updateObject 412 stale, 409 duplicate name, 400 schema, 403 without UpdateObject, 404 under another class', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA, validate_schema: true });
    const a = await createObject(t, cls.id, { cpu: 1 });
    const b = await createObject(t, cls.id, { cpu: 2 });
    const stale = await t.request('PATCH', `/api/v1/classes/${cls.id}/${a.id}`, {
      headers: { 'if-match': '"svc-v1.object.eA.9"' },
      body: { description: 'x' },
    });
    expect(stale.status).toBe(412);
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${a.id}`, { body: { name: b.name } })).status).toBe(409);
    const invalid = await t.request('PATCH', `/api/v1/classes/${cls.id}/${a.id}`, { body: { json_data: { cpu: 1.5 } } });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({ reason: 'schema_validation_failed' });
    const reader = await principalWith(t, [[cid, ['ReadObject']]]);
    expect(
      (await t.request('PATCH', `/api/v1/classes/${cls.id}/${a.id}`, { token: reader.token, body: { description: 'x' } })).status,
    ).toBe(403);
    const other = await createClass(t, cid);
    expect((await t.request('PATCH', `/api/v1/classes/${other.id}/${a.id}`, { body: { description: 'x' } })).status).toBe(404);
  });

  it('updateObjectByName 200; 404 once the class was renamed', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, {});
    const res = await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}/objects/by-name/${o.name}`, {
      body: { json_data: { x: 1 } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: o.id, json_data: { x: 1 } });
    await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { name: uniq('renamed') } });
    const gone = await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}/objects/by-name/${o.name}`, { body: { json_data: {} } });
    expect(gone.status).toBe(404);
  });
});

describe('deleteObject and deleteObjectByName', () => {
  it('deleteObject 204 deletes the object and its relations with events', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const a = await createObject(t, cls.id, {});
    const b = await createObject(t, cls.id, {});
    const [cr] = await t.deps.sql<
      { id: number }[]
    >`insert into class_relations (from_class_id, to_class_id) values (${cls.id}, ${cls.id}) returning id`;
    const [rel] = await t.deps.sql<{ id: number }[]>`
      insert into object_relations (class_relation_id, from_object_id, to_object_id) values (${cr!.id}, ${a.id}, ${b.id}) returning id`;
    const res = await t.request('DELETE', `/api/v1/classes/${cls.id}/${a.id}`);
    expect(res.status).toBe(204);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/${a.id}`)).status).toBe(404);
    expect((await eventsOf(t, 'object', a.id)).at(-1)).toMatchObject({ action: 'deleted', before: { id: a.id } });
    expect((await eventsOf(t, 'object_relation', rel!.id)).map((e) => e.action)).toEqual(['deleted']);
  });

  it('deleteObject 412 stale, 403 without DeleteObject, 404 under another class', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const o = await createObject(t, cls.id, {});
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/${o.id}`, { headers: { 'if-match': '"nope"' } })).status).toBe(412);
    const reader = await principalWith(t, [[cid, ['ReadObject']]]);
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/${o.id}`, { token: reader.token })).status).toBe(403);
    const other = await createClass(t, cid);
    expect((await t.request('DELETE', `/api/v1/classes/${other.id}/${o.id}`)).status).toBe(404);
  });

  it('deleteObjectByName 204 and then 404', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const o = await createObject(t, cls.id, {});
    const user = await principalWith(t, [[cid, ALL_CLASS_OBJECT]]);
    const path = `/api/v1/classes/by-name/${cls.name}/objects/by-name/${o.name}`;
    expect((await t.request('DELETE', path, { token: user.token })).status).toBe(204);
    expect((await t.request('DELETE', path, { token: user.token })).status).toBe(404);
  });
});

describe('patchObjectData', () => {
  const patch = (classId: number, objectId: number, ops: unknown, headers: Record<string, string> = {}) =>
    t.request('PATCH', `/api/v1/classes/${classId}/${objectId}/data`, {
      rawBody: JSON.stringify(ops),
      contentType: 'application/json-patch+json',
      headers,
    });

  it('patchObjectData 200 applies the patch atomically; a patch that changes nothing is a no-op', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, { a: 1, list: [1, 2] });
    const res = await patch(cls.id, o.id, [
      { op: 'test', path: '/a', value: 1.0 },
      { op: 'add', path: '/list/-', value: 3 },
      { op: 'replace', path: '/a', value: 'x' },
      { op: 'copy', from: '/a', path: '/b' },
    ]);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ json_data: { a: 'x', b: 'x', list: [1, 2, 3] }, revision: 2 });
    const noop = await patch(cls.id, o.id, [{ op: 'test', path: '/a', value: 'x' }]);
    expect((noop.body as Obj).revision).toBe(2);
    expect((await eventsOf(t, 'object', o.id)).map((e) => e.action)).toEqual(['created', 'updated']);
  });

  it('patchObjectData 409 for a failed operation (nothing changes), 400 for a non-object result or a bad pointer, 415 for another content type', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, { a: 1 });
    const failed = await patch(cls.id, o.id, [
      { op: 'replace', path: '/a', value: 2 },
      { op: 'test', path: '/a', value: 1 },
    ]);
    expect(failed.status).toBe(409);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/${o.id}`)).body).toMatchObject({ json_data: { a: 1 }, revision: 1 });
    expect((await patch(cls.id, o.id, [{ op: 'replace', path: '', value: [1] }])).status).toBe(400);
    expect((await patch(cls.id, o.id, [{ op: 'remove', path: 'a' }])).status).toBe(400);
    const wrongType = await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}/data`, { body: [{ op: 'remove', path: '/a' }] });
    expect(wrongType.status).toBe(415);
  });

  it('patchObjectData 400 when the result fails the class schema, 412 stale, 403 without UpdateObject, 404 under another class', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA, validate_schema: true });
    const o = await createObject(t, cls.id, { cpu: 1 });
    const invalid = await patch(cls.id, o.id, [{ op: 'remove', path: '/cpu' }]);
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({ reason: 'schema_validation_failed' });
    expect((await patch(cls.id, o.id, [{ op: 'add', path: '/x', value: 1 }], { 'if-match': '"svc-v1.object.AA.7"' })).status).toBe(412);
    const reader = await principalWith(t, [[cid, ['ReadObject']]]);
    const denied = await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}/data`, {
      token: reader.token,
      rawBody: '[]',
      contentType: 'application/json-patch+json',
    });
    expect(denied.status).toBe(403);
    const other = await createClass(t, cid);
    expect((await patch(other.id, o.id, [])).status).toBe(404);
  });
});

describe('listObjects and listObjectsByClassName', () => {
  it('json_data equals / in / all mean the same with the index-friendly containment beside them', async () => {
    const cls = await createClass(t, await collection(t));
    const a = await createObject(t, cls.id, { n: 1, flag: true, owner: null, s: '1', tags: [1, 'x'], list: [{ k: 'v' }] });
    const b = await createObject(t, cls.id, { n: 1.5, flag: false, s: 'true', tags: ['1', true], nested: { deep: { v: 'q' } } });
    const c = await createObject(t, cls.id, { n: 'x', list: [{ k: 'w' }] });
    const q = async (query: Record<string, string | string[]>) =>
      ids(await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query }));
    expect(await q({ json_data__equals: 'n=1.0' })).toEqual([a.id]); // numerically equal, written differently
    expect(await q({ json_data__equals: 'n=1.50' })).toEqual([b.id]);
    expect(await q({ json_data__equals: 's=1' })).toEqual([a.id]); // the string "1" (and no number 1 at s)
    expect(await q({ json_data__equals: 'flag=true' })).toEqual([a.id]);
    expect(await q({ json_data__equals: 's=true' })).toEqual([b.id]); // the string "true"
    expect(await q({ json_data__equals: 'owner=null' })).toEqual([a.id]);
    expect(await q({ json_data__equals: 'nested,deep,v=q' })).toEqual([b.id]);
    expect(await q({ json_data__in: 'n=x,1' })).toEqual([a.id, c.id]);
    expect(await q({ json_data__all: 'tags=1' })).toEqual([a.id, b.id]); // the number 1 and the string "1"
    expect(await q({ json_data__all: 'tags=true,1' })).toEqual([b.id]);
    expect(await q({ json_data__all: 'tags=x,1' })).toEqual([a.id]); // one value of one JSON form, one of two
    expect(await q({ json_data__equals: 'list,0,k=w' })).toEqual([c.id]); // an array index in the path
    expect(await q({ json_data__not_equals: 'n=1' })).toEqual([b.id, c.id]);
    expect(await q({ json_data__not_all: 'tags=x' })).toEqual([b.id, c.id]);
  });

  it('json_data equals / in / all of a plain string (containment alone) match the string itself, not arrays or objects holding it', async () => {
    const cls = await createClass(t, await collection(t));
    const str = await createObject(t, cls.id, { s: 'q', tags: ['x', 'y'], nested: { deep: { v: 'q' } } });
    const arr = await createObject(t, cls.id, { s: ['q'], tags: 'x', nested: { deep: ['q'] } });
    const obj = await createObject(t, cls.id, { s: { q: 'q' }, tags: [['x'], 'y'], nested: [{ deep: { v: 'q' } }] });
    const num = await createObject(t, cls.id, { s: 'Q', tags: ['X'], nested: { deep: { v: 'q', w: 1 } } });
    const q = async (query: Record<string, string | string[]>) =>
      ids(await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query }));
    expect(await q({ json_data__equals: 's=q' })).toEqual([str.id]);
    expect(await q({ json_data__in: 's=q,Q' })).toEqual([str.id, num.id]);
    expect(await q({ json_data__equals: 'nested,deep,v=q' })).toEqual([str.id, num.id]);
    expect(await q({ json_data__all: 'tags=x' })).toEqual([str.id]);
    expect(await q({ json_data__all: 'tags=x,y' })).toEqual([str.id]); // one contained document, {"tags":["x","y"]}
    expect(await q({ json_data__all: 'tags=y,x,y' })).toEqual([str.id]);
    expect(await q({ json_data__all: 'tags=x,z' })).toEqual([]);
    expect(await q({ json_data__not_equals: 's=q' })).toEqual([arr.id, obj.id, num.id]);
  });

  it('json_data filters that are containment tests alone go out as one contained document, with the same result', async () => {
    const cls = await createClass(t, await collection(t));
    const a = await createObject(t, cls.id, { env: 'prod', role: 'db', tags: ['x', 'y'], net: { zone: 'a', rack: 'r1' }, n: 1 });
    const b = await createObject(t, cls.id, { env: 'prod', role: 'web', tags: ['x'], n: 2 });
    const c = await createObject(t, cls.id, { env: 'dev', role: 'db', net: { zone: 'a' } });
    const d = await createObject(t, cls.id, { env: ['prod'], role: 'db', tags: 'x' });
    const e = await createObject(t, cls.id, { ['__proto__']: 'p', env: 'prod', constructor: { x: 'y' } });
    const statements: string[] = [];
    const pools = [t.deps.sql, listPoolOf(t.deps.sql)].map((p) => p?.options as unknown as { debug: unknown } | undefined);
    const q = async (query: Record<string, string | string[]>) => {
      for (const o of pools)
        if (o) o.debug = (_c: number, text: string, params: unknown[]) => statements.push(`${text} ${JSON.stringify(params)}`);
      try {
        return ids(await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query: { ...query, include_total: 'false' } }));
      } finally {
        for (const o of pools) if (o) o.debug = false;
      }
    };
    const page = () => statements.filter((x) => x.includes('from objects o')).at(-1)!;
    expect(await q({ json_data__equals: ['env=prod', 'role=db'] })).toEqual([a.id]);
    expect(page().match(/@>/g)).toHaveLength(1);
    expect(page()).toContain(JSON.stringify(JSON.stringify({ env: 'prod', role: 'db' })));
    expect(await q({ json_data__equals: 'env=prod', json_data__all: 'tags=x' })).toEqual([a.id, b.id]);
    expect(page().match(/@>/g)).toHaveLength(1);
    expect(await q({ json_data__all: ['tags=x', 'tags=y'] })).toEqual([a.id]);
    expect(await q({ json_data__equals: ['net,zone=a', 'net,rack=r1'] })).toEqual([a.id]);
    expect(page()).toContain(JSON.stringify(JSON.stringify({ net: { zone: 'a', rack: 'r1' } })));
    // values that cannot be one document: two documents, and no object holds both
    expect(await q({ json_data__equals: ['env=prod', 'env=dev'] })).toEqual([]);
    expect(page().match(/@>/g)).toHaveLength(2);
    expect(await q({ json_data__equals: 'tags=x', json_data__all: 'tags=x' })).toEqual([]);
    expect(await q({ json_data__equals: 'role=db', json_data__all: 'role=db' })).toEqual([]);
    // negated, numeric (a number or a string) and array-index filters stay as they are beside the document
    expect(await q({ json_data__equals: 'env=prod', json_data__not_equals: 'role=db' })).toEqual([b.id, e.id]);
    expect(await q({ json_data__equals: ['env=prod', 'n=2'] })).toEqual([b.id]);
    expect(await q({ json_data__equals: ['env=prod', 'tags,0=x'] })).toEqual([a.id, b.id]);
    // member names that are JavaScript's own
    expect(await q({ json_data__equals: ['__proto__=p', 'env=prod', 'constructor,x=y'] })).toEqual([e.id]);
    expect(await q({ json_data__equals: ['__proto__=q', 'env=prod'] })).toEqual([]);
    // one document alone is the filter as it was
    expect(await q({ json_data__equals: 'role=db' })).toEqual([a.id, c.id, d.id]);
    expect(await q({ json_data__equals: ['role=db', 'net,zone=a'] })).toEqual([a.id, c.id]);
    // the same conditions in an aggregate
    const agg = await t.request('GET', `/api/v1/classes/${cls.id}/object-aggregates`, {
      query: { json_data__equals: ['env=prod', 'role=db'], aggregate: 'min:json_data.n' },
    });
    expect(agg.status, agg.text).toBe(200);
    expect((agg.body as { object_count: number }[]).map((r) => r.object_count)).toEqual([1]);
  });

  it('listObjects answers a caller without ReadClass 403/404 before looking at the query (no 400 for a bad sort), with or without computed fields named', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    await createObject(t, cls.id, {});
    const outsider = await principalWith(t, [[await collection(t), ['ReadClass', 'ReadObject']]]);
    const list = (query: Record<string, string>) => t.request('GET', `/api/v1/classes/${cls.id}/objects`, { token: outsider.token, query });
    const refused = (await list({})).status;
    expect([403, 404]).toContain(refused);
    expect((await list({ sort: 'no_such_field' })).status).toBe(refused);
    expect((await list({ sort: 'computed.shared.nope' })).status).toBe(refused);
    // the admin gets the 400s
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query: { sort: 'no_such_field' } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query: { sort: 'computed.shared.nope' } })).status).toBe(400);
  });

  it('listObjects 200 filters by json_data, name and collection_id, sorts, pages and totals', async () => {
    const cls = await createClass(t, await collection(t));
    const a = await createObject(t, cls.id, { cpu: 2, net: { ip: '10.0.0.5' }, tags: ['x', 'y'] });
    const b = await createObject(t, cls.id, { cpu: 8, net: { ip: '192.168.1.1' }, tags: ['y'] });
    const c = await createObject(t, cls.id, { cpu: 'n/a' });
    const q = (query: Record<string, string | number>) => t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query });
    expect(ids(await q({}))).toEqual([a.id, b.id, c.id]);
    expect(ids(await q({ json_data__gte: 'cpu=4' }))).toEqual([b.id]);
    expect(ids(await q({ json_data__within_network: 'net,ip=10.0.0.0/8' }))).toEqual([a.id]);
    expect(ids(await q({ json_data__all: 'tags=x,y' }))).toEqual([a.id]);
    expect(ids(await q({ json_data__is_null: 'net' }))).toEqual([c.id]);
    expect(ids(await q({ name__in: `${a.name},${c.name}` }))).toEqual([a.id, c.id]);
    expect(ids(await q({ sort: '-id' }))).toEqual([c.id, b.id, a.id]);
    const page1 = await q({ limit: 2, sort: 'name' });
    expect(page1.headers.get('x-total-count')).toBe('3');
    const page2 = await q({ limit: 2, sort: 'name', cursor: page1.headers.get('x-next-cursor')! });
    expect([...ids(page1), ...ids(page2)].sort()).toEqual([a.id, b.id, c.id].sort());
    expect((await q({ limit: 2, sort: 'id', cursor: page1.headers.get('x-next-cursor')! })).status).toBe(400);
  });

  it('listObjects shows only readable objects: permissions filter and object-scoped tokens', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const a = await createObject(t, cls.id, {});
    await createObject(t, cls.id, {});
    const reader = await principalWith(t, [[cid, ['ReadClass', 'ReadObject']]]);
    const all = await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { token: reader.token });
    expect(all.headers.get('x-total-count')).toBe('2');
    const narrowed = await t.request('GET', `/api/v1/classes/${cls.id}/objects`, {
      token: reader.token,
      query: { permissions: 'UpdateObject' },
    });
    expect(ids(narrowed)).toEqual([]);
    const scoped = await principalWith(t, [[cid, ['ReadClass', 'ReadObject']]], {
      scope: { resources: [{ kind: 'class', id: cls.id }] },
    });
    expect(ids(await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { token: scoped.token }))).toHaveLength(2);
    const objectScoped = await principalWith(t, [[cid, ['ReadClass', 'ReadObject']]], {
      scope: { resources: [{ kind: 'object', id: a.id }] },
    });
    // The class itself is outside an object-only scope.
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { token: objectScoped.token })).status).toBe(403);
  });

  it('listObjects 400 for unknown filters and computed keys, 403 without ReadClass, 404 for a missing class', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const queries: Record<string, string>[] = [
      { nope: '1' },
      { 'computed.shared.none': '1' },
      { sort: 'computed.shared.none' },
      { 'related.x.nothing': '1' },
    ];
    for (const query of queries) {
      const res = await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query });
      expect(res.status, JSON.stringify(query)).toBe(400);
    }
    const other = await principalWith(t, [[await collection(t), ['ReadClass', 'ReadObject']]]);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { token: other.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/classes/2000000000/objects')).status).toBe(404);
  });

  it('listObjectsByClassName 200 and 404 for an unknown class name', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, {});
    const res = await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects`);
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual([o.id]);
    expect((await t.request('GET', `/api/v1/classes/by-name/${uniq('none')}/objects`)).status).toBe(404);
  });

  it('listObjects applies related.<alias>.* filters through the relations hook', async () => {
    const cid = await collection(t);
    const hosts = await createClass(t, cid);
    const racks = await createClass(t, cid);
    const h1 = await createObject(t, hosts.id, {});
    await createObject(t, hosts.id, {});
    const r1 = await createObject(t, racks.id, { row: 'A' });
    const [cr] = await t.deps.sql<
      { id: number }[]
    >`insert into class_relations (from_class_id, to_class_id) values (${hosts.id}, ${racks.id}) returning id`;
    await t.deps.sql`insert into object_relations (class_relation_id, from_object_id, to_object_id) values (${cr!.id}, ${h1.id}, ${r1.id})`;
    const res = await t.request('GET', `/api/v1/classes/${hosts.id}/objects`, {
      query: { 'related.r.class.name': racks.name, 'related.r.object.json_data': 'row=A' },
    });
    expect(res.status, res.text).toBe(200);
    expect(ids(res)).toEqual([h1.id]);
  });
});

describe('json_data as the database wrote it (getObject and listObjects pass the jsonb text through)', () => {
  // Every kind of JSON value, strings that need escaping or look like the placeholders the
  // renderer replaces (src/domain/json-text.ts), member names alike, deep nesting.
  const ODD = {
    quote: 'he said "hi"',
    backslashes: 'C:\\path\\u0000 not a NUL',
    unicode: 'ü 😀 \u2028 \u00e9',
    control: 'tab\tnewline\n',
    'member "quoted"': 1,
    '\\u0000': 'a member named backslash-u0000',
    numbers: [0, -1, 1.5, -0.0001, 1e300, 2 ** 53, 12345678901234567000],
    nested: { a: [1, [2, [3, { b: null, c: true, d: false }]]], e: {}, f: [] },
    placeholderish: ['"\\u00000\\u0000"', '\\u00001\\u0000'],
  };

  it('GET and a list page answer the stored value (also a bare string, number, array or null)', async () => {
    const cls = await createClass(t, await collection(t));
    const values: unknown[] = [ODD, 'just a string', 42, [1, 'two', { three: 3 }], null, { '': '' }];
    const created: number[] = [];
    const times = new Map<number, [string, string]>();
    for (const v of values) {
      const res = await t.request('POST', `/api/v1/classes/${cls.id}/objects`, { body: { name: uniq('odd'), json_data: v } });
      expect(res.status, res.text).toBe(201);
      const o = res.body as Obj & { created_at: string; updated_at: string };
      created.push(o.id);
      times.set(o.id, [o.created_at, o.updated_at]);
    }
    const expected = values.map((v) => JSON.parse(JSON.stringify(v)) as unknown);
    for (const [i, id] of created.entries()) {
      const got = await t.request('GET', `/api/v1/classes/${cls.id}/${id}`);
      expect(got.status, got.text).toBe(200);
      expect((got.body as Obj).json_data).toEqual(expected[i]);
      // the times read as the database's UTC text are written exactly as the create wrote its Dates
      const { created_at, updated_at } = got.body as { created_at: string; updated_at: string };
      expect([created_at, updated_at]).toEqual(times.get(id));
      expect(created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    const page = await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query: { sort: 'id', limit: 10 } });
    expect(page.status, page.text).toBe(200);
    expect((page.body as Obj[]).map((o) => o.json_data)).toEqual(expected);
    expect((page.body as (Obj & { created_at: string; updated_at: string })[]).map((o) => [o.created_at, o.updated_at])).toEqual(
      created.map((id) => times.get(id)),
    );
    // the audit list passes its snapshots, provenance and metadata through the same way
    const events = await t.request('GET', `/api/v1/classes/${cls.id}/${created[0]}/events`);
    expect(events.status, events.text).toBe(200);
    const [ev] = events.body as { action: string; after: Obj; before: unknown; metadata: unknown; provenance: { actor: unknown } }[];
    expect(ev).toMatchObject({ action: 'created', before: null, metadata: { class_id: cls.id }, after: { json_data: expected[0] } });
    expect(ev!.provenance.actor).toMatchObject({ kind: 'user' });
    const audit = await t.deps.sql<
      { occurred_at: Date }[]
    >`select occurred_at from events where id = ${(ev as unknown as { id: number }).id}`;
    expect((ev as unknown as { occurred_at: string }).occurred_at).toBe(audit[0]!.occurred_at.toISOString());
    // the times' text is UTC whatever the session's time zone
    const zoned = await t.deps.sql.begin(async (tx) => {
      await tx`set local timezone = 'Asia/Kolkata'`;
      return tx<{ created_at: string; updated_at: string }[]>`select ${objectColsJsonText(tx)} from objects o where o.id = ${created[0]!}`;
    });
    expect([isoTime(zoned[0]!.created_at), isoTime(zoned[0]!.updated_at)]).toEqual(times.get(created[0]!));
    // a name that looks like a placeholder is left alone as well
    const named = await t.request('POST', `/api/v1/classes/${cls.id}/objects`, { body: { name: '"\\u00000\\u0000"', json_data: 1 } });
    expect(named.status, named.text).toBe(201);
    const byName = await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query: { name: '"\\u00000\\u0000"' } });
    expect((byName.body as Obj[]).map((o) => [o.name, o.json_data])).toEqual([['"\\u00000\\u0000"', 1]]);
    const computed = await t.request('GET', `/api/v1/classes/${cls.id}/objects`, { query: { sort: 'id', include: 'computed' } });
    expect(computed.status, computed.text).toBe(200);
    expect((computed.body as Obj[]).map((o) => o.json_data)).toEqual([...expected, 1]);
  });
});
