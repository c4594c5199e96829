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

interface Row {
  dimensions: { field: string; state: string; value: unknown }[];
  object_count: number;
  measures: { operation: string; field: string; value: number | null; contributing_count: number; skipped_count: number }[];
}

async function fixture() {
  const cid = await collection(t);
  const cls = await createClass(t, cid);
  await createObject(t, cls.id, { site: 'a', cpu: 2, mem: 4 });
  await createObject(t, cls.id, { site: 'a', cpu: 6, mem: 'lots' });
  await createObject(t, cls.id, { site: 'b', cpu: 1 });
  await createObject(t, cls.id, { site: null, cpu: 3 });
  await createObject(t, cls.id, { cpu: 'x' });
  const f = await t.request('POST', `/api/v1/classes/${cls.id}/computed-fields`, {
    body: { key: 'dbl', operation: { type: 'sum', paths: ['/cpu', '/cpu'] }, result_type: 'number' },
  });
  expect(f.status).toBe(201);
  return { cid, cls };
}

const agg = (classId: number, query: Record<string, string | number | (string | number)[]>, token?: string) =>
  t.request('GET', `/api/v1/classes/${classId}/object-aggregates`, { query, token });

describe('aggregateObjects', () => {
  it('aggregateObjects 200 groups by a JSON path with value, null and missing states and measures with counts', async () => {
    const { cls } = await fixture();
    const res = await agg(cls.id, {
      group_by: 'json_data.site',
      aggregate: ['sum:json_data.cpu', 'average:json_data.mem', 'max:computed.shared.dbl'],
    });
    expect(res.status, res.text).toBe(200);
    const rows = res.body as Row[];
    expect(rows.map((r) => [r.dimensions[0]!.state, r.dimensions[0]!.value, r.object_count])).toEqual([
      ['value', 'a', 2],
      ['value', 'b', 1],
      ['null', null, 1],
      ['missing', null, 1],
    ]);
    expect(rows[0]!.measures).toEqual([
      { operation: 'sum', field: 'json_data.cpu', value: 8, contributing_count: 2, skipped_count: 0 },
      { operation: 'average', field: 'json_data.mem', value: 4, contributing_count: 1, skipped_count: 1 },
      { operation: 'max', field: 'computed.shared.dbl', value: 12, contributing_count: 2, skipped_count: 0 },
    ]);
    expect(rows[3]!.measures[0]).toMatchObject({ value: null, contributing_count: 0, skipped_count: 1 });
    expect(res.headers.get('x-page-limit')).toBe('100');
    expect(res.headers.get('x-total-count')).toBeNull();
  });

  it('aggregateObjects 200 without group_by returns one row; computed dimensions report unavailable values', async () => {
    const { cls } = await fixture();
    const one = await agg(cls.id, { aggregate: 'min:json_data.cpu' });
    expect(one.body).toEqual([
      {
        dimensions: [],
        object_count: 5,
        measures: [{ operation: 'min', field: 'json_data.cpu', value: 1, contributing_count: 4, skipped_count: 1 }],
      },
    ]);
    const byComputed = await agg(cls.id, { group_by: 'computed.shared.dbl', sort: 'dimensions.desc' });
    const rows = byComputed.body as Row[];
    expect(rows.map((r) => [r.dimensions[0]!.state, r.dimensions[0]!.value])).toEqual([
      ['unavailable', null],
      ['value', 12],
      ['value', 6],
      ['value', 4],
      ['value', 2],
    ]);
    const empty = await agg((await createClass(t, await collection(t))).id, { aggregate: 'sum:json_data.cpu' });
    expect(empty.body).toEqual([
      {
        dimensions: [],
        object_count: 0,
        measures: [{ operation: 'sum', field: 'json_data.cpu', value: null, contributing_count: 0, skipped_count: 0 }],
      },
    ]);
  });

  it('aggregateObjects pages by cursor in every sort order, with filters applied before grouping', async () => {
    const { cls } = await fixture();
    for (const sort of ['dimensions.asc', 'dimensions.desc', 'object_count.asc', 'object_count.desc']) {
      const all = (await agg(cls.id, { group_by: ['json_data.site', 'collection_id'], sort })).body as Row[];
      const seen: Row[] = [];
      let cursor: string | null = null;
      do {
        const q: Record<string, string | number | string[]> = { group_by: ['json_data.site', 'collection_id'], sort, limit: 1 };
        if (cursor) q.cursor = cursor;
        const page = await agg(cls.id, q);
        expect(page.status, page.text).toBe(200);
        seen.push(...(page.body as Row[]));
        cursor = page.headers.get('x-next-cursor');
      } while (cursor && seen.length < 10);
      expect(seen, sort).toEqual(all);
      expect(all).toHaveLength(4);
    }
    const filtered = await agg(cls.id, { group_by: 'json_data.site', json_data__gte: 'cpu=2', 'computed.shared.dbl__lt': '10' });
    expect((filtered.body as Row[]).map((r) => [r.dimensions[0]!.value, r.object_count])).toEqual([
      ['a', 1],
      [null, 1],
    ]);
    const bad = await agg(cls.id, {
      group_by: 'json_data.site',
      sort: 'object_count.asc',
      cursor: (await agg(cls.id, { group_by: 'json_data.site', limit: 1 })).headers.get('x-next-cursor')!,
    });
    expect(bad.status).toBe(400);
  });

  it('aggregateObjects counts only readable objects', async () => {
    const a = await collection(t);
    const cls = await createClass(t, a);
    const o1 = await createObject(t, cls.id, { site: 'x' });
    await createObject(t, cls.id, { site: 'x' });
    const scoped = await principalWith(t, [[a, ['ReadClass', 'ReadObject']]], {
      scope: { resources: [{ kind: 'class', id: cls.id }], permissions: ['ReadClass', 'ReadObject'] },
    });
    const narrow = await principalWith(t, [[a, ['ReadClass', 'ReadObject']]], {
      scope: {
        resources: [
          { kind: 'collection', id: a },
          { kind: 'object', id: o1.id },
        ],
      },
    });
    expect(((await agg(cls.id, { group_by: 'json_data.site' }, scoped.token)).body as Row[])[0]!.object_count).toBe(2);
    expect(((await agg(cls.id, { group_by: 'json_data.site' }, narrow.token)).body as Row[])[0]!.object_count).toBe(2);
    const classOnly = await principalWith(t, [[a, ['ReadClass']]]);
    expect((await agg(cls.id, { group_by: 'json_data.site' }, classOnly.token)).body).toEqual([]);
  });

  it('aggregateObjects 400 for missing or malformed group_by/aggregate, unknown computed fields and more than two computed filters', async () => {
    const { cls } = await fixture();
    const bad: Record<string, string | string[]>[] = [
      {},
      { group_by: 'nope' },
      { group_by: ['name', 'name'] },
      { group_by: ['name', 'description', 'collection_id', 'created_at'] },
      { aggregate: 'median:json_data.cpu' },
      { aggregate: 'sum:name' },
      { group_by: 'computed.shared.none' },
      { aggregate: 'sum:json_data.cpu', sort: 'name' },
      { aggregate: 'sum:json_data.cpu', nope: '1' },
      {
        aggregate: 'sum:json_data.cpu',
        'computed.shared.dbl__gt': '1',
        'computed.shared.dbl__lt': '100',
        'computed.shared.dbl__not_in': '5,7',
      },
    ];
    for (const query of bad) expect((await agg(cls.id, query)).status, JSON.stringify(query)).toBe(400);
  });

  it('aggregateObjects 413 when a grouped value is too large for a replay-safe cursor', async () => {
    const cls = await createClass(t, await collection(t));
    await createObject(t, cls.id, { blob: 'x'.repeat(5000) });
    await createObject(t, cls.id, { blob: 'y'.repeat(5000) });
    const res = await agg(cls.id, { group_by: 'json_data.blob', limit: 1 });
    expect(res.status).toBe(413);
    expect((await agg(cls.id, { group_by: 'json_data.blob' })).status).toBe(200);
  });

  it('aggregateObjects 403 without ReadClass and 404 for a missing class; aggregateObjectsByClassName 200 and 404', async () => {
    const { cls } = await fixture();
    const other = await principalWith(t, [[await collection(t), ['ReadClass', 'ReadObject']]]);
    expect((await agg(cls.id, { group_by: 'name' }, other.token)).status).toBe(403);
    expect((await agg(2_000_000_000, { group_by: 'name' })).status).toBe(404);
    const [row] = await t.deps.sql<{ name: string }[]>`select name from classes where id = ${cls.id}`;
    const byName = await t.request('GET', `/api/v1/classes/by-name/${row!.name}/object-aggregates`, { query: { group_by: 'name' } });
    expect(byName.status).toBe(200);
    expect((byName.body as Row[]).length).toBe(5);
    expect(
      (await t.request('GET', `/api/v1/classes/by-name/${uniq('none')}/object-aggregates`, { query: { group_by: 'name' } })).status,
    ).toBe(404);
  });
});

