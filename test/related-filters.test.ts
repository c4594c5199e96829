// The related.<alias>.* filters of the object list: through GET /api/v1/classes/{class_id}/objects
// and, for the work limits, through the condition builder directly (inside withTx, which turns
// the limit's SQLSTATE into the 400). Fixtures are written with SQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { graphFixtures } from './graph-fixtures.ts';
import { relatedObjectConditions } from '../src/db/related-filters.ts';
import { withTx } from '../src/db/tx.ts';
import { and } from '../src/db/list.ts';
import { ApiError } from '../src/domain/errors.ts';
import type { Authority } from '../src/domain/authz.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const { collection, klass, object, classRelation, objectRelation, caller } = graphFixtures(() => t);
const ADMIN: Authority = { principal: { id: 1 }, isAdmin: true, token: { scope: null } };

async function list(classId: number, query: Record<string, string | number>, token?: string) {
  return t.request('GET', `/api/v1/classes/${classId}/objects`, { query, token });
}
const ids = (body: unknown) => (body as { id: number }[]).map((o) => o.id);

/**
 * Servers s1..s4 (class S, collection cs), racks r1, r2 (class R, collection cr), rooms m1, m2
 * (class M, collection cm): s1-r1, s2-r1, s3-r2, r1-m1 (room "north"), r2-m2 (room "south");
 * s4 is unrelated; servers s1 -> s2 are also related to each other (S -> S).
 */
async function datacenter() {
  const [cs, cr, cm] = [await collection(), await collection(), await collection()];
  const S = await klass(cs);
  const R = await klass(cr);
  const M = await klass(cm);
  const sr = await classRelation(S.id, R.id);
  const rm = await classRelation(R.id, M.id);
  const ss = await classRelation(S.id, S.id);
  const s1 = await object(S.id, cs, { cpu: 4 });
  const s2 = await object(S.id, cs, { cpu: 8 });
  const s3 = await object(S.id, cs, { cpu: 16 });
  const s4 = await object(S.id, cs, { cpu: 2 });
  const r1 = await object(R.id, cr, { u: 42 });
  const r2 = await object(R.id, cr, { u: 48 });
  const m1 = await object(M.id, cm, { site: 'north' }, uniq('north'));
  const m2 = await object(M.id, cm, { site: 'south' }, uniq('south'));
  await objectRelation(sr, s1, r1);
  await objectRelation(sr, s2, r1);
  await objectRelation(sr, s3, r2);
  await objectRelation(rm, r1, m1);
  await objectRelation(rm, r2, m2);
  await objectRelation(ss, s1, s2);
  return { cs, cr, cm, S, R, M, s1, s2, s3, s4, r1, r2, m1, m2 };
}

