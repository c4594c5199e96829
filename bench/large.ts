// Large data (`make bench-large`): list, search and audit reads over BENCH_LARGE_OBJECTS (default
// 1,000,000) objects in one class and BENCH_LARGE_EVENTS (default 5,000,000) audit events, each
// against the hand-written indexed SQL that returns the same rows, run through postgres.js
// directly (its own connection, no service code). The goal of issue #14: every case within 2x.
//
// The service is called the way its deployed server calls it, through its HTTP request listener
// (the one `make run` serves: @hono/node-server's, src/http/server.ts requestListener), on an
// in-memory connection (bench/served.ts): node:http's request and response, without a socket. Both
// sides are timed interleaved (one service request, then one SQL run, so both see the same machine
// load); the report has median and p95 of each and ratio = service median / SQL median.
// Before timing, each case checks that the service answered exactly the rows of its SQL (ids in
// order), so the comparison is of the same result, and warms all three sides up (BENCH_LARGE_WARMUP
// rounds, default 2,000, at most BENCH_LARGE_WARMUP_SECONDS, default 10). A service request is timed
// until its response has been written and its body decoded (parsing the JSON is the client's work;
// the timed requests leave it unparsed), an SQL run until postgres.js has returned its rows. "svc
// SQL replay" is the service's own read statements of one request replayed back to back through
// postgres.js, each planned as the service plans it (prepared for the pool's statements, which may
// keep a generic plan; unnamed, planned at every execution, for the list pool's): service median
// minus it is roughly the request's cost outside the database. The hand-written SQL uses only the
// indexes the migrations create (the trigram indexes of object names and descriptions among them).
//
// The SQL the service ran for each case is captured (postgres.js `debug`) and, with
// BENCH_LARGE_EXPLAIN=1, printed with EXPLAIN (ANALYZE, BUFFERS) after the table.
//
// Uses SVC_DATABASE_URL when set (a fresh database is created and dropped), else an embedded
// PostgreSQL. BENCH_LARGE_ITERATIONS (default 100: at 30 the medians of two runs differed by up
// to 20 % on a 2-core machine) iterations per case, each case capped at
// BENCH_LARGE_CASE_SECONDS (default 20) seconds; BENCH_LARGE_ONLY (a regular expression) times only
// the cases whose name it matches.
//
// The service is measured as it is deployed, bundled by esbuild (scripts/build-server.ts): started
// as TypeScript (`node --import tsx bench/large.ts`), this file bundles itself into
// dist/bench/large.js and runs that. Through tsx every function created at run time is wrapped
// for its name (keepNames), which cost the service ~10 % of a page in process and the hand-written
// side (postgres.js, plain JavaScript) nothing.
import { spawnSync } from 'node:child_process';
import { createClass, createCollection, seedObjects, type Bench, startBench } from './setup.ts';
import { listPoolOf } from '../src/db/sql.ts';
import { Hono } from 'hono';
import { servedClient, servedFetch } from './served.ts';

if (import.meta.url.endsWith('.ts')) {
  const builder = '../scripts/build-server.ts'; // (a variable: not part of the bundle)
  const { bundle } = (await import(builder)) as typeof import('../scripts/build-server.ts');
  const run = spawnSync(process.execPath, [await bundle('bench/large.ts', 'dist/bench/large.js')], { stdio: 'inherit' });
  process.exit(run.status ?? 1);
}

const int = (name: string, fallback: number) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 0) throw new Error(`${name} must be a non-negative integer`);
  return v;
};
const OBJECTS = Math.max(1000, int('BENCH_LARGE_OBJECTS', 1_000_000));
const EVENTS = Math.max(1000, int('BENCH_LARGE_EVENTS', 5_000_000));
const ITER = Math.max(5, int('BENCH_LARGE_ITERATIONS', 100));
const CASE_MS = Math.max(1, int('BENCH_LARGE_CASE_SECONDS', 20)) * 1000;
/**
 * Warm-up rounds per case before timing (each: the service, the SQL, the bare server), at most
 * BENCH_LARGE_WARMUP_SECONDS: the service's code for a case's route and filters is JIT-compiled
 * over its first thousands of requests, while the SQL side's code (postgres.js) is hot from every
 * case before; a deployed service answers a route's requests from optimised code. Over a route's
 * first 500 requests (after other lists) each stage of the service's request took 4-8x its steady
 * time, and the bare server and the SQL alone were slower too, while V8's compiler threads shared
 * the cores (bench/FINDINGS.md, 2026-12-02); with 200 rounds, the default until then, the cases
 * were timed in that window.
 */
