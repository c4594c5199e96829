import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, createClass, createObject, principalWith } from './class-fixtures.ts';
import { purgeHistory } from '../src/workers/history-retention.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';

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
    from entity_versions where entity_kind = ${kind} and entity_id = ${id} order by id`;
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

  it('a JSON Patch and a delete (with the relation it takes along) record the caller, who is not the one who created', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const user = await principalWith(t, [[cid, ['ReadClass', 'ReadObject', 'UpdateObject', 'DeleteObject']]]);
    const a = await createObject(t, cls.id, { a: 1 });
    const b = await createObject(t, cls.id, { b: 1 });
    const cr = await t.request('POST', '/api/v1/relations/classes', { body: { from_class_id: cls.id, to_class_id: cls.id } });
    expect(cr.status, cr.text).toBe(201);
    const rel = await t.request('POST', '/api/v1/relations/objects', {
      body: { class_relation_id: (cr.body as { id: number }).id, from_object_id: a.id, to_object_id: b.id },
    });
    expect(rel.status, rel.text).toBe(201);
    const patched = await t.request('PATCH', `/api/v1/classes/${cls.id}/${a.id}/data`, {
      token: user.token,
      rawBody: JSON.stringify([{ op: 'replace', path: '/a', value: 2 }]),
      contentType: 'application/json-patch+json',
    });
    expect(patched.status, patched.text).toBe(200);
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/${a.id}`, { token: user.token })).status).toBe(204);

    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and kind = 'human'`;
    const who = (v: Version[]) => v.map((x) => [x.operation, x.actor_kind, x.actor_principal_id, x.initiator_principal_id]);
    expect(who(await versionsOf('object', a.id))).toEqual([
      ['insert', 'user', admin!.id, admin!.id],
      ['update', 'user', user.id, user.id],
      ['delete', 'user', user.id, user.id],
    ]);
    expect(who(await versionsOf('object_relation', (rel.body as { id: number }).id))).toEqual([
      ['insert', 'user', admin!.id, admin!.id],
      ['delete', 'user', user.id, user.id],
    ]);
  });

  it('an object relation created by one user and deleted by another records each of them', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const maker = await principalWith(t, [[cid, ['ReadClass', 'ReadObject', 'CreateObjectRelation', 'ReadObjectRelation']]]);
    const breaker = await principalWith(t, [[cid, ['ReadClass', 'ReadObject', 'DeleteObjectRelation', 'ReadObjectRelation']]]);
    const a = await createObject(t, cls.id, {});
    const b = await createObject(t, cls.id, {});
    const cr = await t.request('POST', '/api/v1/relations/classes', { body: { from_class_id: cls.id, to_class_id: cls.id } });
    expect(cr.status, cr.text).toBe(201);
    const rel = await t.request('POST', '/api/v1/relations/objects', {
      token: maker.token,
      body: { class_relation_id: (cr.body as { id: number }).id, from_object_id: a.id, to_object_id: b.id },
    });
    expect(rel.status, rel.text).toBe(201);
    const id = (rel.body as { id: number }).id;
    expect((await t.request('DELETE', `/api/v1/relations/objects/${id}`, { token: breaker.token })).status).toBe(204);
    const v = await versionsOf('object_relation', id);
    expect(v.map((x) => [x.operation, x.actor_kind, x.actor_principal_id, x.initiator_principal_id])).toEqual([
      ['insert', 'user', maker.id, maker.id],
      ['delete', 'user', breaker.id, breaker.id],
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface WireVersion {
  revision: number;
  operation: string;
  valid_from: string;
  valid_to: string | null;
  actor: { kind: string; principal_id: number | null };
  data: { id: number; collection_id: number; revision: number; json_data: unknown };
}

describe('listObjectHistory and getObjectAsOf (and by name)', () => {
  it('an object changed five times across two collections: every version by revision and by instant, per reader', async () => {
    const c1 = await collection(t);
    const c2 = await collection(t);
    const cls = await createClass(t, c1);
    const inC1 = await principalWith(t, [[c1, ['ReadObject']]]);
    const inC2 = await principalWith(t, [[c2, ['ReadObject']]]);
    const neither = await principalWith(t, [[await collection(t), ['ReadObject']]]);
    const o = await createObject(t, cls.id, { step: 0 });
    const change = async (path: string, body: unknown) => {
      await sleep(3); // each version its own millisecond, so each has an instant of its own
      const r = await t.request('PATCH', path, { body });
      expect(r.status, r.text).toBe(200);
    };
    await change(`/api/v1/classes/${cls.id}/${o.id}`, { json_data: { step: 1 } });
    await change(`/api/v1/classes/${cls.id}/${o.id}`, { json_data: { step: 2 } });
    await change(`/api/v1/classes/${cls.id}`, { collection_id: c2 });
    await change(`/api/v1/classes/${cls.id}/${o.id}`, { json_data: { step: 4 } });
    await change(`/api/v1/classes/${cls.id}/${o.id}`, { json_data: { step: 5 } });
    const base = `/api/v1/classes/${cls.id}/${o.id}/history`;

    const all = await t.request('GET', base);
    expect(all.status, all.text).toBe(200);
    const versions = all.body as WireVersion[];
    expect(versions.map((v) => [v.revision, v.operation, v.data.collection_id])).toEqual([
      [6, 'update', c2],
      [5, 'update', c2],
      [4, 'update', c2],
      [3, 'update', c1],
      [2, 'update', c1],
      [1, 'insert', c1],
    ]);
    expect(versions[0]!.valid_to).toBeNull();
    expect(versions[1]!.data).toMatchObject({ id: o.id, revision: 5, json_data: { step: 4 } });
    expect(versions[0]!.actor.kind).toBe('user');

    const seenBy = async (token: string) => {
      const r = await t.request('GET', base, { token });
      return r.status === 200 ? (r.body as WireVersion[]).map((v) => v.revision) : r.status;
    };
    expect(await seenBy(inC1.token)).toEqual([3, 2, 1]);
    expect(await seenBy(inC2.token)).toEqual([6, 5, 4]);
    expect(await seenBy(neither.token)).toBe(403);

    for (const v of versions) {
      // By revision (a filter of the list) and by instant.
      const byRev = await t.request('GET', base, { query: { revision: v.revision } });
      expect((byRev.body as WireVersion[]).map((x) => x.revision)).toEqual([v.revision]);
      const asOf = await t.request('GET', `${base}/as-of`, { query: { at: v.valid_from } });
      expect(asOf.status, asOf.text).toBe(200);
      expect(asOf.body).toEqual(v);
      const c1Reader = await t.request('GET', `${base}/as-of`, { token: inC1.token, query: { at: v.valid_from } });
      const c2Reader = await t.request('GET', `${base}/as-of`, { token: inC2.token, query: { at: v.valid_from } });
      const inFirst = v.data.collection_id === c1;
      expect([c1Reader.status, c2Reader.status]).toEqual(inFirst ? [200, 403] : [403, 200]);
      expect(((inFirst ? c1Reader : c2Reader).body as WireVersion).revision).toBe(v.revision);
      const other = await t.request('GET', `${base}/as-of`, { token: neither.token, query: { at: v.valid_from } });
      expect(other.status).toBe(403);
      const byName = await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects/by-name/${o.name}/history/as-of`, {
        query: { at: v.valid_from },
      });
      expect(byName.body).toEqual(v);
    }

    // Paging newest first, filters of the list query language.
    const page = await t.request('GET', base, { query: { limit: 4 } });
    expect((page.body as WireVersion[]).map((v) => v.revision)).toEqual([6, 5, 4, 3]);
    const cursor = page.headers.get('x-next-cursor');
    expect(cursor).toBeTruthy();
    const next = await t.request('GET', base, { query: { limit: 4, cursor: cursor! } });
    expect((next.body as WireVersion[]).map((v) => v.revision)).toEqual([2, 1]);
    const inserts = await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects/by-name/${o.name}/history`, {
      query: { operation: 'insert' },
    });
    expect((inserts.body as WireVersion[]).map((v) => v.revision)).toEqual([1]);
    const late = await t.request('GET', base, { query: { valid_from__gte: versions[2]!.valid_from, sort: 'revision' } });
    expect((late.body as WireVersion[]).map((v) => v.revision)).toEqual([4, 5, 6]);

    // Before it existed: 404; not a timestamp: 400; another class: 404.
    const before = new Date(Date.parse(versions.at(-1)!.valid_from) - 60_000).toISOString();
    expect((await t.request('GET', `${base}/as-of`, { query: { at: before } })).status).toBe(404);
    expect((await t.request('GET', `${base}/as-of`, { query: { at: 'yesterday' } })).status).toBe(400);
    expect((await t.request('GET', base, { query: { operation: 'merge' } })).status).toBe(400);
    const otherClass = await createClass(t, c1);
    expect((await t.request('GET', `/api/v1/classes/${otherClass.id}/${o.id}/history`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/2000000000/history`)).status).toBe(404);
    expect((await t.request('GET', base, { token: null })).status).toBe(401);

    // Deleted: the tombstone and every version for unscoped administrators only.
    await sleep(3);
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/${o.id}`)).status).toBe(204);
    const after = await t.request('GET', base);
    const tomb = (after.body as WireVersion[])[0]!;
    expect([tomb.revision, tomb.operation, tomb.valid_to, tomb.data.revision]).toEqual([7, 'delete', null, 6]);
    const now = await t.request('GET', `${base}/as-of`, { query: { at: tomb.valid_from } });
    expect((now.body as WireVersion).operation).toBe('delete');
    expect((await t.request('GET', base, { token: inC2.token })).status).toBe(404);
    expect((await t.request('GET', `${base}/as-of`, { token: inC1.token, query: { at: versions.at(-1)!.valid_from } })).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects/by-name/${o.name}/history`)).status).toBe(404);
  });
});