describe('getMetaCounts', () => {
  it('getMetaCounts 200 counts only what the caller can read', async () => {
    const parent = await collection(t);
    const child = await collection(t, parent);
    const k1 = await createClass(t, parent);
    const k2 = await createClass(t, child);
    await createObject(t, k1.id, {});
    await createObject(t, k1.id, {});
    await createObject(t, k2.id, {});
    const user = await principalWith(t, [[parent, ['ReadCollection', 'ReadClass', 'ReadObject']]]);
    const res = await t.request('GET', '/api/v0/meta/counts', { token: user.token });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      total_collections: 2,
      total_classes: 2,
      total_objects: 3,
      objects_per_class: [
        { svc_class_id: k1.id, count: 2 },
        { svc_class_id: k2.id, count: 1 },
      ],
    });
    const scoped = await principalWith(t, [[parent, ['ReadCollection', 'ReadClass', 'ReadObject']]], {
      scope: { resources: [{ kind: 'class', id: k2.id }] },
    });
    expect((await t.request('GET', '/api/v0/meta/counts', { token: scoped.token })).body).toEqual({
      total_collections: 0,
      total_classes: 1,
      total_objects: 1,
      objects_per_class: [{ svc_class_id: k2.id, count: 1 }],
    });
    const nobody = await principalWith(t, []);
    expect((await t.request('GET', '/api/v0/meta/counts', { token: nobody.token })).body).toEqual({
      total_collections: 0,
      total_classes: 0,
      total_objects: 0,
      objects_per_class: [],
    });
  });

  it('getMetaCounts 200 for an unscoped admin covers every collection without grants; 401 without a token', async () => {
    const k = await createClass(t, await collection(t));
    await createObject(t, k.id, {});
    await createObject(t, k.id, {});
    const admin = (await t.request('GET', '/api/v0/meta/counts')).body as {
      total_collections: number;
      total_objects: number;
      objects_per_class: { svc_class_id: number; count: number }[];
    };
    expect(admin.objects_per_class).toContainEqual({ svc_class_id: k.id, count: 2 });
    expect(admin.total_objects).toBeGreaterThanOrEqual(2);
    expect(admin.total_collections).toBeGreaterThanOrEqual(1);
    expect((await t.request('GET', '/api/v0/meta/counts', { token: null })).status).toBe(401);
  });
});
