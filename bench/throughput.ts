// Throughput benchmark (`make bench-throughput`): the service against the best bare server built from
// the same parts (bench/bare-server.ts) under the same concurrent load, both as real processes on
// 127.0.0.1 and the same database. Every measurement starts a fresh process, warms it, then loads it
// with wrk (-t1) when it is installed, else autocannon (used as a library, in this process); rounds
// run bare, service, bare, service, and each row's ratio is service / bare within a round. Also: a
// soak of getObject and one of createObject (one service process under that load, last window vs
// first, with a bare server alongside as the control of the machine's own drift), the service's
// RSS, and 2 api processes vs 1 (with the bare select server's 2 processes vs 1 as the control of
// what the machine can give).
// Both servers run as plain JavaScript bundles (scripts/build-server.ts, rebuilt at the start), the
// service as `make run` and deploy/*.service run it.
// Prints numbers only (a markdown table on stdout, then each goal of #14 the run measured, judged on
// the means of its rounds, and our own bar for the hot paths #14 sets none for, a list page, an
// update, a JSON Patch and a delete; progress on stderr); tests never time anything.
//
// Uses SVC_DATABASE_URL when set (a scratch database is created on that server and dropped), else an
// embedded PostgreSQL in a temporary directory. Knobs: BENCH_CONNECTIONS (50), BENCH_DURATION (10 s
// per measurement), BENCH_WARMUP (3 s; under BENCH_PROCESS_CPU, 3 s of CPU at its share), BENCH_ROUNDS
// (2), BENCH_SOAK_SECONDS (60; 0 skips the soaks),
// BENCH_SOAK_WINDOW (10 s compared at each end of the soak), BENCH_SOAK_CHUNK (300 s: the soak's
// middle is loaded and reported in chunks of at most this), BENCH_ONLY (a comma-separated list of
// scenario ids, e.g. `bare-constant,svc-healthz`, and soaks, `soak`, `soak-create` and
// `soak-update`: a shorter targeted run; the table then has only the rows whose scenarios ran),
// BENCH_SVC_NODE_OPTIONS (extra node flags for the service processes, e.g. `--cpu-prof
// --cpu-prof-dir=/tmp/prof` to profile them under the load; bench/cpuprofile-top.ts summarises a
// profile), BENCH_BARE_NODE_OPTIONS (the same for the bare server), BENCH_LOADER (wrk or autocannon;
// default wrk when it is on the PATH), BENCH_SVC_LOG_LEVEL (the service's SVC_LOG_LEVEL, default
// warn: no `request` log line per request; info measures them), BENCH_PROCESS_CPU (a fraction of a
// core, e.g. 0.3: each server process, bare or service, in a cgroup of its own with that CPU quota,
// bench/cpu-cap.ts; root. On a machine with too few cores for two server processes, PostgreSQL and
// the load generator, `2 processes vs 1` then measures how a server scales with processes, each
// with the same CPU, instead of the cores left over).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import autocannon, { type AutocannonInstance, type AutocannonRequest } from 'autocannon';
import postgres from 'postgres';
import { CpuCap } from './cpu-cap.ts';
import { scratchDatabase, type ScratchDatabase } from './scratch-database.ts';
import { freePort } from '../src/db/embedded.ts';
import { SERVER_SCHEMA } from './objects.ts';
import { bundle, SERVER_BUNDLE } from '../scripts/build-server.ts';

const int = (name: string, fallback: number, min = 1) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < min) throw new Error(`${name} must be an integer >= ${min}`);
  return v;
};
const CONNECTIONS = int('BENCH_CONNECTIONS', 50, 2);
const DURATION = int('BENCH_DURATION', 10);
const ROUNDS = int('BENCH_ROUNDS', 2);
const SOAK = int('BENCH_SOAK_SECONDS', 60, 0);
const SOAK_WINDOW = Math.min(int('BENCH_SOAK_WINDOW', 10), Math.max(1, Math.floor(SOAK / 3)));
const SOAK_CHUNK = int('BENCH_SOAK_CHUNK', 300);
const ONLY = (process.env.BENCH_ONLY ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const SVC_NODE_OPTIONS = (process.env.BENCH_SVC_NODE_OPTIONS ?? '').split(' ').filter(Boolean);
const SVC_LOG_LEVEL = process.env.BENCH_SVC_LOG_LEVEL ?? 'warn';
const BARE_NODE_OPTIONS = (process.env.BENCH_BARE_NODE_OPTIONS ?? '').split(' ').filter(Boolean);
const LOADER = loader(process.env.BENCH_LOADER);
/** BENCH_PROCESS_CPU: each server process under a CPU quota of its own (bench/cpu-cap.ts), or none. */
const CAP = process.env.BENCH_PROCESS_CPU ? new CpuCap(Number(process.env.BENCH_PROCESS_CPU)) : undefined;
/** The warm-up: 3 s, or under a cap as much CPU as 3 s uncapped would give (0.3 of a core: 10 s). */
const WARMUP = int('BENCH_WARMUP', CAP && CAP.share < 1 ? Math.ceil(3 / CAP.share) : 3);
const ADMIN_PASSWORD = 'bench-throughput-password';
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BARE_BUNDLE = 'dist/bench/bare-server.js';
const TICK_US = 1e6 / (Number(process.env.BENCH_CLK_TCK) || 100); // USER_HZ: 100 on Linux

/** wrk when asked for or (unless autocannon is asked for) when it is on the PATH. */
function loader(asked: string | undefined): 'wrk' | 'autocannon' {
  if (asked !== undefined && asked !== 'wrk' && asked !== 'autocannon') throw new Error('BENCH_LOADER must be wrk or autocannon');
  const found = spawnSync('wrk', ['--version']).error === undefined;
  if (asked === 'wrk' && !found) throw new Error('BENCH_LOADER=wrk: wrk is not installed (Debian: apt-get install wrk)');
  return asked ?? (found ? 'wrk' : 'autocannon');
}

// ---------------------------------------------------------------------------------------------
// Processes: every one started here is stopped at the end, on failure and on Ctrl-C.

interface Proc {
  name: string;
  pid: number;
  port: number;
  child: ChildProcess;
  exited: Promise<void>;
  output: () => string[];
  startRssKb: number;
}

const live = new Set<Proc>();
const running = new Set<AutocannonInstance>();
/** wrk processes under way. */
const generators = new Set<ChildProcess>();

/** The environment of a child: ours without SVC_* (so nothing in the caller's shell changes the service). */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SVC_') && !k.startsWith('BARE_')) env[k] = v;
  return { ...env, ...extra };
}