describe('the history of collections, classes, relations, export templates and remote targets', () => {
  it('versions that begin at one instant: two changes in one transaction, and a transaction older than the version it replaces', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, { v: 0 });
    const base = `/api/v1/classes/${cls.id}/${o.id}/history`;
    // Two changes in one transaction: the first version ends the instant it begins.
    await t.deps.sql.begin(async (tx) => {
      await tx`update objects set json_data = '{"v": 1}', revision = revision + 1 where id = ${o.id}`;
      await tx`update objects set json_data = '{"v": 2}', revision = revision + 1 where id = ${o.id}`;
    });
    // A transaction that began before the next change commits changes the object after it: its
    // version begins where the one it replaces began, never before.
    const older = await t.deps.sql.reserve();
    try {
      await older`begin`;
      await older`select now()`; // the transaction's time, fixed from here
      await sleep(20);
      expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { body: { json_data: { v: 3 } } })).status).toBe(200);
      await older`update objects set json_data = '{"v": 4}', revision = revision + 1 where id = ${o.id}`;
      await older`commit`;
    } finally {
      older.release();
    }
    const list = await t.request('GET', base);
    expect(list.status, list.text).toBe(200);
    const v = (list.body as WireVersion[]).reverse();
    expect(v.map((x) => x.revision)).toEqual([1, 2, 3, 4, 5]);
    for (let i = 0; i < v.length - 1; i++) expect(v[i]!.valid_to).toBe(v[i + 1]!.valid_from);
    expect(v[1]!.valid_to).toBe(v[1]!.valid_from);
    expect(v[3]!.valid_to).toBe(v[3]!.valid_from);
    expect(v[4]!.valid_to).toBeNull();
    // As of the instant two versions began, the later one was current.
    for (const [at, revision] of [
      [v[1]!.valid_from, 3],
      [v[3]!.valid_from, 5],
      [v[0]!.valid_from, v[0]!.valid_from === v[1]!.valid_from ? 3 : 1],
    ] as const) {
      const asOf = await t.request('GET', `${base}/as-of`, { query: { at } });
      expect(asOf.status, asOf.text).toBe(200);
      expect((asOf.body as WireVersion).revision, at).toBe(revision);
    }
    // Before the first version: nothing.
    const before = await t.request('GET', `${base}/as-of`, { query: { at: new Date(Date.parse(v[0]!.valid_from) - 1).toISOString() } });
    expect(before.status).toBe(404);
  });

  it('list and as-of for each kind (200, 403 for a reader of neither version, 404 unknown, 400 bad instant); relations judged by their ends then', async () => {
    const c1 = await collection(t);
    const c2 = await collection(t);
    const a = await createClass(t, c1);
    const b = await createClass(t, c1);
    const oa = await createObject(t, a.id, {});
    const ob = await createObject(t, b.id, {});
    const cr = await t.request('POST', '/api/v1/relations/classes', { body: { from_class_id: a.id, to_class_id: b.id } });
    expect(cr.status, cr.text).toBe(201);
    const crId = (cr.body as { id: number }).id;
    const or = await t.request('POST', '/api/v1/relations/objects', {
      body: { class_relation_id: crId, from_object_id: oa.id, to_object_id: ob.id },
    });
    expect(or.status, or.text).toBe(201);
    const tpl = await t.request('POST', '/api/v1/export-templates', { body: { collection_id: c1, name: uniq('tpl'), template: 'x' } });
    expect(tpl.status, tpl.text).toBe(201);
    const rt = await t.request('POST', '/api/v1/remote-targets', {
      body: {
        collection_id: c1,
        name: uniq('rt'),
        description: 'a target',
        method: 'post',
        url_template: 'https://hooks.example.com/x',
        allowed_subject_types: ['collection'],
      },
    });
    expect(rt.status, rt.text).toBe(201);
    await sleep(3);
    expect((await t.request('PATCH', `/api/v1/classes/${a.id}`, { body: { description: 'changed' } })).status).toBe(200);

    const reader = await principalWith(t, [
      [c1, ['ReadCollection', 'ReadClass', 'ReadObject', 'ReadClassRelation', 'ReadObjectRelation', 'ReadTemplate', 'ReadRemoteTarget']],
    ]);
    const outsider = await principalWith(t, [
      [c2, ['ReadCollection', 'ReadClass', 'ReadClassRelation', 'ReadObjectRelation', 'ReadTemplate']],
    ]);
    const bases = [
      `/api/v1/collections/${c1}/history`,
      `/api/v1/classes/${a.id}/history`,
      `/api/v1/classes/by-name/${a.name}/history`,
      `/api/v1/relations/classes/${crId}/history`,
      `/api/v1/relations/objects/${(or.body as { id: number }).id}/history`,
      `/api/v1/export-templates/${(tpl.body as { id: number }).id}/history`,
      `/api/v1/remote-targets/${(rt.body as { id: number }).id}/history`,
    ];
    for (const base of bases) {
      const list = await t.request('GET', base, { token: reader.token });
      expect(list.status, `${base}: ${list.text}`).toBe(200);
      const versions = list.body as WireVersion[];
      expect(versions.at(-1)!.operation, base).toBe('insert');
      const at = versions.at(-1)!.valid_from;
      const asOf = await t.request('GET', `${base}/as-of`, { token: reader.token, query: { at } });
      expect(asOf.status, base).toBe(200);
      expect(asOf.body, base).toEqual(versions.at(-1));
      expect((await t.request('GET', base, { token: outsider.token })).status, base).toBe(403);
      expect((await t.request('GET', `${base}/as-of`, { token: outsider.token, query: { at } })).status, base).toBe(403);
      expect((await t.request('GET', `${base}/as-of`, { query: { at: '2001-01-01T00:00:00Z' } })).status, base).toBe(404);
      expect((await t.request('GET', `${base}/as-of`, { query: { at: 'x' } })).status, base).toBe(400);
    }
    const classVersions = (await t.request('GET', `/api/v1/classes/${a.id}/history`)).body as WireVersion[];
    expect(classVersions.map((v) => [v.revision, v.operation])).toEqual([
      [2, 'update'],
      [1, 'insert'],
    ]);
    for (const missing of [
      '/api/v1/collections/2000000000/history',
      '/api/v1/relations/classes/2000000000/history',
      '/api/v1/relations/objects/2000000000/history',
      '/api/v1/export-templates/2000000000/history',
      '/api/v1/remote-targets/2000000000/history',
      `/api/v1/classes/by-name/${uniq('none')}/history`,
    ]) {
      expect((await t.request('GET', missing)).status, missing).toBe(404);
    }
  });
});

