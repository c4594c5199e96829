// Relation graphs (#11): getRelatedClassGraph, getRelatedObjectGraph and their by-name forms, and
// ignore_classes / ignore_self_class on listRelatedObjects. Depth and shortest paths from the root,
// cycles (each node and relation once), visibility (a node only if readable, a relation only when
// it and both ends are), the work limit, and every error status. Fixtures are written with SQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withProxiedApp } from './holding-proxy.ts';
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

const fx = graphFixtures(() => t);
const { collection, classRelation, objectRelation } = fx;
const klass = async (collectionId: number, name?: string) => fx.klass(collectionId, name);
const object = (classId: number, collectionId: number, name?: string) => fx.object(classId, collectionId, { k: 1 }, name);
const caller = async (grants: [number, string[]][], scope: TokenScopeValue | null = null) => (await fx.caller(grants, scope)).token;

interface Node {
  id: number;
  depth: number;
  path: number[];
}
interface Relation {
  id: number;
  from_class_id?: number;
  to_class_id?: number;
  from_object_id?: number;
  to_object_id?: number;
}
interface ClassGraph {
  classes: (Node & Record<string, unknown>)[];
  relations: Relation[];
}
interface ObjectGraph {
  objects: (Node & Record<string, unknown>)[];
  relations: Relation[];
}
const nodes = (list: Node[]) => list.map((n) => [n.id, n.depth, n.path]);
const relationIds = (list: Relation[]) => list.map((r) => r.id);
type Query = Record<string, string | number | boolean>;

