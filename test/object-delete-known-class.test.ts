// deleteObject by id under a class this process has read before (src/mutations/objects.ts
// deleteOwnObject): one statement checks the class version, the object's class, If-Match and the
// permission, binds the actor (for the history triggers), deletes an object that has no relations
// and writes its audit event from the deleted row, and goes out with BEGIN and COMMIT in one round
// trip. Everything that statement cannot settle (an object with relations, the class changed or gone,
// the object elsewhere or gone, the permission withdrawn, a scoped token, an If-Match that names no
// current revision) must come out exactly as the general way answers it, which a delete by the
// class's and the object's names takes; and a relation committed while the statement waited for the
// object's lock must not go with the object unrecorded (migrations/0320_object_delete_alone.sql).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, createClass, createObject, principalWith, etagOf } from './class-fixtures.ts';
import { withProxiedApp } from './holding-proxy.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const remove = (classId: number, objectId: number, token = t.adminToken, ifMatch?: string) =>
  t.request('DELETE', `/api/v1/classes/${classId}/${objectId}`, { token, headers: ifMatch ? { 'if-match': ifMatch } : {} });

interface EventRow {
  entity_type: string;
  entity_id: number;
  entity_name: string;
  collection_id: number;
  action: string;
  actor_user_id: number;
  summary: string;
  before: Record<string, unknown>;
  after: unknown;
  before_revision: number;
  after_revision: number | null;
  metadata: Record<string, unknown>;
  provenance: unknown;
}

/** The delete events of an object, or of an object relation. */
async function deleteEventsOf(kind: 'object' | 'object_relation', id: number): Promise<EventRow[]> {
  return t.deps.sql<EventRow[]>`
    select entity_type, entity_id, entity_name, collection_id, action, actor_user_id, summary, before, after,
      before_revision, after_revision, metadata, provenance
    from events where entity_type = ${kind} and entity_id = ${id} and action = 'deleted' order by id`;
}

/** A class relation from `from` to `to` and an object relation between `a` and `b` over it; the latter's id. */
async function relate(from: number, to: number, a: number, b: number): Promise<{ classRelationId: number; id?: number }> {
  const cr = await t.request('POST', '/api/v1/relations/classes', { body: { from_class_id: from, to_class_id: to } });
  expect(cr.status, cr.text).toBe(201);
  const classRelationId = (cr.body as { id: number }).id;
  if (a === 0) return { classRelationId };
  const or = await t.request('POST', '/api/v1/relations/objects', {
    body: { class_relation_id: classRelationId, from_object_id: a, to_object_id: b },
  });
  expect(or.status, or.text).toBe(201);
  return { classRelationId, id: (or.body as { id: number }).id };
}

