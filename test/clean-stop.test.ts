// Clean starts and stops of a real api process (deploy/svc-api@.service's command, on a database of
// this file's own): started before the migrations it waits (readyz 503) and serves once
// `bin/svc migrate` has applied them; on SIGTERM readyz turns 503 at once while a request in
// flight completes, then the process exits 0; a request that never completes is cut at
// SVC_SHUTDOWN_DRAIN_MS and the process still exits 0.
//
// "In flight" without timing anything: the request is sent with `Expect: 100-continue`; the
// server's `100 Continue` says it has the request, and its body is sent only when the test says so.
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_UNIT,
  call,
  createDatabase,
  freePort,
  killAll,
  spawnService,
  svc,
  toHeaders,
  unitCommand,
  until,
  type ServiceProcess,
} from './process-fixtures.ts';
import { checkResponse, type CheckedResponse } from './contract-check.ts';

const ADMIN_PASSWORD = 'clean-stop-admin-password';
let db: { url: string; drop(): Promise<void> };
const procs: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createDatabase('svc_stop');
});

afterAll(async () => {
  await killAll(procs);
  await db?.drop();
});

async function startApi(settings: Record<string, string> = {}): Promise<{ p: ServiceProcess; base: string }> {
  const port = await freePort();
  const p = spawnService(unitCommand(API_UNIT, String(port)), {
    SVC_DATABASE_URL: db.url,
    SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
    SVC_LOG_LEVEL: 'info',
    SVC_DB_POOL_MAX: '4',
    ...settings,
  });
  procs.push(p);
  return { p, base: `http://127.0.0.1:${port}` };
}

interface InFlight {
  /** The server has the request (it answered 100 Continue). */
  received: Promise<void>;
  /** Sends the body: the request completes. */
  finish(): void;
  response: Promise<CheckedResponse>;
}

/** A login whose body waits for finish(). */
function loginInFlight(base: string): InFlight {
  const body = JSON.stringify({ name: 'admin', password: ADMIN_PASSWORD });
  const req = httpRequest(new URL('/api/v0/auth/login', base), {
    method: 'POST',
    agent: false,
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), expect: '100-continue' },
  });
  const received = new Promise<void>((ok) => req.once('continue', () => ok()));
  const response = new Promise<CheckedResponse>((ok, fail) => {
    req.once('error', fail);
    req.once('response', (r) => {
      let text = '';
      r.setEncoding('utf8');
      r.on('data', (c: string) => (text += c));
      r.on('end', () => ok(checkResponse('POST', '/api/v0/auth/login', r.statusCode!, toHeaders(r.headers), text)));
      r.on('error', fail);
    });
  });
  // a response cut on purpose is awaited later: not an unhandled rejection meanwhile
  response.catch(() => {});
  req.flushHeaders();
  return { received, finish: () => req.end(body), response };
}

describe('an api process started before the migrations', () => {
  let api: { p: ServiceProcess; base: string };

  it('waits with readyz 503 (healthz 200, the API 503) until bin/svc migrate has applied them, then serves', async () => {
    api = await startApi();
    // until it answers and has looked at the database (before that it says it is starting); a 200 ends the wait too, and fails
    const first = await until('the api process to report the pending migrations', async () => {
      const res = await call(api.base, 'GET', '/readyz').catch(() => undefined);
      return res && (res.status !== 503 || /migrations/.test((res.body as { message: string }).message)) ? res : undefined;
    });
    expect(first.status, first.text).toBe(503);
    expect((first.body as { message: string }).message).toMatch(/bin\/svc migrate/);
    expect((await call(api.base, 'GET', '/healthz')).status).toBe(200);
    const early = await call(api.base, 'POST', '/api/v0/auth/login', { body: { name: 'admin', password: ADMIN_PASSWORD } });
    expect(early.status).toBe(503);
    // still waiting, not failed
    expect(api.p.child.exitCode).toBeNull();
    expect((await call(api.base, 'GET', '/readyz')).status).toBe(503);

    const migrated = await svc(['migrate'], db.url);
    expect(migrated.code, migrated.stderr).toBe(0);

    await until('readyz 200', async () => ((await call(api.base, 'GET', '/readyz')).status === 200 ? true : undefined));
    await api.p.waitForOutput(/stop with .* process \d+/);
    const login = await call(api.base, 'POST', '/api/v0/auth/login', { body: { name: 'admin', password: ADMIN_PASSWORD } });
    expect(login.status, login.text).toBe(200);
  }, 180_000);

  it('SIGTERM under load: readyz 503 at once, the request in flight completes, exit 0', async () => {
    const inFlight = loginInFlight(api.base);
    await inFlight.received;
    api.p.child.kill('SIGTERM');
    await api.p.waitForOutput(/"msg":"shutting down"/);

    const ready = await call(api.base, 'GET', '/readyz');
    expect(ready.status).toBe(503);
    expect((ready.body as { message: string }).message).toMatch(/stopping/);
    // a straggler the gateway still sends is served, and told to close its connection
    const health = await call(api.base, 'GET', '/healthz');
    expect(health.status).toBe(200);
    expect(health.headers.get('connection')).toBe('close');
    expect(api.p.child.exitCode).toBeNull();

    inFlight.finish();
    const res = await inFlight.response;
    expect(res.status, res.text).toBe(200);
    expect((res.body as { token: string }).token).toBeTruthy();
    expect(await api.p.exited).toEqual({ code: 0, signal: null });
    expect(api.p.output()).not.toMatch(/cut at the drain bound|shutdown step failed|start-up failed/);
  }, 120_000);
});

describe('the drain bound', () => {
  it('a request that never completes is cut after SVC_SHUTDOWN_DRAIN_MS; the process still exits 0', async () => {
    // on its own too: the database migrated whatever ran before
    expect((await svc(['migrate'], db.url)).code).toBe(0);
    const api = await startApi({ SVC_SHUTDOWN_DRAIN_MS: '1000' });
    await api.p.waitForOutput(/stop with .* process \d+/);
    const stuck = loginInFlight(api.base);
    await stuck.received;
    api.p.child.kill('SIGTERM');
    expect(await api.p.exited).toEqual({ code: 0, signal: null });
    await expect(stuck.response).rejects.toThrow(/socket hang up|ECONNRESET/);
    expect(api.p.output()).toMatch(/requests still in flight were cut at the drain bound/);
  }, 120_000);
});
