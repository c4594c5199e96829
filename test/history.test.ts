import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, createClass, createObject, principalWith } from './class-fixtures.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

interface Version {
  revision: number;
  operation: string;
  valid_from: Date;
  valid_to: Date | null;
  actor_kind: string;
  actor_principal_id: number | null;
  initiator_principal_id: number | null;
  collection_id: number | null;
  data: Record<string, unknown>;
}

function versionsOf(kind: string, id: number): Promise<Version[]> {
  return t.deps.sql<Version[]>`
    select revision, operation, valid_from, valid_to, actor_kind, actor_principal_id, initiator_principal_id, collection_id, data
    from entity_history where entity_kind = ${kind} and entity_id = ${id} order by id`;
}

describe('entity history (written by triggers in the change transaction)', () => {
  it('an object: insert, update, a no-op update writing nothing, a move with its class, a delete tombstone; the actor is the caller', async () => {
    const c1 = await collection(t);
    const c2 = await collection(t);
    const cls = await createClass(t, c1);
    const user = await principalWith(t, [[c1, ['ReadClass', 'ReadObject', 'UpdateObject', 'CreateObject', 'DeleteObject']]]);
    const o = await createObject(t, cls.id, { a: 1 });
    const upd = await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { token: user.token, body: { json_data: { a: 2 } } });
    expect(upd.status, upd.text).toBe(200);
    const same = await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { body: { json_data: { a: 2 } } });
    expect(same.status).toBe(200);
    const moved = await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { collection_id: c2 } });
    expect(moved.status, moved.text).toBe(200);
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/${o.id}`)).status).toBe(204);

    const v = await versionsOf('object', o.id);
    expect(v.map((x) => [x.revision, x.operation, x.collection_id])).toEqual([
      [1, 'insert', c1],
      [2, 'update', c1],
      [3, 'update', c2],
      [4, 'delete', c2],
    ]);
    expect(v[1]!.data).toMatchObject({ id: o.id, json_data: { a: 2 }, revision: 2 });
    expect(v[1]!.actor_kind).toBe('user');
    expect(v[1]!.actor_principal_id).toBe(user.id);
    expect(v[1]!.initiator_principal_id).toBe(user.id);
    // Each version is closed by the next; the tombstone stays current.
    for (let i = 0; i < v.length - 1; i++) expect(v[i]!.valid_to).toEqual(v[i + 1]!.valid_from);
    expect(v.at(-1)!.valid_to).toBeNull();

    const classVersions = await versionsOf('class', cls.id);
    expect(classVersions.map((x) => [x.revision, x.operation, x.collection_id])).toEqual([
      [1, 'insert', c1],
      [2, 'update', c2],
    ]);
  });

  it('a rolled-back change leaves no version; users are not versioned', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const a = await createObject(t, cls.id, {});
    const b = await createObject(t, cls.id, {});
    const dup = await t.request('PATCH', `/api/v1/classes/${cls.id}/${a.id}`, { body: { name: b.name } });
    expect(dup.status).toBe(409);
    expect((await versionsOf('object', a.id)).map((x) => x.revision)).toEqual([1]);
    const [n] = await t.deps.sql<{ n: number }[]>`
      select count(*)::int as n from information_schema.triggers where event_object_table in ('users', 'principals') and trigger_name like '%history%'`;
    expect(n!.n).toBe(0);
  });

  it('collections are versioned too', async () => {
    const cid = await collection(t);
    const ren = await t.request('PATCH', `/api/v1/collections/${cid}`, { body: { name: uniq('renamed') } });
    expect(ren.status, ren.text).toBe(200);
    expect((await versionsOf('collection', cid)).map((x) => [x.revision, x.operation])).toEqual([
      [1, 'insert'],
      [2, 'update'],
    ]);
  });
});
