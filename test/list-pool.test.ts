// The list pool (src/db/sql.ts listPoolOf): a list page whose plan depends on its filter values runs
// as one statement on connections that plan every statement for its values; without a list pool (or
// inside a transaction) it runs in a transaction of its own that sets the same mode. Both answer the
// same rows and totals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createSql, listPoolOf, type Sql } from '../src/db/sql.ts';
import { parseListQuery, type ListSpec } from '../src/domain/list-query.ts';
import { runList } from '../src/db/list.ts';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { userWith } from './iam-fixtures.ts';

const settings = { SVC_DB_POOL_MAX: 1, SVC_DB_STATEMENT_TIMEOUT_MS: 10_000, SVC_DB_POOL_ACQUIRE_TIMEOUT_MS: 5_000 };
const spec: ListSpec = {
  fields: {
    id: { type: 'integer', column: 't.id', notNull: true },
    name: { type: 'text', column: 't.name' },
    json_data: { type: 'json', column: 't.json_data' },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

describe('the list pool', () => {
  let pooled: Sql; // with a list pool of one connection
  let plain: Sql; // without one
  const table = uniq('list_pool').replace(/-/g, '_');
  type Statement = { conn: string; text: string };
  const seen: Statement[] = [];
  const debugInto = (db: Sql, conn: string) => {
    (db.options as unknown as { debug: unknown }).debug = (_c: number, text: string) => seen.push({ conn, text });
  };

  beforeAll(async () => {
    pooled = createSql(inject('dbUrl'), { ...settings, SVC_DB_LIST_POOL_MAX: 1 });
    plain = createSql(inject('dbUrl'), { ...settings, SVC_DB_LIST_POOL_MAX: 0 });
    await plain`create table ${plain(table)} (id int primary key, name text not null, json_data jsonb not null)`;
    await plain`insert into ${plain(table)} select g, 'n-' || g, jsonb_build_object('env', case when g % 10 = 0 then 'prod' else 'dev' end)
      from generate_series(1, 300) g`;
    // each pool's one connection opened (postgres.js reads the array types on a new connection)
    await pooled`select 1`;
    await listPoolOf(pooled)!`select 1`;
    debugInto(pooled, 'pool');
    debugInto(listPoolOf(pooled)!, 'list');
    debugInto(plain, 'plain');
  });
  afterAll(async () => {
    await plain`drop table if exists ${plain(table)}`;
    await plain.end();
    await pooled.end();
  });

  const page = (db: Sql, query: Record<string, string>) =>
    runList<{ id: number }>(db, {
      from: db`${db(table)} t`,
      select: db`t.id`,
      parsed: parseListQuery({ limit: '7', ...query }, spec),
      spec,
    });

  it('exists only when configured; its sessions plan for values, the pool keeps the default', async () => {
    expect(listPoolOf(plain)).toBeUndefined();
    const list = listPoolOf(pooled)!;
    expect((await list<{ m: string }[]>`select current_setting('plan_cache_mode') as m`)[0]!.m).toBe('force_custom_plan');
    expect((await pooled<{ m: string }[]>`select current_setting('plan_cache_mode') as m`)[0]!.m).toBe('auto');
    await pooled.begin(async (tx) => expect(listPoolOf(tx as unknown as Sql)).toBeUndefined());
  });

  it('a filtered page is one statement there, planned for its values at every execution; the same rows and totals as in a transaction', async () => {
    const query = { json_data__equals: 'env=prod', include_total: 'true' };
    seen.length = 0;
    const viaList = await page(pooled, query);
    const sent = seen.splice(0);
    expect(sent.filter((s) => s.conn === 'pool')).toEqual([]); // nothing on the pool: no BEGIN, no setting
    expect(sent.filter((s) => s.conn === 'list').map((s) => s.text.trim().split(/\s+/)[0])).toEqual(['select', 'select']); // page and count
    const viaTx = await page(plain, query);
    const txSent = seen.splice(0).map((s) => s.text.trim().slice(0, 40));
    expect(txSent.some((t) => t.startsWith('begin'))).toBe(true);
    expect(txSent.some((t) => t.includes('plan_cache_mode'))).toBe(true);
    expect(viaList.rows).toEqual(viaTx.rows);
    expect(viaList.rows.map((r) => r.id)).toEqual([10, 20, 30, 40, 50, 60, 70]);
    expect([viaList.total, viaTx.total]).toEqual([30, 30]);
    expect(viaList.nextCursor).not.toBeNull();
    // The cursor's next page, then the last one, on both paths.
    const next = { ...query, cursor: viaList.nextCursor! };
    expect((await page(pooled, next)).rows).toEqual((await page(plain, next)).rows);
    // Run it more than the five executions after which PostgreSQL may switch a prepared statement to
    // its generic plan: on the list pool's one connection every execution was planned for its values.
    for (let i = 0; i < 8; i++) await page(pooled, { json_data__equals: i % 2 ? 'env=prod' : 'env=dev', include_total: 'false' });
    const plans = await listPoolOf(pooled)!<{ generic: number; custom: number }[]>`
      select generic_plans::int as generic, custom_plans::int as custom from pg_prepared_statements
      where statement like ${`%from "${table}" t where%`} and statement not like 'select count%' order by custom_plans desc limit 1`;
    expect(plans[0]!.generic).toBe(0);
    expect(plans[0]!.custom).toBeGreaterThanOrEqual(8);
  });

  it('an unfiltered page stays on the pool, and ending the pool ends the list pool too', async () => {
    seen.length = 0;
    const p = await page(pooled, { include_total: 'false' });
    expect(p.rows.map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(
      seen.map((s) => s.conn),
      JSON.stringify(seen),
    ).toEqual(['pool']);
    const other = createSql(inject('dbUrl'), { ...settings, SVC_DB_LIST_POOL_MAX: 1 });
    const list = listPoolOf(other)!;
    await list`select 1`;
    await other.end();
    await expect(list`select 1`).rejects.toMatchObject({ code: 'CONNECTION_ENDED' });
  });
});

// One entity's events (db/audit.ts listEventRows): the page is read from the entity index whatever
// the entity, so it stays on the pool, whose sessions (plan_cache_mode auto, above) let PostgreSQL
// keep a prepared statement's generic plan when it costs no more than planning it anew for every
// entity; any other filter still sends the page to the list pool.
describe("one entity's events", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ SVC_DB_POOL_MAX: 1, SVC_DB_LIST_POOL_MAX: 1 });
  });
  afterAll(async () => t.close());

  /** Which pool each statement of GET `path` went to ('pool' or 'list'), but the token's own. */
  async function pools(token: string, path: string, query: Record<string, string> = {}): Promise<string[]> {
    const seen: string[] = [];
    const tag = (db: Sql, conn: string) => {
      (db.options as unknown as { debug: unknown }).debug = (_c: number, text: string) => {
        if (/from events e\b/.test(text) && !/^\s*select count/.test(text)) seen.push(conn);
      };
    };
    tag(t.deps.sql, 'pool');
    tag(listPoolOf(t.deps.sql)!, 'list');
    try {
      const res = await t.request('GET', path, { token, query });
      expect(res.status, res.text).toBe(200);
    } finally {
      for (const db of [t.deps.sql, listPoolOf(t.deps.sql)!]) (db.options as unknown as { debug: unknown }).debug = false;
    }
    return seen;
  }

  it('a wrapper route, and the filters entity_type and entity_id alone, stay on the pool for an administrator and a reader', async () => {
    const ok = async (path: string, body: unknown) => {
      const res = await t.request('POST', path, { body });
      expect(res.status, res.text).toBe(201);
      return (res.body as { id: number }).id;
    };
    const c = await ok('/api/v1/collections', { name: uniq('pin') });
    const k = await ok('/api/v1/classes', { name: uniq('pin-k'), collection_id: c });
    const objects: number[] = [];
    for (let i = 0; i < 8; i++) objects.push(await ok(`/api/v1/classes/${k}/objects`, { name: uniq('pin-o'), json_data: { i } }));
    const auditor = await userWith(t, [[c, ['ReadAudit']]]);
    for (const token of [t.adminToken, auditor.token]) {
      for (const o of objects) {
        expect(await pools(token, `/api/v1/classes/${k}/${o}/events`)).toEqual(['pool']);
        expect(await pools(token, '/api/v1/events', { entity_type: 'object', entity_id: String(o) })).toEqual(['pool']);
      }
      // another filter: planned for its values on the list pool
      expect(await pools(token, '/api/v1/events', { entity_type: 'object', entity_id: String(objects[0]), action: 'created' })).toEqual([
        'list',
      ]);
      expect(await pools(token, `/api/v1/classes/${k}/${objects[0]}/events`, { action: 'created' })).toEqual(['list']);
    }
  });
});