async function startProc(
  name: string,
  script: string,
  env: Record<string, string>,
  port: number,
  readyPath: string,
  nodeOptions: string[] = [],
): Promise<Proc> {
  // node itself (not npx's CLI, which would run the server as a grandchild): the pid we read
  // /proc of is the server's.
  const child = spawn(process.execPath, [...nodeOptions, script], {
    cwd: ROOT,
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  CAP?.place(child.pid!);
  // Its last chunks of output, for the errors below, kept as they came: a service logging every
  // request (BENCH_SVC_LOG_LEVEL=info) then costs this process a read a chunk, as a log collector.
  const chunks: Buffer[] = [];
  const keep = (b: Buffer) => {
    chunks.push(b);
    if (chunks.length > 8) chunks.shift();
  };
  const output = () => Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean).slice(-40);
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let alive = true;
  const exited = new Promise<void>((ok) => child.once('exit', () => ((alive = false), ok())));
  const proc: Proc = { name, pid: child.pid!, port, child, exited, output, startRssKb: 0 };
  live.add(proc);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (!alive) throw new Error(`${name} exited during start-up:\n${output().join('\n')}`);
    if (Date.now() > deadline) throw new Error(`${name} not ready within 60 s:\n${output().join('\n')}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}${readyPath}`);
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.startRssKb = memKb(proc, 'VmRSS');
  return proc;
}

async function stopProc(p: Proc): Promise<void> {
  if (!live.has(p)) return;
  p.child.kill('SIGTERM');
  const killed = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
  await p.exited;
  clearTimeout(killed);
  live.delete(p);
}

/**
 * A process's name and CPU so far, in µs, from /proc/<pid>/stat: its own (utime + stime, fields 14
 * and 15 of proc(5)) and that of the children it has reaped (cutime + cstime, 16 and 17).
 */
function procCpu(pid: number | 'self'): { name: string; ownUs: number; reapedUs: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const close = stat.lastIndexOf(')');
  const f = stat.slice(close + 2).split(' ');
  return {
    name: stat.slice(stat.indexOf('(') + 1, close),
    ownUs: (Number(f[11]) + Number(f[12])) * TICK_US,
    reapedUs: (Number(f[13]) + Number(f[14])) * TICK_US,
  };
}

/**
 * The machine's CPU time so far from the first line of /proc/stat, in ticks: all of it, and the
 * part the hypervisor gave to other guests while this one wanted to run (steal, the eighth
 * field). A window's steal share is a sign of the host's load: on the 2-vCPU development machine
 * the soak's slow chunks came with 0.2-0.5 % of steal and its quick ones with under 0.1 %, both
 * processes' CPU a request rising and falling together (bench/FINDINGS.md, seventh session).
 */
function machineTicks(): { total: number; steal: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { total: f.reduce((a, b) => a + b, 0), steal: f[7] ?? 0 };
}

/** The steal share between two readings of machineTicks, in %. */
function stealPct(t0: ReturnType<typeof machineTicks>, t1: ReturnType<typeof machineTicks>): number {
  const total = t1.total - t0.total;
  return total > 0 ? (100 * (t1.steal - t0.steal)) / total : 0;
}

/** utime + stime of the process so far, in µs. */
function cpuUs(p: Proc): number {
  return procCpu(p.pid).ownUs;
}

/**
 * CPU of the local PostgreSQL so far, in µs: every process named `postgres` on this machine (the
 * server, its backends, its background workers), with the CPU of the children each has reaped, so
 * that a backend which exits between two readings still counts (its postmaster reaps it). Null when
 * there is none (a database on another machine). Whatever else that server runs counts too: the
 * benchmark's database should be the only one busy.
 */
function dbCpuUs(): number | null {
  let us = 0;
  let found = false;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let cpu: ReturnType<typeof procCpu>;
    try {
      cpu = procCpu(Number(pid));
    } catch {
      continue; // exited since the listing
    }
    if (cpu.name !== 'postgres') continue;
    found = true;
    us += cpu.ownUs + cpu.reapedUs;
  }
  return found ? us : null;
}

/** What a window is measured by, read at its start and at its end (readings). */
interface Readings {
  /** The loaded processes' CPU, summed (cpuUs). */
  cpu: number;
  db: number | null;
  ticks: ReturnType<typeof machineTicks>;
}

function readings(ps: Proc[]): Readings {
  return { cpu: ps.reduce((s, p) => s + cpuUs(p), 0), db: dbCpuUs(), ticks: machineTicks() };
}

/**
 * A window's costs from its two readings: the processes' and PostgreSQL's CPU a request (µs; the
 * latter null when the database is elsewhere) and the machine's steal share (%).
 */
function costs(r0: Readings, r1: Readings, requests: number): { cpu: number; db: number | null; steal: number } {
  return {
    cpu: (r1.cpu - r0.cpu) / requests,
    db: r0.db !== null && r1.db !== null ? (r1.db - r0.db) / requests : null,
    steal: stealPct(r0.ticks, r1.ticks),
  };
}

