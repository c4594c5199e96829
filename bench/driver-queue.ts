// The postgres.js queue patch (patches/postgres+3.4.9.patch): BENCH_DRIVER_QUERIES (default
// 1,000,000) `select 1` queries from 50 concurrent callers on a pool of 10, throughput of the first
// and the last 100,000 and their ratio (goal >= 0.9), for the installed (patched) driver; then the
// same driver with upstream's queue.js put back, loaded side by side from a temporary copy, for
// BENCH_DRIVER_UPSTREAM_QUERIES (default 300,000: it slows down as it goes, so 1,000,000 takes
// minutes; 0 skips it).
// Part of `make bench`; alone: `SVC_DATABASE_URL=postgres://... npx tsx bench/driver-queue.ts`.
// Prints numbers only.
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import postgres from 'postgres';

const WINDOW = 100_000;
const WARMUP = 10_000;
const CALLERS = 50;
const POOL = 10;

/** src/queue.js of postgres 3.4.9 as published (the array that is only reset when it empties). */
const UPSTREAM_VERSION = '3.4.9';
const UPSTREAM_QUEUE = `export default Queue

function Queue(initial = []) {
  let xs = initial.slice()
  let index = 0

  return {
    get length() {
      return xs.length - index
    },
    remove: (x) => {
      const index = xs.indexOf(x)
      return index === -1
        ? null
        : (xs.splice(index, 1), x)
    },
    push: (x) => (xs.push(x), x),
    shift: () => {
      const out = xs[index++]

      if (index === xs.length) {
        index = 0
        xs = []
      } else {
        xs[index - 1] = undefined
      }

      return out
    }
  }
}
`;

type Postgres = typeof postgres;

interface Run {
  label: string;
  total: number;
  /** Queries per second in each window of WINDOW queries, in order. */
  windows: number[];
}

const queries = (name: string, fallback: number, allowZero = false) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || (v < 2 * WINDOW && !(allowZero && v === 0))) {
    throw new Error(`${name} must be an integer >= ${2 * WINDOW}${allowZero ? ' (or 0)' : ''}`);
  }
  return v;
};

/** `total` queries (after a warm-up) from CALLERS callers on a fresh pool of POOL; per-window throughput. */
async function drive(driver: Postgres, url: string, label: string, total: number): Promise<Run> {
  const sql = driver(url, { max: POOL, onnotice: () => {} });
  try {
    const callers = async (n: number, onDone: () => void) => {
      let started = 0;
      await Promise.all(
        Array.from({ length: CALLERS }, async () => {
          while (started < n) {
            started++;
            await sql`select 1`;
            onDone();
          }
        }),
      );
    };
    await callers(WARMUP, () => {});
    const windows: number[] = [];
    let finished = 0;
    let windowStart = performance.now();
    await callers(total, () => {
      if (++finished % WINDOW !== 0) return;
      const now = performance.now();
      windows.push((WINDOW * 1000) / (now - windowStart));
      windowStart = now;
    });
    process.stderr.write(`  done: driver queue / ${label}\n`);
    return { label, total, windows };
  } finally {
    await sql.end();
  }
}

/** The installed driver's ESM sources copied to a temporary directory with upstream's queue.js. */
async function loadUpstream(tmp: string): Promise<Postgres | string> {
  const entry = fileURLToPath(import.meta.resolve('postgres'));
  const pkg = JSON.parse(await readFile(join(dirname(entry), '..', 'package.json'), 'utf8')) as { version: string };
  if (pkg.version !== UPSTREAM_VERSION) return `installed postgres is ${pkg.version}; the kept upstream queue is of ${UPSTREAM_VERSION}`;
  await cp(dirname(entry), join(tmp, 'src'), { recursive: true });
  await writeFile(join(tmp, 'package.json'), '{"type":"module"}\n');
  await writeFile(join(tmp, 'src', 'queue.js'), UPSTREAM_QUEUE);
  return ((await import(pathToFileURL(join(tmp, 'src', 'index.js')).href)) as { default: Postgres }).default;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

function table(runs: Run[]): string {
  const rows = runs.map((r) => {
    const first = r.windows[0]!;
    const last = r.windows[r.windows.length - 1]!;
    return [
      r.label,
      fmt(r.total),
      `${fmt(first)}/s`,
      `${fmt(last)}/s`,
      `${(last / first).toFixed(2)}x`,
      r.windows.map((w) => (w / 1000).toFixed(1)).join(' '),
    ];
  });
  const k = `${WINDOW / 1000}k`;
  const header = ['queue', 'queries', `first ${k}`, `last ${k}`, 'last/first', `every ${k} (k queries/s)`];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : i === cells.length - 1 ? c : c.padStart(widths[i]!))).join('  ');
  return [
    `Driver queue: postgres.js, pool ${POOL}, ${CALLERS} concurrent callers of \`select 1\` after ${fmt(WARMUP)} warm-up queries;`,
    `last/first = throughput of the last ${fmt(WINDOW)} queries / of the first ${fmt(WINDOW)} (goal >= 0.9).`,
    '',
    line(header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map(line),
  ].join('\n');
}

/** Runs the installed driver, then upstream's queue; returns the table. */
export async function benchDriverQueue(url: string): Promise<string> {
  const total = queries('BENCH_DRIVER_QUERIES', 1_000_000);
  const upstreamTotal = queries('BENCH_DRIVER_UPSTREAM_QUERIES', 300_000, true);
  const installed = await readFile(join(dirname(fileURLToPath(import.meta.resolve('postgres'))), 'queue.js'), 'utf8');
  const patched = installed.includes('patches/postgres+3.4.9.patch');
  const runs: Run[] = [await drive(postgres, url, patched ? 'installed, patched' : 'installed, NOT patched', total)];
  const notes: string[] = [];
  if (upstreamTotal > 0) {
    const tmp = await mkdtemp(join(tmpdir(), 'svc-bench-pg-'));
    try {
      const upstream = await loadUpstream(tmp);
      if (typeof upstream === 'string') notes.push(`(upstream run skipped: ${upstream})`);
      else runs.push(await drive(upstream, url, `upstream ${UPSTREAM_VERSION}`, upstreamTotal));
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }
  return [table(runs), ...notes].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const url = process.env.SVC_DATABASE_URL || process.env.DATABASE_URL;
  if (!url) throw new Error('set SVC_DATABASE_URL (any database: the benchmark runs only `select 1`)');
  console.log(await benchDriverQueue(url));
}
