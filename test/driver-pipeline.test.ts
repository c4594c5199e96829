// Transactions of postgres.js as patched by patches/postgres+3.4.9.patch: statements issued together
// inside sql.begin are written together (upstream waited for each answer, BEGIN's included), and
// tx.commitWith(query) sends COMMIT behind the final statement. Checked in the copy `import`
// resolves to and the one `require` resolves to, against the test database; the round trips are
// observed by a proxy that forwards the client's bytes at once but holds PostgreSQL's answers until
// the test releases them (no timing: what the client sent before any answer came back).
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type postgresType from 'postgres';
import { HoldingProxy } from './holding-proxy.ts';

type Postgres = typeof postgresType;
const require = createRequire(import.meta.url);
const esmEntry = fileURLToPath(import.meta.resolve('postgres'));
const cjsEntry = require.resolve('postgres');
const packageRoot = join(dirname(cjsEntry), '..', '..');

const copies: [string, () => Promise<Postgres>][] = [
  ['ESM (import)', async () => ((await import('postgres')) as { default: Postgres }).default],
  ['CJS (require)', async () => require(cjsEntry) as Postgres],
];

const url = new URL(inject('dbUrl'));

describe.each(copies)('postgres.js transactions, %s copy', (_name, load) => {
  let postgres: Postgres;
  let sql: ReturnType<Postgres>;
  const table = `drv_pipe_${Math.random().toString(36).slice(2, 8)}`;

  beforeAll(async () => {
    postgres = await load();
    sql = postgres(url.toString(), { max: 3, onnotice: () => {}, connection: { application_name: table } });
    await sql.unsafe(`create table ${table} (id int primary key, v int not null default 0)`);
  });
  afterAll(async () => {
    await sql.unsafe(`drop table if exists ${table}`);
    await sql.end();
  });

  it('writes BEGIN, the statements issued together and, with commitWith, the final statement and COMMIT in one go each', async () => {
    const proxy = new HoldingProxy();
    const port = await proxy.start(url.hostname || '127.0.0.1', Number(url.port || 5432));
    const through = new URL(url);
    through.hostname = '127.0.0.1';
    through.port = String(port);
    // unprepared: each statement's text goes out every time, so the proxy can see which were sent
    const one = postgres(through.toString(), { max: 1, prepare: false, onnotice: () => {} });
    try {
      const body = async (tx: postgresType.TransactionSql) => {
        const [a, b] = await Promise.all([tx`select 'pipe-a' as a`, tx`select 'pipe-b' as b`]);
        const [c] = await tx.commitWith(tx`select 'pipe-final' as c`);
        return [a[0]!.a, b[0]!.b, c!.c];
      };
      await one.begin(body); // connects (and reads the types) first
      proxy.hold();
      const run = one.begin(body);
      // Every answer is held: if the client waited for BEGIN's (upstream), it could not send these.
      await proxy.until(['begin', 'pipe-a', 'pipe-b']);
      expect(proxy.sent).not.toContain('pipe-final');
      proxy.hold();
      proxy.release();
      await proxy.until(['pipe-final', 'commit']);
      proxy.release();
      expect(await run).toEqual(['pipe-a', 'pipe-b', 'pipe-final']);
    } finally {
      proxy.release();
      await one.end();
      await proxy.close();
    }
  });

  it('commits what commitWith ends; a failing final statement commits nothing and is the error', async () => {
    await sql.begin(async (tx) => {
      await tx.unsafe(`insert into ${table} (id) values (1)`);
      await tx.commitWith(tx.unsafe(`update ${table} set v = v + 1 where id = 1`));
    });
    await expect(
      sql.begin(async (tx) => {
        await tx.unsafe(`insert into ${table} (id) values (2)`);
        await tx.commitWith(tx.unsafe(`insert into ${table} (id) values (1)`));
      }),
    ).rejects.toMatchObject({ code: '23505' });
    const rows = await sql.unsafe(`select id, v from ${table} order by id`);
    expect(rows.map((r) => [r.id, r.v])).toEqual([[1, 1]]);
  });

  it('refuses a statement after commitWith, and a second commitWith', async () => {
    await expect(
      sql.begin(async (tx) => {
        await tx.commitWith(tx.unsafe(`update ${table} set v = v + 1 where id = 1`));
        await tx`select 1`;
      }),
    ).rejects.toMatchObject({ code: 'COMMIT_SENT' });
    await expect(
      sql.begin(async (tx) => {
        void tx.commitWith(tx.unsafe(`select 1`));
        void tx.commitWith(tx.unsafe(`select 2`)); // throws: COMMIT is already on its way
      }),
    ).rejects.toMatchObject({ code: 'COMMIT_SENT' });
    // the final statement before the refused one did commit
    const [row] = await sql.unsafe(`select v from ${table} where id = 1`);
    expect(row!.v).toBe(2);
  });

  it('in a savepoint commitWith only returns the query: the outer transaction decides', async () => {
    await expect(
      sql.begin(async (tx) => {
        await tx.savepoint(async (sp) => {
          await sp.commitWith(sp.unsafe(`insert into ${table} (id) values (3)`));
        });
        await tx.unsafe(`insert into ${table} (id) values (1)`); // fails: the whole transaction rolls back
      }),
    ).rejects.toMatchObject({ code: '23505' });
    const [row] = await sql.unsafe(`select count(*)::int as n from ${table} where id = 3`);
    expect(row!.n).toBe(0);
  });

  it('keeps transactions and plain queries apart under concurrency, with errors in the pipeline', async () => {
    let committed = 0;
    let duplicates = 0;
    let plain = 0;
    const work: Promise<unknown>[] = [];
    for (let i = 0; i < 600; i++) {
      if (i % 3 === 0) {
        work.push(sql`select ${i}::int as x`.then(([r]) => expect(r!.x).toBe(i)).then(() => plain++));
        continue;
      }
      const id = 100 + (i % 50);
      work.push(
        sql
          .begin(async (tx) => {
            const mine = tx`select ${i}::int as x`;
            const insert = tx`insert into ${sql(table)} (id) values (${id})`; // all but the first per id fail
            const [[r]] = await Promise.all([mine, insert]);
            expect(r!.x).toBe(i);
            await tx.commitWith(tx`update ${sql(table)} set v = v + 1 where id = ${id}`);
          })
          .then(
            () => committed++,
            (e: { code?: string }) => {
              expect(e.code).toBe('23505');
              duplicates++;
            },
          ),
      );
    }
    await Promise.all(work);
    expect({ committed, duplicates, plain }).toEqual({ committed: 50, duplicates: 350, plain: 200 });
    const [sum] = await sql.unsafe(`select count(*)::int as n, sum(v)::int as s from ${table} where id >= 100`);
    expect(sum).toMatchObject({ n: 50, s: 50 });
    const [idle] =
      await sql`select count(*)::int as n from pg_stat_activity where application_name = ${table} and state = 'idle in transaction'`;
    expect(idle!.n).toBe(0);
  });
});

describe('the workerd copy', () => {
  it('carries the same transaction code as the ESM copy', () => {
    const begin = (file: string) => {
      const src = readFileSync(file, 'utf8');
      return src.slice(src.indexOf('  async function begin('), src.indexOf('  function move('));
    };
    const esm = begin(esmEntry);
    expect(esm).toContain('commitWith');
    expect(begin(join(packageRoot, 'cf', 'src', 'index.js'))).toBe(esm);
  });
});