const WARM = Math.max(1, int('BENCH_LARGE_WARMUP', 2000));
const WARM_MS = int('BENCH_LARGE_WARMUP_SECONDS', 10) * 1000;
const EXPLAIN = process.env.BENCH_LARGE_EXPLAIN === '1';
/** BENCH_LARGE_ONLY: a regular expression; only the cases whose name it matches are timed. */
const ONLY = process.env.BENCH_LARGE_ONLY ? new RegExp(process.env.BENCH_LARGE_ONLY, 'i') : null;
/** The events spread over this many collections; the non-admin reader has ReadAudit on the first. */
const EVENT_COLLECTIONS = 5;

type Query = Record<string, string | number | boolean>;
type Row = Record<string, unknown>;

interface Result {
  name: string;
  n: number;
  svc: { median: number; p95: number };
  sql: { median: number; p95: number };
  bare: { median: number; p95: number };
  rows: number;
  /** The read statements the service ran for one request, replayed through postgres.js (median of the sums). */
  replay: number;
  statements: number;
  note: string;
}

const results: Result[] = [];

// "bare HTTP": the hand-written SQL of the case under way behind a bare Hono route, served through
// the same listener on the same in-memory connection as the service, answering its rows as JSON
// (c.json) and nothing else: no token, no validation, no paging. What any HTTP server answering
// the same rows pays on top of the SQL; service / bare HTTP is what the service adds to that.
type Hand = () => Promise<{ ids: number[]; total?: number | null }>;
let handNow: Hand | undefined;
/** The rows the hand-written SQL last returned (kept by `ids`, which every case's SQL side calls). */
let lastRows: readonly Row[] | undefined;
const bareSend = servedFetch(
  new Hono().get('/hand', async (c) => {
    lastRows = undefined;
    const r = await handNow!();
    if (!lastRows) throw new Error('the SQL side of the case kept no rows');
    return c.json(lastRows, 200, r.total != null ? { 'x-total-count': String(r.total) } : {});
  }).fetch,
);
const bareHttp = async () => {
  const res = await bareSend('GET', '/hand', {});
  if (res.status !== 200) throw new Error(`bare HTTP: ${res.status} ${res.text.slice(0, 300)}`);
};
const captured = new Map<string, { string: string; parameters: unknown[] }[]>();

