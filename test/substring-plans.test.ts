// A rare substring filter is read from the trigram indexes (migration 0190) whatever ANALYZE sampled
// (migration 0230). PostgreSQL estimates an unanchored pattern by the share of the column's
// histogram bounds it matches; with the default statistics target, a fragment of any sampled name
// was estimated at 1 % of the class, and the page read the class in id order instead of the index.
// A class of 50,000 objects in a database of this file's own, analyzed; fragments of the names and
// descriptions in the histogram bounds are filtered on through the API, and the service's own page
// statement, as it ran, is explained with its parameters. No timing: the plan is what is checked.
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { MIGRATIONS_DIR, migrate } from '../src/db/migrate.ts';
import { createSql } from '../src/db/sql.ts';
import { createDatabase, type OwnDatabase } from './db-fixtures.ts';
import { planOfSent, startTestApp, statementsDuring, uniq, type SentStatement, type TestApp } from './helpers.ts';

const OBJECTS = 50_000;
let db: OwnDatabase;
let t: TestApp;
let classId: number;

beforeAll(async () => {
  db = await createDatabase('substring_plans', { migrate: true });
  t = await startTestApp({ SVC_DATABASE_URL: db.url });
  const col = await t.request('POST', '/api/v1/collections', { body: { name: uniq('substrings') } });
  expect(col.status, col.text).toBe(201);
  const cls = await t.request('POST', '/api/v1/classes', { body: { name: uniq('hosts'), collection_id: (col.body as { id: number }).id } });
  expect(cls.status, cls.text).toBe(201);
  classId = (cls.body as { id: number }).id;
  const collectionId = (col.body as { id: number }).id;
  // names and descriptions with 8 hex characters of their own (a fragment of one names that object),
  // and some data, so that reading the whole class costs what it does in a real one
  await t.deps.sql`
    insert into objects (name, description, collection_id, class_id, json_data)
    select 'srv-' || substr(md5(g::text), 1, 8) || '-' || g, 'rack unit ' || substr(md5((g * 7)::text), 1, 8),
      ${collectionId}, ${classId},
      jsonb_build_object('hostname', 'srv-' || g || '.example.net', 'env', (array['prod', 'staging', 'dev'])[1 + g % 3],
        'metrics', jsonb_build_object('cpu', 1 + g % 16, 'mem_gb', 2 * (1 + g % 32)),
        'ip', '10.' || (g / 65536) % 256 || '.' || (g / 256) % 256 || '.' || g % 256,
        'tags', jsonb_build_array('rack-' || g % 40, case when g % 2 = 0 then 'even' else 'odd' end))
    from generate_series(1, ${OBJECTS}::int) g`;
  await t.deps.sql`analyze objects`;
}, 120_000);

afterAll(async () => {
  await t?.close();
  await db?.drop();
});

/** Fragments (the 8 hex characters) of names in the column's histogram bounds, spread over it. */
async function sampledFragments(column: 'name' | 'description'): Promise<string[]> {
  const [row] = await t.deps.sql<{ bounds: string[] }[]>`
    select histogram_bounds::text::text[] as bounds from pg_stats
    where schemaname = 'public' and tablename = 'objects' and attname = ${column}`;
  const bounds = row!.bounds;
  expect(bounds.length).toBeGreaterThan(100);
  const at = [0.1, 0.3, 0.5, 0.7, 0.9].map((f) => bounds[Math.floor(f * (bounds.length - 1))]!);
  return at.map((b) => /[0-9a-f]{8}/.exec(b)![0]);
}

/** The response of one request, checked, and the statements it ran. */
async function statementsOf(path: string, query: Record<string, string | number | boolean>) {
  const { result: res, statements } = await statementsDuring(t.deps.sql, () => t.request('GET', path, { query }));
  expect(res.status, res.text).toBe(200);
  return { res, seen: statements };
}

/** The plan of the statement that reads `objects` with a pattern (or `condition`), explained with its parameters. */
async function planOf(seen: SentStatement[], condition = /like/i): Promise<string> {
  const page = seen.filter((s) => /from objects o\b/.test(s.text) && condition.test(s.text));
  expect(page.length).toBe(1);
  // planned for its values, as the service's page is (the list pool's sessions, or the setting its
  // transaction makes without one)
  return planOfSent(t.deps.sql, page[0]!);
}

