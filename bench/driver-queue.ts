// The postgres.js queue patch (patches/postgres+3.4.9.patch): BENCH_DRIVER_QUERIES (default
// 1,000,000) `select 1` queries from 50 concurrent callers on a pool of 10, throughput of the first
// and the last 100,000 and their ratio (goal >= 0.9), for the installed (patched) driver; then the
// same driver with upstream's queue.js put back, loaded side by side from a temporary copy, for
// BENCH_DRIVER_UPSTREAM_QUERIES (default 300,000: it slows down as it goes, so 1,000,000 takes
// minutes; 0 skips it).
// Then the Query patch: BENCH_DRIVER_FRAGMENT_QUERIES (default 200,000) statements built from
// tagged-template fragments, as the service builds its list statements, through the installed
// driver and through the same driver with upstream's Query constructor put back (side by side,
// interleaved, 2 rounds): queries/s, the time the process spent in garbage collection and its
// mark-compacts (a Query of upstream is promoted to the old generation by the young-generation
// collections, so it is collected only by mark-compacts).
// Then the species patch: BENCH_DRIVER_SPECIES_QUERIES (default 50,000) such statements one after
// another from one caller (as a request runs its statement), through the installed driver and
// through the same driver with upstream's static `Symbol.species` getters of Query and Result put
// back (interleaved, 2 rounds): statements/s and the process's CPU per statement, all threads (with
// the getters V8 keeps trying and aborting to optimise both constructors on its compiler thread).
// Then the parts of the patch that write a statement: BENCH_DRIVER_TEXT_QUERIES (default 100,000)
// statements made as the service makes its audit page (a ~1,000-character text of eleven fragments,
// nine identifiers and seven values, an array four times in a row) from 50 callers on a pool of
// 10, through the installed driver and through the same driver with upstream's `build` (which
// renders the text, then flattens and hashes it to find the prepared statement, every time), `Bind`,
// `arrayEscape`, `escapeIdentifier` and `str` put back (interleaved, 2 rounds): statements/s and
// the process's CPU per statement.
// Part of `make bench-latency` (and `make bench`); alone: `SVC_DATABASE_URL=postgres://... npx tsx bench/driver-queue.ts`.
// Prints numbers only.
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { constants as perfConstants, PerformanceObserver } from 'node:perf_hooks';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import postgres from 'postgres';

const WINDOW = 100_000;
const WARMUP = 10_000;
const CALLERS = 50;
const POOL = 10;

/** src/queue.js of postgres 3.4.9 as published (the array that is only reset when it empties). */
export const UPSTREAM_VERSION = '3.4.9';
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

/** A text of the patched driver's `file`, and upstream's in its place. */
interface Replacement {
  file: string;
  patched: string;
  upstream: string;
}

/** Query's and Result's Symbol.species as patched (data properties) and as upstream's getters. */
const SPECIES: Replacement[] = [
  ['query.js', 'Promise'],
  ['result.js', 'Array'],
].map(([file, base]) => ({
  file: file!,
  patched: `  static [Symbol.species] = ${base}\n`,
  upstream: `  static get [Symbol.species]() {\n    return ${base}\n  }\n`,
}));

/** The patched Query constructor's opening and upstream's, for putting upstream's back in a copy. */
const PATCHED_QUERY_OPENING = `    super(captureResolvers)
    this.resolver = capturedResolve
    this.rejecter = capturedReject
    capturedResolve = capturedReject = null
`;
const UPSTREAM_QUERY_OPENING = `    let resolve
      , reject

    super((a, b) => {
      resolve = a
      reject = b
    })

    this.resolve = x => (this.active = false, resolve(x))
    this.reject = x => (this.active = false, reject(x))
`;

/**
 * The parts of the patch that write a statement, as patched and as upstream's: connection.js
 * `build` (the shape cache) and `Bind` (an array given again right after itself), types.js
 * `arrayEscape` and `escapeIdentifier`, bytes.js `str` (short ASCII strings copied in JavaScript).
 */