const percentile = (s: number[], p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
const nowUs = () => Number(process.hrtime.bigint()) / 1e3;
const log = (s: string) => process.stderr.write(`${s}\n`);

function fmt(us: number): string {
  if (us >= 1e6) return `${(us / 1e6).toFixed(2)} s`;
  if (us >= 1e4) return `${(us / 1e3).toFixed(1)} ms`;
  return `${(us / 1e3).toFixed(2)} ms`;
}

/**
 * One case: `svc` makes the service request and returns the ids it answered (parsed when read) and
 * the total when asked; `hand` runs the hand-written SQL and returns its ids (and total). They must
 * agree.
 */
async function compare(
  b: Bench,
  name: string,
  svc: () => Promise<{ ids: number[]; total?: number | null }>,
  hand: Hand,
  note = '',
): Promise<void> {
  if (ONLY && !ONLY.test(name)) return;
  // Capture the service's statements of one request (the second: the first may open a connection,
  // whose driver reads the array types), then check both sides answer the same rows.
  await svc();
  const stmts: { string: string; parameters: unknown[]; prepared: boolean }[] = [];
  const pools = [b.sql, listPoolOf(b.sql)].map((p) => p?.options as unknown as { debug: unknown } | undefined);
  // a statement on the pool may keep a generic plan (it is replayed prepared); the list pool plans
  // each for its values (replayed unnamed, planned at every execution)
  for (const [i, opts] of pools.entries())
    if (opts) opts.debug = (_conn: number, string: string, parameters: unknown[]) => stmts.push({ string, parameters, prepared: i === 0 });
  const s = await svc();
  for (const opts of pools) if (opts) opts.debug = false;
  captured.set(name, stmts);
  const h = await hand();
  if (s.ids.join(',') !== h.ids.join(',') || (s.total ?? null) !== (h.total ?? null))
    throw new Error(
      `${name}: the service and the SQL disagree: service ${s.ids.length} rows [${s.ids.slice(0, 5).join(',')}…] total ${s.total}, ` +
        `SQL ${h.ids.length} rows [${h.ids.slice(0, 5).join(',')}…] total ${h.total}`,
    );
  const ts: number[] = [];
  const th: number[] = [];
  const tb: number[] = [];
  handNow = hand;
  const sides: [() => Promise<unknown>, number[]][] = [
    [svc, ts],
    [hand, th],
    [bareHttp, tb],
  ];
  // warm-up: WARM rounds, at most WARM_MS (at least one)
  const warmUntil = performance.now() + WARM_MS;
  for (let i = 0; i < WARM && (i === 0 || performance.now() < warmUntil); i++) for (const [f] of sides) await f();
  const deadline = performance.now() + CASE_MS;
  for (let i = 0; i < ITER; i++) {
    // rotate which side goes first, so none always runs on a cache another just warmed
    for (let k = 0; k < sides.length; k++) {
      const [f, times] = sides[(i + k) % sides.length]!;
      const t = nowUs();
      await f();
      times.push(nowUs() - t);
    }
    if (ts.length >= 5 && performance.now() > deadline) break;
  }
  handNow = undefined;
  ts.sort((x, y) => x - y);
  th.sort((x, y) => x - y);
  tb.sort((x, y) => x - y);
  // Replay the service's read statements of one request (token checks, lookups, the page, the
  // count) back to back on the direct connection, each planned as the service's pool plans it: the
  // part of the service's time spent in SQL. Ten times, the last five counted (a prepared statement
  // may switch to its generic plan after five executions).
  const reads = stmts.filter((st) => /^\s*(select|with)\b/i.test(st.string));
  const replays: number[] = [];
  for (let i = 0; i < 10; i++) {
    const t = nowUs();
    for (const st of reads) await direct.unsafe(st.string, st.parameters as never[], { prepare: st.prepared });
    if (i >= 5) replays.push(nowUs() - t);
  }
  replays.sort((x, y) => x - y);
  const r: Result = {
    name,
    n: ts.length,
    svc: { median: percentile(ts, 0.5), p95: percentile(ts, 0.95) },
    sql: { median: percentile(th, 0.5), p95: percentile(th, 0.95) },
    bare: { median: percentile(tb, 0.5), p95: percentile(tb, 0.95) },
    rows: s.ids.length,
    replay: percentile(replays, 0.5),
    statements: stmts.length,
    note: [note, s.total != null ? `total ${s.total}` : ''].filter(Boolean).join('; '),
  };
  results.push(r);
  log(`  done: ${name} (${(r.svc.median / r.sql.median).toFixed(2)}x; bare HTTP ${(r.bare.median / r.sql.median).toFixed(2)}x)`);
}

function table(): string {
  const header = [
    'case',
    'n',
    'rows',
    'service median',
    'p95',
    'SQL median',
    'p95',
    'svc/SQL',
    'bare HTTP median',
    'bare/SQL',
    'svc/bare',
    'svc stmts',
    'svc SQL replay',
    'note',
  ];
  const x = (ratio: number) => `${ratio.toFixed(ratio >= 100 ? 0 : 2)}x`;
  const rows = results.map((r) => {
    const ratio = r.svc.median / r.sql.median;
    return [
      r.name,
      String(r.n),
      String(r.rows),
      fmt(r.svc.median),
      fmt(r.svc.p95),
      fmt(r.sql.median),
      fmt(r.sql.p95),
      `${x(ratio)}${ratio > 2 ? ' !' : ''}`,
      fmt(r.bare.median),
      x(r.bare.median / r.sql.median),
      x(r.svc.median / r.bare.median),
      String(r.statements),
      fmt(r.replay),
      r.note,
    ];
  });
  const right = [false, true, true, true, true, true, true, true, true, true, true, true, true, false];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

const started = performance.now();
const b = await startBench();
// The hand-written SQL's connection: the bench's seeding connection (no statement timeout: the app's
// 30 s is too short for 1M objects with their history rows).
const direct = b.seed;
try {
  const token = b.adminToken;
  const ids = (rows: readonly Row[]) => ((lastRows = rows), rows.map((r) => Number(r.id)));
  // A request goes through the service's HTTP request listener on an in-memory connection
  // (bench/served.ts). Its time ends when its response has been written and its body decoded:
  // parsing the JSON is the client's work (the agreement check before timing parses it; the timed
  // requests leave `rows` unread).
  const send = servedClient(b.app);
  const served = async (path: string, query: Query, tok: string) => {
    const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
    const res = await send('GET', `${path}?${qs}`, { authorization: `Bearer ${tok}` });
    if (res.status !== 200) throw new Error(`GET ${path}: expected 200, got ${res.status}: ${res.text.slice(0, 500)}`);
    return res;
  };
  const get = async (path: string, query: Query, tok = token) => {
    const res = await served(path, query, tok);
    const total = res.headers.get('x-total-count');
    return {
      get rows() {
        return JSON.parse(res.text) as Row[];
      },
      next: res.headers.get('x-next-cursor') ?? null,
      total: total === undefined ? null : Number(total),
    };
  };
  /** A list answer as compare() takes it: the ids, parsed only when read, and the total. */
  const answered = (r: Awaited<ReturnType<typeof get>>) => ({
    get ids() {
      return ids(r.rows);
    },
    total: r.total,
  });

  // --- seed ---------------------------------------------------------------------------------
  let t0 = performance.now();
  const objCol = await createCollection(b);
  const classId = await createClass(b, objCol, { description: 'large bench servers' });
  await seedObjects(b, objCol, classId, OBJECTS);
  log(`seeded ${OBJECTS} objects in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  t0 = performance.now();
  const cols: number[] = [];
  for (let i = 0; i < EVENT_COLLECTIONS; i++) cols.push(await createCollection(b));
  // As bench/audit.ts: one INSERT, spread over the collections (every 50th collection-less, every
  // 7th naming a second collection as related, as object updates would).
  await direct`
    insert into events (entity_type, entity_id, entity_name, collection_id, related_collection_ids, action,
      actor_kind, actor_user_id, initiator_user_id, provenance, summary, before, after, before_revision, after_revision)
    select 'object', g, 'srv-' || g,
      case when g % 50 = 0 then null else (${cols}::int[])[1 + g % ${EVENT_COLLECTIONS}] end,
      case when g % 7 = 0 then array[(${cols}::int[])[1 + (g / 7) % ${EVENT_COLLECTIONS}]] else '{}'::int[] end,
      'updated', 'user', ${b.adminId}, ${b.adminId},
      jsonb_build_object('actor', jsonb_build_object('kind', 'user', 'principal', jsonb_build_object('id', ${b.adminId}::int, 'name', 'admin')),
        'initiator', jsonb_build_object('principal_id', ${b.adminId}::int, 'name', 'admin'), 'task_id', null),
      'object updated', jsonb_build_object('counter', g - 1), jsonb_build_object('counter', g), 1, 2
    from generate_series(1, ${EVENTS}::int) g`;
  log(`seeded ${EVENTS} events in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  t0 = performance.now();
  await direct`vacuum analyze objects`;
  await direct`vacuum analyze events`;
  log(`vacuum analyze in ${((performance.now() - t0) / 1000).toFixed(0)} s`);

  // The columns of an object as the service answers them (the SQL side fetches the same data).
  const OBJ = direct`id, name, description, collection_id, class_id, json_data, created_at, updated_at, revision`;
  const list = `/api/v1/classes/${classId}/objects`;
  const svcList =
    (query: Query, tok = token) =>
    async () =>
      answered(await get(list, query, tok));

  // --- keyset pages ---------------------------------------------------------------------------
  const page1 = { limit: 100, include_total: false };
  /** The hand-written first page of the class in id order under `cond` (a fragment of `direct`). */
  const classPage = (cond: typeof OBJ) => async () => ({
    ids: ids(await direct`select ${OBJ} from objects where class_id = ${classId} and ${cond} order by id limit 100`),
  });
  await compare(b, 'keyset page 1 (id order, limit 100)', svcList(page1), async () => ({
    ids: ids(await direct`select ${OBJ} from objects where class_id = ${classId} order by id limit 100`),
  }));
  // Follow real cursors for a while (limit 250), then take a cursor of this query and point it at
  // the row 90% into the class: the deep page of a client that kept following cursors.
  // (The last cursor answered: a class of fewer than 10,000 objects runs out of pages first.)
  let cursor: string | null = null;
  let followed = 0;
  let lastId = 0;
  for (; followed < 40; followed++) {
    const r = await get(list, { limit: 250, include_total: false, ...(cursor ? { cursor } : {}) });
    const got = ids(r.rows);
    if (got[0]! <= lastId) throw new Error('cursor paging went backwards');
    lastId = got.at(-1)!;
    if (!r.next) break;
    cursor = r.next;
  }
  const [deepRow] = await direct<{ id: number }[]>`
    select id from objects where class_id = ${classId} order by id offset ${Math.floor(OBJECTS * 0.9)} limit 1`;
  const c0 = JSON.parse(Buffer.from(cursor!, 'base64url').toString()) as { v: unknown[]; s: string };
  const deepCursor = Buffer.from(JSON.stringify({ v: [deepRow!.id], s: c0.s })).toString('base64url');
  await compare(
    b,
    `keyset deep page (row ${Math.floor(OBJECTS * 0.9)}, limit 250)`,
    svcList({ limit: 250, include_total: false, cursor: deepCursor }),
    async () => ({
      ids: ids(await direct`select ${OBJ} from objects where class_id = ${classId} and id > ${deepRow!.id} order by id limit 250`),
    }),
    `after following ${followed} cursors`,
  );
  await compare(
    b,
    'keyset page 1, sort name',
    svcList({ ...page1, sort: 'name' }),
    async () => ({ ids: ids(await direct`select ${OBJ} from objects where class_id = ${classId} order by name limit 100`) }),
    'index (class_id, name)',
  );

  // --- filtered and sorted ------------------------------------------------------------------
  // Names are 'srv-' || md5(g)[1..8] || '-' || g: 'srv-c' is 1/16 of them, three quarters into the name order.
  await compare(
    b,
    'filter name__startswith + json env=prod, sort name',
    svcList({ ...page1, sort: 'name', name__startswith: 'srv-c', json_data__equals: 'env=prod' }),
    async () => ({
      ids: ids(
        await direct`
        select ${OBJ} from objects
        where class_id = ${classId} and name >= 'srv-c' and name < 'srv-d' and json_data @> '{"env":"prod"}'
        order by name limit 100`,
      ),
    }),
    'SQL: name range + @>',
  );
  await compare(
    b,
    'filter json cpu>=4, sort name',
    svcList({ ...page1, sort: 'name', json_data__gte: 'metrics,cpu=4' }),
    async () => ({
      ids: ids(
        await direct`
        select ${OBJ} from objects
        where class_id = ${classId} and (case when jsonb_typeof(json_data #> '{metrics,cpu}') = 'number'
          then (json_data #> '{metrics,cpu}')::numeric end) >= 4
        order by name limit 100`,
      ),
    }),
    '~81% match',
  );

  // --- include_total ------------------------------------------------------------------------
  // The list above with the total: the service's count(*) against the SQL page + count(*).
  await compare(
    b,
    'same list (json cpu>=4, sort name), include_total=true',
    svcList({ limit: 100, sort: 'name', json_data__gte: 'metrics,cpu=4', include_total: true }),
    async () => {
      const where = direct`class_id = ${classId} and (case when jsonb_typeof(json_data #> '{metrics,cpu}') = 'number'
        then (json_data #> '{metrics,cpu}')::numeric end) >= 4`;
      const rows = await direct`select ${OBJ} from objects where ${where} order by name limit 100`;
      const [c] = await direct<{ n: string }[]>`select count(*) as n from objects where ${where}`;
      return { ids: ids(rows), total: Number(c!.n) };
    },
    'SQL: page + count(*)',
  );

  // --- substring search -----------------------------------------------------------------------
  // 'beef' in the md5 part of a name: a few dozen of 1M names, so no page fills early in id order;
  // both sides are served by the trigram index of names (migration 0190) when PostgreSQL estimates
  // the pattern rare (bench/FINDINGS.md, 2026-12-02: one run read the class in id order on both).
  await compare(
    b,
    'name__contains (rare substring)',
    svcList({ ...page1, name__contains: 'beef' }),
    classPage(direct`name like '%beef%'`),
    'SQL: like (trigram index)',
  );
  // case-insensitive: the service matches lower(name) LIKE lower(pattern), served by the trigram index
  // of the names' lowercase (migration 0240); by hand, ILIKE on the names' own trigram index
  await compare(
    b,
    'name__icontains (rare substring, "BEEF")',
    svcList({ ...page1, name__icontains: 'BEEF' }),
    classPage(direct`name ilike '%BEEF%'`),
    'SQL: ilike (trigram index)',
  );
  // a pattern: the service judges it rare by the texts every match must hold ('srv-', 'beef'), as a
  // substring (src/db/substring-stats.ts); both sides are served by the trigram index of names
  await compare(
    b,
    'name__like=srv-%beef% (rare pattern)',
    svcList({ ...page1, name__like: 'srv-%beef%' }),
    classPage(direct`name like 'srv-%beef%'`),
    'SQL: like (trigram index)',
  );
  await compare(
    b,
    'name__regex=^srv-[0-9a-f]*beef (rare pattern)',
    svcList({ ...page1, name__regex: '^srv-[0-9a-f]*beef' }),
    classPage(direct`name ~ '^srv-[0-9a-f]*beef'`),
    'SQL: ~ (trigram index)',
  );
  await compare(
    b,
    'name__contains (common: "-12")',
    svcList({ ...page1, name__contains: '-12' }),
    classPage(direct`name like '%-12%'`),
    'page fills early in id order',
  );
  const plain = async (q: string) => {
    const res = await served('/api/v1/search', { q, kinds: 'object', limit_per_kind: 100 }, token);
    return {
      get ids() {
        return (JSON.parse(res.text) as { results: { objects: { id: number }[] } }).results.objects.map((x) => x.id);
      },
    };
  };
  await compare(
    b,
    'plain search q=beef (objects)',
    () => plain('beef'),
    async () => ({
      ids: ids(
        await direct`
        select ${OBJ} from objects where name ilike '%beef%' or description ilike '%beef%' order by id limit 100`,
      ),
    }),
    'names and descriptions',
  );

  // --- JSON containment -------------------------------------------------------------------------
  // json_data__all: the array at the path holds every value (SQL `@>`); the GIN index on json_data
  // (jsonb_path_ops) serves `json_data @> '{"tags": [...]}'` in the hand-written SQL.
  await compare(
    b,
    'json_data__all=tags=rack-8 (2.5%)',
    svcList({ ...page1, json_data__all: 'tags=rack-8' }),
    classPage(direct`json_data @> '{"tags":["rack-8"]}'`),
    'SQL: @> (GIN)',
  );
  await compare(
    b,
    'json_data__all=tags=rack-8,rack-9 (none)',
    svcList({ ...page1, json_data__all: 'tags=rack-8,rack-9' }),
    classPage(direct`json_data @> '{"tags":["rack-8","rack-9"]}'`),
    'SQL: @> (GIN)',
  );
  // Two filters (equals and all) that are containment tests alone: one contained document
  // (db/list.ts filtersSql), as the hand-written SQL writes it. No object is both on rack 9 and even.
  await compare(
    b,
    'json_data env=prod + all tags=rack-9,even (none)',
    svcList({ ...page1, json_data__equals: 'env=prod', json_data__all: 'tags=rack-9,even' }),
    classPage(direct`json_data @> '{"env":"prod","tags":["rack-9","even"]}'`),
    'SQL: one @> (GIN)',
  );
  const host = `srv-${Math.floor(OBJECTS * 0.7)}.example.net`;
  await compare(
    b,
    'json_data__equals=hostname=<one host>',
    svcList({ ...page1, json_data__equals: `hostname=${host}` }),
    classPage(direct`json_data @> ${direct.json({ hostname: host })}`),
    'SQL: @> (GIN)',
  );

  // --- objects for a non-admin -----------------------------------------------------------------
  // A member of a group granted ReadClass and ReadObject on the class's collection: the page tests
  // each object's collection against the grants the token cache keeps (Authority.grants); the SQL
  // names the collection.
  const objectReader = await b.principalWith([[objCol, ['ReadClass', 'ReadObject']]]);
  await compare(
    b,
    'keyset page 1, non-admin (ReadObject on the collection)',
    svcList(page1, objectReader.token),
    classPage(direct`collection_id = ${objCol}`),
  );
  await compare(
    b,
    'json_data__equals=hostname=<one host>, non-admin',
    svcList({ ...page1, json_data__equals: `hostname=${host}` }, objectReader.token),
    classPage(direct`collection_id = ${objCol} and json_data @> ${direct.json({ hostname: host })}`),
    'SQL: @> (GIN)',
  );

  // --- audit stream for a non-admin -----------------------------------------------------------
  const reader = await b.principalWith([[cols[0]!, ['ReadCollection', 'ReadAudit']]]);
  const events = (query: Query) => async () => answered(await get('/api/v1/events', query, reader.token));
  const visibleSql = direct`(collection_id = ${cols[0]!} or related_collection_ids && array[${cols[0]!}::int])`;
  const [vis] = await direct<{ n: string }[]>`select count(*) as n from events where ${visibleSql}`;
  await compare(
    b,
    'audit events page 1, non-admin (ReadAudit on 1 collection)',
    events({ limit: 100, include_total: false }),
    async () => ({
      ids: ids(await direct`select * from events where ${visibleSql} order by id desc limit 100`),
    }),
    `sees ${vis!.n} of ${EVENTS}`,
  );
  const [mid] = await direct<{ id: number }[]>`
    select id from events where ${visibleSql} order by id desc offset ${Math.floor(Number(vis!.n) * 0.9)} limit 1`;
  const first = await get('/api/v1/events', { limit: 100, include_total: false }, reader.token);
  const e0 = JSON.parse(Buffer.from(first.next!, 'base64url').toString()) as { v: unknown[]; s: string };
  const deepEvents = Buffer.from(JSON.stringify({ v: [mid!.id], s: e0.s })).toString('base64url');
  await compare(
    b,
    'audit events deep page (90%), non-admin',
    events({ limit: 100, include_total: false, cursor: deepEvents }),
    async () => ({
      ids: ids(await direct`select * from events where ${visibleSql} and id < ${mid!.id} order by id desc limit 100`),
    }),
  );
  await compare(
    b,
    'audit events page 1, non-admin, include_total=true',
    events({ limit: 100 }),
    async () => {
      const rows = await direct`select * from events where ${visibleSql} order by id desc limit 100`;
      const [c] = await direct<{ n: string }[]>`select count(*) as n from events where ${visibleSql}`;
      return { ids: ids(rows), total: Number(c!.n) };
    },
    'the default; SQL: page + count(*)',
  );
  await compare(
    b,
    'audit events, non-admin, entity_id filter',
    events({ limit: 100, include_total: false, entity_type: 'object', entity_id: 5 * Math.floor(EVENTS / 10) }),
    async () => ({
      ids: ids(
        await direct`
        select * from events where entity_type = 'object' and entity_id = ${5 * Math.floor(EVENTS / 10)} and ${visibleSql}
        order by id desc limit 100`,
      ),
    }),
    'index (entity_type, entity_id, id)',
  );

  console.log(
    `Large data: ${OBJECTS.toLocaleString('en-US')} objects in one class, ${EVENTS.toLocaleString('en-US')} events over ` +
      `${EVENT_COLLECTIONS} collections. Service = GET through the service's HTTP request listener in-process, on an in-memory connection (admin token unless noted); SQL = the ` +
      `hand-written query for the same rows through postgres.js directly. svc/SQL = ratio of medians ("!" beyond the 2x goal); bare HTTP = the same SQL behind a bare Hono route ` +
      `through the same listener and connection, its rows as JSON; svc stmts = ` +
      `statements the service ran for one request; svc SQL replay = its read statements replayed through postgres.js.\n`,
  );
  console.log(table());

  if (EXPLAIN) {
    for (const [name, stmts] of captured) {
      console.log(`\n### ${name}`);
      for (const s of stmts) {
        if (!/^\s*select/i.test(s.string) || /from\s+tokens|svc_token|auth_tokens/i.test(s.string)) continue;
        const rows = await direct.unsafe(`explain (analyze, buffers) ${s.string}`, s.parameters as never[]);
        console.log(s.string.replace(/\s+/g, ' ').slice(0, 2000));
        console.log(rows.map((r) => r['QUERY PLAN']).join('\n'));
      }
    }
  }
  console.log(`\n(BENCH_LARGE_ITERATIONS=${ITER}; total run ${((performance.now() - started) / 1000).toFixed(0)} s)`);
} finally {
  await b.close();
}
