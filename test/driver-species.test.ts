// postgres.js's Query (a Promise subclass) and Result (an Array subclass) as patched by
// patches/postgres+3.4.9.patch: their Symbol.species is a data property instead of upstream's
// static getter. With the getter, V8 (Node 20) aborted every optimisation of both constructors and
// of the functions that inline them ("dependency change"), over and over, for the life of the
// process (`bench/driver-queue.ts` measures the difference). These tests check the three copies
// Node can load carry the data property, and that the driver keeps upstream's meaning of species: a
// query's `then` answers a plain Promise, a result's `map` and `filter` plain Arrays.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import postgres from 'postgres';
import { defaultExport, DRIVER_COPIES, eachCopy, type DriverCopy } from './driver-copies.ts';

describe.each(eachCopy())('postgres.js species, %s copy', (_name, copy: DriverCopy) => {
  it('Query[Symbol.species] is Promise and Result[Symbol.species] is Array, as data properties', async () => {
    const { Query } = await copy.load<{ Query: object }>('query.js');
    const Result = defaultExport<object>(await copy.load('result.js'));
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
    const Query = await DRIVER_COPIES[0]!.load<{ Query: new () => unknown }>('query.js');
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
