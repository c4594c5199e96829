// postgres.js as patched by patches/postgres+3.4.9.patch keeps the text of a tagged statement by its
// shape (types.js shapeOf, connection.js build): the template strings of the query and of each
// fragment in it, the identifiers and the types of the values, in order. A statement of a shape
// built before takes its text and signature from the cache instead of being rendered, flattened and
// hashed again (`bench/driver-queue.ts` "Driver statement writing" measures it). These tests check that
// the cache answers exactly what rendering answers, that every part that changes the text or the
// types changes the shape, that the parts whose text comes from values are rendered as before, and
// that the cache is bounded; for the three copies Node can load, and in use on PostgreSQL.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type postgres from 'postgres';
import { defaultExport, eachCopy, NODE_DRIVER_COPIES, type DriverCopy } from './driver-copies.ts';

type Sql = ReturnType<typeof postgres>;
/** A query as the driver's internals see it (its template strings and values). */
type Query = object;
interface ShapeNode {
  text: string | undefined;
}
interface Shapes {
  size: number;
}
interface Types {
  shapeOf(shapes: Shapes, q: Query, parameters: unknown[], types: unknown[], options: unknown): ShapeNode | null;
  shapeCache(max?: number): Shapes;
  keepShapeText(shapes: Shapes, node: ShapeNode, text: string, signature: string): void;
  stringify(q: Query, string: string, value: unknown, parameters: unknown[], types: unknown[], options: unknown): string;
}
describe.each(eachCopy())('postgres.js statement shapes, %s copy', (_name, copy: DriverCopy) => {
  let sql: Sql;
  let types: Types;
  beforeAll(async () => {
    types = await copy.load<Types>('types.js');
    // never connects: the queries below are only walked and rendered
    sql = defaultExport<typeof postgres>(await copy.load('index.js'))('postgres://nobody@127.0.0.1:1/none', { max: 1 });
  });

  /** What the driver renders for q: its text, parameters and types. */
  const rendered = (q: Query) => {
    const parameters: unknown[] = [];
    const ts: unknown[] = [];
    const text = types.stringify(
      q,
      (q as unknown as { strings: string[] }).strings[0]!,
      (q as unknown as { args: unknown[] }).args[0],
      parameters,
      ts,
      sql.options,
    );
    return { text, parameters, types: ts };
  };
  /** The shape node of q in `shapes`, and the parameters and types the walk pushed. */
  const walked = (shapes: Shapes, q: Query) => {
    const parameters: unknown[] = [];
    const ts: unknown[] = [];
    const node = types.shapeOf(shapes, q, parameters, ts, sql.options);
    return { node, parameters, types: ts };
  };

  // A statement made as the service makes its pages: nested fragments, identifiers, an array of
  // fragments, and values of several types.
  const page = (opts: { entity: bigint | number; ids: number[]; column?: string; conditions?: number; limit?: number }) => {
    const where = Array.from({ length: opts.conditions ?? 2 }, (_, i) => sql`and ${sql(`c${i}`)} = ${i}`);
    const inner = sql`select e.*, ${sql('e')}.${sql(opts.column ?? 'id')} as ${sql('__k0')} from events e
      where e.collection_id = any(${opts.ids}::int[]) and e.entity_id = ${opts.entity as never} ${where}
      order by ${sql('e')}.${sql('id')} desc limit ${opts.limit ?? 100}`;
    return sql`select ${sql`e.id, e.entity_type`}, ${sql('__k0')} from (${inner}) ${sql('e')} order by 1`;
  };

  it('a statement of the same shape ends at the same node, with the parameters and types rendering pushes', () => {
    const shapes = types.shapeCache();
    const a = page({ entity: 5n, ids: [1, 2] });
    const first = walked(shapes, a);
    expect(first.node).not.toBeNull();
    expect(first.node!.text).toBeUndefined();
    const r = rendered(a);
    expect(first.parameters).toEqual(r.parameters);
    expect(first.types).toEqual(r.types);
    first.node!.text = r.text;
    const size = shapes.size;

    const b = page({ entity: 7n, ids: [3], limit: 5 });
    const second = walked(shapes, b);
    expect(second.node).toBe(first.node);
    expect(shapes.size).toBe(size);
    const rb = rendered(b);
    expect(second.node!.text).toBe(rb.text);
    expect(second.parameters).toEqual([[3], 7n, 0, 1, 5]);
    expect(second.parameters).toEqual(rb.parameters);
    expect(second.types).toEqual(rb.types);
  });

  it('an identifier, a value of another type, or another number of fragments is another shape', () => {
    const shapes = types.shapeCache();
    const base = walked(shapes, page({ entity: 5n, ids: [1] })).node;
    const variants = [
      page({ entity: 5n, ids: [1], column: 'name' }), // identifier
      page({ entity: 5, ids: [1] }), // number instead of bigint
      page({ entity: 5n, ids: [1], conditions: 3 }), // array of three fragments instead of two
      page({ entity: 5n, ids: [1], conditions: 0 }), // an empty array: a value, not fragments
    ];
    const nodes = variants.map((q) => walked(shapes, q).node);
    for (const n of nodes) expect(n).not.toBeNull();
    expect(new Set([base, ...nodes]).size).toBe(1 + variants.length);
    for (const q of variants) {
      const again = walked(shapes, q);
      expect(rendered(q).types).toEqual(again.types);
    }
    // and their texts differ where the shapes' do
    expect(rendered(variants[0]!).text).not.toBe(rendered(page({ entity: 5n, ids: [1] })).text);
    expect(rendered(variants[2]!).text).not.toBe(rendered(page({ entity: 5n, ids: [1] })).text);
  });

  it('the same text made by different call sites is two shapes, each with that text', () => {
    const shapes = types.shapeCache();
    const x = 1;
    const one = walked(shapes, sql`select ${x}`).node;
    const two = walked(shapes, sql`select ${x}`).node;
    expect(one).not.toBe(two);
  });

  it('parts whose text comes from values are not cached: a Builder, an unsafe fragment, a mutable strings array', () => {
    const shapes = types.shapeCache();
    expect(walked(shapes, sql`select ${sql(['a', 'b'])} from t`).node).toBeNull();
    expect(walked(shapes, sql`select 1 ${sql.unsafe('where a = 1')}`).node).toBeNull();
    const strings = Object.assign(['select 1'], { raw: ['select 1'] }) as unknown as TemplateStringsArray;
    expect(walked(shapes, sql(strings)).node).toBeNull();
    Object.freeze(strings);
    expect(walked(shapes, sql(strings)).node).not.toBeNull();
  });

  it('a Parameter is shaped by its type; one of no type number is rendered as before', () => {
    const shapes = types.shapeCache();
    const as = (type: unknown) => sql`select ${sql.typed('1' as never, type as never)}`;
    const text = walked(shapes, as(25)).node;
    expect(text).not.toBeNull();
    expect(walked(shapes, as(25)).node).toBe(text);
    expect(walked(shapes, as(20)).node).not.toBe(text);
    expect(walked(shapes, as('text')).node).toBeNull();
  });

  it('the cache is bounded: past its size (its nodes, and one per 64 characters of the texts kept) it starts over', () => {
    const shapes = types.shapeCache(6);
    const q = () => sql`select ${1}, ${sql('a')}`;
    const first = walked(shapes, q()).node!; // three nodes: the strings, the number, the identifier
    expect(shapes.size).toBe(3);
    types.keepShapeText(shapes, first, 'x'.repeat(130), 'signature');
    expect(shapes.size).toBe(5);
    expect(walked(shapes, q()).node!.text).toBe('x'.repeat(130));
    expect(walked(shapes, sql`select ${2}`).node).toBeNull(); // two more nodes: over 6, dropped
    expect(shapes.size).toBe(0);
    const again = walked(shapes, q());
    expect(again.node).not.toBeNull();
    expect(again.node!.text).toBeUndefined();
    expect(shapes.size).toBe(3);
  });
});