describe('history operations without a token', () => {
  it('401 for every list and as-of operation of every versioned kind (by id and by name)', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const o = await createObject(t, cls.id, {});
    const bases = [
      `/api/v1/collections/${cid}/history`,
      `/api/v1/classes/${cls.id}/history`,
      `/api/v1/classes/by-name/${cls.name}/history`,
      `/api/v1/relations/classes/1/history`,
      `/api/v1/relations/objects/1/history`,
      `/api/v1/export-templates/1/history`,
      `/api/v1/remote-targets/1/history`,
      `/api/v1/classes/${cls.id}/${o.id}/history`,
      `/api/v1/classes/by-name/${cls.name}/objects/by-name/${o.name}/history`,
    ];
    const at = new Date().toISOString();
    for (const base of bases) {
      const list = await t.request('GET', base, { token: null });
      expect(list.status, base).toBe(401);
      const asOf = await t.request('GET', `${base}/as-of`, { token: null, query: { at } });
      expect(asOf.status, `${base}/as-of`).toBe(401);
    }
  });
});

describe('history retention (SVC_HISTORY_RETENTION_DAYS)', () => {
  const days = (n: number) => ({ ...t.deps, config: { ...t.deps.config, SVC_HISTORY_RETENTION_DAYS: n } });
  /** Moves the versions of `revisions` back by `ago` days (a version ends when the next begins). */
  const age = (id: number, revisions: number[], ago: number) => t.deps.sql`
    update entity_history set valid_from = valid_from - make_interval(days => ${ago}::int)
    where entity_kind = 'object' and entity_id = ${id} and revision = any(${revisions}::int[])`;

  it('purges versions that ended longer ago than the setting; the current version stays; 0 is off', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, { v: 0 });
    for (const v of [1, 2]) {
      expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { body: { json_data: { v } } })).status).toBe(200);
    }
    // All three began 40 days ago: the first two ended then, the third is current.
    await age(o.id, [1, 2, 3], 40);
    expect(await purgeHistory(t.deps)).toBe(0);
    expect((await versionsOf('object', o.id)).length).toBe(3);
    expect(await purgeHistory(days(30))).toBeGreaterThanOrEqual(2);
    const left = await versionsOf('object', o.id);
    expect(left.map((v) => [v.revision, v.valid_to])).toEqual([[3, null]]);
    const res = await t.request('GET', `/api/v1/classes/${cls.id}/${o.id}/history`);
    expect((res.body as WireVersion[]).map((v) => v.revision)).toEqual([3]);
    // The current version is the one found as of any instant after it began.
    const asOf = await t.request('GET', `/api/v1/classes/${cls.id}/${o.id}/history/as-of`, {
      query: { at: new Date(Date.now() - 20 * 86_400_000).toISOString() },
    });
    expect(asOf.status, asOf.text).toBe(200);
    expect((asOf.body as WireVersion).revision).toBe(3);
  });

  it('a version is purged by when it ended (when the next began), not when it began; a tombstone is current', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, { v: 0 });
    const other = await createObject(t, cls.id, { v: 0 });
    for (const v of [1, 2, 3]) {
      expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { body: { json_data: { v } } })).status).toBe(200);
    }
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/${o.id}`)).status).toBe(204);
    // Revisions 1 and 2 began 40 days ago, 3 20 days ago, 4 10 days ago; the tombstone (5) now.
    await age(o.id, [1, 2], 40);
    await age(o.id, [3], 20);
    await age(o.id, [4], 10);
    await age(other.id, [1], 40);

    await purgeHistory(days(30)); // 1 ended 40 days ago; 2 ended 20 days ago
    expect((await versionsOf('object', o.id)).map((v) => v.revision)).toEqual([2, 3, 4, 5]);
    await purgeHistory(days(15)); // 2 (ended 20 days ago); 3 ended 10 days ago
    expect((await versionsOf('object', o.id)).map((v) => v.revision)).toEqual([3, 4, 5]);
    await purgeHistory(days(1)); // 3 (ended 10 days ago); 4 ended now, when the tombstone began
    const left = await versionsOf('object', o.id);
    expect(left.map((v) => [v.revision, v.operation])).toEqual([
      [4, 'update'],
      [5, 'delete'],
    ]);
    expect(left[0]!.valid_to).toEqual(left[1]!.valid_from);
    expect(left[1]!.valid_to).toBeNull();
    // Another object's only version is current, however old.
    expect((await versionsOf('object', other.id)).map((v) => v.revision)).toEqual([1]);
    expect(await purgeHistory(days(1))).toBe(0);
  });

  it('one purger at a time: while another holds the purge, a purge deletes nothing and the next one does', async () => {
    const cls = await createClass(t, await collection(t));
    const o = await createObject(t, cls.id, { v: 0 });
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${o.id}`, { body: { json_data: { v: 1 } } })).status).toBe(200);
    await age(o.id, [1, 2], 40);
    const other = await t.deps.sql.reserve();
    try {
      await other`begin`;
      await other`select pg_advisory_xact_lock(727331)`;
      expect(await purgeHistory(days(30))).toBe(0);
      expect((await versionsOf('object', o.id)).length).toBe(2);
      await other`commit`;
    } finally {
      other.release();
    }
    expect(await purgeHistory(days(30))).toBeGreaterThanOrEqual(1);
    expect((await versionsOf('object', o.id)).map((v) => v.revision)).toEqual([2]);
  });
});

describe('history of task work', () => {
  it('an imported collection: its version names the worker, the submitting user and the task', async () => {
    const name = uniq('imported');
    const res = await t.request('POST', '/api/v1/imports', { body: { version: 2, graph: { collections: [{ ref: 'c', name }] } } });
    expect(res.status, res.text).toBe(202);
    const taskId = (res.body as { id: number }).id;
    expect((await runTaskOnce(t.deps, { taskIds: [taskId] }))?.id).toBe(taskId);
    const [c] = await t.deps.sql<{ id: number }[]>`select id from collections where name = ${name} and parent_collection_id is null`;
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and kind = 'human'`;
    const [v] = await t.deps.sql<{ actor_kind: string; initiator_principal_id: number; task_id: number }[]>`
      select actor_kind, initiator_principal_id, task_id from entity_history where entity_kind = 'collection' and entity_id = ${c!.id}`;
    expect(v).toEqual({ actor_kind: 'worker', initiator_principal_id: admin!.id, task_id: taskId });
  });
});