/** A memory line of /proc/<pid>/status (VmRSS now, VmHWM the peak so far), in kB. */
function memKb(p: Proc, key: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${p.pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

// ---------------------------------------------------------------------------------------------
// Load

/**
 * What a load sends to one process: GETs of one path, creates (POSTs whose bodies carry a name
 * unique to the run and one of the data variants as json_data), updates (PATCHes of `path`
 * followed by each of `updates` in turn, each body's json_data a data variant with a counter unique
 * to the run: the requests in flight update different rows, and every update changes its row; with
 * `patches`, of `path` + id + `/data`, each body a JSON Patch replacing the counter with one unique
 * to the run), or deletes (DELETEs of `path` followed by the ids of objects made for the load, each
 * once: `deletes(n)` makes n of them, ids in a row, and gives the first).
 */
interface Shape {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  headers: Record<string, string>;
  creates?: boolean;
  updates?: number[];
  patches?: boolean;
  deletes?: (count: number) => Promise<number>;
}

interface Target {
  port: number;
  shape: Shape;
}

interface Load {
  requests: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  /** CPU of the load generator over the load, in cores. */
  generatorCores: number;
}

let dataVariants: string[] | undefined;
/** The json_data of creates: 1,000 variants of serverData, as JSON. */
const variants = () => (dataVariants ??= Array.from({ length: 1000 }, (_, i) => JSON.stringify(serverData(i))));
const runTag = Date.now().toString(36);
let loads = 0;

/** The i-th create body of a load whose names start with `prefix` (the same in both generators). */
const createBody = (prefix: string, i: number) => `{"name":"${prefix}${i}","json_data":${variants()[i % variants().length]}}`;
/**
 * The data variants without their `counter` value and closing brace: an update's json_data is one
 * of them with a counter unique to the run, so that every update changes its row (the service
 * writes nothing, and records no event, for an update that changes nothing).
 */
let updateHeads: string[] | undefined;
const heads = () =>
  (updateHeads ??= variants().map((v) => {
    if (!v.endsWith('"counter":0}')) throw new Error('a data variant must end with its counter');
    return v.slice(0, -2);
  }));
/** Counters of load n's updates start above n × UPDATE_BASE (the seeded rows' is 0). */
const UPDATE_BASE = 10_000_000;
/** The i-th update body of a load whose counters start above `base` (the same in both generators). */
const updateBody = (base: number, i: number) => `{"json_data":${heads()[i % heads().length]}${base + i}}}`;
/** The i-th JSON Patch body of a load whose counters start above `base` (the same in both generators). */
const patchBody = (base: number, i: number) => `[{"op":"replace","path":"/counter","value":${base + i}}]`;
/** The headers of a shape's requests: its own, and the content type of its body if it has one. */
const headersOf = (shape: Shape): Record<string, string> =>
  shape.creates === true || shape.updates !== undefined
    ? { ...shape.headers, 'content-type': shape.patches ? 'application/json-patch+json' : 'application/json' }
    : shape.headers;
/** The path of an update of object `id`: `path` + id, and `/data` for a JSON Patch. */
const updatePath = (shape: Shape, id: number) => `${shape.path}${id}${shape.patches ? '/data' : ''}`;
/**
 * How many objects a delete load gets made for it per second of its duration: more than any server
 * here deletes (about 3,000/s on the machines seen); a load that ran out would get 404s, which abort
 * the run.
 */
const DELETES_PER_SECOND = 12_000;

/**
 * Loads every target at once for `seconds`, the connections split evenly among them, with wrk
 * (`-t1`, as the issue's own measurements) when it is installed, else autocannon in this process
 * (BENCH_LOADER=wrk|autocannon chooses). wrk uses a fraction of autocannon's CPU per request, which
 * on a small machine leaves the servers more of it. Any response other than 2xx, or any error,
 * aborts the run (a benchmark of errors measures nothing).
 */
async function load(targets: Target[], seconds: number): Promise<Load> {
  const n = ++loads;
  const split = (i: number) => Math.floor(CONNECTIONS / targets.length) + (i < CONNECTIONS % targets.length ? 1 : 0);
  // the objects a delete load deletes, made before it starts
  const firstIds = await Promise.all(targets.map((t) => t.shape.deletes?.(Math.ceil(seconds * DELETES_PER_SECOND)) ?? 0));
  const gen0 = generatorCpuUs();
  const started = performance.now();
  const parts = await Promise.all(
    targets.map((t, i) => {
      const at: LoadPart = { prefix: `tp-${runTag}-${n}-${i}-`, base: (n * targets.length + i) * UPDATE_BASE, firstId: firstIds[i]! };
      return LOADER === 'wrk' ? wrkLoad(t, split(i), seconds, at) : autocannonLoad(t, split(i), seconds, at);
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const requests = parts.reduce((s, r) => s + r.requests, 0);
  const secs = Math.max(...parts.map((r) => r.seconds), 0) || elapsed;
  // Percentiles of the targets' loads: the one target's, or the slower one's.
  return {
    requests,
    seconds: secs,
    rps: requests / secs,
    p50: Math.max(...parts.map((r) => r.p50)),
    p99: Math.max(...parts.map((r) => r.p99)),
    generatorCores: (generatorCpuUs() - gen0) / 1e6 / elapsed,
  };
}

type PartLoad = Omit<Load, 'rps' | 'generatorCores'>;

/**
 * Where one target's load starts: the prefix of its creates' names, the base of its update
 * counters, the first id its deletes delete (the same in both generators).
 */
interface LoadPart {
  prefix: string;
  base: number;
  firstId: number;
}

/** CPU of this process and its finished children (wrk, once it exited) so far, in µs. */
function generatorCpuUs(): number {
  const cpu = procCpu('self');
  return cpu.ownUs + cpu.reapedUs;
}

async function autocannonLoad(t: Target, connections: number, seconds: number, { prefix, base, firstId }: LoadPart): Promise<PartLoad> {
  const hist: RecordableHistogram = createHistogram();
  let i = 0;
  const { updates, patches, deletes } = t.shape;
  const body = patches ? patchBody : updateBody;
  const request: AutocannonRequest = {
    method: t.shape.method,
    path: t.shape.path,
    headers: headersOf(t.shape),
    ...(t.shape.creates ? { setupRequest: (req) => ({ ...req, body: createBody(prefix, ++i) }) } : {}),
    ...(updates
      ? {
          setupRequest: (req) => {
            i += 1;
            return { ...req, path: updatePath(t.shape, updates[i % updates.length]!), body: body(base, i) };
          },
        }
      : {}),
    ...(deletes ? { setupRequest: (req) => ({ ...req, path: `${t.shape.path}${firstId + i++}` }) } : {}),
  };
  const inst = autocannon({ url: `http://127.0.0.1:${t.port}`, connections, duration: seconds, timeout: 10, requests: [request] });
  inst.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => hist.record(Math.max(1, Math.round(ms * 1000))));
  running.add(inst);
  let r: Awaited<typeof inst>;
  try {
    r = await inst;
  } finally {
    running.delete(inst);
  }
  if (r.non2xx || r.errors || r.timeouts) {
    throw new Error(
      `${t.shape.method} ${t.shape.path}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts; ` +
        `status codes ${JSON.stringify(r.statusCodeStats)}`,
    );
  }
  return { requests: r.requests.total, seconds: r.duration, p50: hist.percentile(50) / 1000, p99: hist.percentile(99) / 1000 };
}

/** A Lua string literal (long brackets: the JSON bodies hold no `]==]`). */
const lua = (s: string) => `[==[${s}]==]`;

async function wrkLoad(t: Target, connections: number, seconds: number, { prefix, base, firstId }: LoadPart): Promise<PartLoad> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-wrk-'));
  const script = join(dir, 'load.lua');
  const headers = headersOf(t.shape);
  await writeFile(
    script,
    [
      `wrk.method = ${lua(t.shape.method)}`,
      ...Object.entries(headers).map(([k, v]) => `wrk.headers[ ${lua(k)} ] = ${lua(v)}`),
      ...(t.shape.creates
        ? [
            `local data = {\n${variants().map(lua).join(',\n')}\n}`,
            'local n = 0',
            'request = function()',
            '  n = n + 1',
            `  return wrk.format(nil, nil, nil, ${lua(`{"name":"${prefix}`)} .. n .. '","json_data":' .. data[(n % #data) + 1] .. '}')`,
            'end',
          ]
        : []),
      ...(t.shape.updates && !t.shape.patches
        ? [
            `local heads = {\n${heads().map(lua).join(',\n')}\n}`,
            `local ids = { ${t.shape.updates.join(', ')} }`,
            'local n = 0',
            'request = function()',
            '  n = n + 1',
            `  local body = '{"json_data":' .. heads[(n % #heads) + 1] .. string.format('%d', ${base} + n) .. '}}'`,
            `  return wrk.format(nil, ${lua(t.shape.path)} .. ids[(n % #ids) + 1], nil, body)`,
            'end',
          ]
        : []),
      ...(t.shape.updates && t.shape.patches
        ? [
            `local ids = { ${t.shape.updates.join(', ')} }`,
            'local n = 0',
            'request = function()',
            '  n = n + 1',
            `  local body = '[{"op":"replace","path":"/counter","value":' .. string.format('%d', ${base} + n) .. '}]'`,
            `  return wrk.format(nil, ${lua(t.shape.path)} .. ids[(n % #ids) + 1] .. '/data', nil, body)`,
            'end',
          ]
        : []),
      ...(t.shape.deletes
        ? [
            'local n = 0',
            'request = function()',
            `  local id = ${firstId} + n`,
            '  n = n + 1',
            `  return wrk.format(nil, ${lua(t.shape.path)} .. string.format('%d', id))`,
            'end',
          ]
        : []),
    ].join('\n'),
  );
  try {
    const args = [
      '-t1',
      `-c${connections}`,
      `-d${seconds}s`,
      '--timeout',
      '10s',
      '--latency',
      '-s',
      script,
      `http://127.0.0.1:${t.port}${t.shape.path}`,
    ];
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    generators.add(child);
    child.once('exit', () => generators.delete(child));
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString('utf8')));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString('utf8')));
    const code = await new Promise<number | null>((ok, fail) => {
      child.once('error', fail);
      // 'close', not 'exit': a process may exit before its output has all been read from the pipe
      child.once('close', (c) => ok(c));
    });
    const requests = /(\d+) requests in ([\d.]+)(us|ms|s|m),/.exec(out);
    const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
    const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
    const bad = (non2xx ? Number(non2xx[1]) : 0) + (errors ? errors.slice(1).reduce((a, b) => a + Number(b), 0) : 0);
    if (code !== 0 || !requests || bad > 0) throw new Error(`wrk ${t.shape.method} ${t.shape.path} (exit ${code}):\n${out}`);
    return {
      requests: Number(requests[1]),
      seconds: wrkSeconds(requests[2]!, requests[3]!),
      p50: wrkPercentile(out, '50%'),
      p99: wrkPercentile(out, '99%'),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const wrkSeconds = (v: string, unit: string) => Number(v) * ({ us: 1e-6, ms: 1e-3, s: 1, m: 60 } as Record<string, number>)[unit]!;

/** A line of wrk's latency distribution, in ms. */
function wrkPercentile(out: string, which: string): number {
  const m = new RegExp(`^\\s*${which}\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out);
  if (!m) throw new Error(`wrk printed no ${which} latency:\n${out}`);
  return wrkSeconds(m[1]!, m[2]!) * 1000;
}

/**
 * One window of the soak: requests per second, the loaded process's CPU µs per request and the local
 * PostgreSQL's (null when it is elsewhere): a drift the database's CPU per request follows (its
 * checkpoints, autovacuum after the creates before) is the database's, not the process's.
 */
interface SoakWindow {
  rps: number;
  cpu: number;
  db: number | null;
  /** The machine's steal share over the window, in % (machineTicks). */
  steal: number;
}

/** The soaks' scenario ids (BENCH_ONLY): getObject's, createObject's and updateObject's. */
const SOAK_IDS = ['soak', 'soak-create', 'soak-update'] as const;

/** What a soak loads: the service's shape and the bare server's (the control) beside it. */
interface SoakKind {
  id: (typeof SOAK_IDS)[number];
  /** What the goals call it: "the soak" (getObject's, as #14 names it), "the createObject soak". */
  goal: string;
  path: string;
  bareDoes: string;
  svc: Shape;
  bare: Shape;
}

/** A soak: the service's first and last windows, and the bare server's (the control) at both ends. */
interface Soak {
  kind: SoakKind;
  first: SoakWindow;
  last: SoakWindow;
  bareFirst: SoakWindow;
  bareLast: SoakWindow;
  startRss: number;
  peakRss: number;
}

interface Measurement extends Load {
  id: string;
  round: number;
  cpuPerReq: number;
  /** CPU of the local PostgreSQL per request (dbCpuUs), null when it is not on this machine. */
  dbCpuPerReq: number | null;
  startRssMb: number;
  peakRssMb: number;
}

/** Fresh process(es), warm-up, then the measured load; CPU per request summed over the processes. */
async function measure(id: string, round: number, procs: () => Promise<Proc[]>, target: (p: Proc) => Shape): Promise<Measurement> {
  const ps = await procs();
  try {
    const targets = ps.map((p) => ({ port: p.port, shape: target(p) }));
    await load(targets, WARMUP);
    const r0 = readings(ps);
    const l = await load(targets, DURATION);
    const { cpu, db, steal } = costs(r0, readings(ps), l.requests);
    const m: Measurement = {
      id,
      round,
      ...l,
      cpuPerReq: cpu,
      dbCpuPerReq: db,
      startRssMb: Math.max(...ps.map((p) => p.startRssKb)) / 1024,
      peakRssMb: Math.max(...ps.map((p) => memKb(p, 'VmHWM'))) / 1024,
    };
    process.stderr.write(
      `  round ${round} ${id.padEnd(16)} ${fmt(m.rps).padStart(7)} req/s  p50 ${m.p50.toFixed(2)} ms  p99 ${m.p99.toFixed(2)} ms  ` +
        `${fmt(m.cpuPerReq)} µs CPU/req${m.dbCpuPerReq !== null ? ` (PostgreSQL ${fmt(m.dbCpuPerReq)})` : ''}  RSS ${m.startRssMb.toFixed(0)} → ${m.peakRssMb.toFixed(0)} MB  ` +
        `(${LOADER} ${(l.generatorCores * 100).toFixed(0)} % of a core; load avg ${loadavg()[0]!.toFixed(2)}; steal ${steal.toFixed(2)} %)\n`,
    );
    return m;
  } finally {
    await Promise.all(ps.map(stopProc));
  }
}

const fmt = (n: number) => (n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1));

// ---------------------------------------------------------------------------------------------
// Database and seeding

let scratch: ScratchDatabase | undefined;

async function createDatabase(): Promise<string> {
  scratch = await scratchDatabase('svc_throughput');
  return scratch.url;
}

let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const inst of running) inst.stop();
    for (const child of generators) child.kill('SIGKILL');
    await Promise.all([...live].map(stopProc));
    CAP?.remove();
    await maker?.end({ timeout: 5 });
    await scratch?.drop();
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\n${signal}: stopping the processes and dropping the scratch database\n`);
    void cleanup().finally(() => process.exit(130));
  });
}
// Last resort (an exit nobody awaited cleanup for): no child outlives us.
process.on('exit', () => {
  for (const p of live) p.child.kill('SIGKILL');
  for (const child of generators) child.kill('SIGKILL');
});