describe('getRelatedClassGraph', () => {
  async function classes() {
    const c = await collection();
    const [a, b, cc, d, x] = [await klass(c), await klass(c), await klass(c), await klass(c), await klass(c)];
    // a -> b -> cc -> d, d -> a (a cycle), x -> a (reverse direction), b -> b (a self relation)
    const ab = await classRelation(a.id, b.id);
    const bc = await classRelation(b.id, cc.id);
    const cd = await classRelation(cc.id, d.id);
    const da = await classRelation(d.id, a.id);
    const xa = await classRelation(x.id, a.id);
    const bb = await classRelation(b.id, b.id);
    return { c, a, b, cc, d, x, ab, bc, cd, da, xa, bb };
  }
  const graph = async (classId: number, query: Query = {}, token?: string) => {
    const res = await t.request('GET', `/api/v1/classes/${classId}/related/graph`, { query, token });
    expect(res.status, res.text).toBe(200);
    return res.body as ClassGraph;
  };

  it('200 at depths 1, 2 and 3: the root at depth 0, shortest paths, every relation among the nodes once; cycles add nothing', async () => {
    const g = await classes();
    const d1 = await graph(g.a.id);
    expect(nodes(d1.classes)).toEqual([
      [g.a.id, 0, [g.a.id]],
      [g.b.id, 1, [g.a.id, g.b.id]],
      [g.d.id, 1, [g.a.id, g.d.id]],
      [g.x.id, 1, [g.a.id, g.x.id]],
    ]);
    // b -> b joins two nodes of the graph (b and itself); b -> cc and cc -> d reach beyond it.
    expect(relationIds(d1.relations)).toEqual([g.ab, g.da, g.xa, g.bb]);
    expect(d1.classes[0]).toMatchObject({ name: g.a.name, collection_id: g.c, validate_schema: false, json_schema: null, revision: 1 });
    expect(d1.relations[0]).toMatchObject({ from_class_id: g.a.id, to_class_id: g.b.id, forward_alias: null, revision: 1 });

    const d2 = await graph(g.a.id, { depth: 2 });
    expect(nodes(d2.classes)).toEqual([
      [g.a.id, 0, [g.a.id]],
      [g.b.id, 1, [g.a.id, g.b.id]],
      [g.d.id, 1, [g.a.id, g.d.id]],
      [g.x.id, 1, [g.a.id, g.x.id]],
      // reached from b and from d at depth 1: the smaller parent id gives the path
      [g.cc.id, 2, [g.a.id, g.b.id, g.cc.id]],
    ]);
    expect(relationIds(d2.relations)).toEqual([g.ab, g.bc, g.cd, g.da, g.xa, g.bb]);

    // Depth 3 (and the maximum, 5) finds nothing new: the cycle a-b-cc-d-a is not walked again.
    const d3 = await graph(g.a.id, { depth: 3 });
    expect(d3).toEqual(d2);
    expect(await graph(g.a.id, { depth: 5 })).toEqual(d2);
    // From the middle of the cycle.
    const fromCc = await graph(g.cc.id, { depth: 2 });
    expect(nodes(fromCc.classes)).toEqual([
      [g.cc.id, 0, [g.cc.id]],
      [g.b.id, 1, [g.cc.id, g.b.id]],
      [g.d.id, 1, [g.cc.id, g.d.id]],
      [g.a.id, 2, [g.cc.id, g.b.id, g.a.id]],
    ]);
    expect(relationIds(fromCc.relations)).toEqual([g.ab, g.bc, g.cd, g.da, g.bb]);
  });

  it('200: ignore_classes leaves classes out and does not cross them; a class with no relations is a graph of one', async () => {
    const g = await classes();
    const res = await graph(g.a.id, { depth: 3, ignore_classes: `${g.b.id},${g.x.id}` });
    expect(nodes(res.classes)).toEqual([
      [g.a.id, 0, [g.a.id]],
      [g.d.id, 1, [g.a.id, g.d.id]],
      [g.cc.id, 2, [g.a.id, g.d.id, g.cc.id]],
    ]);
    expect(relationIds(res.relations)).toEqual([g.cd, g.da]);
    // The root is the root even when its own class is named.
    expect(nodes((await graph(g.a.id, { ignore_classes: g.a.id })).classes)[0]).toEqual([g.a.id, 0, [g.a.id]]);
    const lone = await klass(g.c);
    expect(await graph(lone.id, { depth: 5 })).toMatchObject({ classes: [{ id: lone.id, depth: 0, path: [lone.id] }], relations: [] });
  });

  it('200 by name: the same graph', async () => {
    const g = await classes();
    const byName = await t.request('GET', `/api/v1/classes/by-name/${encodeURIComponent(g.a.name)}/related/graph`, {
      query: { depth: 2 },
    });
    expect(byName.status, byName.text).toBe(200);
    expect(byName.body).toEqual(await graph(g.a.id, { depth: 2 }));
  });

  it('visibility: only readable classes, and a relation only when it and both of its ends are readable', async () => {
    const c1 = await collection();
    const c2 = await collection();
    const a = await klass(c1);
    const hidden = await klass(c2);
    const beyond = await klass(c1);
    const visible = await klass(c1);
    await classRelation(a.id, hidden.id);
    const hb = await classRelation(hidden.id, beyond.id);
    const av = await classRelation(a.id, visible.id);
    const vb = await classRelation(visible.id, beyond.id);
    // No ReadClass on c2: `hidden` and both of its relations are left out; `beyond` is still reached through `visible`.
    const token = await caller([[c1, ['ReadClass', 'ReadClassRelation']]]);
    const res = await graph(a.id, { depth: 5 }, token);
    expect(nodes(res.classes)).toEqual([
      [a.id, 0, [a.id]],
      [visible.id, 1, [a.id, visible.id]],
      [beyond.id, 2, [a.id, visible.id, beyond.id]],
    ]);
    expect(relationIds(res.relations)).toEqual([av, vb]);
    expect(relationIds(res.relations)).not.toContain(hb);
    // ReadClass on c2 without ReadClassRelation there: the class is readable but its relations are not crossed.
    const token2 = await caller([
      [c1, ['ReadClass', 'ReadClassRelation']],
      [c2, ['ReadClass']],
    ]);
    expect(await graph(a.id, { depth: 5 }, token2)).toEqual(res);
    // An administrator sees all four classes and relations.
    const all = await graph(a.id, { depth: 5 });
    expect(all.classes).toHaveLength(4);
    expect(all.relations).toHaveLength(4);
  });

  it('400 bad depth, ignore_classes or unknown parameter; 404 unknown class; 403 unreadable class; 401 without token', async () => {
    const c = await collection();
    const a = await klass(c);
    const path = `/api/v1/classes/${a.id}/related/graph`;
    for (const query of [
      { depth: 0 },
      { depth: 6 },
      { depth: 'x' },
      { ignore_classes: 'abc' },
      { ignore_classes: '1,,2' },
      { name: 'x' },
    ] as Query[]) {
      const res = await t.request('GET', path, { query });
      expect(res.status, JSON.stringify(query)).toBe(400);
    }
    expect((await t.request('GET', path, { query: { ignore_self_class: false } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/classes/2000000000/related/graph')).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/by-name/${uniq('nope')}/related/graph`)).status).toBe(404);
    const token = await caller([[c, ['ReadClassRelation']]]);
    expect((await t.request('GET', path, { token })).status).toBe(403);
    expect((await t.request('GET', `/api/v1/classes/by-name/${a.name}/related/graph`, { token })).status).toBe(403);
    expect((await t.request('GET', path, { token: null })).status).toBe(401);
    expect((await t.request('GET', `/api/v1/classes/by-name/${a.name}/related/graph`, { token: null })).status).toBe(401);
  });
});

describe('getRelatedObjectGraph', () => {
  async function objects() {
    const c1 = await collection();
    const c2 = await collection();
    const A = await klass(c1);
    const B = await klass(c2);
    const ab = await classRelation(A.id, B.id);
    const aa = await classRelation(A.id, A.id);
    const a1 = await object(A.id, c1);
    const a2 = await object(A.id, c1);
    const a3 = await object(A.id, c1);
    const b1 = await object(B.id, c2);
    const b2 = await object(B.id, c2);
    // a1 -> b1, a2 -> b1, a2 -> a3, a3 -> a1 (a cycle a1-b1-a2-a3-a1), a3 -> b2
    const r1 = await objectRelation(ab, a1, b1);
    const r2 = await objectRelation(ab, a2, b1);
    const r3 = await objectRelation(aa, a2, a3);
    const r4 = await objectRelation(aa, a3, a1);
    const r5 = await objectRelation(ab, a3, b2);
    return { c1, c2, A, B, a1, a2, a3, b1, b2, r1, r2, r3, r4, r5 };
  }
  type G = Awaited<ReturnType<typeof objects>>;
  const url = (g: G) => `/api/v1/classes/${g.A.id}/${g.a1}/related/graph`;
  const graph = async (g: G, query: Query = {}, token?: string) => {
    const res = await t.request('GET', url(g), { query, token });
    expect(res.status, res.text).toBe(200);
    return res.body as ObjectGraph;
  };

  it('200 at depths 1, 2 and 3 (ignore_self_class=false): shortest paths, each relation once, the cycle walked once', async () => {
    const g = await objects();
    const q = { ignore_self_class: false };
    const d1 = await graph(g, q);
    expect(nodes(d1.objects)).toEqual([
      [g.a1, 0, [g.a1]],
      [g.a3, 1, [g.a1, g.a3]],
      [g.b1, 1, [g.a1, g.b1]],
    ]);
    expect(relationIds(d1.relations)).toEqual([g.r1, g.r4]);
    expect(d1.objects[2]).toMatchObject({ svc_class_id: g.B.id, collection_id: g.c2, json_data: { k: 1 }, revision: 1 });
    expect(d1.relations[0]).toMatchObject({ from_object_id: g.a1, to_object_id: g.b1, revision: 1 });

    const d2 = await graph(g, { ...q, depth: 2 });
    expect(nodes(d2.objects)).toEqual([
      [g.a1, 0, [g.a1]],
      [g.a3, 1, [g.a1, g.a3]],
      [g.b1, 1, [g.a1, g.b1]],
      [g.a2, 2, [g.a1, g.a3, g.a2]],
      [g.b2, 2, [g.a1, g.a3, g.b2]],
    ]);
    expect(relationIds(d2.relations)).toEqual([g.r1, g.r2, g.r3, g.r4, g.r5]);
    const d3 = await graph(g, { ...q, depth: 3 });
    expect(d3).toEqual(d2);
    expect(new Set(d3.objects.map((o) => o.id)).size).toBe(d3.objects.length);
  });

  it('200: objects of the root object class are left out by default (ignore_self_class), and so are ignore_classes', async () => {
    const g = await objects();
    // Default: class A is left out and not crossed, so a2 (behind b1) and b2 (behind a3) are not reached.
    const d3 = await graph(g, { depth: 3 });
    expect(nodes(d3.objects)).toEqual([
      [g.a1, 0, [g.a1]],
      [g.b1, 1, [g.a1, g.b1]],
    ]);
    expect(relationIds(d3.relations)).toEqual([g.r1]);
    // ignore_classes B with the own class kept: the A objects only.
    const onlyA = await graph(g, { depth: 3, ignore_self_class: false, ignore_classes: g.B.id });
    expect(nodes(onlyA.objects)).toEqual([
      [g.a1, 0, [g.a1]],
      [g.a3, 1, [g.a1, g.a3]],
      [g.a2, 2, [g.a1, g.a3, g.a2]],
    ]);
    expect(relationIds(onlyA.relations)).toEqual([g.r3, g.r4]);
    // Both: the root alone.
    expect(await graph(g, { depth: 3, ignore_classes: g.B.id })).toMatchObject({ objects: [{ id: g.a1, depth: 0 }], relations: [] });
  });

  it('200 by name: the same graph', async () => {
    const g = await objects();
    const [row] = await t.deps.sql<{ name: string }[]>`select name from objects where id = ${g.a1}`;
    const res = await t.request(
      'GET',
      `/api/v1/classes/by-name/${encodeURIComponent(g.A.name)}/objects/by-name/${encodeURIComponent(row!.name)}/related/graph`,
      { query: { depth: 2, ignore_self_class: false } },
    );
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(await graph(g, { depth: 2, ignore_self_class: false }));
  });

  it('visibility: a node only if readable, a relation only when it and both ends are readable; scoped tokens stay inside', async () => {
    const g = await objects();
    const q = { depth: 3, ignore_self_class: false };
    // Reads only c1: the B objects and every relation touching them are left out.
    const onlyC1 = await caller([[g.c1, ['ReadObject', 'ReadObjectRelation']]]);
    const res = await graph(g, q, onlyC1);
    expect(nodes(res.objects)).toEqual([
      [g.a1, 0, [g.a1]],
      [g.a3, 1, [g.a1, g.a3]],
      [g.a2, 2, [g.a1, g.a3, g.a2]],
    ]);
    expect(relationIds(res.relations)).toEqual([g.r3, g.r4]);
    // ReadObject in c2 without ReadObjectRelation there: the B objects are readable, but no relation to them is.
    const noRel = await caller([
      [g.c1, ['ReadObject', 'ReadObjectRelation']],
      [g.c2, ['ReadObject']],
    ]);
    expect(await graph(g, q, noRel)).toEqual(res);
    // An object-scoped token covering a1, a2 and b1: the a1-b1-a2 path only.
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
    const res3 = await graph(g, q, scoped);
    expect(nodes(res3.objects)).toEqual([
      [g.a1, 0, [g.a1]],
      [g.b1, 1, [g.a1, g.b1]],
      [g.a2, 2, [g.a1, g.b1, g.a2]],
    ]);
    expect(relationIds(res3.relations)).toEqual([g.r1, g.r2]);
  });

  it('400 asking to narrow beyond the work limit (reason search_work_limit); ignore_classes narrows it', async () => {
    const c = await collection();
    const A = await klass(c);
    const L = await klass(c);
    const cr = await classRelation(A.id, L.id);
    const hub = await object(A.id, c);
    const prefix = uniq('leaf');
    // 10,001 leaves around the hub: within the relation limit, beyond the node limit.
    await t.deps.sql`
      with leaves as (
        insert into objects (name, class_id, collection_id, json_data)
        select ${prefix} || '-' || i, ${L.id}, ${c}, '{}'::jsonb from generate_series(1, 10001) i
        returning id)
      insert into object_relations (class_relation_id, from_object_id, to_object_id) select ${cr}, ${hub}, id from leaves`;
    const res = await t.request('GET', `/api/v1/classes/${A.id}/${hub}/related/graph`);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ reason: 'search_work_limit' });
    expect((res.body as { message: string }).message).toMatch(/10000 reached nodes.*narrow/);
    const narrowed = await t.request('GET', `/api/v1/classes/${A.id}/${hub}/related/graph`, { query: { ignore_classes: L.id } });
    expect(narrowed.status).toBe(200);
    expect(narrowed.body).toMatchObject({ objects: [{ id: hub }], relations: [] });
  });

  it('400 when the relations among the reached objects exceed 20,000, though the search itself stayed within the limits', async () => {
    const c = await collection();
    const A = await klass(c);
    const L = await klass(c);
    const al = await classRelation(A.id, L.id);
    const ll = await classRelation(L.id, L.id);
    const hub = await object(A.id, c);
    const prefix = uniq('clique');
    // 205 leaves around the hub, related to each other: depth 1 crosses 205 relations, but the
    // graph holds those and the 20,910 among the leaves.
    const leaves = await t.deps.sql<{ id: number }[]>`
      insert into objects (name, class_id, collection_id, json_data)
      select ${prefix} || '-' || i, ${L.id}, ${c}, '{}'::jsonb from generate_series(1, 205) i returning id`;
    const ids = leaves.map((r) => r.id);
    await t.deps.sql`
      insert into object_relations (class_relation_id, from_object_id, to_object_id)
      select ${al}, ${hub}, l from unnest(${ids}::int[]) l`;
    await t.deps.sql`
      insert into object_relations (class_relation_id, from_object_id, to_object_id)
      select ${ll}, x, y from unnest(${ids}::int[]) x, unnest(${ids}::int[]) y where x < y`;
    const listed = await t.request('GET', `/api/v1/classes/${A.id}/${hub}/related/objects`, { query: { limit: 1 } });
    expect(listed.status).toBe(200);
    expect(listed.headers.get('x-total-count')).toBe('205');
    const res = await t.request('GET', `/api/v1/classes/${A.id}/${hub}/related/graph`);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ reason: 'search_work_limit' });
    expect((res.body as { message: string }).message).toMatch(/20000 relations.*narrow/);
  });

  it('404 unknown or mismatched class or object; 403 unreadable object; 401 without token; 400 bad parameters', async () => {
    const g = await objects();
    const [row] = await t.deps.sql<{ name: string }[]>`select name from objects where id = ${g.a1}`;
    const byName = (cls: string, obj: string) =>
      `/api/v1/classes/by-name/${encodeURIComponent(cls)}/objects/by-name/${encodeURIComponent(obj)}/related/graph`;
    expect((await t.request('GET', `/api/v1/classes/${g.B.id}/${g.a1}/related/graph`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/${g.A.id}/2000000000/related/graph`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/2000000000/${g.a1}/related/graph`)).status).toBe(404);
    expect((await t.request('GET', byName(uniq('nope'), row!.name))).status).toBe(404);
    expect((await t.request('GET', byName(g.A.name, uniq('nope')))).status).toBe(404);
    expect((await t.request('GET', byName(g.B.name, row!.name))).status).toBe(404);
    const onlyC2 = await caller([[g.c2, ['ReadObject', 'ReadObjectRelation']]]);
    expect((await t.request('GET', url(g), { token: onlyC2 })).status).toBe(403);
    expect((await t.request('GET', byName(g.A.name, row!.name), { token: onlyC2 })).status).toBe(403);
    expect((await t.request('GET', url(g), { token: null })).status).toBe(401);
    expect((await t.request('GET', byName(g.A.name, row!.name), { token: null })).status).toBe(401);
    for (const query of [
      { depth: 0 },
      { depth: 6 },
      { ignore_classes: '0' },
      { ignore_self_class: 'maybe' },
      { class_id: g.B.id },
    ] as Query[]) {
      const res = await t.request('GET', url(g), { query });
      expect(res.status, JSON.stringify(query)).toBe(400);
    }
  });
});

