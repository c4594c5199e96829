// updateObject by id under a class this process has read before (src/mutations/objects.ts
// updateOwnObject): one statement checks the class version, the object's class and the permission,
// binds the actor (for the history triggers), updates the object and writes its audit event from the
// row as it was and as it is, and goes out with BEGIN and COMMIT in one round trip. Everything that
// statement cannot settle (the class changed or gone, the object elsewhere or gone, the permission
// withdrawn, a scoped token, data the schema refuses or whose compliance needs a record, an update
// that changes nothing, an If-Match that names no current revision) must come out exactly as the
// general way answers it, which an update by the class's and the object's names takes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import {
  collection,
  createClass,
  createObject,
  eventsOf,
  principalWith,
  type Obj,
  type ObjectEventRow,
  CPU_SCHEMA as SCHEMA,
  etagOf,
} from './class-fixtures.ts';
import { withProxiedApp } from './holding-proxy.ts';
import { EVENTS_CHANNEL } from '../src/db/wakeups.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const update = (classId: number, objectId: number, body: Record<string, unknown>, token = t.adminToken, ifMatch?: string) =>
  t.request('PATCH', `/api/v1/classes/${classId}/${objectId}`, { token, body, headers: ifMatch ? { 'if-match': ifMatch } : {} });

/** The object's update events, with what the test cannot know beforehand (ids, times) put in terms of the object. */
async function updateEventsOf(o: Obj) {
  const rows = await t.deps.sql<
    ObjectEventRow[]
  >`select entity_name, collection_id, actor_user_id, summary, before, after, before_revision, after_revision, metadata, provenance
    from events where entity_type = 'object' and entity_id = ${o.id} and action = 'updated' order by id`;
  return rows;
}

