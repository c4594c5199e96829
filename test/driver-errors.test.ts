// postgres.js's errors from the server as patched by patches/postgres+3.4.9.patch: a PostgresError
// is made without a stack of its own (its frames were the driver's socket handler parsing the
// server's message, captured twice and formatted once per failed query), and a query's error still
// gets the query's origin appended. These tests check the three copies, and what an error of a
// statement looks like through PostgreSQL.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import postgres from 'postgres';
import { defaultExport, eachCopy, NODE_DRIVER_COPIES, type DriverCopy } from './driver-copies.ts';

type Errors = { Errors: { postgres(x: { message: string; code: string }): Error & { code: string } } };

describe.each(eachCopy())('postgres.js server errors, %s copy', (_name, copy: DriverCopy) => {
  it('are made without frames, with their fields, and leave Error.stackTraceLimit as it was', async () => {
    const { Errors } = await copy.load<Errors>('errors.js');
    const before = Error.stackTraceLimit;
    const err = Errors.postgres({ message: 'duplicate key value violates unique constraint "x"', code: '23505' });
    expect(Error.stackTraceLimit).toBe(before);
    expect(err.name).toBe('PostgresError');
    expect(err.code).toBe('23505');
    expect(err.message).toBe('duplicate key value violates unique constraint "x"');
    expect(err.stack).toBe('PostgresError: duplicate key value violates unique constraint "x"');
  });
});

describe.each(eachCopy(NODE_DRIVER_COPIES))('postgres.js server errors through PostgreSQL, %s copy', (_name, copy) => {
  let sql: ReturnType<typeof postgres>;
  beforeAll(async () => {
    sql = defaultExport<typeof postgres>(await copy.load('index.js'))(inject('dbUrl'), { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await sql.end();
  });

  it("a tagged statement's error: the message, then the statement's origin, no frame of the driver's", async () => {
    const err = (await sql`select 1 / ${0}::int as x`.then(
      () => undefined,
      (e: unknown) => e,
    )) as Error & { code: string; query: string };
    expect(err.code).toBe('22012');
    expect(err.query).toBe('select 1 / $1::int as x');
    const [head, ...frames] = err.stack!.split('\n');
    expect(head).toBe('PostgresError: division by zero');
    expect(frames.length).toBeGreaterThan(0);
    expect(frames.some((f) => f.includes('driver-errors.test.ts'))).toBe(true);
    expect(frames.filter((f) => /postgres[\\/](cjs[\\/])?src[\\/]connection\.js/.test(f))).toEqual([]);
  });

  it("an unsafe statement's error (no origin): the message alone", async () => {
    const err = (await sql.unsafe('select 1 / 0 as x').then(
      () => undefined,
      (e: unknown) => e,
    )) as Error & { code: string };
    expect(err.code).toBe('22012');
    expect(err.stack).toBe('PostgresError: division by zero');
  });
});
