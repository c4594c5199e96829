// postgres.js's Query (a Promise subclass) and Result (an Array subclass) as patched by
// patches/postgres+3.4.9.patch: their Symbol.species is a data property instead of upstream's
// static getter. With the getter, V8 (Node 20) aborted every optimisation of both constructors and
// of the functions that inline them ("dependency change"), over and over, for the life of the
// process (`bench/driver-queue.ts` measures the difference). These tests check the three copies
// Node can load carry the data property, and that the driver keeps upstream's meaning of species: a
// query's `then` answers a plain Promise, a result's `map` and `filter` plain Arrays.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import postgres from 'postgres';

const require = createRequire(import.meta.url);
const esmSrc = dirname(fileURLToPath(import.meta.resolve('postgres')));
const packageRoot = join(dirname(require.resolve('postgres')), '..', '..');

type Loaded = { Query: object; Result: object };
const copies: [string, () => Promise<Loaded>][] = [
  [
    'ESM (import)',
    async () => ({
      Query: ((await import(pathToFileURL(join(esmSrc, 'query.js')).href)) as { Query: object }).Query,
      Result: ((await import(pathToFileURL(join(esmSrc, 'result.js')).href)) as { default: object }).default,
    }),
  ],
  [
    'CommonJS (require)',
    async () => ({
      Query: (require(join(packageRoot, 'cjs', 'src', 'query.js')) as { Query: object }).Query,
      Result: require(join(packageRoot, 'cjs', 'src', 'result.js')) as object,
    }),
  ],
  [
    'workerd (cf)',
    async () => ({
      Query: ((await import(pathToFileURL(join(packageRoot, 'cf', 'src', 'query.js')).href)) as { Query: object }).Query,
      Result: ((await import(pathToFileURL(join(packageRoot, 'cf', 'src', 'result.js')).href)) as { default: object }).default,
    }),
  ],
];

describe.each(copies)('postgres.js species, %s copy', (_name, load) => {
  it('Query[Symbol.species] is Promise and Result[Symbol.species] is Array, as data properties', async () => {
    const { Query, Result } = await load();
    const q = Object.getOwnPropertyDescriptor(Query, Symbol.species);
    const r = Object.getOwnPropertyDescriptor(Result, Symbol.species);
    expect(q?.value).toBe(Promise);
    expect(q?.get).toBeUndefined();
    expect(r?.value).toBe(Array);
    expect(r?.get).toBeUndefined();
  });
});

describe('postgres.js species, in use', () => {
  let sql: ReturnType<typeof postgres>;
  beforeAll(() => {
    sql = postgres(inject('dbUrl'), { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await sql.end();
  });

  it('a query is the installed Query, and its then() answers a plain Promise', async () => {
    const query = sql`select 1 as x`;
    const Query = (await import(pathToFileURL(join(esmSrc, 'query.js')).href)) as { Query: new () => unknown };
    expect(query).toBeInstanceOf(Query.Query);
    const chained = query.then((rows) => rows);
    expect(Object.getPrototypeOf(chained)).toBe(Promise.prototype);
    expect(await chained).toEqual([{ x: 1 }]);
  });

  it('a result keeps its statement facts unlisted, and map and filter answer plain Arrays', async () => {
    const rows = await sql<{ g: number }[]>`select g from generate_series(1, 3) g`;
    expect(rows.count).toBe(3);
    expect(rows.command).toBe('SELECT');
    expect(Object.keys(rows)).toEqual(['0', '1', '2']);
    const mapped = rows.map((r) => r.g);
    expect(Object.getPrototypeOf(mapped)).toBe(Array.prototype);
    expect(mapped).toEqual([1, 2, 3]);
    expect(Object.getPrototypeOf(rows.filter((r) => r.g > 1))).toBe(Array.prototype);
  });
});
