// Reads through the service while a stream of updates goes to the database, with the worker that
// merges the GIN indexes' pending lists (SVC_GIN_PENDING_FLUSH_INTERVAL_MS=1000, the default) and
// without it (0). Each mode's reads are measured first with no writes, the baseline of its round:
// one connection (autocannon) reading a `json_data__equals` page (one object, through the
// `json_data` GIN index) and a `name__contains` page (a few objects, through the trigram index),
// 100 rows at most, no total. The updates (a counter in `json_data`, as a monitoring agent would
// send) go straight to the database at a fixed rate, so that the service's own CPU is the reads'.
//
// Uses SVC_DATABASE_URL when set (a scratch database is created on that server and dropped), else
// an embedded PostgreSQL in a temporary directory. Knobs: BENCH_OBJECTS (100000),
// BENCH_WRITES_PER_SECOND (400), BENCH_DURATION (10 s per measurement), BENCH_WARMUP (3 s of each
// page before a fresh service's first measurement), BENCH_ROUNDS (2).
// Needs the built server (`make build`; `make bench-pending-lists` builds it).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHistogram } from 'node:perf_hooks';
import autocannon from 'autocannon';
import postgres from 'postgres';
import { scratchDatabase, type ScratchDatabase } from './scratch-database.ts';
import { freePort } from '../src/db/embedded.ts';

const ROOT = join(import.meta.dirname, '..');
const num = (name: string, dflt: number) => Math.max(1, Number(process.env[name] ?? dflt) || dflt);
const OBJECTS = num('BENCH_OBJECTS', 100_000);
const RATE = num('BENCH_WRITES_PER_SECOND', 400);
const DURATION = num('BENCH_DURATION', 10);
const ROUNDS = num('BENCH_ROUNDS', 2);
const WARMUP = num('BENCH_WARMUP', 3);
const PASSWORD = 'bench-password-pending';
const log = (s: string) => process.stderr.write(`${s}\n`);

let scratch: ScratchDatabase | undefined;
let dataDir: string | undefined;
const children = new Set<ChildProcess>();

/** The built service (role all) on `dbUrl`, ready; resolves to its port and a stop function. */
async function startService(dbUrl: string, flushMs: number): Promise<{ port: number; stop: () => Promise<void> }> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SVC_')) env[k] = v;
  const child = spawn(process.execPath, ['dist/server/main.js'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...env,
      SVC_DATABASE_URL: dbUrl,
      SVC_BIND: `127.0.0.1:${port}`,
      SVC_ADMIN_PASSWORD: PASSWORD,
      SVC_LOG_LEVEL: 'warn',
      SVC_DATA_DIR: dataDir!,
      SVC_GIN_PENDING_FLUSH_INTERVAL_MS: String(flushMs),
    },
  });
  children.add(child);
  const exited = new Promise<void>((ok) => child.once('exit', () => (children.delete(child), ok())));
  for (let waited = 0; ; waited += 100) {
    if (child.exitCode !== null) throw new Error('the service exited during start-up');
    if (waited > 60_000) throw new Error('the service was not ready within 60 s');
    const up = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      async (r) => (await r.arrayBuffer(), r.ok),
      () => false,
    );
    if (up) break;
    await new Promise((ok) => setTimeout(ok, 100));
  }
  return { port, stop: () => (child.kill('SIGTERM'), exited) };
}

/** Updates at RATE a second until stopped, straight to the database; resolves to how many were made. */
function writer(db: postgres.Sql, firstId: number): { stop: () => Promise<number> } {
  let made = 0;
  let inFlight = 0;
  let failed: unknown;
  const perTick = RATE / 100;
  let owed = 0;
  const timer = setInterval(() => {
    owed += perTick;
    for (; owed >= 1 && inFlight < 16; owed--) {
      inFlight++;
      const id = firstId + Math.floor(Math.random() * OBJECTS);
      void db`update objects set json_data = jsonb_set(json_data, '{counter}', to_jsonb(revision + 1)),
          revision = revision + 1, updated_at = now()
        where id = ${id}`
        .then(
          () => made++,
          (err: unknown) => (failed ??= err),
        )
        .finally(() => inFlight--);
    }
  }, 10);
  return {
    async stop() {
      clearInterval(timer);
      while (inFlight > 0) await new Promise((ok) => setTimeout(ok, 10));
      if (failed) throw failed;
      return made;
    },
  };
}

interface Reading {
  p50: number;
  p99: number;
  perSecond: number;
}

