// postgres.js as patched by patches/postgres+3.4.9.patch writes a statement's parameters (Bind) with
// less work: a short ASCII string is copied into the message in JavaScript (bytes.js `str`), an
// array element with nothing to escape skips the two regular expression replacements
// (types.js `arrayEscape`, and `escapeIdentifier` for a name with no quote and no dot), and an array
// given again right after itself, with the same type, is not serialized again (connection.js `Bind`). These tests check that the bytes and the values are those
// upstream writes: for the three copies Node can load, and through PostgreSQL.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type postgres from 'postgres';
import { defaultExport, eachCopy, NODE_DRIVER_COPIES, type DriverCopy } from './driver-copies.ts';

interface Bytes {
  (): Bytes;
  str(x: string): Bytes;
  end(at?: number): Buffer;
  P(): Bytes;
}
type Serializer = (xs: unknown, serializer: (x: unknown) => string, options: unknown, typarray: number) => string;
type Escape = (name: string) => string;
type Loaded = { b: Bytes; arraySerializer: Serializer; escapeIdentifier: Escape };

/** The parts these tests use of a copy. */
async function loaded(copy: DriverCopy): Promise<Loaded> {
  const types = await copy.load<{ arraySerializer: Serializer; escapeIdentifier: Escape }>('types.js');
  return {
    b: defaultExport<Bytes>(await copy.load('bytes.js')),
    arraySerializer: types.arraySerializer,
    escapeIdentifier: types.escapeIdentifier,
  };
}

// ASCII, the 64-character boundary of the copy, characters of 2, 3 and 4 bytes in UTF-8 at the
// start, the middle and the end (the copy stops there and the native write starts over)
const STRINGS = [
  '',
  'a',
  '$1',
  'x'.repeat(63),
  'x'.repeat(64),
  'x'.repeat(65),
  'é',
  'aé',
  `${'x'.repeat(63)}é`,
  `${'x'.repeat(64)}é`,
  '€uro',
  'snow ☃ man',
  '😀',
  `x${'😀'.repeat(40)}`,
  'tab\tand\nnewline',
];

describe.each(eachCopy())('postgres.js Bind, %s copy', (_name, copy: DriverCopy) => {
  let driver: Loaded;
  beforeAll(async () => {
    driver = await loaded(copy);
  });

  it('str writes each string as its UTF-8 bytes', () => {
    const { b } = driver;
    for (const s of STRINGS) {
      const out = b().P().str(s).str('tail').end();
      expect(out.subarray(5).toString('hex')).toBe(Buffer.from(`${s}tail`).toString('hex'));
      expect(out.readUInt32BE(1)).toBe(4 + Buffer.byteLength(`${s}tail`));
    }
  });

  it('str grows the message for strings longer than it has room for', () => {
    const { b } = driver;
    const parts = Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(60, 'y'));
    let m = b().P();
    for (const p of parts) m = m.str(p);
    expect(m.end().subarray(5).toString()).toBe(parts.join(''));
  });

  it('array elements are quoted, and escaped only where they hold a backslash or a quote', () => {
    const { arraySerializer } = driver;
    const text = (x: unknown) => `${x as string}`;
    expect(arraySerializer([1, 22, 333], text, {}, 1007)).toBe('{"1","22","333"}');
    expect(arraySerializer(['plain', 'a"b', 'c\\d', '\\"', ''], text, {}, 1009)).toBe('{"plain","a\\"b","c\\\\d","\\\\\\"",""}');
    expect(arraySerializer([null, 'x'], text, {}, 1009)).toBe('{null,"x"}');
  });

  it('identifiers are quoted, a quote doubled and a dot made a separator', () => {
    const { escapeIdentifier } = driver;
    expect(escapeIdentifier('id')).toBe('"id"');
    expect(escapeIdentifier('')).toBe('""');
    expect(escapeIdentifier('Ünïcode')).toBe('"Ünïcode"');
    expect(escapeIdentifier('e.id')).toBe('"e"."id"');
    expect(escapeIdentifier('we"ird')).toBe('"we""ird"');
    expect(escapeIdentifier('a."b')).toBe('"a"."""b"');
  });
});

describe.each(eachCopy(NODE_DRIVER_COPIES))('postgres.js Bind in use, %s copy', (_name, copy: DriverCopy) => {
  let sql: ReturnType<typeof postgres>;
  beforeAll(async () => {
    sql = defaultExport<typeof postgres>(await copy.load('index.js'))(inject('dbUrl'), { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await sql.end();
  });

  it('strings reach PostgreSQL as sent, prepared and unnamed', async () => {
    for (const s of STRINGS) {
      const [r] = await sql<{ s: string; n: number }[]>`select ${s}::text as s, octet_length(${s}::text) as n`;
      expect(r).toEqual({ s, n: Buffer.byteLength(s) });
      const [u] = await sql.unsafe<{ s: string; n: number }[]>('select $1::text as s, octet_length($1::text) as n', [s], {
        prepare: false,
      });
      expect(u).toEqual({ s, n: Buffer.byteLength(s) });
    }
  });

  it('identifiers with quotes and dots name what they name', async () => {
    const [r] = await sql`select 1 as ${sql('plain')}, 2 as ${sql('we"ird')}, t.x as ${sql('x')} from (select 3 as x) t`;
    expect(r).toEqual({ plain: 1, 'we"ird': 2, x: 3 });
    const [q] = await sql`select ${sql('t.x')} from (select 4 as x) t`;
    expect(q).toEqual({ x: 4 });
  });

  it('arrays with quotes and backslashes round-trip', async () => {
    const texts = ['plain', 'a"b', 'c\\d', '\\"', '', 'é', 'with,comma', 'with}brace', 'NULL'];
    const [r] = await sql<{ a: string[] }[]>`select ${texts}::text[] as a`;
    expect(r!.a).toEqual(texts);
  });

  it('the same array given again right after itself, or with another type, answers each value', async () => {
    const ids = [3, 1, 2];
    const other = [7];
    const [r] = await sql<{ a: number[]; b: number[]; c: string[]; d: number[]; e: number[] }[]>`
      select ${ids}::int[] as a, ${ids}::int[] as b, ${ids}::text[] as c, ${other}::int[] as d, ${ids}::int[] as e`;
    expect(r).toEqual({ a: [3, 1, 2], b: [3, 1, 2], c: ['3', '1', '2'], d: [7], e: [3, 1, 2] });
    // another type serializes the same array otherwise: booleans as bool[] ('t') and as text[] ('true')
    const flags = [true, false];
    const [t] = await sql<{ a: boolean[]; b: string[] }[]>`select ${sql.array(flags, 16)} as a, ${sql.array(flags, 25)} as b`;
    expect(t).toEqual({ a: [true, false], b: ['true', 'false'] });
    // four times in a row, as the service's audit page binds a caller's collections
    const [s] = await sql<{ n: number }[]>`
      select (1 = any(${ids}::int[]))::int + (2 = any(${ids}::int[]))::int + (3 = any(${ids}::int[]))::int
        + cardinality(${ids}::int[]) as n`;
    expect(s!.n).toBe(6);
  });
});
