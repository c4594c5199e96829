import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createSql, type Sql, type TransactionSql } from '../src/db/sql.ts';
import { testConfig } from './helpers.ts';
import { parseListQuery, type ListSpec } from '../src/domain/list-query.ts';
import { runList } from '../src/db/list.ts';
import { pageHeaders } from '../src/http/paging.ts';
import { ApiError } from '../src/domain/errors.ts';

const spec: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'i.id' },
    name: { type: 'text', column: 'i.name' },
    size: { type: 'integer', column: 'i.size' },
    seen_at: { type: 'timestamp', column: 'i.seen_at' },
    active: { type: 'boolean', column: 'i.active' },
    json_data: { type: 'json', column: 'i.json_data' },
  },
  aliases: { sz: 'size' },
  defaultSort: [{ field: 'id', desc: false }],
  extraParams: ['include'],
};

function status(fn: () => unknown): number {
  try {
    fn();
    return 200;
  } catch (e) {
    return e instanceof ApiError ? e.status : 500;
  }
}

describe('parseListQuery', () => {
  it('400 for unknown fields, operators, bad values; clamps limit', () => {
    expect(status(() => parseListQuery({ nope: 'x' }, spec))).toBe(400);
    expect(status(() => parseListQuery({ name__gt: 'x' }, spec))).toBe(400);
    expect(status(() => parseListQuery({ size: 'abc' }, spec))).toBe(400);
    expect(status(() => parseListQuery({ seen_at__gt: 'yesterday' }, spec))).toBe(400);
    expect(status(() => parseListQuery({ limit: 0 }, spec))).toBe(400);
    expect(status(() => parseListQuery({ limit: -3 }, spec))).toBe(400);
    expect(status(() => parseListQuery({ sort: 'name,name' }, spec))).toBe(400);
    expect(status(() => parseListQuery({ sort: 'json_data' }, spec))).toBe(400);
    expect(status(() => parseListQuery({ cursor: 'garbage!' }, spec))).toBe(400);
    expect(status(() => parseListQuery({ id: '1-5000' }, spec))).toBe(400);
    expect(status(() => parseListQuery({ json_data__gte: 'novalue' }, spec))).toBe(400);
    expect(parseListQuery({ limit: 300 }, spec).limit).toBe(250);
    expect(parseListQuery({}, spec).limit).toBe(100);
  });

  it('expands integer lists and ranges, reads negation, aliases, sort forms and extras', () => {
    const p = parseListQuery({ id: '1,2,5-9', sz__not_gt: '3', sort: 'name.desc,-size', include: 'computed' }, spec);
    expect(p.filters[0]!.values).toEqual([1, 2, 5, 6, 7, 8, 9]);
    expect(p.filters[1]).toMatchObject({ field: 'size', op: 'gt', negate: true });
    expect(p.sort).toEqual([
      { field: 'name', desc: true },
      { field: 'size', desc: true },
      { field: 'id', desc: true },
    ]);
    expect(p.extras).toEqual({ include: 'computed' });
    expect(parseListQuery({ json_data__gte: 'metrics,cpu=4' }, spec).filters[0]).toMatchObject({ path: ['metrics', 'cpu'], values: ['4'] });
  });

  it('a repeated filter is one more condition (AND); repeats count toward the 64 filters', () => {
    const p = parseListQuery({ name__not_equals: ['a', 'b'], size__gt: '1' }, spec);
    expect(p.filters.map((f) => [f.field, f.op, f.negate, f.values])).toEqual([
      ['name', 'equals', true, ['a']],
      ['name', 'equals', true, ['b']],
      ['size', 'gt', false, [1]],
    ]);
    expect(status(() => parseListQuery({ size: ['1', 'x'] }, spec))).toBe(400);
    expect(status(() => parseListQuery({ id__not_equals: Array.from({ length: 64 }, (_, i) => String(i)) }, spec))).toBe(200);
    expect(status(() => parseListQuery({ id__not_equals: Array.from({ length: 65 }, (_, i) => String(i)) }, spec))).toBe(400);
    expect(parseListQuery({ name: ['a', 'b'] }, spec).signature()).not.toBe(parseListQuery({ name: 'a' }, spec).signature());
  });

  it('a cursor is bound to its filters and sort', () => {
    const a = parseListQuery({ name: 'x' }, spec);
    const cursor = Buffer.from(JSON.stringify({ v: [1], s: a.signature() })).toString('base64url');
    expect(status(() => parseListQuery({ name: 'x', cursor }, spec))).toBe(200);
    expect(status(() => parseListQuery({ name: 'y', cursor }, spec))).toBe(400);
  });
});