async function read(port: number, path: string, token: string, seconds = DURATION): Promise<Reading> {
  // autocannon's own percentiles are whole milliseconds; these pages take less than one
  const hist = createHistogram();
  const inst = autocannon({
    url: `http://127.0.0.1:${port}${path}`,
    connections: 1,
    duration: seconds,
    headers: { authorization: `Bearer ${token}` },
  });
  inst.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => hist.record(Math.max(1, Math.round(ms * 1000))));
  const r = await inst;
  if (r.non2xx || r.errors || r.timeouts) throw new Error(`${path}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
  return { p50: hist.percentile(50) / 1000, p99: hist.percentile(99) / 1000, perSecond: r.requests.total / r.duration };
}

async function main(): Promise<void> {
  dataDir = await mkdtemp(join(tmpdir(), 'svc-pending-data-'));
  scratch = await scratchDatabase('svc_pending');
  const dbUrl = scratch.url;

  // The first start migrates the database and creates the administrator.
  await (await startService(dbUrl, 0)).stop();
  const db = postgres(dbUrl, { max: 8, onnotice: () => {} });
  try {
    const t0 = performance.now();
    const [c] = await db<{ id: number }[]>`insert into collections (name) values ('pending-lists') returning id`;
    const [k] = await db<{ id: number }[]>`insert into classes (name, collection_id) values ('hosts', ${c!.id}) returning id`;
    await db`
      insert into objects (name, description, collection_id, class_id, json_data)
      select 'srv-' || substr(md5(g::text), 1, 8) || '-' || g,
        'rack ' || (g % 40) || ' row ' || (g % 7) || ' host of team ' || substr(md5((g * 7)::text), 1, 6), ${c!.id}, ${k!.id},
        jsonb_build_object('env', case when g % 3 = 0 then 'prod' else 'dev' end, 'counter', 0, 'hostname', 'h' || g,
          'metrics', jsonb_build_object('cpu', g % 16, 'mem', g % 64),
          'tags', jsonb_build_array('rack-' || (g % 40), case when g % 2 = 0 then 'even' else 'odd' end))
      from generate_series(1, ${OBJECTS}::int) g`;
    const [first] = await db<{ id: number }[]>`select min(id)::int as id from objects where class_id = ${k!.id}`;
    await db`vacuum analyze`;
    log(`seeded ${OBJECTS} objects in ${((performance.now() - t0) / 1000).toFixed(0)} s`);

    const pages = [
      ['`json_data__equals=hostname=h777` (1 object)', `json_data__equals=${encodeURIComponent(`hostname=h${Math.min(777, OBJECTS)}`)}`],
      ['`name__contains=beef`', 'name__contains=beef'],
    ] as const;
    type Cell = { idle: Reading[]; writes: Reading[] };
    const cells = new Map<string, Cell>();
    const cell = (page: string, flush: number) => {
      const key = `${page} ${flush}`;
      if (!cells.has(key)) cells.set(key, { idle: [], writes: [] });
      return cells.get(key)!;
    };
    const rates: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const flush of [1000, 0]) {
        await db`vacuum objects`;
        await db`vacuum events`;
        const svc = await startService(dbUrl, flush);
        try {
          const login = await fetch(`http://127.0.0.1:${svc.port}/api/v0/auth/login`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ name: 'admin', password: PASSWORD }),
          });
          const { token } = (await login.json()) as { token: string };
          const list = (q: string) => `/api/v1/classes/${k!.id}/objects?${q}&limit=100&include_total=false`;
          for (const [, q] of pages) await read(svc.port, list(q), token, WARMUP);
          for (const [name, q] of pages) cell(name, flush).idle.push(await read(svc.port, list(q), token));
          const w = writer(db, first!.id);
          await new Promise((ok) => setTimeout(ok, 3_000));
          const t1 = performance.now();
          for (const [name, q] of pages) cell(name, flush).writes.push(await read(svc.port, list(q), token));
          const seconds = (performance.now() - t1) / 1000 + 3;
          rates.push((await w.stop()) / seconds);
          log(`round ${round}, flush ${flush ? `every ${flush} ms` : 'off'}: done`);
        } finally {
          await svc.stop();
        }
      }
    }

    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const ms = (x: number) => `${x.toFixed(2)} ms`;
    const lines = [
      `Reads under writes, ${new Date().toISOString().slice(0, 10)}: ${OBJECTS.toLocaleString('en-US')} objects, ` +
        `updates straight to the database at ${Math.round(mean(rates))}/s (asked ${RATE}), one reading connection, ` +
        `${DURATION} s a measurement, ${ROUNDS} round(s); means of the rounds' medians.`,
      '',
      '| Page | Flush | p50 idle | p50 under writes | p99 under writes | Under writes / idle | Requests/s under writes |',
      '|---|---|---|---|---|---|---|',
    ];
    for (const [name] of pages) {
      for (const flush of [1000, 0]) {
        const c = cell(name, flush);
        const idle = mean(c.idle.map((r) => r.p50));
        const busy = mean(c.writes.map((r) => r.p50));
        lines.push(
          `| ${name} | ${flush ? `every ${flush} ms` : 'off'} | ${ms(idle)} | ${ms(busy)} | ${ms(mean(c.writes.map((r) => r.p99)))} | ` +
            `**${(busy / idle).toFixed(2)}** | ${Math.round(mean(c.writes.map((r) => r.perSecond)))} |`,
        );
      }
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await db.end({ timeout: 5 });
  }
}

async function cleanup(): Promise<void> {
  for (const child of children) child.kill('SIGKILL');
  await scratch?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}

try {
  await main();
} finally {
  await cleanup();
}
