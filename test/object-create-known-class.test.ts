// createObject under a class this process has read before (src/mutations/objects.ts createOwnObject):
// one statement checks the class version and the permission, binds the actor (for the history
// triggers), inserts the object and its audit event, and goes out with BEGIN and COMMIT in one round trip. Everything that statement
// cannot settle (the class changed, renamed or gone, the permission withdrawn, a scoped token, data
// the remembered schema refuses or that needs a compliance record) must come out exactly as the
// first create under a class does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, createClass, createObject, eventsOf, principalWith, type Obj, CPU_SCHEMA as SCHEMA } from './class-fixtures.ts';
import { withProxiedApp } from './holding-proxy.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const create = (classId: number, json_data: unknown, token = t.adminToken, name = uniq('obj')) =>
  t.request('POST', `/api/v1/classes/${classId}/objects`, { token, body: { name, json_data } });

describe('createObject under a class read before', () => {
  it('goes out in one round trip: the insert and COMMIT are sent before any answer comes back', async () => {
    // A second app on the same database whose connections pass a proxy that can hold PostgreSQL's
    // answers; its token cache is on, so the request needs no statement before the create.
    await withProxiedApp(t, async ({ app, proxy, config, quiet }) => {
      const post = (classId: number | string, name: string) =>
        app.fetch(
          new Request(`http://test.local/api/v1/classes/${typeof classId === 'number' ? classId : `by-name/${classId}`}/objects`, {
            method: 'POST',
            headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name, json_data: { cpu: 2 } }),
          }),
        );
      const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
      // the first create reads the class (two round trips); a second prepares the one statement on a
      // connection; run both on every pooled connection so the held one finds its statement prepared
      for (let i = 0; i < 2 * config.SVC_DB_POOL_MAX + 2; i++) expect((await post(cls.id, uniq('warm'))).status).toBe(201);

      // by id, and by the class's name (whose id is then not looked up either)
      for (const route of [cls.id, cls.name]) {
        const name = uniq('one-trip');
        await quiet(); // the fan-out wake that follows each create's commit
        // Every answer is held: the object's name (a parameter of the insert) can only be on the wire
        // now if the client did not wait for the class to be read first; the reply completes without
        // the answer to anything sent later: COMMIT went with it.
        const { sent, reply: res } = await proxy.sendHeld([name], () => post(route, name));
        expect(res.status).toBe(201);
        // BEGIN (a simple query), then two statements executed: the create and COMMIT; no statement
        // of its own binds the actor. An Execute message is 'E', length 9, the unnamed portal, no row limit.
        expect(sent.startsWith('Q\0\0\0\x0bbegin \0')).toBe(true);
        expect(sent.split('E\0\0\0\t\0\0\0\0\0').length - 1).toBe(2);
        const o = (await res.json()) as Obj;
        proxy.release();
        const [row] = await t.deps.sql`select name, class_id from objects where id = ${o.id}`;
        expect(row).toEqual({ name, class_id: cls.id });
      }
    });
  });

  it('remembers a class whose creates were all refused so far: the next create goes out in one round trip', async () => {
    await withProxiedApp(t, async ({ app, proxy, config, quiet }) => {
      const post = (classId: number, name: string) =>
        app.fetch(
          new Request(`http://test.local/api/v1/classes/${classId}/objects`, {
            method: 'POST',
            headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name, json_data: { cpu: 2 } }),
          }),
        );
      const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
      const taken = uniq('taken');
      expect((await create(cls.id, { cpu: 1 }, t.adminToken, taken)).status).toBe(201); // through the other app
      // only conflicts through this app, on every pooled connection: the first reads the class (and
      // is refused), the rest are refused by the one statement, which each connection then has prepared
      for (let i = 0; i < 2 * config.SVC_DB_POOL_MAX + 2; i++) {
        const res = await post(cls.id, taken);
        expect(res.status).toBe(409);
        expect(await res.json()).toMatchObject({ error: 'Conflict' });
      }
      const name = uniq('one-trip');
      await quiet();
      // with every answer held: the class was not read first
      const { sent, reply: res } = await proxy.sendHeld([name], () => post(cls.id, name));
      expect(res.status).toBe(201);
      expect(sent.startsWith('Q\0\0\0\x0bbegin \0')).toBe(true);
      expect(sent.split('E\0\0\0\t\0\0\0\0\0').length - 1).toBe(2);
      proxy.release();
    });
  });

  it("records the object's own id and times in its created event, and the caller in its history", async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA, validate_schema: true });
    await createObject(t, cls.id, { cpu: 1 });
    const writer = await principalWith(t, [[cid, ['CreateObject', 'ReadObject', 'ReadClass']]]);
    await createObject(t, cls.id, { cpu: 1 }, {}, writer.token);
    const res = await create(cls.id, { cpu: 7 }, writer.token);
    expect(res.status, res.text).toBe(201);
    const o = res.body as Obj;
    const read = await t.request('GET', `/api/v1/classes/${cls.id}/${o.id}`);
    expect(read.body).toEqual(o);
    const events = await eventsOf(t, 'object', o.id);
    expect(events.map((e) => [e.action, e.collection_id])).toEqual([['created', cid]]);
    const [e] = await t.deps.sql<{ after: unknown; after_revision: number; summary: string; actor_user_id: number }[]>`
      select after, after_revision, summary, actor_user_id from events where entity_type = 'object' and entity_id = ${o.id}`;
    expect(e).toEqual({
      after: o,
      after_revision: 1,
      summary: `object ${o.name} created in class ${cls.name}`,
      actor_user_id: writer.id,
    });
    const history = await t.deps.sql`
      select operation, revision, actor_kind, actor_principal_id from entity_history
      where entity_kind = 'object' and entity_id = ${o.id}`;
    expect(history).toEqual([{ operation: 'insert', revision: 1, actor_kind: 'user', actor_principal_id: writer.id }]);
    // and an administrator's create (the statement without the grant test) the same way
    const mine = await create(cls.id, { cpu: 8 });
    expect(mine.status, mine.text).toBe(201);
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and kind = 'human'`;
    const adminHistory = await t.deps.sql`
      select operation, revision, actor_kind, actor_principal_id, initiator_principal_id, task_id from entity_history
      where entity_kind = 'object' and entity_id = ${(mine.body as Obj).id}`;
    expect(adminHistory).toEqual([
      {
        operation: 'insert',
        revision: 1,
        actor_kind: 'user',
        actor_principal_id: admin!.id,
        initiator_principal_id: admin!.id,
        task_id: null,
      },
    ]);
  });

  it('checks the data against the schema as it is now, whichever way it changed', async () => {
    const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
    await createObject(t, cls.id, { cpu: 1 });
    await createObject(t, cls.id, { cpu: 2 });
    // stricter: what the schema read before accepts is refused now
    const stricter = { ...SCHEMA, properties: { cpu: { type: 'integer', maximum: 10 } } };
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { json_schema: stricter } })).status).toBe(200);
    const refused = await create(cls.id, { cpu: 50 });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ reason: 'schema_validation_failed', details: [{ path: '/cpu' }] });
    await createObject(t, cls.id, { cpu: 3 });
    // looser: what the schema read before refuses is accepted now
    const looser = { ...SCHEMA, properties: { cpu: { type: ['integer', 'string'] } } };
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { json_schema: looser } })).status).toBe(200);
    await createObject(t, cls.id, { cpu: 'four' });
    await createObject(t, cls.id, { cpu: 'five' });
    expect((await create(cls.id, { cpu: true })).status).toBe(400);
    // validation off: anything goes
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { validate_schema: false } })).status).toBe(200);
    await createObject(t, cls.id, { cpu: 'six' });
  });

  it('answers 404 for a class deleted or renamed since, and creates in its new collection after a move', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const byName = (name: string) =>
      t.request('POST', `/api/v1/classes/by-name/${name}/objects`, { body: { name: uniq('obj'), json_data: {} } });
    expect((await byName(cls.name)).status).toBe(201);
    expect((await byName(cls.name)).status).toBe(201);
    const renamed = uniq('class');
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { name: renamed } })).status).toBe(200);
    expect((await byName(cls.name)).status).toBe(404);
    expect((await byName(renamed)).status).toBe(201);
    // the old name on another class now: creates by that name go there
    const successor = await createClass(t, cid, { name: cls.name });
    const there = await byName(cls.name);
    expect(there.status).toBe(201);
    expect((there.body as Obj).svc_class_id).toBe(successor.id);
    expect((await byName(cls.name)).status).toBe(201);

    const other = await collection(t);
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { collection_id: other } })).status).toBe(200);
    const moved = await createObject(t, cls.id, {});
    expect(moved.collection_id).toBe(other);
    expect((await eventsOf(t, 'object', moved.id)).map((e) => e.collection_id)).toEqual([other]);

    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}`)).status).toBe(204);
    const gone = await create(cls.id, {});
    expect(gone.status).toBe(404);
    expect((await byName(renamed)).status).toBe(404);
  });

  it('answers 403 once the permission is withdrawn, or when the token is scoped elsewhere, and writes nothing', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    await createObject(t, cls.id, {});
    const writer = await principalWith(t, [[cid, ['CreateObject', 'ReadObject', 'ReadClass']]]);
    await createObject(t, cls.id, {}, {}, writer.token);
    await createObject(t, cls.id, {}, {}, writer.token);
    await t.deps.sql`delete from collection_permissions where group_id = ${writer.groupId} and permission = 'CreateObject'`;
    const name = uniq('denied');
    expect((await create(cls.id, {}, writer.token, name)).status).toBe(403);
    // a reader never allowed to create: the class stays known for the others
    const reader = await principalWith(t, [[cid, ['ReadObject', 'ReadClass']]]);
    expect((await create(cls.id, {}, reader.token, name)).status).toBe(403);
    const elsewhere = await createClass(t, cid);
    const scoped = await principalWith(t, [[cid, ['CreateObject', 'ReadObject', 'ReadClass']]], {
      scope: { resources: [{ kind: 'class', id: elsewhere.id }] },
    });
    expect((await create(cls.id, {}, scoped.token, name)).status).toBe(403);
    expect(await t.deps.sql`select id from objects where class_id = ${cls.id} and name = ${name}`).toEqual([]);
    await t.deps
      .sql`insert into collection_permissions (collection_id, group_id, permission) values (${cid}, ${writer.groupId}, 'CreateObject')`;
    expect((await create(cls.id, {}, writer.token, name)).status).toBe(201);
  });

  it('answers 409 for a duplicate name and leaves no event behind', async () => {
    const cls = await createClass(t, await collection(t));
    const first = await createObject(t, cls.id, {});
    await createObject(t, cls.id, {});
    expect((await create(cls.id, {}, t.adminToken, first.name)).status).toBe(409);
    const [n] = await t.deps.sql<{ n: number }[]>`
      select count(*)::int as n from events where entity_type = 'object' and entity_name = ${first.name}
        and (metadata->>'class_id')::int = ${cls.id}`;
    expect(n!.n).toBe(1);
  });

  it('records compliance under a schema that is not enforced, for the second object as for the first', async () => {
    const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: false });
    const flips = async (o: Obj) => (await eventsOf(t, 'object_validation', o.id)).map((e) => e.action);
    const good1 = await createObject(t, cls.id, { cpu: 1 });
    const good2 = await createObject(t, cls.id, { cpu: 2 });
    const bad1 = await createObject(t, cls.id, { cpu: 'x' });
    const bad2 = await createObject(t, cls.id, { cpu: 'y' });
    expect([await flips(good1), await flips(good2)]).toEqual([[], []]);
    expect((await flips(bad1)).length).toBe(1);
    expect(await flips(bad2)).toEqual(await flips(bad1));
  });
});
