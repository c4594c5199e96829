// Fragments made by partOf (src/db/sql.ts): a postgres.js Query without its promise, for fragments
// that are only ever embedded in a statement. They rely on how postgres.js writes a statement of
// nested fragments (it reads a fragment's template strings and values): checked here against the
// driver's own fragments, the same statement text, parameters and rows, so a postgres.js upgrade
// that changes it fails here first.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import postgres from 'postgres';
import { partOf, textPart, type Db } from '../src/db/sql.ts';

const url = new URL(inject('dbUrl'));
let sql: ReturnType<typeof postgres>;
const seen: { text: string; params: unknown[] }[] = [];

beforeAll(async () => {
  sql = postgres(url.toString(), {
    max: 1,
    onnotice: () => {},
    debug: (_conn: number, text: string, params: unknown[]) => seen.push({ text, params }),
  });
  await sql`select 1`; // the connection's first statements (the driver reads the array types) go before
});
afterAll(async () => {
  await sql.end();
});

/** The text, parameters and rows of a statement embedding `where` and `order` made with `tag`. */
async function run(tag: (s: TemplateStringsArray, ...v: unknown[]) => unknown) {
  const f = tag as (s: TemplateStringsArray, ...v: unknown[]) => postgres.PendingQuery<postgres.Row[]>;
  const inner = f`${sql('g')} between ${2}::int and ${f`${9}::int`}`;
  const where = f`(${inner}) and (${sql('g')} <> all(${[4, 5]}::int[]))`;
  const cols = [f`${sql('g')} as a`, f`, ${sql('g')} * ${10}::int as b`];
  seen.length = 0;
  const rows = await sql`select ${cols} from generate_series(1, 12) ${sql('g')} where ${where} order by ${f`${sql('g')} desc`}`;
  return { statement: seen[0], rows: rows.map((r) => ({ ...r })) };
}

describe('partOf fragments (postgres.js Query without the promise)', () => {
  it('embed exactly as postgres.js fragments do: same text, parameters and rows', async () => {
    const part = partOf(sql as unknown as Db);
    const own = await run(sql as never);
    const parts = await run(part);
    expect(parts.statement).toEqual(own.statement);
    expect(parts.rows).toEqual(own.rows);
    expect(parts.rows.map((r) => r.a)).toEqual([9, 8, 7, 6, 3, 2]);
    expect(parts.statement!.text).toBe(
      'select  "g" as a , "g" * $1::int as b from generate_series(1, 12) "g" where ("g" between $2::int and $3::int) and ("g" <> all($4::int[])) order by "g" desc',
    );
  });

  it("nest in the driver's own fragments, and those in parts", async () => {
    const part = partOf(sql as unknown as Db);
    seen.length = 0;
    const rows = await sql`select ${part`${sql`${1}::int`} + ${part`${sql`${2}::int`} * ${3}::int`}`} as n`;
    expect(rows[0]!.n).toBe(7);
    expect(seen[0]!.text).toBe('select $1::int + $2::int * $3::int as n');
  });

  it('of a constant text embed as that text, made once', async () => {
    const cols = textPart(sql as unknown as Db, 'g as a, g * 2 as b');
    expect(textPart(sql as unknown as Db, 'g as a, g * 2 as b')).toBe(cols);
    seen.length = 0;
    const rows = await sql`select ${cols} from generate_series(1, 2) g where g > ${1}::int`;
    expect(rows.map((r) => ({ ...r }))).toEqual([{ a: 2, b: 4 }]);
    expect(seen[0]!.text).toBe('select g as a, g * 2 as b from generate_series(1, 2) g where g > $1::int');
  });

  it('are never run: awaiting one fails at once instead of reaching a connection', async () => {
    const part = partOf(sql as unknown as Db);
    const p = part`select 1`;
    expect(() => (p as unknown as Promise<unknown>).then(() => undefined)).toThrow(TypeError);
  });
});