const WRITING: Replacement[] = [
  {
    file: 'connection.js',
    patched: `    // patched: a statement of a shape built before takes its text from the shape cache
    const shape = q.tagged ? shapeOf(shapes, q, parameters, types, options) : null
    let string
    if (shape !== null && shape.text !== undefined) {
      string = shape.text
    } else {
      parameters.length = types.length = 0
      string = stringify(q, q.strings[0], q.args[0], parameters, types, options)
      !q.tagged && q.args.forEach(x => handleValue(x, parameters, types, options))
      shape !== null && keepShapeText(shapes, shape, string, types + string)
    }

    q.prepare = options.prepare && ('prepare' in q.options ? q.options.prepare : true)
    q.string = string
    q.signature = q.prepare && (shape !== null ? shape.signature : signatureOf(string, types))
`,
    upstream: `    const string = stringify(q, q.strings[0], q.args[0], parameters, types, options)

    !q.tagged && q.args.forEach(x => handleValue(x, parameters, types, options))

    q.prepare = options.prepare && ('prepare' in q.options ? q.options.prepare : true)
    q.string = string
    q.signature = q.prepare && types + string
`,
  },
  {
    file: 'connection.js',
    patched: `      type = types[i]
      const value = x
      // patched: an object (an array) given again right after itself is not serialized again
      parameters[i] = x = typeof x === 'object' && x === last && type === lastType
        ? lastText
        : type in options.serializers
          ? options.serializers[type](x)
          : '' + x
      last = value
      lastType = type
      lastText = x
`,
    upstream: `      type = types[i]
      parameters[i] = x = type in options.serializers
        ? options.serializers[type](x)
        : '' + x
`,
  },
  {
    file: 'types.js',
    patched: `  return x.indexOf('\\\\') === -1 && x.indexOf('"') === -1
    ? x
    : x
      .replace(escapeBackslash, '\\\\\\\\')
      .replace(escapeQuote, '\\\\"')
`,
    upstream: `  return x
    .replace(escapeBackslash, '\\\\\\\\')
    .replace(escapeQuote, '\\\\"')
`,
  },
  {
    file: 'types.js',
    patched: `  return typeof str === 'string' && str.indexOf('"') === -1 && str.indexOf('.') === -1
    ? '"' + str + '"'
    : '"' + str.replace(/"/g, '""').replace(/\\./g, '"."') + '"'
`,
    upstream: `  return '"' + str.replace(/"/g, '""').replace(/\\./g, '"."') + '"'
`,
  },
  {
    file: 'bytes.js',
    patched: `    const n = x.length
    if (n <= 64) {
      fit(n)
      let i = 0
      for (let c; i < n && (c = x.charCodeAt(i)) < 128; i++)
        buffer[b.i + i] = c
      if (i === n) {
        b.i += n
        return b
      }
    }
`,
    upstream: '',
  },
];

type Postgres = typeof postgres;
type Part = 'queue' | 'query' | 'species' | 'text';

/** What loadUpstream puts back for each part but the queue (a whole file); test/driver-put-back.test.ts checks it still finds them. */
export const PUT_BACK: Record<Exclude<Part, 'queue'>, Replacement[]> = {
  // the prototype's resolve and reject stay; upstream's own arrow functions shadow them
  query: [{ file: 'query.js', patched: PATCHED_QUERY_OPENING, upstream: UPSTREAM_QUERY_OPENING }],
  species: SPECIES,
  text: WRITING,
};

interface Run {
  label: string;
  total: number;
  /** Queries per second in each window of WINDOW queries, in order. */
  windows: number[];
}

