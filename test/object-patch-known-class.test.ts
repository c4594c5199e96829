// patchObjectData by id under a class this process has read before (src/mutations/objects.ts
// patchOwnObjectData): the object's data read without a lock, the patch applied and checked in the
// process, then the one-statement update at the revision read. It must answer and record exactly as
// the general way (under the locks, which a process's first write under a class takes), lose
// no patch to a concurrent one (an object changed in between goes the general way), and leave every
// refusal (a failed operation, a result the schema refuses, a stale If-Match) to the general way.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.ts';
import { collection, createClass, createObject, principalWith, type Obj, type ObjectEventRow, etagOf } from './class-fixtures.ts';
import { withProxiedApp } from './holding-proxy.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const SCHEMA = {
  type: 'object',
  properties: { cpu: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } } },
  required: ['cpu'],
};

const patchAt = (path: string, ops: unknown, token = t.adminToken, ifMatch?: string) =>
  t.request('PATCH', path, {
    token,
    rawBody: JSON.stringify(ops),
    contentType: 'application/json-patch+json',
    headers: ifMatch ? { 'if-match': ifMatch } : {},
  });
const patch = (classId: number, objectId: number, ops: unknown, token = t.adminToken, ifMatch?: string) =>
  patchAt(`/api/v1/classes/${classId}/${objectId}/data`, ops, token, ifMatch);

type EventRow = Omit<ObjectEventRow, 'collection_id' | 'provenance'>;

async function updateEventsOf(o: { id: number }): Promise<EventRow[]> {
  return t.deps.sql<EventRow[]>`
    select entity_name, actor_user_id, summary, before, after, before_revision, after_revision, metadata
    from events where entity_type = 'object' and entity_id = ${o.id} and action = 'updated' order by id`;
}

/** A class with SCHEMA enforced, read by this process (a create under it: known from here on). */
async function knownClass(cid?: number) {
  const cls = await createClass(t, cid ?? (await collection(t)), { json_schema: SCHEMA, validate_schema: true });
  await createObject(t, cls.id, { cpu: 0 });
  return cls;
}

