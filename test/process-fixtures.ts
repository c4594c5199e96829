// The service as real processes, started the way deploy/*.service starts them (the ExecStart and
// Environment lines are read from the unit files, so the tests and the units cannot drift), on a
// database of the test's own on the test server (workers started here would otherwise claim the
// tasks and deliveries of the other test files sharing the run's database).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkResponse, type CheckedResponse } from './contract-check.ts';
import { freePort } from '../src/db/embedded.ts';

export { freePort };

export const REPO = fileURLToPath(new URL('..', import.meta.url));
export const API_UNIT = 'deploy/svc-api@.service';
export const WORKER_UNIT = 'deploy/svc-worker@.service';

export interface UnitCommand {
  argv: string[];
  env: Record<string, string>;
}

/**
 * The ExecStart and Environment lines of a unit, with %i as `instance`. The checkout stands for
 * WorkingDirectory, and this Node for the unit's node binary.
 */
export function unitCommand(unitFile: string, instance: string): UnitCommand {
  const text = readFileSync(new URL(`../${unitFile}`, import.meta.url), 'utf8');
  const lines = text.split('\n').map((l) => l.trim());
  const exec = lines.filter((l) => l.startsWith('ExecStart='));
  if (exec.length !== 1) throw new Error(`${unitFile}: expected one ExecStart line`);
  const argv = exec[0]!
    .slice('ExecStart='.length)
    .split(/\s+/)
    .map((a) => a.replaceAll('%i', instance));
  if (basename(argv[0]!) !== 'node') throw new Error(`${unitFile}: ExecStart does not run node: ${argv[0]}`);
  argv[0] = process.execPath;
  const env: Record<string, string> = {};
  for (const l of lines.filter((x) => x.startsWith('Environment='))) {
    const assignment = l.slice('Environment='.length).replaceAll('%i', instance);
    const eq = assignment.indexOf('=');
    env[assignment.slice(0, eq)] = assignment.slice(eq + 1);
  }
  return { argv, env };
}

/** A new, empty (unmigrated) database on the test server; drop() removes it. */
export { createDatabase } from './db-fixtures.ts';

/** The environment of a child: this one without any SVC_* or database setting of the test runner. */
export function childEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('SVC_') || k === 'DATABASE_URL' || k === 'NODE_OPTIONS' || k.startsWith('VITEST')) continue;
    env[k] = v;
  }
  return { ...env, ...settings };
}

export interface ServiceProcess {
  child: ChildProcess;
  pid: number;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves once the output matches `re`; rejects when the process exits first. */
  waitForOutput(re: RegExp): Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts a unit's command from the checkout with the unit's environment plus `settings`. */
export function spawnService(cmd: UnitCommand, settings: Record<string, string>): ServiceProcess {
  const child = spawn(cmd.argv[0]!, cmd.argv.slice(1), {
    cwd: REPO,
    env: childEnv({ ...cmd.env, ...settings }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const watchers: (() => void)[] = [];
  const onData = (c: Buffer) => {
    out += c.toString();
    for (const w of [...watchers]) w();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) =>
    child.once('exit', (code, signal) => ok({ code, signal })),
  );
  let done = false;
  void exited.then(() => (done = true));
  return {
    child,
    pid: child.pid!,
    output: () => out,
    exited,
    waitForOutput(re) {
      return new Promise<void>((ok, fail) => {
        const check = () => {
          if (re.test(out)) {
            watchers.splice(watchers.indexOf(check), 1);
            ok();
          }
        };
        watchers.push(check);
        check();
        void exited.then((e) => {
          if (!re.test(out)) fail(new Error(`the process exited (${e.code ?? e.signal}) before printing ${re}:\n${out}`));
        });
        if (done && !re.test(out)) fail(new Error(`the process had exited before printing ${re}:\n${out}`));
      });
    },
  };
}

/** Stops what a failed test left running. */
export async function killAll(procs: ServiceProcess[]): Promise<void> {
  await Promise.all(
    procs.map(async (p) => {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    }),
  );
}

/** Polls `probe` every `everyMs` until it returns a value (not undefined). */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, everyMs = 200, limitMs = 90_000): Promise<T> {
  const end = Date.now() + limitMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((ok) => setTimeout(ok, everyMs));
  }
}

/** A request to a spawned service over a fresh connection, its response checked against openapi.yaml. */
export async function call(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<CheckedResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const url = new URL(path, base);
  const res = await new Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>((ok, fail) => {
    const req = httpRequest(url, { method, headers, agent: false }, (r) => {
      let text = '';
      r.setEncoding('utf8');
      r.on('data', (c: string) => (text += c));
      r.on('end', () => ok({ status: r.statusCode!, headers: r.headers, text }));
      r.on('error', fail);
    });
    req.on('error', fail);
    req.end(body);
  });
  return checkResponse(method, url.pathname, res.status, toHeaders(res.headers), res.text);
}

export function toHeaders(h: IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    for (const item of Array.isArray(v) ? v : [v]) out.append(k, item);
  }
  return out;
}

/** bin/svc with these arguments on `databaseUrl`. */
export function svc(args: string[], databaseUrl: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((ok, fail) => {
    const child = spawn(`${REPO}/bin/svc`, args, {
      cwd: REPO,
      env: childEnv({ SVC_DATABASE_URL: databaseUrl }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => ok({ code, stdout, stderr }));
  });
}