describe('listRelatedObjects: ignore_classes and ignore_self_class', () => {
  it('leaves out (and does not cross) the own class by default and the ignored classes', async () => {
    const c = await collection();
    const A = await klass(c);
    const B = await klass(c);
    const C = await klass(c);
    const ab = await classRelation(A.id, B.id);
    const aa = await classRelation(A.id, A.id);
    const bc = await classRelation(B.id, C.id);
    const a1 = await object(A.id, c);
    const a2 = await object(A.id, c);
    const b1 = await object(B.id, c);
    const c1 = await object(C.id, c);
    // a1 - a2 - b1 - c1: b1 and c1 are reached only through a2, of the start's own class.
    await objectRelation(aa, a1, a2);
    await objectRelation(ab, a2, b1);
    await objectRelation(bc, b1, c1);
    const list = async (query: Query) => {
      const res = await t.request('GET', `/api/v1/classes/${A.id}/${a1}/related/objects`, { query: { depth: 3, ...query } });
      expect(res.status, res.text).toBe(200);
      return nodes(res.body as Node[]);
    };
    expect(await list({})).toEqual([]);
    expect(await list({ ignore_self_class: true })).toEqual([]);
    expect(await list({ ignore_self_class: false })).toEqual([
      [a2, 1, [a1, a2]],
      [b1, 2, [a1, a2, b1]],
      [c1, 3, [a1, a2, b1, c1]],
    ]);
    // An ignored class is not crossed: c1 lies behind b1.
    expect(await list({ ignore_self_class: false, ignore_classes: B.id })).toEqual([[a2, 1, [a1, a2]]]);
    expect(await list({ ignore_self_class: false, ignore_classes: `${C.id},${2_000_000_000}` })).toEqual([
      [a2, 1, [a1, a2]],
      [b1, 2, [a1, a2, b1]],
    ]);
    // From b1 (class B): the A objects on one side and C on the other.
    const fromB = await t.request('GET', `/api/v1/classes/${B.id}/${b1}/related/objects`, { query: { depth: 2, ignore_classes: C.id } });
    expect(nodes(fromB.body as Node[])).toEqual([
      [a2, 1, [b1, a2]],
      [a1, 2, [b1, a2, a1]],
    ]);
    for (const query of [{ ignore_classes: 'x' }, { ignore_classes: '-1' }, { ignore_self_class: 'yes' }] as Query[]) {
      const res = await t.request('GET', `/api/v1/classes/${A.id}/${a1}/related/objects`, { query });
      expect(res.status, JSON.stringify(query)).toBe(400);
    }
  });
});

describe('the snapshot of a traversal', () => {
  it('a read-only repeatable-read transaction whose setting goes out with its first read, in one round trip', async () => {
    // through a proxy that can hold PostgreSQL's answers
    await withProxiedApp(t, async ({ proxy, get }) => {
      expect((await get('/api/v1/iam/me')).status).toBe(200);
      const c = await t.request('POST', '/api/v1/collections', { body: { name: uniq('snap') } });
      const k = await t.request('POST', '/api/v1/classes', {
        body: { name: uniq('snap-k'), collection_id: (c.body as { id: number }).id },
      });
      proxy.hold();
      const reply = get(`/api/v1/classes/${(k.body as { id: number }).id}/related/graph`);
      // Every answer is held: the class's check (its first read) can only be on the wire now if the
      // setting did not wait for an answer.
      await proxy.until(['set transaction isolation level repeatable read, read only', 'svc_granted']);
      proxy.release();
      expect((await reply).status).toBe(200);
    });
  });
});
