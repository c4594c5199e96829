// startswith as an index range where the database sorts text by code point (src/db/text-order.ts):
// which databases qualify (databases with C, C.UTF-8 and ICU collations made here), the range's
// upper bound, and that a startswith filter answers exactly the names that start with the prefix,
// across the boundaries the range must get right.
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createSql, type Sql } from '../src/db/sql.ts';
import { learnTextOrder, prefixUpperBound, sortsByCodePoint } from '../src/db/text-order.ts';
import { loadConfig } from '../src/config.ts';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, createClass } from './class-fixtures.ts';

describe('prefixUpperBound', () => {
  it('raises the last code point; drops a last U+10FFFF; skips the surrogates; none for an empty prefix', () => {
    expect(prefixUpperBound('srv-c')).toBe('srv-d');
    expect(prefixUpperBound('a\u{10FFFF}')).toBe('b');
    expect(prefixUpperBound('x\u{10FFFF}\u{10FFFF}')).toBe('y');
    expect(prefixUpperBound('\u{10FFFF}')).toBeNull();
    expect(prefixUpperBound('')).toBeNull();
    expect(prefixUpperBound('a\uD7FF')).toBe('a\uE000');
    expect(prefixUpperBound('a😀')).toBe('a😁');
    expect(prefixUpperBound('é')).toBe('ê');
  });
});

describe('learnTextOrder', () => {
  const admin = postgres(inject('dbUrl'), { max: 1, onnotice: () => {} });
  const made: string[] = [];
  const pools: Sql[] = [];

  async function databaseWith(options: string): Promise<Sql> {
    const name = uniq('txtord').replace(/-/g, '_');
    await admin.unsafe(`create database ${name} template template0 ${options}`);
    made.push(name);
    const url = new URL(inject('dbUrl'));
    url.pathname = `/${name}`;
    const sql = createSql(url.toString(), loadConfig({}));
    pools.push(sql);
    return sql;
  }

  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    for (const name of made) await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });

  it('finds code-point order under C and C.UTF-8, not under an ICU collation', async () => {
    const c = await databaseWith(`locale 'C'`);
    const cUtf8 = await databaseWith(`encoding 'UTF8' locale 'C.UTF-8'`);
    const icu = await databaseWith(`encoding 'UTF8' locale 'C.UTF-8' locale_provider icu icu_locale 'en-US'`);
    expect(await learnTextOrder(c)).toBe(true);
    expect(await learnTextOrder(cUtf8)).toBe(true);
    expect(await learnTextOrder(icu)).toBe(false);
    expect([sortsByCodePoint(c), sortsByCodePoint(cUtf8), sortsByCodePoint(icu)]).toEqual([true, true, false]);
  });
});

describe('startswith through the API', () => {
  let t: TestApp;
  let classId: number;
  const tag = uniq('sw');
  const names = [
    `${tag}-c`,
    `${tag}-c-1`,
    `${tag}-cz`,
    `${tag}-c~`,
    `${tag}-c\u{10FFFF}`,
    `${tag}-cé`,
    `${tag}-c😀`,
    `${tag}-C`,
    `${tag}-b\u{10FFFF}`,
    `${tag}-d`,
    `${tag}-`,
    `${tag}-c%`,
    `${tag}-c_x`,
    `x${tag}-c`,
  ];

  beforeAll(async () => {
    t = await startTestApp();
    await learnTextOrder(t.deps.sql); // createApp asks without waiting; the range form is what is tested here when it applies
    classId = (await createClass(t, await collection(t))).id;
    for (const name of names) {
      const res = await t.request('POST', `/api/v1/classes/${classId}/objects`, { body: { name, json_data: {} } });
      expect(res.status, res.text).toBe(201);
    }
  });
  afterAll(() => t.close());

  const startsWith = async (prefix: string) => {
    const res = await t.request('GET', `/api/v1/classes/${classId}/objects`, { query: { name__startswith: prefix, sort: 'name' } });
    expect(res.status, res.text).toBe(200);
    return (res.body as { name: string }[]).map((o) => o.name).sort();
  };

  it.each([`-c`, `-c%`, `-c_`, `-b`, `-`, `-c😀`, `-c\u{10FFFF}`])(
    'name__startswith=<tag>%s answers exactly the names with that prefix',
    async (suffix) => {
      const prefix = tag + suffix;
      expect(await startsWith(prefix)).toEqual(names.filter((n) => n.startsWith(prefix)).sort());
    },
  );
});