/** An integer setting of at least `min` (2 windows unless given), or 0 where `allowZero`. */
const queries = (name: string, fallback: number, allowZero = false, min = 2 * WINDOW) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || (v < min && !(allowZero && v === 0))) {
    throw new Error(`${name} must be an integer >= ${min}${allowZero ? ' (or 0)' : ''}`);
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

/**
 * The installed driver's ESM sources copied to a temporary directory with upstream's queue.js
 * (`part` 'queue'), upstream's Query constructor (`part` 'query') or upstream's species getters
 * (`part` 'species') put back.
 */
async function loadUpstream(tmp: string, part: Part): Promise<Postgres | string> {
  const entry = fileURLToPath(import.meta.resolve('postgres'));
  const pkg = JSON.parse(await readFile(join(dirname(entry), '..', 'package.json'), 'utf8')) as { version: string };
  if (pkg.version !== UPSTREAM_VERSION) return `installed postgres is ${pkg.version}; the kept upstream ${part} is of ${UPSTREAM_VERSION}`;
  await cp(dirname(entry), join(tmp, 'src'), { recursive: true });
  await writeFile(join(tmp, 'package.json'), '{"type":"module"}\n');
  if (part === 'queue') await writeFile(join(tmp, 'src', 'queue.js'), UPSTREAM_QUEUE);
  for (const { file, patched, upstream } of part === 'queue' ? [] : PUT_BACK[part]) {
    const text = await readFile(join(tmp, 'src', file), 'utf8');
    // the patch changed and this file did not follow: fail rather than skip the part unnoticed
    if (!text.includes(patched))
      throw new Error(`bench/driver-queue.ts: the installed ${file} no longer holds the patched text of the ${part} part`);
    await writeFile(join(tmp, 'src', file), text.replace(patched, upstream));
  }
  return ((await import(pathToFileURL(join(tmp, 'src', 'index.js')).href)) as { default: Postgres }).default;
}

interface FragmentRun {
  label: string;
  queriesPerSecond: number;
  /** The process's CPU time (all threads) per statement, µs. */
  cpuUsPerQuery: number;
  gcMs: number;
  markCompacts: number;
}

type Statement = (sql: postgres.Sql, i: number) => postgres.PendingQuery<postgres.Row[]>;

/** Six tagged-template fragments: a column list, conditions, an order, as a list statement is built. */
const sixFragments: Statement = (sql, i) => {
  const columns = sql`${i}::int as id, ${'x'}::text as name`;
  const where = sql`${sql`${i % 7}::int >= 0`} and ${sql`${'a'}::text <> ''`}`;
  return sql`select ${columns} where ${where} order by ${sql`1`} limit ${1}`;
};

/** As the service makes a non-administrator's audit page of one entity (src/db/audit.ts): no rows. */
const auditPage: Statement = (sql, i) => {
  const ids = [1 + (i % 3)];
  const columns = sql`e.id, e.event_id, (e.occurred_at at time zone 'UTC')::text as occurred_at, e.entity_type, e.entity_id,
    e.entity_name, e.collection_id, e.action, e.actor_kind, e.actor_user_id, e.initiator_user_id, e.task_id,
    e.provenance::text as provenance, e.request_id, e.correlation_id, e.summary,
    case when e.collection_id = any(${ids}::int[]) then e.before::text end as before,
    case when e.collection_id = any(${ids}::int[]) then e.after::text end as after, e.before_revision, e.after_revision,
    e.metadata::text as metadata, e.schema_version::int as schema_version`;
  const events = sql`select g as id, gen_random_uuid() as event_id, now() as occurred_at, 'object'::text as entity_type,
    g::bigint as entity_id, 'x' as entity_name, 1 as collection_id, '{}'::int[] as related_collection_ids, 'updated' as action,
    'user' as actor_kind, 1 as actor_user_id, 1 as initiator_user_id, null::int as task_id, '{}'::jsonb as provenance,
    null::text as request_id, null::text as correlation_id, '' as summary, null::jsonb as before, null::jsonb as after,
    1 as before_revision, 2 as after_revision, '{}'::jsonb as metadata, 1 as schema_version from generate_series(1, 2) g`;
  const visible = sql`(e.collection_id = any(${ids}::int[]) or e.related_collection_ids && ${ids}::int[])`;
  const where = [
    visible,
    sql`${sql('e')}.${sql('entity_type')} = ${'object'}::text`,
    sql`${sql('e')}.${sql('entity_id')} = ${BigInt(1000 + i) as never}::bigint`,
  ];
  const page = sql`select e.*, ${sql('e')}.${sql('id')} as ${sql('__k0')} from (${events}) e
    where (${where[0]!}) and (${where[1]!}) and (${where[2]!}) order by ${sql('e')}.${sql('id')} desc nulls first limit ${100}`;
  return sql`select ${columns}, ${sql('__k0')} from (${page}) ${sql('e')} order by ${sql('e')}.${sql('id')} desc nulls first`;
};

/**
 * `total` statements made by `statement` (six fragments unless given) from `callers` callers
 * (CALLERS unless given) on a pool of POOL (of one connection for one caller), after a warm-up;
 * queries/s, the process's CPU per statement and the garbage collection it did meanwhile.
 */
async function driveFragments(
  driver: Postgres,
  url: string,
  label: string,
  total: number,
  callers = CALLERS,
  statement: Statement = sixFragments,
): Promise<FragmentRun> {
  const sql = driver(url, { max: callers === 1 ? 1 : POOL, onnotice: () => {} });
  try {
    const run = async (n: number) => {
      let started = 0;
      await Promise.all(
        Array.from({ length: callers }, async () => {
          while (started < n) await statement(sql, started++);
        }),
      );
    };
    await run(WARMUP);
    let gcMs = 0;
    let markCompacts = 0;
    const observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        gcMs += e.duration;
        if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR)
          markCompacts++;
      }
    });
    observer.observe({ entryTypes: ['gc'] });
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    await run(total);
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    await new Promise((r) => setImmediate(r)); // the last entries
    observer.disconnect();
    process.stderr.write(`  done: driver fragments / ${label}\n`);
    return { label, queriesPerSecond: (total * 1000) / ms, cpuUsPerQuery: (cpu.user + cpu.system) / total, gcMs, markCompacts };
  } finally {
    await sql.end();
  }
}

