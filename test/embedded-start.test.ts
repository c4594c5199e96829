// The service started for real, as a newcomer and a process manager do: `node --import tsx
// src/main.ts` and `make run`, without SVC_DATABASE_URL (so on the embedded PostgreSQL), with
// SVC_DATA_DIR inside a private (0700) directory whose path holds a space. As root the embedded
// server runs as `postgres`, which cannot enter such a directory; as another user the same start
// must simply work. A stop signal must end the server and its PostgreSQL (no process left), and
// nothing may warn on stderr.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../src/db/embedded.ts';

const ADMIN_PASSWORD = 'embedded-start-admin-password';
let outer: string;
let dataDir: string;

beforeAll(async () => {
  outer = await mkdtemp(join(tmpdir(), 'svc-start-'));
  await chmod(outer, 0o700);
  await mkdir(join(outer, 'with space'), { mode: 0o700 });
  dataDir = join(outer, 'with space', 'data');
});

// Every child started here: one that never came up is stopped after the tests too.
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((ok) => child.once('exit', ok));
    }
  }
  // As root the cluster may live outside SVC_DATA_DIR, linked from it (src/db/embedded.ts).
  const link = join(dataDir, 'postgres');
  const target = await readlink(link).catch(() => undefined);
  if (target) await rm(target, { recursive: true, force: true });
  await rm(outer, { recursive: true, force: true });
});

interface Started {
  child: ChildProcess;
  base: string;
  /** The server's own pid, as it prints it. */
  serverPid: number;
  clusterDir: string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `cmd` from the repository root with the embedded database; resolves once it has printed its start lines. */
async function start(cmd: string, args: string[], opts: { detached?: boolean } = {}): Promise<Started> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ['SVC_DATABASE_URL', 'DATABASE_URL', 'NODE_OPTIONS', 'MAKEFLAGS', 'MFLAGS', 'MAKELEVEL']) delete env[k];
  Object.assign(env, {
    SVC_DATA_DIR: dataDir,
    SVC_BIND: `127.0.0.1:${port}`,
    SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
    SVC_LOG_LEVEL: 'info',
  });
  const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: opts.detached });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) =>
    child.once('exit', (code, signal) => ok({ code, signal })),
  );
  await new Promise<void>((ok, fail) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (/stop with .* process \d+\n/.test(out)) ok();
    });
    void exited.then((e) => fail(new Error(`the service exited at start (${e.code ?? e.signal}):\n${out}\n${err}`)));
  });
  return {
    child,
    base: `http://127.0.0.1:${port}`,
    serverPid: Number(/stop with .* process (\d+)/.exec(out)![1]),
    clusterDir: /data in (.+)\n/.exec(out)![1]!,
    stderr: () => err,
    exited,
  };
}

/** pid → [parent pid, state] of every process (from /proc). */
function processTable(): Map<number, [number, string]> {
  const table = new Map<number, [number, string]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(name), [Number(ppid), state!]);
    } catch {
      // exited meanwhile
    }
  }
  return table;
}

/** The postmaster of `clusterDir` and its children. */
function postgresProcesses(clusterDir: string): number[] {
  const postmaster = Number(readFileSync(join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const table = processTable();
  expect(table.has(postmaster)).toBe(true);
  return [postmaster, ...[...table].filter(([, [ppid]]) => ppid === postmaster).map(([pid]) => pid)];
}

/** The given processes that still run (a zombie has exited). */
function stillRunning(pids: number[]): number[] {
  const table = processTable();
  return pids.filter((pid) => table.has(pid) && table.get(pid)![1] !== 'Z');
}

/** Ready, and the admin can log in: the whole start went through. */
async function expectServing(s: Started): Promise<void> {
  const ready = await fetch(`${s.base}/readyz`);
  expect(ready.status).toBe(200);
  const login = await fetch(`${s.base}/api/v0/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'admin', password: ADMIN_PASSWORD }),
  });
  expect(login.status).toBe(200);
  expect(((await login.json()) as { token: string }).token).toBeTruthy();
}

/** Nothing of the service runs any more, its cluster shut down cleanly, and stderr stayed quiet. */
function expectAllStopped(s: Started, pids: number[]): void {
  expect(stillRunning([s.serverPid, ...pids])).toEqual([]);
  expect(existsSync(join(s.clusterDir, 'postmaster.pid'))).toBe(false);
  expect(s.stderr()).not.toMatch(/MaxListenersExceededWarning|Warning:|start-up failed|shutdown step failed/);
}

/** Whatever a failed test left running: the server is stopped the way that also stops its PostgreSQL. */
function cleanUp(s: Started): void {
  for (const pid of stillRunning([s.serverPid])) process.kill(pid, 'SIGTERM');
  if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
}

describe('starting and stopping the service on the embedded PostgreSQL', () => {
  it('node --import tsx src/main.ts: serves from a private directory, and SIGTERM stops it and its PostgreSQL', async () => {
    const s = await start(process.execPath, ['--import', 'tsx', 'src/main.ts']);
    try {
      expect(s.serverPid).toBe(s.child.pid);
      await expectServing(s);
      const pids = postgresProcesses(s.clusterDir);
      expect(pids.length).toBeGreaterThan(1);
      s.child.kill('SIGTERM');
      expect(await s.exited).toEqual({ code: 0, signal: null });
      expectAllStopped(s, pids);
    } finally {
      cleanUp(s);
    }
  }, 180_000);

  it('make run: SIGTERM to make reaches the server, which stops its PostgreSQL', async () => {
    // -o: never reinstall here (the stamp counts as up to date); the recipe is what is tested.
    const s = await start('make', ['--no-print-directory', '-o', 'node_modules/.install-stamp', 'run']);
    try {
      await expectServing(s);
      const pids = postgresProcesses(s.clusterDir);
      s.child.kill('SIGTERM');
      await s.exited;
      expectAllStopped(s, pids);
    } finally {
      cleanUp(s);
    }
  }, 180_000);

  it('make run: Ctrl-C (SIGINT to the whole process group) stops the server and its PostgreSQL', async () => {
    const s = await start('make', ['--no-print-directory', '-o', 'node_modules/.install-stamp', 'run'], { detached: true });
    try {
      await expectServing(s);
      const pids = postgresProcesses(s.clusterDir);
      process.kill(-s.child.pid!, 'SIGINT');
      await s.exited;
      expectAllStopped(s, pids);
    } finally {
      cleanUp(s);
    }
  }, 180_000);
});