describe('runList against PostgreSQL', () => {
  let sql: Sql;
  beforeAll(() => {
    sql = createSql(inject('dbUrl'), testConfig());
  });
  afterAll(async () => {
    await sql.end();
  });

  async function withItems<T>(fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
    return sql.begin(async (tx) => {
      await tx`create temporary table i (id serial primary key, name text, size int, seen_at timestamptz, active boolean, json_data jsonb) on commit drop`;
      return fn(tx);
    }) as Promise<T>;
  }

  it('pages through 1,000 rows with concurrent inserts and sees each original row exactly once', async () => {
    await withItems(async (tx) => {
      await tx`insert into i (name, size, seen_at) select 'n' || (g % 37), g % 11, now() - (g % 13) * interval '1 microsecond' from generate_series(1, 1000) g`;
      for (const sort of ['name.desc,size', '-seen_at', 'size,name', undefined]) {
        const seen = new Map<number, number>();
        let cursor: string | undefined;
        let pages = 0;
        do {
          const parsed = parseListQuery({ limit: 97, ...(sort ? { sort } : {}), ...(cursor ? { cursor } : {}) }, spec);
          const page = await runList<{ id: number }>(tx, { from: tx`i`, select: tx`i.id`, parsed, spec });
          for (const r of page.rows) seen.set(r.id, (seen.get(r.id) ?? 0) + 1);
          // concurrent writers: new rows land before and after the cursor position
          await tx`insert into i (name, size, seen_at) values ('a', 0, now() - interval '1 hour'), ('zzz', 99, now() + interval '1 hour')`;
          cursor = page.nextCursor ?? undefined;
          pages++;
        } while (cursor && pages < 100);
        for (let id = 1; id <= 1000; id++) expect(seen.get(id), `${sort} id ${id}`).toBe(1);
      }
    });
  });

  it('filters: text, integer, timestamp, negation, JSON paths and networks', async () => {
    await withItems(async (tx) => {
      await tx`insert into i (name, size, seen_at, active, json_data) values
        ('alpha', 1, '2026-01-01T00:00:00Z', true, '{"metrics":{"cpu":8},"ip":"10.1.2.3","tags":["a","b"],"owner":null}'),
        ('Beta', 2, '2026-02-01T00:00:00Z', false, '{"metrics":{"cpu":2},"ip":"not-an-ip","tags":["a"]}'),
        ('gamma_x', 3, '2026-03-01T00:00:00Z', null, '{"metrics":{"cpu":"high"},"ip":"192.168.1.9","interfaces":{"eth0":{}}}')`;
      const names = async (query: Record<string, string | string[]>) => {
        const parsed = parseListQuery(query, spec);
        const page = await runList<{ name: string }>(tx, { from: tx`i`, select: tx`i.name`, parsed, spec });
        return page.rows.map((r) => r.name);
      };
      expect(await names({ name__icontains: 'ETA' })).toEqual(['Beta']);
      expect(await names({ name__startswith: 'gamma_' })).toEqual(['gamma_x']);
      expect(await names({ name__like: 'g%' })).toEqual(['gamma_x']);
      expect(await names({ size__between: '2,3' })).toEqual(['Beta', 'gamma_x']);
      expect(await names({ size__not_in: '1,2' })).toEqual(['gamma_x']);
      expect(await names({ seen_at__gte: '2026-02-01' })).toEqual(['Beta', 'gamma_x']);
      expect(await names({ active__is_null: 'true' })).toEqual(['gamma_x']);
      expect(await names({ json_data__gte: 'metrics,cpu=4' })).toEqual(['alpha']);
      expect(await names({ json_data__has_key: 'interfaces=eth0' })).toEqual(['gamma_x']);
      expect(await names({ json_data__within_network: 'ip=10.0.0.0/8' })).toEqual(['alpha']);
      expect(await names({ json_data__not_within_network: 'ip=10.0.0.0/8' })).toEqual(['Beta', 'gamma_x']);
      expect(await names({ json_data__all: 'tags=a,b' })).toEqual(['alpha']);
      expect(await names({ json_data__array_length: 'tags=1' })).toEqual(['Beta']);
      expect(await names({ json_data__is_null: 'owner' })).toEqual(['alpha', 'Beta', 'gamma_x']);
      expect(await names({ json_data__equals: 'metrics,cpu=high' })).toEqual(['gamma_x']);
      expect(await names({ json_data__equals: 'missing,path=1' })).toEqual([]);
      expect(await names({ name__not_equals: ['alpha', 'Beta'] })).toEqual(['gamma_x']);
      expect(await names({ size__gte: ['2', '3'] })).toEqual(['gamma_x']);
    });
  });

  it('totals follow the filters and paging headers are set', async () => {
    await withItems(async (tx) => {
      await tx`insert into i (name, size) select 'x', g from generate_series(1, 30) g`;
      const parsed = parseListQuery({ limit: 10, size__gt: '5' }, spec);
      const page = await runList(tx, { from: tx`i`, select: tx`i.id`, parsed, spec });
      expect(page.total).toBe(25);
      const h = pageHeaders(page);
      expect(h['x-page-limit']).toBe('10');
      expect(h['x-total-count']).toBe('25');
      expect(h['x-next-cursor']).toBeTruthy();
      const noTotal = await runList(tx, { from: tx`i`, select: tx`i.id`, parsed: parseListQuery({ include_total: 'false' }, spec), spec });
      expect(pageHeaders(noTotal)['x-total-count']).toBeUndefined();
    });
  });

  it('rows lose their sort-key columns, unless they go to a view (viewed); the cursor is the same', async () => {
    await withItems(async (tx) => {
      await tx`insert into i (name, size) select 'n' || g, g % 3 from generate_series(1, 5) g`;
      const parsed = parseListQuery({ limit: 2, sort: 'size,name' }, spec);
      const plain = await runList<Record<string, unknown>>(tx, { from: tx`i`, select: tx`i.id, i.name`, parsed, spec });
      const viewed = await runList<Record<string, unknown>>(tx, { from: tx`i`, select: tx`i.id, i.name`, parsed, spec, viewed: true });
      expect(plain.rows).toEqual([
        { id: 3, name: 'n3' },
        { id: 1, name: 'n1' },
      ]);
      expect(viewed.rows).toEqual([
        { id: 3, name: 'n3', __k0: 0, __k1: 'n3', __k2: 3 },
        { id: 1, name: 'n1', __k0: 1, __k1: 'n1', __k2: 1 },
      ]);
      expect(viewed.nextCursor).toBe(plain.nextCursor);
    });
  });
});