function fragmentTable(runs: FragmentRun[][], total: number): string {
  const header = ['Query', 'queries/s (per round)', 'GC ms (per round)', 'mark-compacts (per round)'];
  const labels = runs[0]!.map((r) => r.label);
  const rows = labels.map((label, i) => [
    label,
    runs.map((round) => fmt(round[i]!.queriesPerSecond)).join(', '),
    runs.map((round) => fmt(round[i]!.gcMs)).join(', '),
    runs.map((round) => String(round[i]!.markCompacts)).join(', '),
  ]);
  const ratio = runs.map((round) => (round[0]!.queriesPerSecond / round[1]!.queriesPerSecond).toFixed(2)).join(', ');
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [
    `Driver fragments: ${fmt(total)} statements of six tagged-template fragments each, pool ${POOL}, ${CALLERS} concurrent callers, rounds interleaved.`,
    '',
    line(header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map(line),
    '',
    `patched / upstream queries/s: ${ratio}`,
  ].join('\n');
}

/** Statements/s and CPU per statement of the installed driver and upstream's part, per round. */
function statementsTable(runs: FragmentRun[][], total: number, title: string, what: string, statement: string): string {
  const header = [what, 'statements/s (per round)', 'CPU µs per statement (per round)'];
  const labels = runs[0]!.map((r) => r.label);
  const rows = labels.map((label, i) => [
    label,
    runs.map((round) => fmt(round[i]!.queriesPerSecond)).join(', '),
    runs.map((round) => round[i]!.cpuUsPerQuery.toFixed(1)).join(', '),
  ]);
  const per = (f: (r: FragmentRun) => number) => runs.map((round) => (f(round[0]!) / f(round[1]!)).toFixed(2)).join(', ');
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [
    `${title}: ${fmt(total)} statements ${statement}, rounds interleaved.`,
    '',
    line(header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map(line),
    '',
    `patched / upstream statements/s: ${per((r) => r.queriesPerSecond)}; CPU per statement: ${per((r) => r.cpuUsPerQuery)}`,
  ].join('\n');
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

/**
 * `fn` with the installed driver's copy that has upstream's `part` put back (loadUpstream), in a
 * temporary directory removed afterwards; the reason instead when that copy cannot be made.
 */
async function withUpstream<T>(part: Part, fn: (upstream: Postgres) => Promise<T>): Promise<T | string> {
  const tmp = await mkdtemp(join(tmpdir(), 'svc-bench-pg-'));
  try {
    const upstream = await loadUpstream(tmp, part);
    return typeof upstream === 'string' ? upstream : await fn(upstream);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Two interleaved rounds of driveFragments: the installed driver, then `upstream`. */
async function fragmentRounds(
  upstream: Postgres,
  url: string,
  labels: [installed: string, upstream: string],
  total: number,
  callers?: number,
  statement?: Statement,
): Promise<FragmentRun[][]> {
  const rounds: FragmentRun[][] = [];
  for (let round = 0; round < 2; round++) {
    rounds.push([
      await driveFragments(postgres, url, labels[0], total, callers, statement),
      await driveFragments(upstream, url, labels[1], total, callers, statement),
    ]);
  }
  return rounds;
}

/** Runs the installed driver, then upstream's queue; returns the table. */
export async function benchDriverQueue(url: string): Promise<string> {
  const total = queries('BENCH_DRIVER_QUERIES', 1_000_000);
  const upstreamTotal = queries('BENCH_DRIVER_UPSTREAM_QUERIES', 300_000, true);
  const fragmentTotal = queries('BENCH_DRIVER_FRAGMENT_QUERIES', 200_000, true);
  const speciesTotal = queries('BENCH_DRIVER_SPECIES_QUERIES', 50_000, true, 1);
  const textTotal = queries('BENCH_DRIVER_TEXT_QUERIES', 100_000, true, 1);
  const installed = await readFile(join(dirname(fileURLToPath(import.meta.resolve('postgres'))), 'queue.js'), 'utf8');
  const patched = installed.includes('patches/postgres+3.4.9.patch');
  const runs: Run[] = [await drive(postgres, url, patched ? 'installed, patched' : 'installed, NOT patched', total)];
  const notes: string[] = [];
  if (upstreamTotal > 0) {
    const run = await withUpstream('queue', (upstream) => drive(upstream, url, `upstream ${UPSTREAM_VERSION}`, upstreamTotal));
    if (typeof run === 'string') notes.push(`(upstream run skipped: ${run})`);
    else runs.push(run);
  }
  const tables = [table(runs), ...notes];
  /** `total` statements through the installed driver and upstream's `part`, in interleaved rounds. */
  const compare = async (
    part: Exclude<Part, 'queue'>,
    total: number,
    labels: [installed: string, upstream: string],
    render: (rounds: FragmentRun[][]) => string,
    callers?: number,
    statement?: Statement,
  ) => {
    if (total === 0) return;
    const rounds = await withUpstream(part, (upstream) => fragmentRounds(upstream, url, labels, total, callers, statement));
    tables.push('', typeof rounds === 'string' ? `(driver ${part} part skipped: ${rounds})` : render(rounds));
  };
  await compare('query', fragmentTotal, ['installed, patched', `upstream ${UPSTREAM_VERSION} constructor`], (rounds) =>
    fragmentTable(rounds, fragmentTotal),
  );
  await compare(
    'species',
    speciesTotal,
    ['installed, patched (data properties)', `upstream ${UPSTREAM_VERSION} (static getters)`],
    (rounds) =>
      statementsTable(
        rounds,
        speciesTotal,
        'Driver species',
        'Query and Result species',
        'of six tagged-template fragments each, one after another from one caller',
      ),
    1,
  );
  await compare(
    'text',
    textTotal,
    ['installed, patched', `upstream ${UPSTREAM_VERSION} build, Bind, escapes, str`],
    (rounds) =>
      statementsTable(
        rounds,
        textTotal,
        'Driver statement writing',
        'Statement writing',
        `as the service makes an audit page (~1,000 characters, eleven fragments), from ${CALLERS} callers on a pool of ${POOL}`,
      ),
    CALLERS,
    auditPage,
  );
  return tables.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const url = process.env.SVC_DATABASE_URL || process.env.DATABASE_URL;
  if (!url) throw new Error('set SVC_DATABASE_URL (any database: the benchmark runs only `select 1`)');
  console.log(await benchDriverQueue(url));
}