describe('patchObjectData under a class read before', () => {
  it('answers and records as the general way does, for an administrator and for a granted caller', async () => {
    const cid = await collection(t);
    const cls = await knownClass(cid);
    const writer = await principalWith(t, [[cid, ['CreateObject', 'ReadObject', 'UpdateObject', 'ReadClass']]]);
    for (const token of [t.adminToken, writer.token]) {
      const [fast, general] = [
        await createObject(t, cls.id, { cpu: 1, tags: ['a'] }),
        await createObject(t, cls.id, { cpu: 1, tags: ['a'] }),
      ];
      const steps = [
        [{ op: 'replace', path: '/cpu', value: 2 }],
        [
          { op: 'test', path: '/cpu', value: 2 },
          { op: 'add', path: '/tags/-', value: 'b' },
        ],
      ];
      for (const ops of steps) {
        const a = await patch(cls.id, fast.id, ops, token, ops === steps[1] ? await etagOf(t, cls.id, fast.id) : undefined);
        expect(a.status, a.text).toBe(200);
        // the general way: an app that has read no class yet (its first write reads and locks it)
        const fresh = await startTestApp();
        const b = await fresh
          .request('PATCH', `/api/v1/classes/${cls.id}/${general.id}/data`, {
            token,
            rawBody: JSON.stringify(ops),
            contentType: 'application/json-patch+json',
          })
          .finally(() => fresh.close());
        expect(b.status, b.text).toBe(200);
        expect({ ...(a.body as Obj), id: 0, name: '', created_at: '', updated_at: '' }).toEqual({
          ...(b.body as Obj),
          id: 0,
          name: '',
          created_at: '',
          updated_at: '',
        });
      }
      const [fastEvents, generalEvents] = [await updateEventsOf(fast), await updateEventsOf(general)];
      const asFast = (v: unknown) =>
        JSON.parse(JSON.stringify(v).replaceAll(`"id":${general.id}`, `"id":${fast.id}`).replaceAll(general.name, fast.name)) as unknown;
      const times = (e: EventRow) => ({
        ...e,
        before: { ...e.before, created_at: 'T', updated_at: 'T' },
        after: { ...e.after, created_at: 'T', updated_at: 'T' },
      });
      expect(fastEvents.length).toBe(2);
      expect(fastEvents.map(times)).toEqual(generalEvents.map((e) => asFast(times(e))));
      expect(fastEvents[1]).toMatchObject({
        summary: `object ${fast.name} updated (JSON Patch)`,
        before: { json_data: { cpu: 2, tags: ['a'] }, revision: 2 },
        after: { json_data: { cpu: 2, tags: ['a', 'b'] }, revision: 3 },
        metadata: { class_id: cls.id, data_changed: true },
      });
    }
  });

  it('reads the object, then writes with the one-statement update (no class or object lock statement)', async () => {
    await withProxiedApp(t, async ({ app, proxy, quiet }) => {
      const cls = await createClass(t, await collection(t), { json_schema: SCHEMA, validate_schema: true });
      const o = await createObject(t, cls.id, { cpu: 1 });
      const send = (cpu: number) =>
        app.fetch(
          new Request(`http://test.local/api/v1/classes/${cls.id}/${o.id}/data`, {
            method: 'PATCH',
            headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json-patch+json' },
            body: JSON.stringify([{ op: 'replace', path: '/cpu', value: cpu }]),
          }),
        );
      /** What the app sent to PostgreSQL for one patch (statement texts go once per connection). */
      const sentFor = async (cpu: number) => {
        await quiet();
        proxy.sent = '';
        expect((await send(cpu)).status).toBe(200);
        await quiet();
        return proxy.sent;
      };
      // the first patch reads and locks the class (the general way), which the app then knows
      expect(await sentFor(2)).toContain('for update of o');
      const second = await sentFor(3);
      expect(second).toContain('select json_data, revision from objects where id = $1::int and class_id = $2::int');
      expect(second).toContain('update objects as o set name = coalesce($5::text, old.name)');
      expect(second).not.toContain('for update of o\0');
    });
  });

  it('leaves every refusal to the general way: a failed operation, a result the schema refuses, a stale If-Match, no change', async () => {
    const cls = await knownClass();
    const o = await createObject(t, cls.id, { cpu: 1 });
    const failed = await patch(cls.id, o.id, [{ op: 'test', path: '/cpu', value: 9 }]);
    expect(failed.status).toBe(409);
    const notObject = await patch(cls.id, o.id, [{ op: 'replace', path: '', value: [1] }]);
    expect(notObject.status).toBe(400);
    const refused = await patch(cls.id, o.id, [{ op: 'replace', path: '/cpu', value: 'x' }]);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ reason: 'schema_validation_failed' });
    const same = await patch(cls.id, o.id, [{ op: 'replace', path: '/cpu', value: 1 }]);
    expect(same.status).toBe(200);
    expect(same.body).toMatchObject({ revision: 1 });
    const stale = await etagOf(t, cls.id, o.id);
    expect((await patch(cls.id, o.id, [{ op: 'replace', path: '/cpu', value: 2 }])).status).toBe(200);
    expect((await patch(cls.id, o.id, [{ op: 'replace', path: '/cpu', value: 3 }], t.adminToken, stale)).status).toBe(412);
    const other = await knownClass();
    expect((await patch(other.id, o.id, [{ op: 'replace', path: '/cpu', value: 4 }])).status).toBe(404);
    expect(await t.deps.sql`select json_data, revision from objects where id = ${o.id}`).toEqual([{ json_data: { cpu: 2 }, revision: 2 }]);
    expect((await updateEventsOf(o)).length).toBe(1);
  });

  it('answers 403 without the permission and writes nothing', async () => {
    const cid = await collection(t);
    const cls = await knownClass(cid);
    const o = await createObject(t, cls.id, { cpu: 1 });
    const reader = await principalWith(t, [[cid, ['ReadObject', 'ReadClass']]]);
    expect((await patch(cls.id, o.id, [{ op: 'replace', path: '/cpu', value: 2 }], reader.token)).status).toBe(403);
    expect(await t.deps.sql`select revision from objects where id = ${o.id}`).toEqual([{ revision: 1 }]);
  });

  it('loses no patch of one object under concurrent writers', async () => {
    const cls = await knownClass();
    const o = await createObject(t, cls.id, { cpu: 1, tags: [] });
    const n = 24;
    const replies = await Promise.all(
      Array.from({ length: n }, (_, i) => patch(cls.id, o.id, [{ op: 'add', path: '/tags/-', value: `t${i}` }])),
    );
    expect(replies.map((r) => r.status)).toEqual(Array.from({ length: n }, () => 200));
    expect(new Set(replies.map((r) => (r.body as Obj).revision)).size).toBe(n);
    const [row] = await t.deps.sql<
      { json_data: { tags: string[] }; revision: number }[]
    >`select json_data, revision from objects where id = ${o.id}`;
    expect(row!.revision).toBe(n + 1);
    expect([...row!.json_data.tags].sort()).toEqual(Array.from({ length: n }, (_, i) => `t${i}`).sort());
    const events = await updateEventsOf(o);
    expect(events.map((e) => [e.before_revision, e.after_revision])).toEqual(Array.from({ length: n }, (_, i) => [i + 1, i + 2]));
    for (let i = 1; i < events.length; i++) expect(events[i]!.before).toEqual(events[i - 1]!.after);
  });
});