interface Seed {
  adminToken: string;
  readerToken: string;
  classId: number;
  objectId: number;
  /** A class of FLEET objects (same schema and collection) whose first page is listed. */
  listedClassId: number;
  /** Another such class, whose objects are updated (apart: the updates' dead rows would slow the list). */
  fleetClassId: number;
  fleetIds: number[];
  /** A class (same schema and collection) whose objects are made in bulk for the deletes (makeDoomed). */
  doomedClassId: number;
}

/** The objects of the listed class, and of the updated one. */
const FLEET = 1000;

async function api<T>(
  port: number,
  method: string,
  path: string,
  status: number,
  token?: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: {
      ...headers,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${res.status}: ${text.slice(0, 500)}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

const serverData = (i: number) => ({
  hostname: `host-${i}.example.net`,
  env: ['prod', 'staging', 'dev'][i % 3],
  metrics: { cpu: 1 + (i % 16), mem_gb: 8 },
  ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
  tags: ['rack-1', 'bench'],
  counter: 0,
});

/** Everything the scenarios need, created through the API of a running service. */
async function seed(port: number): Promise<Seed> {
  const login = (name: string, password: string) =>
    api<{ token: string }>(port, 'POST', '/api/v0/auth/login', 200, undefined, { name, password });
  const adminToken = (await login('admin', ADMIN_PASSWORD)).token;
  const a = <T>(method: string, path: string, status: number, body?: unknown, headers?: Record<string, string>) =>
    api<T>(port, method, path, status, adminToken, body, headers);
  const collection = await a<{ id: number }>('POST', '/api/v1/collections', 201, { name: 'throughput' });
  const cls = await a<{ id: number }>('POST', '/api/v1/classes', 201, {
    name: 'servers',
    collection_id: collection.id,
    json_schema: SERVER_SCHEMA,
    validate_schema: true,
  });
  let objectId = 0;
  for (let i = 0; i < 20; i++) {
    const o = await a<{ id: number }>('POST', `/api/v1/classes/${cls.id}/objects`, 201, { name: `seed-${i}`, json_data: serverData(i) });
    objectId ||= o.id;
  }
  /** A class of FLEET objects, created 25 at a time; their ids. */
  const fleetOf = async (name: string) => {
    const k = await a<{ id: number }>('POST', '/api/v1/classes', 201, {
      name,
      collection_id: collection.id,
      json_schema: SERVER_SCHEMA,
      validate_schema: true,
    });
    const ids: number[] = [];
    for (let i = 0; i < FLEET; i += 25) {
      const batch = Array.from({ length: Math.min(25, FLEET - i) }, (_, j) =>
        a<{ id: number }>('POST', `/api/v1/classes/${k.id}/objects`, 201, { name: `${name}-${i + j}`, json_data: serverData(i + j) }),
      );
      for (const o of await Promise.all(batch)) ids.push(o.id);
    }
    return { id: k.id, ids };
  };
  const listed = await fleetOf('listed');
  const fleet = await fleetOf('fleet');
  const doomed = await a<{ id: number }>('POST', '/api/v1/classes', 201, {
    name: 'doomed',
    collection_id: collection.id,
    json_schema: SERVER_SCHEMA,
    validate_schema: true,
  });
  const user = { name: 'reader', password: 'reader-password' };
  const { approval } = await a<{ approval: string }>('POST', '/api/v1/iam/credential-approvals', 201, {
    password: ADMIN_PASSWORD,
    operation: { kind: 'create_user', user },
  });
  const reader = await a<{ id: number }>('POST', '/api/v1/iam/users', 201, user, { 'x-svc-credential-approval': approval });
  const group = await a<{ id: number }>('POST', '/api/v1/iam/groups', 201, { name: 'readers' });
  await a('POST', `/api/v1/iam/groups/${group.id}/members/${reader.id}`, 201);
  await a('POST', `/api/v1/collections/${collection.id}/permissions/group/${group.id}`, 200, ['ReadCollection', 'ReadClass', 'ReadObject']);
  const readerToken = (await login(user.name, user.password)).token;
  return {
    adminToken,
    readerToken,
    classId: cls.id,
    objectId,
    listedClassId: listed.id,
    fleetClassId: fleet.id,
    fleetIds: fleet.ids,
    doomedClassId: doomed.id,
  };
}

let maker: postgres.Sql | undefined;
let made = 0;
/**
 * Makes `count` objects of class `classId` in one statement (as a bulk import would: no events),
 * their ids in a row; the first id. For the deletes, which need a new object each.
 */
async function makeDoomed(dbUrl: string, classId: number, count: number): Promise<number> {
  maker ??= postgres(dbUrl, { max: 1, onnotice: () => {} });
  const prefix = `doomed-${runTag}-${++made}-`;
  const [r] = await maker<{ first: number; last: number; n: number }[]>`
    with o as (
      insert into objects (name, description, collection_id, class_id, json_data)
      select ${prefix} || g, '', k.collection_id, k.id, ${JSON.stringify(serverData(made))}::text::jsonb
      from classes k, generate_series(1, ${count}::int) g where k.id = ${classId}::int
      returning id
    )
    select min(id)::int as first, max(id)::int as last, count(*)::int as n from o`;
  if (!r || r.n !== count || r.last - r.first + 1 !== count)
    throw new Error(`makeDoomed: ${count} objects did not get ids in a row: ${JSON.stringify(r)}`);
  // the dead rows of the loads before and the new rows' visibility settled now, not by an autovacuum
  // during the load, and the bulk insert's WAL checkpointed: each load starts from the same state
  await maker`vacuum (analyze) objects`;
  await maker`checkpoint`;
  return r.first;
}

// ---------------------------------------------------------------------------------------------
// Scenarios

async function main(): Promise<void> {
  await bundle('src/main.ts', SERVER_BUNDLE);
  await bundle('bench/bare-server.ts', BARE_BUNDLE);
  const started = performance.now();
  const load0 = loadavg()[0]!;
  const dbUrl = await createDatabase();
  const service = async (role = 'api', extra: Record<string, string> = {}) => {
    const port = await freePort();
    const env = {
      SVC_DATABASE_URL: dbUrl,
      SVC_BIND: `127.0.0.1:${port}`,
      SVC_LOG_LEVEL: SVC_LOG_LEVEL,
      SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
      SVC_RUNTIME_ROLE: role,
      ...extra,
    };
    return startProc(`service:${port}`, SERVER_BUNDLE, env, port, '/readyz', SVC_NODE_OPTIONS);
  };
  const bare = async () => {
    const port = await freePort();
    return startProc(
      `bare:${port}`,
      BARE_BUNDLE,
      { BARE_DATABASE_URL: dbUrl, BARE_PORT: String(port) },
      port,
      '/constant',
      BARE_NODE_OPTIONS,
    );
  };

  process.stderr.write('seeding through the API\n');
  const seedPort = await freePort();
  // The first process migrates the new database (an api process alone waits for migrations).
  const first = await startProc(
    'seeding',
    SERVER_BUNDLE,
    {
      SVC_DATABASE_URL: dbUrl,
      SVC_BIND: `127.0.0.1:${seedPort}`,
      SVC_LOG_LEVEL: 'warn',
      SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
      SVC_RUNTIME_ROLE: 'api',
      SVC_MIGRATE: 'apply',
    },
    seedPort,
    '/readyz',
  );
  const s = await seed(first.port).finally(() => stopProc(first));
  /**
   * VACUUM ANALYZE of the whole database, then a CHECKPOINT: the rounds, and the soaks after them,
   * each start from a settled database, with the WAL of what came before (the seed, the deletes'
   * bulk inserts) already checkpointed rather than checkpointed during their windows.
   */
  const settle = async () => {
    const scratch = postgres(dbUrl, { max: 1, onnotice: () => {} });
    try {
      await scratch`vacuum analyze`;
      await scratch`checkpoint`;
    } finally {
      await scratch.end();
    }
  };
  await settle();
  const auth = (token: string) => ({ authorization: `Bearer ${token}` });
  const get = (path: string, token?: string): Shape => ({ method: 'GET', path, headers: token ? auth(token) : {} });
  const objPath = `/api/v1/classes/${s.classId}/${s.objectId}`;
  const create = (path: string, token?: string): Shape => ({ method: 'POST', path, headers: token ? auth(token) : {}, creates: true });
  const update = (path: string, token?: string): Shape => ({
    method: 'PATCH',
    path,
    headers: token ? auth(token) : {},
    updates: s.fleetIds,
  });
  const patch = (path: string, token?: string): Shape => ({ ...update(path, token), patches: true });
  const remove = (path: string, token?: string): Shape => ({
    method: 'DELETE',
    path,
    headers: token ? auth(token) : {},
    deletes: (count) => makeDoomed(dbUrl, s.doomedClassId, count),
  });

  // One round: each bare measurement right before the service one(s) it is compared with.
  const fullPlan: [string, () => Promise<Proc[]>, (p: Proc) => Shape][] = [
    ['bare-constant', async () => [await bare()], () => get('/constant')],
    ['svc-healthz', async () => [await service()], () => get('/healthz')],
    ['bare-constant-headers', async () => [await bare()], () => get('/constant-headers')],
    ['bare-select', async () => [await bare()], () => get(`/objects/${s.objectId}`)],
    ['bare-token', async () => [await bare()], () => get(`/token/objects/${s.objectId}`, s.adminToken)],
    ['svc-get-admin', async () => [await service()], () => get(objPath, s.adminToken)],
    ['svc-get-reader', async () => [await service()], () => get(objPath, s.readerToken)],
    ['bare-list', async () => [await bare()], () => get(`/token/classes/${s.listedClassId}/objects`, s.readerToken)],
    ['svc-list-reader', async () => [await service()], () => get(`/api/v1/classes/${s.listedClassId}/objects`, s.readerToken)],
    ['bare-select-2procs', async () => Promise.all([bare(), bare()]), () => get(`/objects/${s.objectId}`)],
    ['svc-get-2procs', async () => Promise.all([service(), service()]), () => get(objPath, s.adminToken)],
    ['bare-create', async () => [await bare()], () => create(`/classes/${s.classId}/objects`)],
    ['svc-create', async () => [await service()], () => create(`/api/v1/classes/${s.classId}/objects`, s.adminToken)],
    ['bare-update', async () => [await bare()], () => update('/objects/')],
    ['svc-update', async () => [await service()], () => update(`/api/v1/classes/${s.fleetClassId}/`, s.adminToken)],
    ['bare-patch', async () => [await bare()], () => patch('/objects/')],
    ['svc-patch', async () => [await service()], () => patch(`/api/v1/classes/${s.fleetClassId}/`, s.adminToken)],
    ['bare-delete', async () => [await bare()], () => remove('/objects/')],
    ['svc-delete', async () => [await service()], () => remove(`/api/v1/classes/${s.doomedClassId}/`, s.adminToken)],
  ];
  const plan = ONLY.length ? fullPlan.filter(([id]) => ONLY.includes(id)) : fullPlan;
  const unknown = ONLY.filter((id) => !(SOAK_IDS as readonly string[]).includes(id) && !fullPlan.some(([p]) => p === id));
  const ids = `${fullPlan.map(([id]) => id).join(', ')}, ${SOAK_IDS.join(', ')}`;
  if (unknown.length) throw new Error(`BENCH_ONLY: unknown ${unknown.join(', ')}; the ids are ${ids}`);
  // a run of soaks alone has their own control (the bare server beside them); scenarios come in pairs
  if (plan.length && (!plan.some(([id]) => id.startsWith('bare-')) || !plan.some(([id]) => id.startsWith('svc-'))))
    throw new Error(`BENCH_ONLY: name at least one bare-* and one svc-* scenario, or soaks alone; the ids are ${ids}`);
  if (!plan.length && SOAK === 0) throw new Error('BENCH_ONLY names only soaks, and BENCH_SOAK_SECONDS=0 skips them');
  const results: Measurement[] = [];
  const rounds = async (part: typeof plan, what: string) => {
    for (let round = 1; part.length && round <= ROUNDS; round++) {
      process.stderr.write(
        `round ${round} of ${ROUNDS}${what} (${CONNECTIONS} connections, ${WARMUP} s warm-up, ${DURATION} s measured)\n`,
      );
      for (const [id, procs, target] of part) results.push(await measure(id, round, procs, target));
    }
  };
  // The deletes' rounds run after the soaks: the hundreds of thousands of objects they make and
  // delete leave the objects table's indexes large, and a create soak after them fell to 0.76-0.83
  // of its first window (PostgreSQL's CPU a create 379-399 -> 531-639 µs, the service's own flat),
  // even with the table vacuumed and checkpointed first; alone it held 0.97.
  const LAST = ['bare-delete', 'svc-delete'];
  await rounds(
    plan.filter(([id]) => !LAST.includes(id)),
    '',
  );

  // The soaks: one service process loaded for SOAK s (getObject; creates; updates), its first and last windows
  // compared. The control: a bare server started with the service and loaded only at both ends, right
  // before the service's first window and right after its last. Its last / first is the drift of the
  // machine and the database over the soak; divided out, what is left is the service's own.
  const soakKinds: SoakKind[] = [
    {
      id: 'soak',
      goal: 'the soak',
      path: 'getObject',
      bareDoes: 'one row select',
      svc: get(objPath, s.adminToken),
      bare: get(`/objects/${s.objectId}`),
    },
    {
      id: 'soak-create',
      goal: 'the createObject soak',
      path: 'createObject, schema enforced, with audit event',
      bareDoes: 'the insert + event transaction',
      svc: create(`/api/v1/classes/${s.classId}/objects`, s.adminToken),
      bare: create(`/classes/${s.classId}/objects`),
    },
    {
      id: 'soak-update',
      goal: 'the updateObject soak (our bar; #14 names the others)',
      path: 'updateObject (json_data), schema enforced, with audit event',
      bareDoes: 'the update + event transaction',
      svc: update(`/api/v1/classes/${s.fleetClassId}/`, s.adminToken),
      bare: update('/objects/'),
    },
  ];
  const soaks: Soak[] = [];
  // the rows the rounds' updates left dead vacuumed now, and their WAL checkpointed, not during a
  // soak's window
  if (SOAK > 0 && results.length) await settle();
  for (const kind of soakKinds) {
    if (SOAK === 0 || (ONLY.length && !ONLY.includes(kind.id))) continue;
    process.stderr.write(`${kind.id}: ${kind.path} on one service process for ${SOAK} s, the bare server alongside at both ends\n`);
    const p = await service();
    const c = await bare();
    try {
      const target = [{ port: p.port, shape: kind.svc }];
      const control = [{ port: c.port, shape: kind.bare }];
      await load(control, WARMUP);
      await load(target, WARMUP);
      const window = async (proc: Proc, t: Target[], what: string, sec: number): Promise<SoakWindow> => {
        const r0 = readings([proc]);
        const l = await load(t, sec);
        const { cpu, db, steal } = costs(r0, readings([proc]), l.requests);
        process.stderr.write(
          `  ${kind.id}: ${what} ${sec} s at ${fmt(l.rps)} req/s, ${fmt(cpu)} µs CPU/req${db !== null ? ` (PostgreSQL ${fmt(db)})` : ''}, steal ${steal.toFixed(2)} %\n`,
        );
        return { rps: l.rps, cpu, db, steal };
      };
      const bareFirst = await window(c, control, 'bare', SOAK_WINDOW);
      const first = await window(p, target, 'service', SOAK_WINDOW);
      // the middle in chunks of at most SOAK_CHUNK s back to back, each reported (the drift's shape)
      for (let left = SOAK - 2 * SOAK_WINDOW; left > 0; left -= SOAK_CHUNK) await window(p, target, 'service', Math.min(left, SOAK_CHUNK));
      const last = await window(p, target, 'service', SOAK_WINDOW);
      const bareLast = await window(c, control, 'bare', SOAK_WINDOW);
      const soak = { kind, first, last, bareFirst, bareLast, startRss: p.startRssKb / 1024, peakRss: memKb(p, 'VmHWM') / 1024 };
      soaks.push(soak);
      process.stderr.write(
        `  ${kind.id}: ${fmt(first.rps)} → ${fmt(last.rps)} req/s (bare ${fmt(bareFirst.rps)} → ${fmt(bareLast.rps)}), RSS peak ${soak.peakRss.toFixed(0)} MB, ` +
          `steal ${first.steal.toFixed(2)} → ${last.steal.toFixed(2)} % (bare ${bareFirst.steal.toFixed(2)} → ${bareLast.steal.toFixed(2)})\n`,
      );
    } finally {
      await Promise.all([stopProc(p), stopProc(c)]);
    }
  }

  await rounds(
    plan.filter(([id]) => LAST.includes(id)),
    ' of the deletes',
  );

  const [pg] = await scratch!.server<{ v: string }[]>`select current_setting('server_version') as v`;
  const db = `PostgreSQL ${pg!.v.split(' ')[0]} (${scratch!.embedded ? 'embedded' : 'SVC_DATABASE_URL'})`;
  console.log(report(results, soaks, { load0, load1: loadavg()[0]!, seconds: (performance.now() - started) / 1000, db }));
}

// ---------------------------------------------------------------------------------------------
// Report

function report(results: Measurement[], soaks: Soak[], run: { load0: number; load1: number; seconds: number; db: string }): string {
  const of = (id: string) => results.filter((r) => r.id === id);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const avg = (id: string, f: (m: Measurement) => number) => mean(of(id).map(f));
  const ratios = (num: string, den: string) => of(num).map((m) => m.rps / of(den).find((d) => d.round === m.round)!.rps);
  let disagree = false;
  const perRound = (r: number[]) => {
    const spread = Math.max(...r) / Math.min(...r) > 1.05;
    disagree ||= spread;
    return `(${r.map((x) => x.toFixed(2)).join(', ')})${spread ? ' †' : ''}`;
  };
  const ms = (x: number) => (x >= 10 ? x.toFixed(0) : x.toFixed(1));
  const row = (path: string, does: string, bareId: string, svcId: string) => {
    const r = ratios(svcId, bareId);
    return [
      path,
      does,
      fmt(avg(bareId, (m) => m.rps)),
      fmt(avg(svcId, (m) => m.rps)),
      `**${mean(r).toFixed(2)}** ${perRound(r)}`,
      `${ms(avg(svcId, (m) => m.p50))} / ${ms(avg(svcId, (m) => m.p99))} vs ${ms(avg(bareId, (m) => m.p50))} / ${ms(avg(bareId, (m) => m.p99))}`,
      `${fmt(avg(svcId, (m) => m.cpuPerReq))} vs ${fmt(avg(bareId, (m) => m.cpuPerReq))}`,
      `${dbCpu(svcId)} vs ${dbCpu(bareId)}`,
      `${fmt(Math.max(...of(svcId).map((m) => m.peakRssMb)))} vs ${fmt(Math.max(...of(bareId).map((m) => m.peakRssMb)))}`,
    ];
  };
  /** The mean PostgreSQL CPU per request of a scenario's rounds, "—" where it was not measured. */
  const dbCpu = (id: string) => {
    const xs = of(id).map((m) => m.dbCpuPerReq);
    return xs.every((x) => x !== null) ? fmt(mean(xs as number[])) : '—';
  };
  const ran = (...ids: string[]) => ids.every((id) => of(id).length > 0);
  const rows = (
    [
      ['`/healthz` vs a constant JSON route', 'nothing', 'bare-constant', 'svc-healthz'],
      [
        '`/healthz` vs the same with its headers',
        'the request id and security headers of every reply',
        'bare-constant-headers',
        'svc-healthz',
      ],
      ['getObject, admin token', 'one row select', 'bare-select', 'svc-get-admin'],
      ['getObject, admin token', 'token `UPDATE … RETURNING` + row select', 'bare-token', 'svc-get-admin'],
      ['getObject, non-admin reader', 'token update + row select', 'bare-token', 'svc-get-reader'],
      ['createObject, schema enforced, with audit event', '`BEGIN; insert object; insert event; COMMIT`', 'bare-create', 'svc-create'],
      [
        `listObjects page 1 (100 of ${fmt(FLEET)}, with its total), non-admin reader`,
        'token update, then the page (101 rows) beside `count(*)`',
        'bare-list',
        'svc-list-reader',
      ],
      [
        'updateObject (json_data), schema enforced, with audit event',
        '`BEGIN; update object (its old row read and locked in the statement); insert event; COMMIT`',
        'bare-update',
        'svc-update',
      ],
      [
        'patchObjectData (a JSON Patch replacing one member), schema enforced, with audit event',
        '`BEGIN; read object locked`; apply; `update object; insert event; COMMIT`',
        'bare-patch',
        'svc-patch',
      ],
      ['deleteObject, with audit event', '`BEGIN; delete object returning its row; insert event; COMMIT`', 'bare-delete', 'svc-delete'],
    ] as const
  )
    .filter(([, , bareId, svcId]) => ran(bareId, svcId))
    .map(([path, does, bareId, svcId]) => row(path, does, bareId, svcId));
  // 2 processes against 1 only when both ran (BENCH_ONLY may have left out the one process)
  const two = ran('svc-get-2procs', 'svc-get-admin') ? ratios('svc-get-2procs', 'svc-get-admin') : undefined;
  // the control: the bare select server, 2 processes against 1, what this machine gives a second process
  const bareTwo = ran('bare-select-2procs', 'bare-select') ? ratios('bare-select-2procs', 'bare-select') : undefined;
  if (two) {
    const [vs, vsId] = bareTwo ? ([' vs bare select 2 processes', 'bare-select-2procs'] as const) : [' vs 1 process', 'svc-get-admin'];
    rows.push([
      'getObject, admin token, 2 api processes vs 1',
      bareTwo ? `one row select, 2 processes vs 1: **${mean(bareTwo).toFixed(2)}** ${perRound(bareTwo)}` : '— (1 process: the row above)',
      fmt(avg(vsId, (m) => m.rps)),
      fmt(avg('svc-get-2procs', (m) => m.rps)),
      `2 / 1 **${mean(two).toFixed(2)}** ${perRound(two)}`,
      `${ms(avg('svc-get-2procs', (m) => m.p50))} / ${ms(avg('svc-get-2procs', (m) => m.p99))}${vs} ${ms(avg(vsId, (m) => m.p50))} / ${ms(avg(vsId, (m) => m.p99))}`,
      `${fmt(avg('svc-get-2procs', (m) => m.cpuPerReq))}${vs} ${fmt(avg(vsId, (m) => m.cpuPerReq))}`,
      `${dbCpu('svc-get-2procs')}${vs} ${dbCpu(vsId)}`,
      `${fmt(Math.max(...of('svc-get-2procs').map((m) => m.peakRssMb)))} (each)${vs} ${fmt(Math.max(...of(vsId).map((m) => m.peakRssMb)))}`,
    ]);
  } else if (ran('svc-get-2procs', 'bare-select-2procs')) {
    // a targeted run of the two 2-process scenarios alone: the service's two against the bare server's two
    rows.push(row('getObject, admin token, 2 api processes', 'one row select, 2 processes', 'bare-select-2procs', 'svc-get-2procs'));
  }
  // each soak's last / first for the service and for the control beside it (the machine's drift)
  const soakRatio = (k: Soak) => k.last.rps / k.first.rps;
  const drift = (k: Soak) => k.bareLast.rps / k.bareFirst.rps;
  for (const k of soaks) {
    rows.push([
      `${k.kind.path}, one process for ${SOAK} s`,
      `${k.kind.bareDoes}, alongside: loaded for ${SOAK_WINDOW} s before the service's first window and after its last`,
      `${fmt(k.bareFirst.rps)} → ${fmt(k.bareLast.rps)}`,
      `${fmt(k.first.rps)} → ${fmt(k.last.rps)}`,
      `last ${SOAK_WINDOW} s / first ${SOAK_WINDOW} s **${soakRatio(k).toFixed(2)}** (bare ${drift(k).toFixed(2)}; ` +
        `service / bare ${(k.first.rps / k.bareFirst.rps).toFixed(2)} → ${(k.last.rps / k.bareLast.rps).toFixed(2)})`,
      '',
      `${fmt(k.first.cpu)} → ${fmt(k.last.cpu)} vs ${fmt(k.bareFirst.cpu)} → ${fmt(k.bareLast.cpu)}`,
      k.first.db !== null && k.last.db !== null && k.bareFirst.db !== null && k.bareLast.db !== null
        ? `${fmt(k.first.db)} → ${fmt(k.last.db)} vs ${fmt(k.bareFirst.db)} → ${fmt(k.bareLast.db)}`
        : '',
      `${fmt(k.startRss)} → ${fmt(k.peakRss)}`,
    ]);
  }
  const header = [
    'Path',
    'Bare server does',
    'Bare req/s',
    'Service req/s',
    'Service / bare (per round)',
    'p50 / p99 ms (svc vs bare)',
    'CPU µs/req (svc vs bare)',
    'PostgreSQL CPU µs/req (svc vs bare)',
    'RSS peak MB (svc vs bare)',
  ];
  const svcIds = [
    'svc-healthz',
    'svc-get-admin',
    'svc-get-reader',
    'svc-create',
    'svc-list-reader',
    'svc-update',
    'svc-patch',
    'svc-delete',
    'svc-get-2procs',
  ];
  const svc = results.filter((r) => svcIds.includes(r.id));
  const bareAll = results.filter((r) => r.id.startsWith('bare-'));
  const cpu = cpus();
  // The goals of #14, each judged on the mean of this run's rounds (the rows above).
  const goals: string[] = [];
  const judge = (what: string, value: number, met: boolean, shown = value.toFixed(2), why = '') =>
    goals.push(`- ${what}: ${shown} (${met ? 'met' : 'not met'})${why}`);
  /** service / bare of the rows that ran, against the goal `atLeast`. */
  const ratioGoal = (what: string, svcId: string, bareId: string, atLeast: number) => {
    if (!ran(svcId, bareId)) return;
    const r = mean(ratios(svcId, bareId));
    judge(what, r, r >= atLeast);
  };
  ratioGoal('`/healthz` ≥ 0.6 of the constant route', 'svc-healthz', 'bare-constant', 0.6);
  if (ran('svc-healthz', 'bare-constant')) {
    const p99 = avg('svc-healthz', (m) => m.p99) / avg('bare-constant', (m) => m.p99);
    judge("`/healthz` p99 within 5× of the bare server's", p99, p99 <= 5, `${p99.toFixed(1)}×`);
  }
  ratioGoal('getObject (admin) ≥ 0.8 of the bare token + select', 'svc-get-admin', 'bare-token', 0.8);
  ratioGoal('getObject (non-admin) ≥ 0.8 of the bare token + select', 'svc-get-reader', 'bare-token', 0.8);
  ratioGoal('getObject ≥ 0.5 of the bare single select', 'svc-get-admin', 'bare-select', 0.5);
  ratioGoal('createObject ≥ 0.8 of the bare insert + event transaction', 'svc-create', 'bare-create', 0.8);
  // the other hot paths measured, for which #14 sets no goal: held to the reads' and creates' 0.8
  ratioGoal(
    'listObjects page (non-admin) ≥ 0.8 of the bare token + page + count (our bar; #14 sets none)',
    'svc-list-reader',
    'bare-list',
    0.8,
  );
  ratioGoal(
    'updateObject ≥ 0.8 of the bare update + event transaction (our bar, as for createObject; #14 sets none)',
    'svc-update',
    'bare-update',
    0.8,
  );
  ratioGoal('patchObjectData ≥ 0.8 of the bare read + update + event transaction (our bar)', 'svc-patch', 'bare-patch', 0.8);
  ratioGoal('deleteObject ≥ 0.8 of the bare delete + event transaction (our bar)', 'svc-delete', 'bare-delete', 0.8);
  const peak = Math.max(...svc.map((m) => m.peakRssMb), ...soaks.map((k) => k.peakRss));
  if (svc.length || soaks.length)
    judge(`RSS < 300 MB under ${CONNECTIONS} connections`, peak, peak < 300, `${fmt(peak)} MB`, soaks.length ? '' : ' (without a soak)');
  for (const k of soaks) {
    judge(`${k.kind.goal}'s last ${SOAK_WINDOW} s ≥ 0.9 of its first`, soakRatio(k), soakRatio(k) >= 0.9);
    const own = soakRatio(k) / drift(k);
    judge(`the same against the bare server alongside (the machine's drift, ${drift(k).toFixed(2)}, divided out)`, own, own >= 0.9);
  }
  if (two)
    judge(
      '2 api processes ≥ 1.5× one on getObject',
      mean(two),
      mean(two) >= 1.5,
      `${mean(two).toFixed(2)}×`,
      (bareTwo ? `; the bare select server's 2 processes ${mean(bareTwo).toFixed(2)}× its one` : '') +
        (CAP
          ? `; each process capped at ${CAP.share} of a core (BENCH_PROCESS_CPU), on ${cpu.length} cores`
          : cpu.length < 4
            ? `; this machine has ${cpu.length} cores for both processes, PostgreSQL and the load generator`
            : ''),
    );
  return [
    `Throughput, ${new Date().toISOString().slice(0, 10)}, ${cpu.length} × ${cpu[0]?.model.trim() ?? 'CPU'}, Node ${process.version}, ${run.db}; ` +
      `load by ${LOADER === 'wrk' ? 'wrk -t1' : 'autocannon'}, ${CONNECTIONS} connections, ${DURATION} s per measurement after ${WARMUP} s warm-up, ${ROUNDS} rounds (bare, service, bare, service), ` +
      `fresh processes (service: SVC_RUNTIME_ROLE=api)${CAP ? `, each server process capped at ${CAP.share} of a core (BENCH_PROCESS_CPU)` : ''}; load average ${run.load0.toFixed(2)} before, ${run.load1.toFixed(2)} after; total ${run.seconds.toFixed(0)} s.`,
    '',
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    ...(svc.length && bareAll.length
      ? [
          '',
          `RSS of the service: ${fmt(mean(svc.map((m) => m.startRssMb)))} MB after start, peak ${fmt(Math.max(...svc.map((m) => m.peakRssMb)))} MB ` +
            `under ${CONNECTIONS} connections (bare server: ${fmt(mean(bareAll.map((m) => m.startRssMb)))} MB after start, peak ${fmt(Math.max(...bareAll.map((m) => m.peakRssMb)))} MB).`,
        ]
      : []),
    ...(disagree ? ['', '† the rounds differ by more than 5 %: something else was using the machine; rerun when it is idle.'] : []),
    ...(goals.length ? ['', 'Goals of #14 (means of the rounds):', ...goals] : []),
  ].join('\n');
}

try {
  await main();
} finally {
  await cleanup();
}