describe('updateObject under a class read before', () => {
  it('goes out in one round trip: the update and COMMIT are sent before any answer comes back', async () => {
    await withProxiedApp(t, async ({ app, proxy, config, quiet }) => {
      const patch = (classId: number, objectId: number, cpu: number, ifMatch?: string) =>
        app.fetch(
          new Request(`http://test.local/api/v1/classes/${classId}/${objectId}`, {
            method: 'PATCH',
            headers: {
              authorization: `Bearer ${t.adminToken}`,
              'content-type': 'application/json',
              ...(ifMatch ? { 'if-match': ifMatch } : {}),
            },
            body: JSON.stringify({ json_data: { cpu } }),
          }),
        );
      const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
      const o = await createObject(t, cls.id, { cpu: 1 });
      // the first update reads the class (two round trips); the others prepare the one statement on
      // every pooled connection, so that the held one finds it prepared
      let cpu = 1;
      for (let i = 0; i < 2 * config.SVC_DB_POOL_MAX + 2; i++) expect((await patch(cls.id, o.id, ++cpu)).status).toBe(200);
      for (const conditional of [false, true]) {
        const marker = conditional ? 987_654_322 : 987_654_321;
        const ifMatch = conditional ? await etagOf(t, cls.id, o.id) : undefined;
        await quiet(); // the fan-out wake that follows each update's commit
        // Every answer is held: the new data (a parameter of the update) can only be on the wire now if
        // the client did not wait for the class and the object to be read first; the reply completes
        // without the answer to anything sent later: COMMIT went with it.
        const { sent, reply: res } = await proxy.sendHeld([String(marker)], () => patch(cls.id, o.id, marker, ifMatch));
        expect(res.status).toBe(200);
        // BEGIN (a simple query), then two statements executed: the update and COMMIT. An Execute
        // message is 'E', length 9, the unnamed portal, no row limit.
        expect(sent.startsWith('Q\0\0\0\x0bbegin \0')).toBe(true);
        expect(sent.split('E\0\0\0\t\0\0\0\0\0').length - 1).toBe(2);
        const body = (await res.json()) as Obj;
        proxy.release();
        expect(body).toMatchObject({
          id: o.id,
          json_data: { cpu: marker },
          revision: o.revision + 2 * config.SVC_DB_POOL_MAX + 3 + Number(conditional),
        });
        const [row] = await t.deps.sql`select json_data, revision from objects where id = ${o.id}`;
        expect(row).toEqual({ json_data: { cpu: marker }, revision: body.revision });
      }
    });
  });

  it('writes the same audit event and history as the general way, for an administrator and for a granted caller', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA, validate_schema: true });
    const writer = await principalWith(t, [[cid, ['CreateObject', 'ReadObject', 'UpdateObject', 'ReadClass']]]);
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and kind = 'human'`;
    for (const [token, actor] of [
      [t.adminToken, admin!.id],
      [writer.token, writer.id],
    ] as const) {
      // the same three updates of two objects: one by id (the one-statement way, the first with
      // If-Match), one by the class's and its own names (the general way)
      const [fast, general] = [await createObject(t, cls.id, { cpu: 1 }), await createObject(t, cls.id, { cpu: 1 })];
      let generalName = general.name;
      const steps: Record<string, unknown>[] = [
        { json_data: { cpu: 2 } },
        { description: 'rack 4' }, // data unchanged: data_changed false
        { name: uniq('renamed'), json_data: { cpu: 3 } },
      ];
      for (const step of steps) {
        const a = await update(cls.id, fast.id, step, token, step === steps[0] ? await etagOf(t, cls.id, fast.id) : undefined);
        expect(a.status, a.text).toBe(200);
        const b = await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}/objects/by-name/${generalName}`, {
          token,
          body: step.name ? { ...step, name: `${step.name as string}-g` } : step,
        });
        expect(b.status, b.text).toBe(200);
        generalName = (b.body as Obj).name;
        expect((a.body as Obj).revision).toBe((b.body as Obj).revision);
      }
      const [fastEvents, generalEvents] = [await updateEventsOf(fast), await updateEventsOf(general)];
      expect(fastEvents.length).toBe(3);
      // the general way's events, told in terms of the other object, are the one statement's
      const asFast = (v: unknown) =>
        JSON.parse(
          JSON.stringify(v)
            .replaceAll(`"id":${general.id}`, `"id":${fast.id}`)
            .replaceAll(general.name, fast.name)
            .replace(/(renamed-[0-9a-z]+)-g/g, '$1'),
        );
      const times = (e: { before: Record<string, unknown>; after: Record<string, unknown> }) => ({
        ...e,
        before: { ...e.before, created_at: 'T', updated_at: 'T' },
        after: { ...e.after, created_at: 'T', updated_at: 'T' },
      });
      expect(fastEvents.map(times)).toEqual(generalEvents.map((e) => asFast(times(e))));
      // what they hold: the object before and after (as a GET shows it), the revisions, the actor
      const now = (await t.request('GET', `/api/v1/classes/${cls.id}/${fast.id}`)).body as Obj & { description: string };
      const last = fastEvents[2]!;
      expect(last.after).toEqual(now);
      expect(last).toMatchObject({
        entity_name: now.name,
        collection_id: cid,
        actor_user_id: actor,
        summary: `object ${now.name} updated`,
        before: { id: fast.id, name: fast.name, description: 'rack 4', json_data: { cpu: 2 }, revision: 3 },
        before_revision: 3,
        after_revision: 4,
        metadata: { class_id: cls.id, data_changed: true },
      });
      expect(fastEvents.map((e) => e.metadata.data_changed)).toEqual([true, false, true]);
      const history = await t.deps.sql`
        select operation, revision, actor_kind, actor_principal_id from entity_history
        where entity_kind = 'object' and entity_id = ${fast.id} order by revision`;
      expect(history).toEqual([
        { operation: 'insert', revision: 1, actor_kind: 'user', actor_principal_id: admin!.id },
        ...[2, 3, 4].map((revision) => ({ operation: 'update', revision, actor_kind: 'user', actor_principal_id: actor })),
      ]);
    }
  });

  it('loses no update of one object under concurrent writers: every revision once, each event chained to the one before', async () => {
    const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
    const o = await createObject(t, cls.id, { cpu: 0 });
    await update(cls.id, o.id, { json_data: { cpu: 1 } });
    const n = 24;
    const replies = await Promise.all(Array.from({ length: n }, (_, i) => update(cls.id, o.id, { json_data: { cpu: 100 + i } })));
    expect(replies.map((r) => r.status)).toEqual(Array.from({ length: n }, () => 200));
    expect(new Set(replies.map((r) => (r.body as Obj).revision)).size).toBe(n);
    const events = await updateEventsOf(o);
    expect(events.map((e) => [e.before_revision, e.after_revision])).toEqual(Array.from({ length: n + 1 }, (_, i) => [i + 1, i + 2]));
    for (let i = 1; i < events.length; i++) expect(events[i]!.before).toEqual(events[i - 1]!.after);
    const [row] = await t.deps.sql<{ revision: number; json_data: unknown }[]>`select revision, json_data from objects where id = ${o.id}`;
    expect(row).toEqual({ revision: n + 2, json_data: events.at(-1)!.after.json_data });
  });

  it('answers an update that changes nothing with the object as it is, and writes nothing', async () => {
    const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
    const o = await createObject(t, cls.id, { cpu: 5 });
    await update(cls.id, o.id, { json_data: { cpu: 6 } });
    const same = await update(cls.id, o.id, { json_data: { cpu: 6 }, name: o.name });
    expect(same.status).toBe(200);
    expect(same.body).toMatchObject({ revision: 2, json_data: { cpu: 6 } });
    expect((await updateEventsOf(o)).length).toBe(1);
  });

  it('wakes the event fan-out after an update it wrote, and not after one that changed nothing', async () => {
    await withProxiedApp(t, async ({ app, proxy, quiet }) => {
      const patch = (classId: number, objectId: number, body: Record<string, unknown>) =>
        app.fetch(
          new Request(`http://test.local/api/v1/classes/${classId}/${objectId}`, {
            method: 'PATCH',
            headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          }),
        );
      const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
      const o = await createObject(t, cls.id, { cpu: 5 });
      /** What the app sent to PostgreSQL for `body`'s update, its wakes included (a wake's NOTIFY names its channel as a parameter). */
      const sentFor = async (body: Record<string, unknown>, revision: number) => {
        await quiet();
        proxy.sent = '';
        const res = await patch(cls.id, o.id, body);
        expect(res.status).toBe(200);
        expect(((await res.json()) as Obj).revision).toBe(revision);
        await quiet();
        return proxy.sent;
      };
      // the first update reads the class; the second is the one statement's, and wakes the fan-out
      await sentFor({ json_data: { cpu: 6 } }, 2);
      expect(await sentFor({ json_data: { cpu: 7 } }, 3)).toContain(EVENTS_CHANNEL);
      // the one statement writes nothing, the general way finds nothing to change: no wake
      expect(await sentFor({ json_data: { cpu: 7 }, name: o.name }, 3)).not.toContain(EVENTS_CHANNEL);
      expect((await updateEventsOf(o)).length).toBe(2);
    });
  });

  it('answers If-Match as the general way does: 412 for a stale tag, 400 for a malformed one (after 404)', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, {});
    const first = await etagOf(t, cls.id, o.id);
    expect((await update(cls.id, o.id, { json_data: { n: 1 } }, t.adminToken, first)).status).toBe(200);
    const current = await etagOf(t, cls.id, o.id);
    const stale = await update(cls.id, o.id, { json_data: { n: 2 } }, t.adminToken, first);
    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ reason: 'stale_resource' });
    // another object's tag of the same revision does not match either
    const other = await createObject(t, cls.id, {});
    await update(cls.id, other.id, { json_data: { n: 1 } });
    expect((await update(cls.id, o.id, { json_data: { n: 2 } }, t.adminToken, await etagOf(t, cls.id, other.id))).status).toBe(412);
    // any of a list, and *
    expect((await update(cls.id, o.id, { json_data: { n: 3 } }, t.adminToken, `${first}, ${current}`)).status).toBe(200);
    expect((await update(cls.id, o.id, { json_data: { n: 4 } }, t.adminToken, '*')).status).toBe(200);
    for (const malformed of ['W/"x"', 'nope', '"a", "b", "c", "d", "e", "f", "g", "h", "i"']) {
      expect((await update(cls.id, o.id, { json_data: { n: 5 } }, t.adminToken, malformed)).status).toBe(400);
      expect((await update(cls.id, 2 ** 31 - 1, { json_data: { n: 5 } }, t.adminToken, malformed)).status).toBe(404);
    }
    // a revision beyond any integer column's is no revision of it
    const huge = current.replace(/\.\d+"$/, '.99999999999"');
    expect((await update(cls.id, o.id, { json_data: { n: 6 } }, t.adminToken, huge)).status).toBe(412);
    expect((await t.deps.sql`select json_data, revision from objects where id = ${o.id}`)[0]).toEqual({ json_data: { n: 4 }, revision: 4 });
    expect((await updateEventsOf(o)).map((e) => e.after_revision)).toEqual([2, 3, 4]);
  });

  it('answers 409 for a name taken in the class and writes nothing', async () => {
    const cls = await createClass(t, await collection(t));
    const [a, b] = [await createObject(t, cls.id, {}), await createObject(t, cls.id, {})];
    await update(cls.id, a.id, { description: 'known' });
    const res = await update(cls.id, a.id, { name: b.name, json_data: { x: 1 } });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: 'Conflict' });
    expect((await t.deps.sql`select name, json_data, revision from objects where id = ${a.id}`)[0]).toEqual({
      name: a.name,
      json_data: {},
      revision: 2,
    });
    expect((await updateEventsOf(a)).length).toBe(1);
  });

  it('checks the data against the schema as it is now, and records compliance where it is not enforced', async () => {
    const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
    const o = await createObject(t, cls.id, { cpu: 1 });
    expect((await update(cls.id, o.id, { json_data: { cpu: 2 } })).status).toBe(200);
    const refused = await update(cls.id, o.id, { json_data: { cpu: 'x' } });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ reason: 'schema_validation_failed', details: [{ path: '/cpu' }] });
    // stricter since: what the schema read before accepts is refused now
    const stricter = { ...SCHEMA, properties: { cpu: { type: 'integer', maximum: 10 } } };
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { json_schema: stricter } })).status).toBe(200);
    expect((await update(cls.id, o.id, { json_data: { cpu: 3 } })).status).toBe(200);
    const tooBig = await update(cls.id, o.id, { json_data: { cpu: 50 } });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body).toMatchObject({ reason: 'schema_validation_failed', details: [{ path: '/cpu' }] });
    // not enforced: a flip either way is recorded, as for the first update under the class
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { validate_schema: false } })).status).toBe(200);
    expect((await update(cls.id, o.id, { json_data: { cpu: 4 } })).status).toBe(200);
    expect((await update(cls.id, o.id, { json_data: { cpu: 'y' } })).status).toBe(200);
    expect((await update(cls.id, o.id, { json_data: { cpu: 'z' } })).status).toBe(200);
    expect((await update(cls.id, o.id, { json_data: { cpu: 5 } })).status).toBe(200);
    const flips = (await eventsOf(t, 'object_validation', o.id))
      .filter((e) => e.metadata.cause === 'object_written')
      .map((e) => e.metadata.compliant);
    expect(flips).toEqual([false, true]);
    // without a schema, anything goes
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}`, { body: { json_schema: null } })).status).toBe(200);
    expect((await update(cls.id, o.id, { json_data: ['any'] })).status).toBe(200);
  });

  it('answers 404 for an object of another class, an object or a class gone, and 403 without the permission', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const other = await createClass(t, cid);
    const [o, elsewhere, doomed] = [
      await createObject(t, cls.id, {}),
      await createObject(t, other.id, {}),
      await createObject(t, cls.id, {}),
    ];
    expect((await update(cls.id, o.id, { description: 'known' })).status).toBe(200);
    expect((await update(cls.id, elsewhere.id, { description: 'x' })).status).toBe(404);
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/${doomed.id}`)).status).toBe(204);
    expect((await update(cls.id, doomed.id, { description: 'x' })).status).toBe(404);

    const writer = await principalWith(t, [[cid, ['ReadObject', 'UpdateObject', 'ReadClass']]]);
    expect((await update(cls.id, o.id, { description: 'by the writer' }, writer.token)).status).toBe(200);
    await t.deps.sql`delete from collection_permissions where group_id = ${writer.groupId} and permission = 'UpdateObject'`;
    expect((await update(cls.id, o.id, { description: 'denied' }, writer.token)).status).toBe(403);
    const scoped = await principalWith(t, [[cid, ['ReadObject', 'UpdateObject', 'ReadClass']]], {
      scope: { resources: [{ kind: 'class', id: other.id }] },
    });
    expect((await update(cls.id, o.id, { description: 'scoped out' }, scoped.token)).status).toBe(403);
    expect((await t.deps.sql`select description, revision from objects where id = ${o.id}`)[0]).toEqual({
      description: 'by the writer',
      revision: 3,
    });

    expect((await t.request('DELETE', `/api/v1/classes/${other.id}/${elsewhere.id}`)).status).toBe(204);
    expect((await t.request('DELETE', `/api/v1/classes/${other.id}`)).status).toBe(204);
    const gone = await update(other.id, elsewhere.id, { description: 'x' });
    expect(gone.status).toBe(404);
  });
});
