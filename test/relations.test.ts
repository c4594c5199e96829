// Class relations and object relations: create, get, list, delete; authorization on both ends,
// token scopes, max counts (also under concurrency), cascades and audit events.
// Fixtures are written with SQL (collections, classes, objects, principals, grants, tokens) so
// these tests depend only on the relation endpoints.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, startTestApp, type TestApp } from './helpers.ts';
import { graphFixtures } from './graph-fixtures.ts';
import { ensureObjectRelation } from '../src/mutations/relations.ts';
import { SYSTEM_ACTOR } from '../src/domain/actor.ts';
import type { TransactionSql } from '../src/db/sql.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const { collection, klass, object, caller } = graphFixtures(() => t);

const ALL_CR = ['CreateClassRelation', 'ReadClassRelation', 'DeleteClassRelation'];
const ALL_OR = ['CreateObjectRelation', 'ReadObjectRelation', 'DeleteObjectRelation'];

async function createCR(body: Record<string, unknown>, token?: string) {
  return t.request('POST', '/api/v1/relations/classes', { body, token });
}
async function createOR(body: Record<string, unknown>, token?: string) {
  return t.request('POST', '/api/v1/relations/objects', { body, token });
}

describe('class relations', () => {
  it('createClassRelation 201: body, Location, ETag, event with related collections; 409 duplicate; reverse pair allowed', async () => {
    const c1 = await collection();
    const c2 = await collection();
    const a = await klass(c1);
    const b = await klass(c2);
    const res = await createCR({
      from_class_id: a.id,
      to_class_id: b.id,
      forward_alias: 'hosts',
      reverse_alias: 'runs_on',
      to_max_relations: 1,
    });
    expect(res.status, res.text).toBe(201);
    const body = res.body as Record<string, unknown>;
    expect(body).toMatchObject({
      from_class_id: a.id,
      to_class_id: b.id,
      forward_alias: 'hosts',
      reverse_alias: 'runs_on',
      from_max_relations: null,
      to_max_relations: 1,
      revision: 1,
    });
    expect(res.headers.get('location')).toBe(`/api/v1/relations/classes/${body.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.class_relation\./);
    const ev = await eventsOf(t, 'class_relation', body.id as number);
    expect(ev).toHaveLength(1);
    expect(ev[0]).toMatchObject({ action: 'created', collection_id: c1 });
    expect(ev[0]!.metadata.related_collection_ids).toEqual([c2]);

    const dup = await createCR({ from_class_id: a.id, to_class_id: b.id });
    expect(dup.status, dup.text).toBe(409);
    const rev = await createCR({ from_class_id: b.id, to_class_id: a.id });
    expect(rev.status, rev.text).toBe(201);
    const self = await createCR({ from_class_id: a.id, to_class_id: a.id });
    expect(self.status, self.text).toBe(201);
    expect((await eventsOf(t, 'class_relation', (self.body as { id: number }).id))[0]!.metadata.related_collection_ids).toBeUndefined();
  });

  it('createClassRelation 404 for a missing class, 400 for a bad body, 401 without a token', async () => {
    const a = await klass(await collection());
    expect((await createCR({ from_class_id: a.id, to_class_id: 2_000_000_000 })).status).toBe(404);
    expect((await createCR({ from_class_id: 2_000_000_000, to_class_id: a.id })).status).toBe(404);
    expect((await createCR({ from_class_id: a.id, to_class_id: a.id, from_max_relations: 0 })).status).toBe(400);
    expect((await createCR({ from_class_id: a.id, to_class_id: a.id, extra: 1 })).status).toBe(400);
    expect((await createCR({ from_class_id: a.id })).status).toBe(400);
    expect(
      (await t.request('POST', '/api/v1/relations/classes', { token: null, body: { from_class_id: a.id, to_class_id: a.id } })).status,
    ).toBe(401);
  });

  it('createClassRelation 403 without the permission on both ends or with a scope covering one end', async () => {
    const c1 = await collection();
    const c2 = await collection();
    const a = await klass(c1);
    const b = await klass(c2);
    const oneSide = await caller([[c1, ALL_CR]]);
    expect((await createCR({ from_class_id: a.id, to_class_id: b.id }, oneSide.token)).status).toBe(403);
    const both = await caller([
      [c1, ALL_CR],
      [c2, ALL_CR],
    ]);
    const scoped = await t.request('POST', '/api/v1/relations/classes', {
      token: (
        await caller(
          [
            [c1, ALL_CR],
            [c2, ALL_CR],
          ],
          { resources: [{ kind: 'class', id: a.id }] },
        )
      ).token,
      body: { from_class_id: a.id, to_class_id: b.id },
    });
    expect(scoped.status).toBe(403);
    const permScoped = await caller(
      [
        [c1, ALL_CR],
        [c2, ALL_CR],
      ],
      { permissions: ['ReadClassRelation'] },
    );
    expect((await createCR({ from_class_id: a.id, to_class_id: b.id }, permScoped.token)).status).toBe(403);
    expect((await createCR({ from_class_id: a.id, to_class_id: b.id }, both.token)).status).toBe(201);
  });

  it('getClassRelation 200 with ETag; 404 missing; 403 without ReadClassRelation on one end; 400 bad id', async () => {
    const c1 = await collection();
    const c2 = await collection();
    const a = await klass(c1);
    const b = await klass(c2);
    const id = ((await createCR({ from_class_id: a.id, to_class_id: b.id })).body as { id: number }).id;
    const res = await t.request('GET', `/api/v1/relations/classes/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id, from_class_id: a.id, to_class_id: b.id });
    expect(res.headers.get('etag')).toBeTruthy();
    expect((await t.request('GET', '/api/v1/relations/classes/2000000000')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/relations/classes/abc')).status).toBe(400);
    const reader = await caller([[c1, ['ReadClassRelation']]]);
    expect((await t.request('GET', `/api/v1/relations/classes/${id}`, { token: reader.token })).status).toBe(403);
    const both = await caller([
      [c1, ['ReadClassRelation']],
      [c2, ['ReadClassRelation']],
    ]);
    expect((await t.request('GET', `/api/v1/relations/classes/${id}`, { token: both.token })).status).toBe(200);
  });

  it('listClassRelations 200: visibility on both ends in the list and the total, filters, sort, paging; 400 unknown filter', async () => {
    const c1 = await collection();
    const c2 = await collection();
    const c3 = await collection();
    const a = await klass(c1);
    const b = await klass(c2);
    const c = await klass(c3);
    const ab = ((await createCR({ from_class_id: a.id, to_class_id: b.id })).body as { id: number }).id;
    const ba = ((await createCR({ from_class_id: b.id, to_class_id: a.id })).body as { id: number }).id;
    const ac = ((await createCR({ from_class_id: a.id, to_class_id: c.id })).body as { id: number }).id;
    const u = await caller([
      [c1, ['ReadClassRelation']],
      [c2, ['ReadClassRelation']],
    ]);
    const res = await t.request('GET', '/api/v1/relations/classes', { token: u.token });
    expect(res.status).toBe(200);
    expect((res.body as { id: number }[]).map((r) => r.id)).toEqual([ab, ba]);
    expect(res.headers.get('x-total-count')).toBe('2');

    const byName = await t.request('GET', '/api/v1/relations/classes', { query: { from_class_name: a.name, sort: '-id' } });
    expect((byName.body as { id: number }[]).map((r) => r.id)).toEqual([ac, ab]);
    const byTo = await t.request('GET', '/api/v1/relations/classes', { query: { to_class_name__in: `${a.name},${c.name}` } });
    expect((byTo.body as { id: number }[]).map((r) => r.id)).toEqual([ba, ac]);
    const byIds = await t.request('GET', '/api/v1/relations/classes', { query: { from_class_id: a.id, to_class_id: b.id } });
    expect((byIds.body as { id: number }[]).map((r) => r.id)).toEqual([ab]);

    const p1 = await t.request('GET', '/api/v1/relations/classes', { query: { from_class_name: a.name, limit: 1 } });
    expect((p1.body as { id: number }[]).map((r) => r.id)).toEqual([ab]);
    const cursor = p1.headers.get('x-next-cursor');
    expect(cursor).toBeTruthy();
    const p2 = await t.request('GET', '/api/v1/relations/classes', { query: { from_class_name: a.name, limit: 1, cursor: cursor! } });
    expect((p2.body as { id: number }[]).map((r) => r.id)).toEqual([ac]);
    expect(p2.headers.get('x-next-cursor')).toBeNull();

    const perms = await caller([
      [c1, ['ReadClassRelation', 'DeleteClassRelation']],
      [c2, ['ReadClassRelation']],
      [c3, ['ReadClassRelation', 'DeleteClassRelation']],
    ]);
    const deletable = await t.request('GET', '/api/v1/relations/classes', {
      token: perms.token,
      query: { permissions: 'DeleteClassRelation' },
    });
    expect((deletable.body as { id: number }[]).map((r) => r.id)).toEqual([ac]);

    expect((await t.request('GET', '/api/v1/relations/classes', { query: { name: 'x' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/relations/classes', { query: { sort: 'from_class_name' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/relations/classes', { query: { permissions: 'Nope' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/relations/classes', { token: null })).status).toBe(401);
  });

  it('listClassRelations: a class-scoped token sees only relations with both ends inside its scope', async () => {
    const c1 = await collection();
    const a = await klass(c1);
    const b = await klass(c1);
    const c = await klass(c1);
    const ab = ((await createCR({ from_class_id: a.id, to_class_id: b.id })).body as { id: number }).id;
    await createCR({ from_class_id: a.id, to_class_id: c.id });
    const u = await caller([[c1, ['ReadClassRelation']]], {
      resources: [
        { kind: 'class', id: a.id },
        { kind: 'class', id: b.id },
      ],
    });
    const res = await t.request('GET', '/api/v1/relations/classes', { token: u.token });
    expect((res.body as { id: number }[]).map((r) => r.id)).toEqual([ab]);
    expect(res.headers.get('x-total-count')).toBe('1');
  });

  it('deleteClassRelation 204 deletes its object relations with an event for each; 412 stale If-Match; 404; 403', async () => {
    const c1 = await collection();
    const c2 = await collection();
    const a = await klass(c1);
    const b = await klass(c2);
    const cr = await createCR({ from_class_id: a.id, to_class_id: b.id });
    const crId = (cr.body as { id: number }).id;
    const a1 = await object(a.id, c1);
    const b1 = await object(b.id, c2);
    const b2 = await object(b.id, c2);
    const or1 = ((await createOR({ class_relation_id: crId, from_object_id: a1, to_object_id: b1 })).body as { id: number }).id;
    const or2 = ((await createOR({ class_relation_id: crId, from_object_id: a1, to_object_id: b2 })).body as { id: number }).id;

    const onlyRead = await caller([
      [c1, ['ReadClassRelation']],
      [c2, ['ReadClassRelation', 'DeleteClassRelation']],
    ]);
    expect((await t.request('DELETE', `/api/v1/relations/classes/${crId}`, { token: onlyRead.token })).status).toBe(403);
    const stale = await t.request('DELETE', `/api/v1/relations/classes/${crId}`, {
      headers: { 'if-match': '"svc-v1.class_relation.MQ.9"' },
    });
    expect(stale.status).toBe(412);
    expect(stale.headers.get('etag')).toBe(cr.headers.get('etag'));
    expect((await t.request('DELETE', `/api/v1/relations/classes/${crId}`, { headers: { 'if-match': 'W/"x"' } })).status).toBe(400);

    const del = await t.request('DELETE', `/api/v1/relations/classes/${crId}`, { headers: { 'if-match': cr.headers.get('etag')! } });
    expect(del.status, del.text).toBe(204);
    expect((await t.request('GET', `/api/v1/relations/classes/${crId}`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/relations/objects/${or1}`)).status).toBe(404);
    for (const id of [or1, or2]) {
      const ev = await eventsOf(t, 'object_relation', id);
      expect(ev.map((e) => e.action)).toEqual(['created', 'deleted']);
      expect(ev[1]).toMatchObject({ collection_id: c1, after: null });
      expect(ev[1]!.metadata.related_collection_ids).toEqual([c2]);
    }
    const crEv = await eventsOf(t, 'class_relation', crId);
    expect(crEv.map((e) => e.action)).toEqual(['created', 'deleted']);
    expect(crEv[1]!.before).toMatchObject({ id: crId });
    expect((await t.request('DELETE', `/api/v1/relations/classes/${crId}`)).status).toBe(404);
  });
});

describe('object relations', () => {
  async function setup(cr: Record<string, unknown> = {}) {
    const c1 = await collection();
    const c2 = await collection();
    const a = await klass(c1);
    const b = await klass(c2);
    const res = await createCR({ from_class_id: a.id, to_class_id: b.id, ...cr });
    expect(res.status, res.text).toBe(201);
    return { c1, c2, a, b, crId: (res.body as { id: number }).id };
  }

  it('createObjectRelation 201: body, Location, ETag, event; 409 duplicate', async () => {
    const s = await setup();
    const a1 = await object(s.a.id, s.c1);
    const b1 = await object(s.b.id, s.c2);
    const res = await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b1 });
    expect(res.status, res.text).toBe(201);
    const body = res.body as { id: number };
    expect(body).toMatchObject({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b1, revision: 1 });
    expect(res.headers.get('location')).toBe(`/api/v1/relations/objects/${body.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.object_relation\./);
    const ev = await eventsOf(t, 'object_relation', body.id);
    expect(ev).toHaveLength(1);
    expect(ev[0]).toMatchObject({ action: 'created', collection_id: s.c1 });
    expect(ev[0]!.metadata).toMatchObject({ related_collection_ids: [s.c2], class_relation_id: s.crId });
    // the event, written in the insert's statement, carries the relation as stored and answered
    const read = await t.request('GET', `/api/v1/relations/objects/${body.id}`);
    expect(read.body).toEqual(res.body);
    const [stored] = await t.deps.sql<{ entity_id: number; after: unknown; after_revision: number; summary: string }[]>`
      select entity_id, after, after_revision, summary from events where entity_type = 'object_relation' and entity_id = ${body.id}`;
    expect(stored).toEqual({
      entity_id: body.id,
      after: res.body,
      after_revision: 1,
      summary: `object relation ${body.id} (object ${a1} to object ${b1}) created`,
    });
    const dup = await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b1 });
    expect(dup.status).toBe(409);
  });

  it("the importer's create of a relation that exists returns null and uses up no relation id; a new one is created", async () => {
    const s = await setup();
    const a1 = await object(s.a.id, s.c1);
    const b1 = await object(s.b.id, s.c2);
    const b2 = await object(s.b.id, s.c2);
    expect((await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b1 })).status).toBe(201);
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and kind = 'human'`;
    const m = { actor: SYSTEM_ACTOR, auth: { principal: { id: admin!.id }, isAdmin: true, token: { scope: null } } };
    // currval is this session's own: other sessions' ids cannot move it
    const currval = async (tx: TransactionSql) =>
      (await tx<{ v: number }[]>`select currval(pg_get_serial_sequence('object_relations', 'id'))::int as v`)[0]!.v;
    await t.deps.sql.begin(async (tx) => {
      const [mine] = await tx<{ v: number }[]>`select nextval(pg_get_serial_sequence('object_relations', 'id'))::int as v`;
      const kept = await ensureObjectRelation({ ...m, tx }, { class_relation_id: s.crId, from_object_id: a1, to_object_id: b1 });
      expect(kept).toBeNull();
      expect(await currval(tx)).toBe(mine!.v);
      const made = await ensureObjectRelation({ ...m, tx }, { class_relation_id: s.crId, from_object_id: a1, to_object_id: b2 });
      expect(made).toMatchObject({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b2, revision: 1 });
      expect(made!.id).toBe(await currval(tx));
    });
  });

  it('createObjectRelation 404 for a missing class relation or object; 400 for mismatched classes, self relations, bad bodies', async () => {
    const s = await setup();
    const a1 = await object(s.a.id, s.c1);
    const a2 = await object(s.a.id, s.c1);
    const b1 = await object(s.b.id, s.c2);
    expect((await createOR({ class_relation_id: 2_000_000_000, from_object_id: a1, to_object_id: b1 })).status).toBe(404);
    expect((await createOR({ class_relation_id: s.crId, from_object_id: 2_000_000_000, to_object_id: b1 })).status).toBe(404);
    expect((await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: 2_000_000_000 })).status).toBe(404);
    const swapped = await createOR({ class_relation_id: s.crId, from_object_id: b1, to_object_id: a1 });
    expect(swapped.status).toBe(400);
    expect((swapped.body as { details: unknown[] }).details).toHaveLength(2);
    expect((await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: a2 })).status).toBe(400);
    const selfCr = ((await createCR({ from_class_id: s.a.id, to_class_id: s.a.id })).body as { id: number }).id;
    expect((await createOR({ class_relation_id: selfCr, from_object_id: a1, to_object_id: a1 })).status).toBe(400);
    expect((await createOR({ class_relation_id: selfCr, from_object_id: a1, to_object_id: a2 })).status).toBe(201);
    expect((await createOR({ class_relation_id: selfCr, from_object_id: a2, to_object_id: a1 })).status).toBe(201);
    expect((await createOR({ class_relation_id: s.crId, from_object_id: a1 })).status).toBe(400);
    expect((await createOR({ class_relation_id: 0, from_object_id: a1, to_object_id: b1 })).status).toBe(400);
  });

  it('createObjectRelation 409 beyond from_max_relations and to_max_relations', async () => {
    const s = await setup({ from_max_relations: 2, to_max_relations: 1 });
    const a1 = await object(s.a.id, s.c1);
    const a2 = await object(s.a.id, s.c1);
    const [b1, b2, b3] = [await object(s.b.id, s.c2), await object(s.b.id, s.c2), await object(s.b.id, s.c2)];
    expect((await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b1 })).status).toBe(201);
    const toFull = await createOR({ class_relation_id: s.crId, from_object_id: a2, to_object_id: b1 });
    expect(toFull.status).toBe(409);
    expect((toFull.body as { reason: string }).reason).toBe('max_relations_exceeded');
    expect((await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b2 })).status).toBe(201);
    const fromFull = await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b3 });
    expect(fromFull.status).toBe(409);
    expect((fromFull.body as { message: string }).message).toContain('from_max_relations');
  });

  it('createObjectRelation: concurrent creates never exceed from_max_relations', async () => {
    const s = await setup({ from_max_relations: 2 });
    const a1 = await object(s.a.id, s.c1);
    const targets = await Promise.all(Array.from({ length: 6 }, () => object(s.b.id, s.c2)));
    const results = await Promise.all(targets.map((b) => createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 409, 409, 409, 409]);
    const [n] = await t.deps.sql<{ n: number }[]>`select count(*)::int as n from object_relations where from_object_id = ${a1}`;
    expect(n!.n).toBe(2);
  });

  it('createObjectRelation 403 without the permission on both objects or with a scope covering one object', async () => {
    const s = await setup();
    const a1 = await object(s.a.id, s.c1);
    const b1 = await object(s.b.id, s.c2);
    const body = { class_relation_id: s.crId, from_object_id: a1, to_object_id: b1 };
    expect((await createOR(body, (await caller([[s.c1, ALL_OR]])).token)).status).toBe(403);
    const grants: [number, string[]][] = [
      [s.c1, ALL_OR],
      [s.c2, ALL_OR],
    ];
    expect((await createOR(body, (await caller(grants, { resources: [{ kind: 'object', id: a1 }] })).token)).status).toBe(403);
    const scopedBoth = await caller(grants, {
      resources: [
        { kind: 'object', id: a1 },
        { kind: 'class', id: s.b.id },
      ],
    });
    expect((await createOR(body, scopedBoth.token)).status).toBe(201);
  });

  it('getObjectRelation 200 with ETag; 404; 403 without ReadObjectRelation on one end', async () => {
    const s = await setup();
    const a1 = await object(s.a.id, s.c1);
    const b1 = await object(s.b.id, s.c2);
    const id = ((await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b1 })).body as { id: number }).id;
    const res = await t.request('GET', `/api/v1/relations/objects/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id, from_object_id: a1, to_object_id: b1 });
    expect(res.headers.get('etag')).toBeTruthy();
    expect((await t.request('GET', '/api/v1/relations/objects/2000000000')).status).toBe(404);
    const one = await caller([[s.c2, ['ReadObjectRelation']]]);
    expect((await t.request('GET', `/api/v1/relations/objects/${id}`, { token: one.token })).status).toBe(403);
    const both = await caller([
      [s.c1, ['ReadObjectRelation']],
      [s.c2, ['ReadObjectRelation']],
    ]);
    expect((await t.request('GET', `/api/v1/relations/objects/${id}`, { token: both.token })).status).toBe(200);
  });

  it('listObjectRelations 200: visibility in list and total, filters, permissions filter; 400 unknown filter', async () => {
    const s = await setup();
    const c3 = await collection();
    const x = await klass(c3);
    const crAx = ((await createCR({ from_class_id: s.a.id, to_class_id: x.id })).body as { id: number }).id;
    const a1 = await object(s.a.id, s.c1);
    const b1 = await object(s.b.id, s.c2);
    const b2 = await object(s.b.id, s.c2);
    const x1 = await object(x.id, c3);
    const r1 = ((await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b1 })).body as { id: number }).id;
    const r2 = ((await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b2 })).body as { id: number }).id;
    const r3 = ((await createOR({ class_relation_id: crAx, from_object_id: a1, to_object_id: x1 })).body as { id: number }).id;
    const u = await caller([
      [s.c1, ['ReadObjectRelation']],
      [s.c2, ['ReadObjectRelation']],
    ]);
    const res = await t.request('GET', '/api/v1/relations/objects', { token: u.token, query: { from_object_id: a1 } });
    expect((res.body as { id: number }[]).map((r) => r.id)).toEqual([r1, r2]);
    expect(res.headers.get('x-total-count')).toBe('2');
    const admin = await t.request('GET', '/api/v1/relations/objects', { query: { from_object_id: a1, sort: '-to_object_id' } });
    expect((admin.body as { id: number }[]).map((r) => r.id)).toEqual([r3, r2, r1]);
    const byCr = await t.request('GET', '/api/v1/relations/objects', { query: { class_relation_id: crAx } });
    expect((byCr.body as { id: number }[]).map((r) => r.id)).toEqual([r3]);
    const byTo = await t.request('GET', '/api/v1/relations/objects', { query: { to_object_id: `${b2},${x1}`, include_total: false } });
    expect((byTo.body as { id: number }[]).map((r) => r.id)).toEqual([r2, r3]);
    expect(byTo.headers.get('x-total-count')).toBeNull();
    const del = await caller([
      [s.c1, ['ReadObjectRelation', 'DeleteObjectRelation']],
      [s.c2, ['ReadObjectRelation']],
      [c3, ['ReadObjectRelation', 'DeleteObjectRelation']],
    ]);
    const filtered = await t.request('GET', '/api/v1/relations/objects', {
      token: del.token,
      query: { permissions: 'DeleteObjectRelation' },
    });
    expect((filtered.body as { id: number }[]).map((r) => r.id)).toEqual([r3]);
    expect((await t.request('GET', '/api/v1/relations/objects', { query: { from_class_id: 1 } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/relations/objects', { query: { limit: 0 } })).status).toBe(400);
  });

  it('deleteObjectRelation 204 with an event; 412 stale If-Match; 404; 403', async () => {
    const s = await setup();
    const a1 = await object(s.a.id, s.c1);
    const b1 = await object(s.b.id, s.c2);
    const created = await createOR({ class_relation_id: s.crId, from_object_id: a1, to_object_id: b1 });
    const id = (created.body as { id: number }).id;
    const half = await caller([
      [s.c1, ['ReadObjectRelation', 'DeleteObjectRelation']],
      [s.c2, ['ReadObjectRelation']],
    ]);
    expect((await t.request('DELETE', `/api/v1/relations/objects/${id}`, { token: half.token })).status).toBe(403);
    expect(
      (await t.request('DELETE', `/api/v1/relations/objects/${id}`, { headers: { 'if-match': '"svc-v1.object_relation.MQ.7"' } })).status,
    ).toBe(412);
    const otherHalf = await caller([
      [s.c1, ['ReadObjectRelation']],
      [s.c2, ['ReadObjectRelation', 'DeleteObjectRelation']],
    ]);
    expect((await t.request('DELETE', `/api/v1/relations/objects/${id}`, { token: otherHalf.token })).status).toBe(403);
    // nothing of the refused deletes was written
    expect((await t.request('GET', `/api/v1/relations/objects/${id}`)).status).toBe(200);
    expect((await eventsOf(t, 'object_relation', id)).map((e) => e.action)).toEqual(['created']);
    const del = await t.request('DELETE', `/api/v1/relations/objects/${id}`, { headers: { 'if-match': created.headers.get('etag')! } });
    expect(del.status).toBe(204);
    const ev = await eventsOf(t, 'object_relation', id);
    expect(ev.map((e) => e.action)).toEqual(['created', 'deleted']);
    expect(ev[1]!.metadata.related_collection_ids).toEqual([s.c2]);
    expect(ev[1]).toMatchObject({ before: created.body, after: null });
    expect((await t.request('GET', `/api/v1/relations/objects/${id}`)).status).toBe(404);
    expect((await t.request('DELETE', `/api/v1/relations/objects/${id}`)).status).toBe(404);
  });

  it('deleteObject 204 with more relations than one statement can record: every relation recorded as deleted, the object last', async () => {
    const c = await collection();
    const a = await klass(c);
    const b = await klass(c);
    const [cr] = await t.deps.sql<
      { id: number }[]
    >`insert into class_relations (from_class_id, to_class_id) values (${a.id}, ${b.id}) returning id`;
    const x = await object(a.id, c);
    // 3,500 events of about twenty parameters each: more than a statement takes (65,535)
    await t.deps.sql`insert into objects (name, class_id, collection_id, json_data)
      select 'many-' || g, ${b.id}, ${c}, '{}'::jsonb from generate_series(1, 3500) g`;
    const relations = await t.deps.sql<{ id: number }[]>`
      insert into object_relations (class_relation_id, from_object_id, to_object_id)
      select ${cr!.id}, ${x}, o.id from objects o where o.class_id = ${b.id} order by o.id returning id`;
    const res = await t.request('DELETE', `/api/v1/classes/${a.id}/${x}`);
    expect(res.status, res.text).toBe(204);
    const ev = await t.deps.sql<{ entity_type: string; entity_id: number; action: string; metadata: Record<string, unknown> }[]>`
      select entity_type, entity_id, action, metadata from events
      where (entity_type = 'object_relation' and entity_id = any(${relations.map((r) => r.id)}::int[])) or (entity_type = 'object' and entity_id = ${x})
      order by id`;
    expect(ev.slice(0, -1).map((e) => [e.entity_type, e.entity_id, e.action])).toEqual(
      relations.map((r) => ['object_relation', r.id, 'deleted']),
    );
    expect(ev.at(-1)).toMatchObject({
      entity_type: 'object',
      entity_id: x,
      action: 'deleted',
      metadata: { deleted_object_relations: 3500 },
    });
    expect(await t.deps.sql`select 1 from object_relations where from_object_id = ${x}`).toHaveLength(0);
  });
});