describe('listObjects related filters', () => {
  it('200: class by name or id, depth, object filters on targets, several groups combined with AND', async () => {
    const d = await datacenter();
    const r = await list(d.S.id, { 'related.rack.class.name': d.R.name });
    expect(r.status, r.text).toBe(200);
    expect(ids(r.body)).toEqual([d.s1, d.s2, d.s3]);
    expect(r.headers.get('x-total-count')).toBe('3');
    // Rooms are two hops away: nothing at the default depth 1.
    expect(ids((await list(d.S.id, { 'related.room.class.id': d.M.id })).body)).toEqual([]);
    const north = await list(d.S.id, {
      'related.room.class.id': d.M.id,
      'related.room.depth__lte': 2,
      'related.room.object.json_data': 'site=north',
    });
    expect(ids(north.body)).toEqual([d.s1, d.s2]);
    const byName = await list(d.S.id, {
      'related.x.class.name': d.M.name,
      'related.x.depth__lte': 2,
      'related.x.object.name__startswith': 'south',
    });
    expect(ids(byName.body)).toEqual([d.s3]);
    const both = await list(d.S.id, {
      'related.room.class.id': d.M.id,
      'related.room.depth__lte': 2,
      'related.room.object.json_data': 'site=north',
      'related.rack.class.id': d.R.id,
      'related.rack.object.json_data__gte': 'u=42',
      'related.rack.object.id': d.r1,
      json_data__gt: 'cpu=4',
    });
    expect(ids(both.body)).toEqual([d.s2]);
    // The other direction: racks related to servers with cpu >= 16.
    const racks = await list(d.R.id, { 'related.srv.class.name': d.S.name, 'related.srv.object.json_data__gte': 'cpu=16' });
    expect(ids(racks.body)).toEqual([d.r2]);
  });

  it('200: an object never matches through itself; same-class targets match only other objects', async () => {
    const d = await datacenter();
    // Servers related to a server with cpu 4 (s1): s2 (directly); s1 itself only if another server with cpu 4 is near.
    const r = await list(d.S.id, { 'related.peer.class.id': d.S.id, 'related.peer.object.json_data': 'cpu=4' });
    expect(ids(r.body)).toEqual([d.s2]);
    // Servers related to any server within 3 hops: s1, s2 (each other), s3 has no other server near.
    const r3 = await list(d.S.id, { 'related.peer.class.id': d.S.id, 'related.peer.depth__lte': 3 });
    expect(ids(r3.body)).toEqual([d.s1, d.s2]);
    // Through rack r1 at depth 2: s1 and s2 reach each other, s3 reaches nobody else through r2.
    const r2 = await list(d.S.id, {
      'related.peer.class.id': d.S.id,
      'related.peer.depth__lte': 2,
      'related.peer.object.id': `${d.s2},${d.s3}`,
    });
    expect(ids(r2.body)).toEqual([d.s1]);
  });

  it('200: hidden targets, objects and relations never make the predicate true', async () => {
    const d = await datacenter();
    const grantsAll: [number, string[]][] = [
      [d.cs, ['ReadClass', 'ReadObject', 'ReadObjectRelation']],
      [d.cr, ['ReadClass', 'ReadObject', 'ReadObjectRelation']],
      [d.cm, ['ReadClass', 'ReadObject', 'ReadObjectRelation']],
    ];
    const q = { 'related.room.class.id': d.M.id, 'related.room.depth__lte': 2 };
    expect(ids((await list(d.S.id, q, (await caller(grantsAll)).token)).body)).toEqual([d.s1, d.s2, d.s3]);
    // Racks hidden (no ReadObject): rooms cannot be reached.
    const noRacks = await caller([grantsAll[0]!, [d.cr, ['ReadClass', 'ReadObjectRelation']], grantsAll[2]!]);
    expect(ids((await list(d.S.id, q, noRacks.token)).body)).toEqual([]);
    // Relations of rooms hidden (no ReadObjectRelation in the rooms' collection).
    const noRoomRel = await caller([grantsAll[0]!, grantsAll[1]!, [d.cm, ['ReadClass', 'ReadObject']]]);
    expect(ids((await list(d.S.id, q, noRoomRel.token)).body)).toEqual([]);
    // Target class not readable: no match (its objects are readable, the class is not).
    const noRoomClass = await caller([grantsAll[0]!, grantsAll[1]!, [d.cm, ['ReadObject', 'ReadObjectRelation']]]);
    expect(ids((await list(d.S.id, q, noRoomClass.token)).body)).toEqual([]);
    // Scoped token: room m2 outside the scope.
    const scoped = await caller(grantsAll, {
      resources: [
        { kind: 'class', id: d.S.id },
        { kind: 'object', id: d.r1 },
        { kind: 'class', id: d.M.id },
      ],
    });
    const res = await list(d.S.id, q, scoped.token);
    expect(ids(res.body)).toEqual([d.s1, d.s2]);
    expect(res.headers.get('x-total-count')).toBe('2');
    // Unknown class names match nothing.
    expect(ids((await list(d.S.id, { 'related.x.class.name': uniq('nope') })).body)).toEqual([]);
  });

  it('400 for malformed related filters', async () => {
    const d = await datacenter();
    const bad = async (q: Record<string, string | number>) => {
      const r = await list(d.S.id, q);
      expect(r.status, JSON.stringify(q)).toBe(400);
    };
    await bad({ 'related.x.depth__lte': 2 });
    await bad({ 'related.x.class.id': d.R.id, 'related.x.class.name': d.R.name });
    await bad({ 'related.x.class.id': 'abc' });
    await bad({ 'related.x.class.id': d.R.id, 'related.x.depth__lte': 11 });
    await bad({ 'related.x.class.id': d.R.id, 'related.x.depth__lte': 0 });
    await bad({ 'related.x.class.id': d.R.id, 'related.x.depth__gt': 1 });
    await bad({ 'related.x.class.id': d.R.id, 'related.x.object.nope': 1 });
    await bad({ 'related.x.class.id': d.R.id, 'related.x.object.name__gt': 'a' });
    await bad({ 'related.x.class.id': d.R.id, 'related.x.object.id': 'abc' });
    await bad({ 'related.x.class.id': d.R.id, 'related.x.object.json_data__gte': 'nopath' });
    await bad({ 'related.x-y.class.id': d.R.id });
    await bad({ 'related.x': d.R.id });
    await bad({ 'related.x.other': 1 });
    await bad({
      'related.a.class.id': d.R.id,
      'related.b.class.id': d.R.id,
      'related.c.class.id': d.R.id,
      'related.d.class.id': d.R.id,
      'related.e.class.id': d.R.id,
    });
    const seventeen: Record<string, string | number> = { 'related.x.class.id': d.R.id };
    const fields = ['id', 'name', 'description', 'collection_id', 'created_at', 'updated_at', 'revision'];
    const ops = ['equals', 'not_equals', 'in'];
    let n = 0;
    for (const f of fields) {
      for (const op of ops) {
        if (n++ >= 17) break;
        seventeen[`related.x.object.${f}__${op}`] = f.endsWith('_at') ? '2020-01-01' : f === 'name' || f === 'description' ? 'a' : 1;
      }
    }
    await bad(seventeen);
  });

  it('400 asking to narrow beyond 1,000 targets or 10,000 reached objects (condition builder)', async () => {
    const c = await collection();
    const A = await klass(c);
    const B = await klass(c);
    const ab = await classRelation(A.id, B.id);
    const prefix = uniq('many');
    const sql = t.deps.sql;
    await sql`
      insert into objects (name, class_id, collection_id, json_data)
      select ${prefix} || '-' || i, ${B.id}, ${c}, '{}'::jsonb from generate_series(1, 1001) i`;
    const run = (query: Record<string, unknown>, classId: number) =>
      withTx(sql, async (tx) => {
        const conds = relatedObjectConditions(tx, ADMIN, query);
        return tx<{ id: number }[]>`select o.id from objects o where o.class_id = ${classId}::int and ${and(tx, conds)}`;
      });
    const status = async (p: Promise<unknown>) =>
      p.then(
        () => 200,
        (e: unknown) => (e instanceof ApiError ? e.status : 500),
      );
    const hub = await object(A.id, c);
    expect(await status(run({ 'related.x.class.id': B.id }, A.id))).toBe(400);
    expect(await status(run({ 'related.x.class.id': B.id, 'related.x.object.id__lte': 2_000_000_000 }, A.id))).toBe(400);
    // 1,000 targets are fine.
    const [firstB] = await sql<{ id: number }[]>`select min(id)::int as id from objects where class_id = ${B.id}`;
    await objectRelation(ab, hub, firstB!.id);
    const ok = await run({ 'related.x.class.id': B.id, 'related.x.object.id__not_in': firstB!.id + 1 }, A.id);
    expect(ok.map((r) => r.id)).toEqual([hub]);
    // One hub related to 10,001 objects: reaching them all from a single target is too much.
    const C = await klass(c);
    const ca = await classRelation(C.id, A.id);
    const target = await object(C.id, c);
    await sql`
      with leaves as (
        insert into objects (name, class_id, collection_id, json_data)
        select ${prefix} || '-leaf-' || i, ${A.id}, ${c}, '{}'::jsonb from generate_series(1, 10001) i returning id)
      insert into object_relations (class_relation_id, from_object_id, to_object_id) select ${ca}, ${target}, id from leaves`;
    expect(await status(run({ 'related.x.class.id': C.id }, A.id))).toBe(400);
  });
});
