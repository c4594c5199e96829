// Traversal: listRelatedClasses and listRelatedObjects. Depth, shortest paths, both directions,
// cycles, permission-visible paths only, class filter, sorting and paging, work limits.
// Fixtures are written with SQL so these tests depend only on the traversal endpoints.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import type { TokenScopeValue } from '../src/db/tokens.ts';
import { graphFixtures } from './graph-fixtures.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const graph = graphFixtures(() => t);
const { collection, classRelation, objectRelation } = graph;
const klass = async (collectionId: number, name?: string) => (await graph.klass(collectionId, name)).id;
const object = (classId: number, collectionId: number) => graph.object(classId, collectionId, { k: 1 });
const caller = async (grants: [number, string[]][], scope: TokenScopeValue | null = null) => (await graph.caller(grants, scope)).token;

interface Related {
  id: number;
  depth: number;
  path: number[];
  name: string;
}
const summary = (body: unknown) => (body as Related[]).map((r) => [r.id, r.depth, r.path]);

describe('listRelatedClasses', () => {
  it('200: both directions, shortest depth and path, cycles, depth bound; the start is not included', async () => {
    const c = await collection();
    const [a, b, cc, d, x] = [await klass(c), await klass(c), await klass(c), await klass(c), await klass(c)];
    // a -> b -> cc -> d, d -> a (cycle), x -> a (reverse direction), self relation on b
    await classRelation(a, b);
    await classRelation(b, cc);
    await classRelation(cc, d);
    await classRelation(d, a);
    await classRelation(x, a);
    await classRelation(b, b);
    const d1 = await t.request('GET', `/api/v1/classes/${a}/related/classes`);
    expect(d1.status, d1.text).toBe(200);
    expect(summary(d1.body)).toEqual([
      [b, 1, [a, b]],
      [d, 1, [a, d]],
      [x, 1, [a, x]],
    ]);
    expect(d1.headers.get('x-total-count')).toBe('3');
    const d3 = await t.request('GET', `/api/v1/classes/${a}/related/classes`, { query: { depth: 3 } });
    expect(summary(d3.body)).toEqual([
      [b, 1, [a, b]],
      [d, 1, [a, d]],
      [x, 1, [a, x]],
      [cc, 2, [a, b, cc]],
    ]);
    expect((d3.body as Record<string, unknown>[])[0]).toMatchObject({ collection_id: c, validate_schema: false, json_schema: null });
  });

  it('200: sorting and paging over the traversal', async () => {
    const c = await collection();
    const start = await klass(c);
    const names = ['zeta', 'alpha', 'mid'].map((n) => `${n}-${uniq()}`);
    const ids: number[] = [];
    for (const n of names) {
      const k = await klass(c, n);
      ids.push(k);
      await classRelation(start, k);
    }
    const byName = await t.request('GET', `/api/v1/classes/${start}/related/classes`, { query: { sort: 'name', limit: 2 } });
    expect((byName.body as Related[]).map((r) => r.name)).toEqual([names[1], names[2]]);
    const next = await t.request('GET', `/api/v1/classes/${start}/related/classes`, {
      query: { sort: 'name', limit: 2, cursor: byName.headers.get('x-next-cursor')! },
    });
    expect((next.body as Related[]).map((r) => r.name)).toEqual([names[0]]);
    expect((await t.request('GET', `/api/v1/classes/${start}/related/classes`, { query: { sort: 'json_schema' } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/classes/${start}/related/classes`, { query: { sort: 'path' } })).status).toBe(400);
  });

  it('200: traverses only classes and relations the caller may read; hidden ones reveal nothing beyond them', async () => {
    const c1 = await collection();
    const c2 = await collection();
    const a = await klass(c1);
    const hidden = await klass(c2);
    const beyond = await klass(c1);
    const visible = await klass(c1);
    await classRelation(a, hidden);
    await classRelation(hidden, beyond);
    await classRelation(a, visible);
    // ReadClass on c2 but no ReadClassRelation there: the relation a -> hidden cannot be crossed.
    const token = await caller([
      [c1, ['ReadClass', 'ReadClassRelation']],
      [c2, ['ReadClass']],
    ]);
    const res = await t.request('GET', `/api/v1/classes/${a}/related/classes`, { token, query: { depth: 5 } });
    expect(summary(res.body)).toEqual([[visible, 1, [a, visible]]]);
    expect(res.headers.get('x-total-count')).toBe('1');
    // ReadClassRelation on c2 but no ReadClass there: the class itself is hidden.
    const token2 = await caller([
      [c1, ['ReadClass', 'ReadClassRelation']],
      [c2, ['ReadClassRelation']],
    ]);
    const res2 = await t.request('GET', `/api/v1/classes/${a}/related/classes`, { token: token2, query: { depth: 5 } });
    expect(summary(res2.body)).toEqual([[visible, 1, [a, visible]]]);
    // A class-scoped token: only classes inside the scope.
    const scoped = await caller([[c1, ['ReadClass', 'ReadClassRelation']]], {
      resources: [
        { kind: 'class', id: a },
        { kind: 'class', id: beyond },
      ],
    });
    const res3 = await t.request('GET', `/api/v1/classes/${a}/related/classes`, { token: scoped, query: { depth: 5 } });
    expect(res3.body).toEqual([]);
  });

  it('400 depth out of range; 404 missing class; 403 unreadable start class; 401 without token', async () => {
    const c = await collection();
    const a = await klass(c);
    expect((await t.request('GET', `/api/v1/classes/${a}/related/classes`, { query: { depth: 0 } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/classes/${a}/related/classes`, { query: { depth: 11 } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/classes/${a}/related/classes`, { query: { name: 'x' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/classes/2000000000/related/classes')).status).toBe(404);
    const token = await caller([[c, ['ReadClassRelation']]]);
    expect((await t.request('GET', `/api/v1/classes/${a}/related/classes`, { token })).status).toBe(403);
    expect((await t.request('GET', `/api/v1/classes/${a}/related/classes`, { token: null })).status).toBe(401);
  });
});

describe('listRelatedObjects', () => {
  // These graphs relate objects of the start object's own class: keep them (ignore_self_class is true by default).
  const keep = { ignore_self_class: false };
  async function graph() {
    const c1 = await collection();
    const c2 = await collection();
    const A = await klass(c1);
    const B = await klass(c2);
    const ab = await classRelation(A, B);
    const aa = await classRelation(A, A);
    const a1 = await object(A, c1);
    const a2 = await object(A, c1);
    const a3 = await object(A, c1);
    const b1 = await object(B, c2);
    const b2 = await object(B, c2);
    // a1 -> b1, a2 -> b1 (a2 reached from a1 through b1 in the reverse direction), a2 -> a3, a3 -> a1 (cycle),
    // a3 -> b2
    await objectRelation(ab, a1, b1);
    await objectRelation(ab, a2, b1);
    await objectRelation(aa, a2, a3);
    await objectRelation(aa, a3, a1);
    await objectRelation(ab, a3, b2);
    return { c1, c2, A, B, a1, a2, a3, b1, b2 };
  }

  it('200: shortest depth and path in both directions, cycles, class_id filter, full object fields', async () => {
    const g = await graph();
    const d1 = await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, { query: keep });
    expect(d1.status, d1.text).toBe(200);
    expect(summary(d1.body)).toEqual([
      [g.a3, 1, [g.a1, g.a3]],
      [g.b1, 1, [g.a1, g.b1]],
    ]);
    expect((d1.body as Record<string, unknown>[])[1]).toMatchObject({
      svc_class_id: g.B,
      collection_id: g.c2,
      json_data: { k: 1 },
      revision: 1,
    });
    const d2 = await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, { query: { ...keep, depth: 2 } });
    expect(summary(d2.body)).toEqual([
      [g.a3, 1, [g.a1, g.a3]],
      [g.b1, 1, [g.a1, g.b1]],
      [g.a2, 2, [g.a1, g.a3, g.a2]],
      [g.b2, 2, [g.a1, g.a3, g.b2]],
    ]);
    const onlyB = await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, {
      query: { ...keep, depth: 10, class_id: g.B },
    });
    expect(summary(onlyB.body)).toEqual([
      [g.b1, 1, [g.a1, g.b1]],
      [g.b2, 2, [g.a1, g.a3, g.b2]],
    ]);
    expect(onlyB.headers.get('x-total-count')).toBe('2');
    const byId = await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, {
      query: { ...keep, depth: 2, sort: '-id', limit: 3 },
    });
    expect((byId.body as Related[]).map((r) => r.id)).toEqual([g.b2, g.b1, g.a3]);
    expect(byId.headers.get('x-next-cursor')).toBeTruthy();
  });

  it('200: only objects and relations the caller may read are traversed; scoped tokens stay inside the scope', async () => {
    const g = await graph();
    // No ReadObject in c2: b1 is hidden, so a2 (reached only through b1 at depth 2) appears only via a3 at depth 2.
    const noB = await caller([[g.c1, ['ReadObject', 'ReadObjectRelation']]]);
    const res = await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, { token: noB, query: { ...keep, depth: 3 } });
    expect(summary(res.body)).toEqual([
      [g.a3, 1, [g.a1, g.a3]],
      [g.a2, 2, [g.a1, g.a3, g.a2]],
    ]);
    // ReadObject in c2 but no ReadObjectRelation there: relations to B objects are hidden.
    const noRel = await caller([
      [g.c1, ['ReadObject', 'ReadObjectRelation']],
      [g.c2, ['ReadObject']],
    ]);
    const res2 = await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, { token: noRel, query: { ...keep, depth: 3 } });
    expect(summary(res2.body)).toEqual([
      [g.a3, 1, [g.a1, g.a3]],
      [g.a2, 2, [g.a1, g.a3, g.a2]],
    ]);
    // Object-scoped token covering a1, a2, b1: the a1-b1-a2 path only.
    const scoped = await caller(
      [
        [g.c1, ['ReadObject', 'ReadObjectRelation']],
        [g.c2, ['ReadObject', 'ReadObjectRelation']],
      ],
      {
        resources: [
          { kind: 'object', id: g.a1 },
          { kind: 'object', id: g.a2 },
          { kind: 'object', id: g.b1 },
        ],
      },
    );
    const res3 = await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, { token: scoped, query: { ...keep, depth: 3 } });
    expect(summary(res3.body)).toEqual([
      [g.b1, 1, [g.a1, g.b1]],
      [g.a2, 2, [g.a1, g.b1, g.a2]],
    ]);
  });

  it('404 object not in the class or missing; 403 unreadable start; 400 bad depth or class_id', async () => {
    const g = await graph();
    expect((await t.request('GET', `/api/v1/classes/${g.B}/${g.a1}/related/objects`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/${g.A}/2000000000/related/objects`)).status).toBe(404);
    const token = await caller([[g.c2, ['ReadObject', 'ReadObjectRelation']]]);
    expect((await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, { token })).status).toBe(403);
    expect((await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, { query: { depth: 'x' } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, { query: { class_id: 0 } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/classes/${g.A}/${g.a1}/related/objects`, { query: { sort: 'json_data' } })).status).toBe(400);
  });

  it('400 asking to narrow when a traversal reaches more than 10,000 objects or 20,000 relations', async () => {
    const c = await collection();
    const A = await klass(c);
    const cr = await classRelation(A, A);
    const hub = await object(A, c);
    const sql = t.deps.sql;
    const prefix = uniq('leaf');
    // 10,001 leaves around the hub: within the relation limit, beyond the object limit.
    await sql`
      with leaves as (
        insert into objects (name, class_id, collection_id, json_data)
        select ${prefix} || '-' || i, ${A}, ${c}, '{}'::jsonb from generate_series(1, 10001) i
        returning id)
      insert into object_relations (class_relation_id, from_object_id, to_object_id) select ${cr}, ${hub}, id from leaves`;
    const res = await t.request('GET', `/api/v1/classes/${A}/${hub}/related/objects`, { query: keep });
    expect(res.status).toBe(400);
    expect((res.body as { message: string }).message).toMatch(/10000 reached nodes.*narrow/);
    // A dense bipartite graph: 150 x 150 = 22,500 relations among 300 objects; depth 2 crosses them all.
    const B = await klass(c);
    const ab = await classRelation(A, B);
    const froms = await sql<{ id: number }[]>`
      insert into objects (name, class_id, collection_id, json_data)
      select ${prefix} || '-a-' || i, ${A}, ${c}, '{}'::jsonb from generate_series(1, 150) i returning id`;
    await sql`
      with tos as (
        insert into objects (name, class_id, collection_id, json_data)
        select ${prefix} || '-b-' || i, ${B}, ${c}, '{}'::jsonb from generate_series(1, 150) i returning id)
      insert into object_relations (class_relation_id, from_object_id, to_object_id)
      select ${ab}, f, tos.id from tos, unnest(${froms.map((r) => r.id)}::int[]) f`;
    const start = froms[0]!.id;
    const res2 = await t.request('GET', `/api/v1/classes/${A}/${start}/related/objects`, { query: { ...keep, depth: 2 } });
    expect(res2.status).toBe(400);
    expect((res2.body as { message: string }).message).toMatch(/20000 relations/);
    // Depth 1 stays within both limits.
    const ok = await t.request('GET', `/api/v1/classes/${A}/${start}/related/objects`, { query: { ...keep, limit: 1 } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-total-count')).toBe('150');
  });
});