describe('substring filters on a class of 50,000 objects', () => {
  it('keep 1,000 histogram bounds for object names and descriptions', async () => {
    const rows = await t.deps.sql<{ attname: string; target: number }[]>`
      select attname, attstattarget::int as target from pg_attribute
      where attrelid = 'objects'::regclass and attname in ('name', 'description') order by attname`;
    expect(rows).toEqual([
      { attname: 'description', target: 1000 },
      { attname: 'name', target: 1000 },
    ]);
  });

  it('and so do the indexes of their lowercase, which hold that lowercase', async () => {
    const rows = await t.deps.sql<{ index: string; bounds: number; lowercase: boolean }[]>`
      select tablename as index, array_length(histogram_bounds::text::text[], 1) as bounds,
        (histogram_bounds::text::text[])[2] = lower((histogram_bounds::text::text[])[2]) as lowercase
      from pg_stats where schemaname = 'public'
        and tablename in ('objects_name_lower_trgm_idx', 'objects_description_lower_trgm_idx') order by tablename`;
    expect(rows).toEqual([
      { index: 'objects_description_lower_trgm_idx', bounds: 1001, lowercase: true },
      { index: 'objects_name_lower_trgm_idx', bounds: 1001, lowercase: true },
    ]);
  });

  /** The class's list filtered on `column` by each fragment of a sampled value: its rows, and `index` in the plan. */
  async function expectIndexed(
    column: 'name' | 'description',
    operator: string,
    sent: (fragment: string) => string,
    index: string | ((fragment: string) => string),
  ) {
    for (const fragment of await sampledFragments(column)) {
      const { res, seen } = await statementsOf(`/api/v1/classes/${classId}/objects`, {
        [`${column}__${operator}`]: sent(fragment),
        include_total: false,
      });
      const values = (res.body as Record<string, string>[]).map((o) => o[column]!);
      expect(values.length).toBeGreaterThan(0);
      for (const v of values) expect(v).toContain(fragment);
      expect(await planOf(seen), fragment).toContain(typeof index === 'string' ? index : index(fragment));
    }
  }

  it('name__contains with a fragment of a sampled name is read from the trigram index', async () => {
    await expectIndexed('name', 'contains', (f) => f, 'objects_name_trgm_idx');
  });

  it('description__icontains with a fragment of a sampled description is read from the trigram index', async () => {
    // with a letter whatever the fragment (the text is uppercased; one without letters is matched as LIKE)
    await expectIndexed('description', 'icontains', (f) => `UNIT ${f}`.toUpperCase(), 'objects_description_lower_trgm_idx');
  });

  it('name__icontains with a fragment of a sampled name is read from the trigram index of its lowercase', async () => {
    // looked up by the fragment alone (a rare word of the text, without srv): a fragment with no
    // letter is matched with LIKE, on the index of the names themselves
    await expectIndexed(
      'name',
      'icontains',
      (f) => `SRV-${f}`.toUpperCase(),
      (f) => (/[a-z]/.test(f) ? 'objects_name_lower_trgm_idx' : 'objects_name_trgm_idx'),
    );
  });

  // The trigrams of `srv` are in every name: an index scan given them reads their lists whole. A
  // text with a rare word is looked up by that word alone at any size, and then tested on its rows.
  it('name__contains and name__like of a text with a rare word look the rows up by that word, at any size', async () => {
    const [fragment] = await sampledFragments('name');
    for (const [operator, value] of [
      ['contains', `srv-${fragment}`],
      ['like', `srv-%${fragment}%`],
    ] as const) {
      const expected = await t.deps.sql<{ id: number }[]>`
        select id from objects where class_id = ${classId} and name like ${operator === 'like' ? value : `%${value}%`}
        order by id limit 100`;
      expect(expected.length).toBeGreaterThan(0);
      const { res, seen } = await statementsOf(`/api/v1/classes/${classId}/objects`, {
        [`name__${operator}`]: value,
        include_total: false,
      });
      expect((res.body as { id: number }[]).map((o) => o.id)).toEqual(expected.map((r) => r.id));
      const [page] = seen.filter((st) => st.text.includes('svc_s'));
      expect(page, value).toBeDefined();
      expect(page!.parameters).toContain(`%${fragment}%`);
      expect(await planOf(seen)).toContain('objects_name_trgm_idx');
    }
  });

  // pg_trgm gives up on the trigrams of a regular expression's literal characters after a character
  // class under repetition: `^srv-[0-9a-f]*beef` by hand is answered by testing the expression on
  // every object; the service reads the ids of the rows holding `beef`, rare by the statistics, from
  // the trigram index, and tests the expression on those
  it('name__regex with a rare text after a repeated class tests the expression on the rows holding the text only', async () => {
    // 'beef' is in 2 of the 50,000 names' hex parts (md5 of their numbers), so in no histogram bound
    const pattern = '^srv-[0-9a-f]*beef';
    const expected = await t.deps.sql<{ id: number }[]>`
      select id from objects where class_id = ${classId} and name ~ ${pattern} order by id limit 100`;
    expect(expected.length).toBeGreaterThan(0);
    let seen: SentStatement[] = [];
    for (let i = 0; i < 50 && !seen.some((st) => st.text.includes('svc_s')); i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100)); // the statistics load in the background
      const got = await statementsOf(`/api/v1/classes/${classId}/objects`, { name__regex: pattern, include_total: false });
      expect((got.res.body as { id: number }[]).map((o) => o.id)).toEqual(expected.map((r) => r.id));
      seen = got.seen;
    }
    const page = seen.filter((st) => /from objects o\b/.test(st.text) && / ~ /.test(st.text));
    expect(page.length).toBe(1);
    expect(page[0]!.text).toContain('svc_s');
    /** Rows a statement read and threw away (filters and rechecks), by EXPLAIN ANALYZE. */
    const removed = async (text: string, parameters: unknown[]) => {
      const [row] = await t.deps.sql.unsafe(`explain (analyze, format json) ${text}`, parameters as never[]);
      let n = 0;
      const walk = (node: Record<string, unknown>) => {
        n += Number(node['Rows Removed by Filter'] ?? 0) + Number(node['Rows Removed by Index Recheck'] ?? 0);
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
      };
      walk((row!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
      return n;
    };
    expect(await removed(page[0]!.text, page[0]!.parameters)).toBeLessThan(100);
    const byHand = `select id from objects where class_id = $1 and name ~ $2 order by id limit 100`;
    expect(await removed(byHand, [classId, pattern])).toBeGreaterThan(OBJECTS / 2);
  });

  // Across all objects, at this size, reading the whole table is the cheaper plan for PostgreSQL (at
  // 1,000,000 objects it takes both trigram indexes); what the estimate chose without the histogram
  // of 1,000 bounds was the walk in id order until the page filled, which a rare name never fills.
  // lower(name) = lower(v): the trigram index of the lowercase answers equality too (pg_trgm 1.6),
  // and its statistics estimate one row where an expression without them was estimated at 0.5 %
  it('name__iequals of a name, in another case, is read from the trigram index of the lowercase', async () => {
    const [row] = await t.deps.sql<{ name: string }[]>`select name from objects where class_id = ${classId} order by id offset 777 limit 1`;
    const { res, seen } = await statementsOf(`/api/v1/classes/${classId}/objects`, {
      name__iequals: row!.name.toUpperCase(),
      include_total: false,
    });
    expect((res.body as { name: string }[]).map((o) => o.name)).toEqual([row!.name]);
    expect(await planOf(seen, /lower\(/)).toContain('objects_name_lower_trgm_idx');
  });

  it('plain-text search for a fragment of a sampled name does not walk the objects in id order', async () => {
    for (const fragment of await sampledFragments('name')) {
      const { res, seen } = await statementsOf('/api/v1/search', { q: fragment, kinds: 'object', limit_per_kind: 100 });
      const found = (res.body as { results: { objects: { name: string; description: string }[] } }).results.objects;
      expect(found.length).toBeGreaterThan(0);
      for (const o of found) expect(`${o.name} ${o.description}`).toContain(fragment);
      expect(await planOf(seen), fragment).not.toContain('objects_pkey');
    }
  });
});

// A table PostgreSQL takes for 5,000,000 objects (its row count set so; autovacuum held off): there
// a fragment of a sampled name, estimated at 0.1 %, is read in id order by the plain statement (the
// misplan of classes above ~1.3M objects, bench/FINDINGS.md 2026-12-02), and the service reads the
// ids the trigram index finds for it first (src/db/substring-stats.ts), once its process has loaded
// the statistics in the background.
describe('substring filters where the objects table is large', () => {
  let big: TestApp;
  beforeAll(async () => {
    await t.deps.sql`alter table objects set (autovacuum_enabled = false)`;
    await t.deps.sql`update pg_class set reltuples = 5000000 where oid = 'objects'::regclass`;
    big = await startTestApp({ SVC_DATABASE_URL: db.url });
  });
  afterAll(async () => {
    await big?.close();
    await t.deps.sql`alter table objects reset (autovacuum_enabled)`;
    await t.deps.sql`analyze objects`;
  });

  /** A request through the service with the large table, once its statistics are in (at most ~5 s). */
  async function bigStatementsOf(path: string, query: Record<string, string | number | boolean>, rare: boolean) {
    for (let i = 0; ; i++) {
      const { result: res, statements } = await statementsDuring(big.deps.sql, () => big.request('GET', path, { query }));
      expect(res.status, res.text).toBe(200);
      if (!rare || statements.some((st) => st.text.includes('svc_s')) || i >= 50) return { res, seen: statements };
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it('PostgreSQL alone reads a fragment of a sampled name in id order there', async () => {
    const [fragment] = await sampledFragments('name');
    const plan = await t.deps.sql.unsafe(`explain select id from objects o where class_id = $1 and name like $2 order by id limit 100`, [
      classId,
      `%${fragment}%`,
    ]);
    expect(plan.map((r) => r['QUERY PLAN'] as string).join('\n')).toMatch(/Index Scan using objects_pkey[\s\S]*Filter: .*name ~~/);
  });

  it('the service reads the ids the trigram index finds instead, for a class list and plain search', async () => {
    for (const fragment of (await sampledFragments('name')).slice(0, 2)) {
      const list = await bigStatementsOf(`/api/v1/classes/${classId}/objects`, { name__contains: fragment, include_total: false }, true);
      const names = (list.res.body as { name: string }[]).map((o) => o.name);
      expect(names.length).toBeGreaterThan(0);
      for (const n of names) expect(n).toContain(fragment);
      const plan = await planOf(list.seen);
      expect(plan, fragment).toContain('objects_name_trgm_idx');
      expect(plan, fragment).not.toMatch(/Index Scan using objects_pkey[^\n]*\n\s*Filter: .*name ~~/);

      const search = await bigStatementsOf('/api/v1/search', { q: `SRV-${fragment}`, kinds: 'object', limit_per_kind: 100 }, true);
      const found = (search.res.body as { results: { objects: { name: string }[] } }).results.objects.map((o) => o.name);
      expect(found.length).toBeGreaterThan(0);
      for (const n of found) expect(n).toContain(fragment);
      // read by the fragment alone (a rare word of the text), case-insensitively unless it has no letter
      expect(await planOf(search.seen), fragment).toMatch(/objects_name(_lower)?_trgm_idx/);
    }
  });

  it('by a rare word of the text alone, without the trigrams of its common words (srv-), then the text on those rows', async () => {
    const [fragment] = await sampledFragments('name');
    const text = `srv-${fragment}`;
    const list = await bigStatementsOf(`/api/v1/classes/${classId}/objects`, { name__contains: text, include_total: false }, true);
    const names = (list.res.body as { name: string }[]).map((o) => o.name);
    expect(names.length).toBeGreaterThan(0);
    for (const n of names) expect(n).toContain(text);
    const [page] = list.seen.filter((st) => st.text.includes('svc_s'));
    expect(page!.parameters).toContain(`%${fragment}%`);
    expect(page!.parameters).toContain(`%${text}%`);

    const search = await bigStatementsOf('/api/v1/search', { q: text.toUpperCase(), kinds: 'object', limit_per_kind: 100 }, true);
    const found = (search.res.body as { results: { objects: { name: string }[] } }).results.objects.map((o) => o.name);
    expect(found.sort()).toEqual([...names].sort());
    const [statement] = search.seen.filter((st) => st.text.includes('svc_s'));
    expect(statement!.parameters.map((p) => String(p).toLowerCase())).toContain(`%${fragment}%`);
  });

  it('and for name__like and name__regex by the text their pattern requires', async () => {
    const [fragment] = await sampledFragments('name');
    for (const [operator, pattern] of [
      ['like', `%${fragment}-%`],
      ['regex', `${fragment}-[0-9]+$`],
    ] as const) {
      const list = await bigStatementsOf(
        `/api/v1/classes/${classId}/objects`,
        { [`name__${operator}`]: pattern, include_total: false },
        true,
      );
      const names = (list.res.body as { name: string }[]).map((o) => o.name);
      expect(names.length, pattern).toBeGreaterThan(0);
      for (const n of names) expect(n).toMatch(new RegExp(`${fragment}-[0-9]+$`));
      expect(
        list.seen.some((st) => st.text.includes('svc_s')),
        pattern,
      ).toBe(true);
      const plan = await planOf(list.seen, operator === 'like' ? /like/ : / ~ /);
      expect(plan, pattern).toContain('objects_name_trgm_idx');
      expect(plan, pattern).not.toMatch(/Index Scan using objects_pkey[^\n]*\n\s*Filter: .*name ~/);
    }
    // negated: the rows the rare pattern does not match
    const not = await bigStatementsOf(
      `/api/v1/classes/${classId}/objects`,
      { name__not_like: `%${fragment}-%`, limit: 250, include_total: false },
      true,
    );
    const others = (not.res.body as { name: string }[]).map((o) => o.name);
    expect(others.length).toBe(250);
    for (const n of others) expect(n).not.toContain(`${fragment}-`);
    expect(not.seen.some((st) => st.text.includes('svc_s'))).toBe(true);
    // an alternation requires no one text: left to PostgreSQL
    const { res, seen } = await bigStatementsOf(
      `/api/v1/classes/${classId}/objects`,
      { name__regex: `${fragment}|zz-never-zz`, include_total: false },
      false,
    );
    expect((res.body as unknown[]).length).toBeGreaterThan(0);
    expect(seen.some((st) => st.text.includes('svc_s'))).toBe(false);
  });

  it('a text in many bounds (srv-, in every name) is left to PostgreSQL', async () => {
    await bigStatementsOf(`/api/v1/classes/${classId}/objects`, { name__contains: 'zz-never-zz' }, true);
    const { seen } = await bigStatementsOf(`/api/v1/classes/${classId}/objects`, { name__contains: 'srv-', include_total: false }, false);
    expect(seen.some((st) => st.text.includes('svc_s'))).toBe(false);
  });
});

// A deployment with objects that upgrades: migration 0240 builds the indexes of the lowercase and
// analyzes them in the migrations' transaction, where PostgreSQL 15 still reads the default target
// for a new index's expression (18 reads the new one); without the migration's own setting, plans on
// 15 would have 101 bounds of the lowercase until autovacuum next analyzed objects, which a stable
// table may not need for months. Run on PostgreSQL 15 (SVC_DATABASE_URL), this test fails without it.
describe('migration 0240 on a database that already has objects', () => {
  it('leaves 1,001 bounds of the lowercase of names and descriptions', async () => {
    const own = await createDatabase('lower_stats');
    const sql = createSql(own.url, loadConfig({}));
    const before = mkdtempSync(join(tmpdir(), 'svc-migrations-'));
    try {
      for (const f of readdirSync(MIGRATIONS_DIR).filter((f) => f < '0240')) symlinkSync(join(MIGRATIONS_DIR, f), join(before, f));
      await migrate(sql, before);
      const [col] = await sql<{ id: number }[]>`insert into collections (name) values ('upgraded') returning id`;
      const [cls] = await sql<{ id: number }[]>`insert into classes (name, collection_id) values ('hosts', ${col!.id}) returning id`;
      await sql`
        insert into objects (name, description, collection_id, class_id, json_data)
        select 'Srv-' || substr(md5(g::text), 1, 8), 'Rack ' || substr(md5((g * 7)::text), 1, 8), ${col!.id}, ${cls!.id}, '{}'
        from generate_series(1, 5000) g`;
      expect(await migrate(sql)).toContain('0240_caseless_substring_indexes.sql');
      const rows = await sql<{ index: string; bounds: number; lowercase: boolean }[]>`
        select tablename as index, array_length(histogram_bounds::text::text[], 1) as bounds,
          (histogram_bounds::text::text[])[2] like 'srv-%' or (histogram_bounds::text::text[])[2] like 'rack %' as lowercase
        from pg_stats where schemaname = 'public'
          and tablename in ('objects_name_lower_trgm_idx', 'objects_description_lower_trgm_idx') order by tablename`;
      expect(rows).toEqual([
        { index: 'objects_description_lower_trgm_idx', bounds: 1001, lowercase: true },
        { index: 'objects_name_lower_trgm_idx', bounds: 1001, lowercase: true },
      ]);
    } finally {
      rmSync(before, { recursive: true, force: true });
      await sql.end();
      await own.drop();
    }
  }, 120_000);
});