describe.each(eachCopy(NODE_DRIVER_COPIES))('postgres.js statement shapes in use, %s copy', (_name, copy: DriverCopy) => {
  let sql: Sql;
  const statements: string[] = [];
  beforeAll(async () => {
    sql = defaultExport<typeof postgres>(await copy.load('index.js'))(inject('dbUrl'), {
      max: 1,
      onnotice: () => {},
      debug: (_conn: number, text: string) => void statements.push(text),
    });
    await sql`select 1`; // connects (the driver then reads the array types)
  });
  afterAll(async () => {
    await sql.end();
  });

  it('answers each statement of a shape with its own values, and the same text each time', async () => {
    statements.length = 0;
    const pick = (column: string, min: number) =>
      sql`select ${sql(column)} as v from (select 1 as a, 2 as b union all select 3, 4) t where ${sql`a >= ${min}`} order by 1`;
    expect(await pick('a', 0)).toEqual([{ v: 1 }, { v: 3 }]);
    expect(await pick('a', 2)).toEqual([{ v: 3 }]);
    expect(await pick('b', 0)).toEqual([{ v: 2 }, { v: 4 }]); // another identifier: another text
    expect(await pick('b', 3)).toEqual([{ v: 4 }]);
    expect(await pick('a', 3)).toEqual([{ v: 3 }]);
    expect(statements[0]).toBe(statements[1]);
    expect(statements[2]).toBe(statements[3]);
    expect(statements[0]).not.toBe(statements[2]);
    expect(statements[4]).toBe(statements[0]);
  });

  it('a value of another type is another prepared statement, typed for it', async () => {
    const typeOf = (v: unknown) => sql<{ t: string }[]>`select pg_typeof(${v as never})::text as t`;
    expect((await typeOf(true))[0]!.t).toBe('boolean');
    expect((await typeOf(5n))[0]!.t).toBe('bigint');
    expect((await typeOf(new Date(0)))[0]!.t).toBe('timestamp with time zone');
    expect((await typeOf(true))[0]!.t).toBe('boolean');
  });

  it('a statement run by its text is prepared once for the types of its values, and again for others', async () => {
    // connection.js signatureOf: the signature of a statement that is not tagged, kept by its text
    // and its parameters' types
    const text = 'select pg_typeof($1)::text as t, $1::text as v -- run by its text';
    const run = (v: unknown) => sql.unsafe<{ t: string; v: string }[]>(text, [v as never], { prepare: true });
    expect(await run(true)).toEqual([{ t: 'boolean', v: 'true' }]);
    expect(await run(false)).toEqual([{ t: 'boolean', v: 'false' }]);
    expect(await run(5n)).toEqual([{ t: 'bigint', v: '5' }]);
    expect(await run(6n)).toEqual([{ t: 'bigint', v: '6' }]);
    expect(await run(true)).toEqual([{ t: 'boolean', v: 'true' }]);
    const [prepared] = await sql<{ n: number }[]>`select count(*)::int as n from pg_prepared_statements where statement = ${text}`;
    expect(prepared!.n).toBe(2);
  });

  it('arrays of fragments of different lengths, Builders and unsafe fragments keep their own texts', async () => {
    const ors = (ns: number[]) =>
      sql<{ g: number }[]>`select g from generate_series(1, 5) g where false ${ns.map((n) => sql`or g = ${n}`)} order by g`;
    expect((await ors([2])).map((r) => r.g)).toEqual([2]);
    expect((await ors([1, 4])).map((r) => r.g)).toEqual([1, 4]);
    expect((await ors([3])).map((r) => r.g)).toEqual([3]);
    const cols = (names: string[]) => sql`select ${sql(names)} from (select 1 as a, 2 as b) t`;
    expect(await cols(['a', 'b'])).toEqual([{ a: 1, b: 2 }]);
    expect(await cols(['b'])).toEqual([{ b: 2 }]);
    const tail = (text: string) => sql<{ g: number }[]>`select g from generate_series(1, 3) g ${sql.unsafe(text)}`;
    expect((await tail('where g > 1 order by g')).map((r) => r.g)).toEqual([2, 3]);
    expect((await tail('where g < 2')).map((r) => r.g)).toEqual([1]);
  });
});