describe('deleteObject under a class read before', () => {
  it('goes out in one round trip: the delete and COMMIT are sent before any answer comes back', async () => {
    await withProxiedApp(t, async ({ app, proxy, config, quiet }) => {
      const del = (classId: number, objectId: number, requestId: string, ifMatch?: string) =>
        app.fetch(
          new Request(`http://test.local/api/v1/classes/${classId}/${objectId}`, {
            method: 'DELETE',
            headers: { authorization: `Bearer ${t.adminToken}`, 'x-request-id': requestId, ...(ifMatch ? { 'if-match': ifMatch } : {}) },
          }),
        );
      const cls = await createClass(t, await collection(t));
      // the first delete reads the class (two round trips); the others prepare the one statement on
      // every pooled connection, so that the held one finds it prepared
      for (let i = 0; i < 2 * config.SVC_DB_POOL_MAX + 2; i++) {
        const o = await createObject(t, cls.id, {});
        expect((await del(cls.id, o.id, uniq('warm'))).status).toBe(204);
      }
      for (const conditional of [false, true]) {
        const o = await createObject(t, cls.id, {});
        const marker = uniq(conditional ? 'held-if-match' : 'held');
        const ifMatch = conditional ? await etagOf(t, cls.id, o.id) : undefined;
        await quiet(); // the fan-out wake that follows each delete's commit
        // Every answer is held: the request id (a parameter of the delete's event) can only be on the
        // wire now if the client did not wait for the class and the object to be read first; the reply
        // completes without the answer to anything sent later: COMMIT went with it.
        const { sent, reply: res } = await proxy.sendHeld([marker], () => del(cls.id, o.id, marker, ifMatch));
        expect(res.status).toBe(204);
        // BEGIN (a simple query), then two statements executed: the delete and COMMIT
        expect(sent.startsWith('Q\0\0\0\x0bbegin \0')).toBe(true);
        expect(sent.split('E\0\0\0\t\0\0\0\0\0').length - 1).toBe(2);
        proxy.release();
        expect(await t.deps.sql`select id from objects where id = ${o.id}`).toEqual([]);
        const [event] = await deleteEventsOf('object', o.id);
        expect(event).toMatchObject({ before_revision: 1, metadata: { class_id: cls.id, deleted_object_relations: 0 } });
      }
    });
  });

  it('writes the same audit event and history as the general way, for an administrator and for a granted caller', async () => {
    const cid = await collection(t);
    // a class name that PostgreSQL's format() would read as placeholders, were it not escaped
    const cls = await createClass(t, cid, { name: uniq('100% %s %% class') });
    const deleter = await principalWith(t, [[cid, ['CreateObject', 'ReadObject', 'DeleteObject', 'ReadClass']]]);
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and kind = 'human'`;
    await remove(cls.id, (await createObject(t, cls.id, {})).id); // the class is read: known from here on
    for (const [token, actor] of [
      [t.adminToken, admin!.id],
      [deleter.token, deleter.id],
    ] as const) {
      // two objects with the same history: one deleted by id (the one-statement way, with If-Match),
      // one by the class's and its own names (the general way)
      const [fast, general] = [await createObject(t, cls.id, { cpu: 1 }), await createObject(t, cls.id, { cpu: 1 })];
      for (const o of [fast, general])
        expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { body: { description: 'rack 4' } })).status).toBe(200);
      const a = await remove(cls.id, fast.id, token, await etagOf(t, cls.id, fast.id));
      expect(a.status, a.text).toBe(204);
      const b = await t.request('DELETE', `/api/v1/classes/by-name/${encodeURIComponent(cls.name)}/objects/by-name/${general.name}`, {
        token,
      });
      expect(b.status, b.text).toBe(204);
      const [fastEvents, generalEvents] = [await deleteEventsOf('object', fast.id), await deleteEventsOf('object', general.id)];
      expect(fastEvents.length).toBe(1);
      const asFast = (v: unknown) =>
        JSON.parse(JSON.stringify(v).replaceAll(`"id":${general.id}`, `"id":${fast.id}`).replaceAll(general.name, fast.name)) as unknown;
      const times = (e: EventRow) => ({ ...e, entity_id: 0, before: { ...e.before, created_at: 'T', updated_at: 'T' } });
      expect(fastEvents.map(times)).toEqual(generalEvents.map((e) => asFast(times(e))));
      expect(fastEvents[0]).toMatchObject({
        entity_name: fast.name,
        collection_id: cid,
        actor_user_id: actor,
        summary: `object ${fast.name} deleted from class ${cls.name}`,
        before: { id: fast.id, name: fast.name, description: 'rack 4', json_data: { cpu: 1 }, revision: 2 },
        after: null,
        before_revision: 2,
        after_revision: null,
        metadata: { class_id: cls.id, deleted_object_relations: 0 },
      });
      // the history's delete, as the general way records it
      const historyOf = (id: number) => t.deps.sql`
        select operation, revision, actor_kind, actor_principal_id from entity_history
        where entity_kind = 'object' and entity_id = ${id} order by id`;
      const history = await historyOf(fast.id);
      expect(history).toEqual(await historyOf(general.id));
      expect(history.at(-1)).toEqual({ operation: 'delete', revision: 3, actor_kind: 'user', actor_principal_id: actor });
    }
  });

  it('deletes an object with relations the general way, recording each relation', async () => {
    const cid = await collection(t);
    const [a, b] = [await createClass(t, cid), await createClass(t, cid)];
    await remove(a.id, (await createObject(t, a.id, {})).id);
    const [x, y] = [await createObject(t, a.id, {}), await createObject(t, b.id, {})];
    const rel = await relate(a.id, b.id, x.id, y.id);
    expect((await remove(a.id, x.id)).status).toBe(204);
    expect(await t.deps.sql`select id from object_relations where id = ${rel.id!}`).toEqual([]);
    expect((await deleteEventsOf('object_relation', rel.id!)).length).toBe(1);
    expect((await deleteEventsOf('object', x.id))[0]!.metadata).toMatchObject({ deleted_object_relations: 1 });
  });

  it('records a relation committed while the delete waited for the object: the delete goes the general way', async () => {
    const cid = await collection(t);
    const [a, b] = [await createClass(t, cid), await createClass(t, cid)];
    await remove(a.id, (await createObject(t, a.id, {})).id);
    const [x, y] = [await createObject(t, a.id, {}), await createObject(t, b.id, {})];
    const { classRelationId } = await relate(a.id, b.id, 0, 0);
    // Another transaction adds a relation of x (its foreign key share-locks x) and holds it uncommitted
    const other = await t.deps.sql.reserve();
    let relationId: number;
    try {
      await other`begin`;
      const [inserted] = await other<{ id: number }[]>`
        insert into object_relations (class_relation_id, from_object_id, to_object_id)
        values (${classRelationId}, ${x.id}, ${y.id}) returning id`;
      relationId = inserted!.id;
      // The delete's statement sees no relation, then waits for x's lock
      const deleting = remove(a.id, x.id);
      const limit = Date.now() + 10_000;
      for (;;) {
        const [w] = await t.deps.sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where wait_event_type = 'Lock' and query like '%svc.object_delete_alone%' and datname = current_database()`;
        if (w!.n > 0) break;
        if (Date.now() > limit) throw new Error('the delete never waited for the object');
        await new Promise((r) => setTimeout(r, 10));
      }
      await other`commit`;
      const res = await deleting;
      expect(res.status, res.text).toBe(204);
    } finally {
      await other`rollback`.catch(() => undefined); // after a failure: nothing left open on a pooled connection
      other.release();
    }
    expect(await t.deps.sql`select id from objects where id = ${x.id}`).toEqual([]);
    expect(await t.deps.sql`select id from object_relations where id = ${relationId}`).toEqual([]);
    // the relation's delete is recorded, and the object's event counts it
    expect((await deleteEventsOf('object_relation', relationId)).length).toBe(1);
    const events = await deleteEventsOf('object', x.id);
    expect(events.length).toBe(1);
    expect(events[0]!.metadata).toMatchObject({ deleted_object_relations: 1 });
  });

  it('answers If-Match as the general way does: 412 for a stale tag, 400 for a malformed one (after 404)', async () => {
    const cls = await createClass(t, await collection(t));
    await remove(cls.id, (await createObject(t, cls.id, {})).id);
    const o = await createObject(t, cls.id, {});
    const stale = await etagOf(t, cls.id, o.id);
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { body: { description: 'moved on' } })).status).toBe(200);
    const refused = await remove(cls.id, o.id, t.adminToken, stale);
    expect(refused.status).toBe(412);
    expect((await remove(cls.id, o.id, t.adminToken, 'W/"nonsense"')).status).toBe(400);
    expect((await remove(cls.id, 2_147_483_000, t.adminToken, 'W/"nonsense"')).status).toBe(404);
    expect(await t.deps.sql`select revision from objects where id = ${o.id}`).toEqual([{ revision: 2 }]);
    expect((await remove(cls.id, o.id, t.adminToken, `${stale}, ${await etagOf(t, cls.id, o.id)}`)).status).toBe(204);
    expect((await remove(cls.id, o.id, t.adminToken, '*')).status).toBe(404);
  });

  it('answers 404 for an object of another class or gone, and 403 without the permission or out of a scoped token', async () => {
    const cid = await collection(t);
    const [cls, other] = [await createClass(t, cid), await createClass(t, cid)];
    await remove(cls.id, (await createObject(t, cls.id, {})).id);
    const [o, elsewhere] = [await createObject(t, cls.id, {}), await createObject(t, other.id, {})];
    expect((await remove(cls.id, elsewhere.id)).status).toBe(404);
    expect(await t.deps.sql`select id from objects where id = ${elsewhere.id}`).toEqual([{ id: elsewhere.id }]);

    const deleter = await principalWith(t, [[cid, ['ReadObject', 'DeleteObject', 'ReadClass']]]);
    await t.deps.sql`delete from collection_permissions where group_id = ${deleter.groupId} and permission = 'DeleteObject'`;
    expect((await remove(cls.id, o.id, deleter.token)).status).toBe(403);
    const scoped = await principalWith(t, [[cid, ['ReadObject', 'DeleteObject', 'ReadClass']]], {
      scope: { resources: [{ kind: 'class', id: other.id }] },
    });
    expect((await remove(cls.id, o.id, scoped.token)).status).toBe(403);
    expect(await t.deps.sql`select id from objects where id = ${o.id}`).toEqual([{ id: o.id }]);
    expect(await deleteEventsOf('object', o.id)).toEqual([]);
    expect((await remove(cls.id, o.id)).status).toBe(204);
    expect((await remove(cls.id, o.id)).status).toBe(404);
  });
});
