// Case-insensitive text filters (icontains, istartswith, iendswith) and plain-text search write
// their ILIKE as LIKE when the text has no letter and nothing beyond ASCII (src/db/list.ts
// textLike): the two then match the same strings, and LIKE spares the planner lowercasing
// every histogram bound of the column. With a letter, objects' names and descriptions are matched
// as lower(c) LIKE lower(p), which the indexes of their lowercase serve (migrations/0240). Checked
// on PostgreSQL itself over strings whose lowercase differs in length or script, and through the
// API: the same rows, and the statement the service ran.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, statementsDuring, uniq, type TestApp } from './helpers.ts';
import { likeEscape } from '../src/db/list.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

// İ lowercases to two characters, K (Kelvin) and Ω (ohm) to ASCII k and ω, ß is its own lowercase
const STRINGS = ['İ-12', 'K-42', 'Ω9.5', 'straße 10.0.0.1', 'ǅ-7', 'ABC-123', 'a_b%c\\d', ' 12 ', '12', '', 'x-İ1-2', '١٢٣-12'];
const CASELESS = ['12', '-', '.0.', '_', '%', '\\', ' 1', '-4', '2', '-12', '9.5', ' '];

describe('ILIKE of a text without letters', () => {
  it('matches what LIKE matches, anchored or not, on this database', async () => {
    const rows: { s: string; p: string; i: boolean; l: boolean }[] = [];
    for (const text of CASELESS) {
      for (const p of ['%' + likeEscape(text) + '%', likeEscape(text) + '%', '%' + likeEscape(text)]) {
        const got = await t.deps.sql<{ s: string; i: boolean; l: boolean }[]>`
          select s, s ilike ${p}::text as i, s like ${p}::text as l from unnest(${STRINGS}::text[]) s`;
        rows.push(...got.map((r) => ({ ...r, p })));
      }
    }
    expect(rows.filter((r) => r.i !== r.l)).toEqual([]);
    // and the check is not empty: some match, some do not
    expect(rows.some((r) => r.l)).toBe(true);
    expect(rows.some((r) => !r.l)).toBe(true);
  });
});

describe('lower(s) LIKE lower(p)', () => {
  it('matches what ILIKE matches, for patterns with letters of either case, on this database', async () => {
    const patterns = [
      '%k%',
      '%K%',
      '%i%',
      '%İ%',
      '%STRASSE%',
      '%straße%',
      '%ǆ%',
      '%Ǆ%',
      '%ω9%',
      '%abc%',
      'a\\_B%',
      '%Ω%',
      '_-12',
      '%X-İ1%',
    ];
    const got = await t.deps.sql<{ s: string; p: string; i: boolean; l: boolean }[]>`
      select s, p, s ilike p as i, lower(s) like lower(p) as l from unnest(${STRINGS}::text[]) s, unnest(${patterns}::text[]) p`;
    expect(got.filter((r) => r.i !== r.l)).toEqual([]);
    expect(got.some((r) => r.i)).toBe(true);
    expect(got.some((r) => !r.i)).toBe(true);
  });
});

describe('the filters and plain search', () => {
  let classId: number;
  // digits only, so that a query of it and punctuation has no letter
  const tag = String(Date.now() % 1e9) + String(Math.floor(Math.random() * 1e6)).padStart(6, '0');
  const names = [`Host-${tag}-10.0.0.1`, `host-${tag}-10.0.0.2`, `İ-${tag}-10.0`, `other-${tag}`];

  beforeAll(async () => {
    const col = await t.request('POST', '/api/v1/collections', { body: { name: uniq('caseless') } });
    const cls = await t.request('POST', '/api/v1/classes', {
      body: { name: uniq('caseless'), collection_id: (col.body as { id: number }).id },
    });
    classId = (cls.body as { id: number }).id;
    for (const name of names) {
      const res = await t.request('POST', `/api/v1/classes/${classId}/objects`, { body: { name, json_data: {} } });
      expect(res.status, res.text).toBe(201);
    }
  });

  /** The response of one request, and the text of the statements it ran. */
  async function run(path: string, query: Record<string, string | number | boolean>) {
    const { result: res, statements } = await statementsDuring(t.deps.sql, () => t.request('GET', path, { query }));
    expect(res.status, res.text).toBe(200);
    return { res, sql: statements.map((st) => st.text).join('\n') };
  }
  const namesOf = (body: unknown) => (body as { name: string }[]).map((o) => o.name).sort();

  it('icontains, istartswith and iendswith without letters are LIKE, with the same rows', async () => {
    const list = `/api/v1/classes/${classId}/objects`;
    const a = await run(list, { name__icontains: '-10.0' });
    expect(namesOf(a.res.body)).toEqual(names.slice(0, 3).sort());
    expect(a.sql).toMatch(/"?o"?\."?name"? like /);
    expect(a.sql).not.toMatch(/ ilike /);
    const b = await run(list, { name__iendswith: '.0.2' });
    expect(namesOf(b.res.body)).toEqual([names[1]]);
    expect(b.sql).not.toMatch(/ ilike /);
  });

  // objects' names and descriptions have trigram indexes on their lowercase (migrations/0240)
  const LOWER_LIKE = /lower\("?o"?\."?name"?\) like lower\(/;

  it('with a letter they match either case, as lower(name) LIKE lower(pattern)', async () => {
    const a = await run(`/api/v1/classes/${classId}/objects`, { name__icontains: `HOST-${tag}` });
    expect(namesOf(a.res.body)).toEqual(names.slice(0, 2).sort());
    expect(a.sql).toMatch(LOWER_LIKE);
    expect(a.sql).not.toMatch(/ ilike /);
    const b = await run(`/api/v1/classes/${classId}/objects`, { name__istartswith: 'HOST-', name__iendswith: '.0.1' });
    expect(namesOf(b.res.body)).toEqual([names[0]]);
    expect(b.sql).toMatch(LOWER_LIKE);
  });

  it('plain search for a text without letters is LIKE, with the same objects', async () => {
    const found = (body: unknown) => (body as { results: { objects: { name: string }[] } }).results.objects.map((o) => o.name).sort();
    const { res, sql } = await run('/api/v1/search', { q: `-${tag}-10.0`, kinds: 'object', limit_per_kind: 100 });
    expect(found(res.body)).toEqual(names.slice(0, 3).sort());
    expect(sql).not.toMatch(/ ilike /);
    // a query of letters and digits finds both cases, through the lowercase of objects' names
    const both = await run('/api/v1/search', { q: `HOST-${tag}`, kinds: 'object', limit_per_kind: 100 });
    expect(found(both.res.body)).toEqual(names.slice(0, 2).sort());
    expect(both.sql).toMatch(LOWER_LIKE);
  });

  it('on a column without an index of its lowercase, a text with a letter stays ILIKE', async () => {
    const name = `Caseless-${tag}`;
    const col = await t.request('POST', '/api/v1/collections', { body: { name } });
    expect(col.status, col.text).toBe(201);
    const { res, sql } = await run('/api/v1/search', { q: name.toUpperCase(), kinds: 'collection', limit_per_kind: 100 });
    const found = (res.body as { results: { collections: { name: string }[] } }).results.collections.map((c) => c.name);
    expect(found).toEqual([name]);
    expect(sql).toMatch(/"?c"?\."?name"? ilike /);
  });
});
