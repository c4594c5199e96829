// The multi-process deployment, as deploy/svc-api@.service and deploy/svc-worker@.service run it:
// 2 api + 2 worker processes (`node --import tsx src/main.ts`, commands read from the unit files)
// on one database of this file's own (workers would otherwise claim the work of other test
// files) and the machine's Redis, with a local HTTPS peer as webhook and remote-call destination.
//
// - migrations: the workers apply them (one of the two), the api processes wait for them;
// - every task is claimed exactly once: exports submitted through both api processes each run once;
// - LISTEN/NOTIFY wakes the workers: the task poll interval is 5 minutes, far beyond the test, so
//   every task here starts on a notification;
// - every delivery is fenced: each event reaches the peer exactly once;
// - login lockouts are shared through Redis: failures on api #1 lock out on api #2;
// - token caches are invalidated across processes: a logout on api #1 is refused on api #2 (NOTIFY);
// - kill -9 of a worker mid-task and mid-delivery loses nothing: its task is failed by the lease
//   rules (worker_lost, never run twice), its delivery is delivered by the other worker (the one
//   repeat an unanswered request may cause is the only one allowed);
// - SIGTERM stops the three survivors with exit code 0;
// - SVC_HTTP_HEADERS_TIMEOUT_MS reaches the api process's server: a silent connection gets its 408.
// Leases and lock timeouts are shortened through their settings; nothing is timed, conditions are polled.
import { randomInt } from 'node:crypto';
import { connect } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPeer, type Peer } from './tls-fixtures.ts';
import {
  API_UNIT,
  WORKER_UNIT,
  call,
  createDatabase,
  freePort,
  killAll,
  spawnService,
  unitCommand,
  until,
  type ServiceProcess,
} from './process-fixtures.ts';
import { uniq } from './helpers.ts';

const REDIS_URL = process.env.SVC_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ADMIN_PASSWORD = 'multi-process-admin-password';

let db: { url: string; drop(): Promise<void> };
let sql: postgres.Sql;
let peer: Peer;
const workers: ServiceProcess[] = [];
const apis: { p: ServiceProcess; base: string }[] = [];
let token = '';

/** What the peer received: path and (for webhooks) the event id; whether it was answered. */
interface Received {
  path: string;
  eventId: string | undefined;
  res: ServerResponse;
  /** The sender went away before an answer (killed, or it gave up). */
  dropped: boolean;
}
const received: Received[] = [];
/** Path prefixes whose requests are held unanswered until released. */
const holding = new Set<string>();

function answer(r: Received): void {
  if (r.dropped || r.res.writableEnded) return;
  r.res.setHeader('content-type', 'application/json');
  r.res.end('{"ok":true}');
}

function receivedOn(prefix: string): Received[] {
  return received.filter((r) => r.path.startsWith(prefix));
}

beforeAll(async () => {
  db = await createDatabase('svc_mp');
  sql = postgres(db.url, { max: 2, onnotice: () => {} });
  peer = await startPeer({ prefix: 'svc-mp-' });
  peer.respond = (req: IncomingMessage, res: ServerResponse) => {
    const header = req.headers['x-svc-event-id'];
    const r: Received = { path: req.url ?? '', eventId: Array.isArray(header) ? header[0] : header, res, dropped: false };
    res.once('close', () => {
      if (!res.writableFinished) r.dropped = true;
    });
    received.push(r);
    if (![...holding].some((p) => r.path.startsWith(p))) answer(r);
  };

  const common: Record<string, string> = {
    SVC_DATABASE_URL: db.url,
    SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
    SVC_LOG_LEVEL: 'info',
    SVC_DB_POOL_MAX: '4',
    SVC_LOGIN_RATE_LIMIT_REDIS_URL: REDIS_URL,
    SVC_TRUSTED_PROXIES: '127.0.0.0/8',
    SVC_TASK_WORKERS: '1',
    SVC_TASK_POLL_INTERVAL_MS: '300000',
    SVC_TASK_LEASE_MS: '5000',
    SVC_EVENT_FANOUT_LOCK_TIMEOUT_MS: '5000',
    SVC_EVENT_FANOUT_POLL_INTERVAL_MS: '1000',
    SVC_EVENT_DELIVERY_WORKERS: '1',
    SVC_EVENT_DELIVERY_BATCH_SIZE: '1',
    SVC_EVENT_DELIVERY_LOCK_TIMEOUT_MS: '6000',
    SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS: '5000',
    SVC_EVENT_DELIVERY_POLL_INTERVAL_MS: '1000',
    SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: 'true',
    SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: 'true',
    SVC_REMOTE_CALL_TIMEOUT_MS: '60000',
    SVC_HTTP_HEADERS_TIMEOUT_MS: '3000',
    SVC_OUTBOUND_CA_FILE: peer.caFile,
  };
  // all four at once, the api processes on an empty database: they wait for the workers' migrations
  for (const i of [1, 2]) {
    const port = await freePort();
    apis.push({ p: spawnService(unitCommand(API_UNIT, String(port)), common), base: `http://127.0.0.1:${port}` });
    workers.push(spawnService(unitCommand(WORKER_UNIT, String(i)), common));
  }
  await Promise.all([...apis.map((a) => a.p), ...workers].map((p) => p.waitForOutput(/stop with .* process \d+/)));
  for (const a of apis) expect((await call(a.base, 'GET', '/readyz')).status).toBe(200);
  const login = await call(apis[0]!.base, 'POST', '/api/v0/auth/login', { body: { name: 'admin', password: ADMIN_PASSWORD } });
  expect(login.status, login.text).toBe(200);
  token = (login.body as { token: string }).token;
}, 240_000);

afterAll(async () => {
  await killAll([...apis.map((a) => a.p), ...workers]);
  for (const r of received) answer(r);
  await peer?.close();
  await sql?.end();
  await db?.drop();
});

/** A request through api #n (1 or 2) as the admin. */
async function api(n: 1 | 2, method: string, path: string, body?: unknown, headers?: Record<string, string>) {
  return call(apis[n - 1]!.base, method, path, { token, body, headers });
}

async function created(res: { status: number; text: string; body: unknown }): Promise<number> {
  expect(res.status, res.text).toBeLessThan(300);
  return (res.body as { id: number }).id;
}

interface TaskRow {
  id: number;
  status: string;
  attempts: number;
  details: { reason?: string } | null;
  locked_until: Date | null;
}

async function tasks(ids: number[]): Promise<TaskRow[]> {
  return sql<TaskRow[]>`select id, status, attempts, details, locked_until from tasks where id = any(${ids}::int[]) order by id`;
}

/** Until every one of the tasks is in a final state. */
async function settled(ids: number[]): Promise<TaskRow[]> {
  return until(`tasks ${ids.join(', ')} to finish`, async () => {
    const rows = await tasks(ids);
    return rows.every((r) => !['queued', 'validating', 'running'].includes(r.status)) ? rows : undefined;
  });
}

/** A webhook sink and a subscription to `updated` events of a new collection, routed to the peer at `path`. */
async function subscribedCollection(path: string): Promise<{ col: number; sub: number }> {
  const sink = await created(await api(1, 'POST', '/api/v1/event-sinks', { name: uniq('sink'), kind: 'webhook' }));
  const col = await created(await api(1, 'POST', '/api/v1/collections', { name: uniq('col') }));
  const sub = await created(
    await api(2, 'POST', `/api/v1/collections/${col}/event-subscriptions`, {
      name: uniq('sub'),
      sink_id: sink,
      entity_types: ['collection'],
      actions: ['updated'],
      routing: { url: peer.url(path) },
    }),
  );
  return { col, sub };
}

async function updateCollection(n: 1 | 2, col: number): Promise<void> {
  const res = await api(n, 'PATCH', `/api/v1/collections/${col}`, { description: uniq('d') });
  expect(res.status, res.text).toBe(200);
}

/** The event ids of the subscription's deliveries, once every one of them succeeded. */
async function allDelivered(sub: number, count: number): Promise<string[]> {
  return until(`${count} deliveries of subscription ${sub} to succeed`, async () => {
    const rows = await sql<{ event_id: string; status: string }[]>`
      select event_id::text as event_id, status from event_deliveries where subscription_id = ${sub}`;
    return rows.length === count && rows.every((r) => r.status === 'succeeded') ? rows.map((r) => r.event_id) : undefined;
  });
}

function countBy<T>(items: T[]): Map<T, number> {
  const m = new Map<T, number>();
  for (const i of items) m.set(i, (m.get(i) ?? 0) + 1);
  return m;
}

describe('2 api + 2 worker processes on one database and one Redis', () => {
  it('migrations: one worker applied them, the api processes applied none and waited', () => {
    const appliedBy = workers.filter((w) => /migrations applied/.test(w.output()));
    expect(appliedBy).toHaveLength(1);
    for (const a of apis) expect(a.p.output()).not.toMatch(/migrations applied/);
  });

  it('SVC_HTTP_HEADERS_TIMEOUT_MS: a connection that sends nothing gets the 408 and is closed', async () => {
    const received = await new Promise<string>((ok, fail) => {
      const socket = connect(Number(new URL(apis[0]!.base).port), '127.0.0.1');
      let got = '';
      socket.on('data', (d: Buffer) => (got += d.toString('utf8')));
      socket.on('close', () => ok(got));
      socket.on('error', fail);
      // the default bound (60 s) would keep it far longer
      setTimeout(() => {
        socket.destroy();
        fail(new Error('still open after 20 s'));
      }, 20_000).unref();
    });
    expect(received.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
  });

  it('every task is claimed exactly once: 24 exports through both api processes each run once, on notifications', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 24; i++) {
      const res = await api(i % 2 === 0 ? 1 : 2, 'POST', '/api/v1/exports', { scope: { kind: 'classes' } });
      expect(res.status, res.text).toBe(202);
      ids.push((res.body as { id: number }).id);
    }
    // the poll interval is 5 minutes: only LISTEN/NOTIFY can have started these
    const rows = await settled(ids);
    for (const r of rows) expect(r, JSON.stringify(r)).toMatchObject({ status: 'succeeded', attempts: 1 });
    const starts = await sql<{ task_id: number; n: number }[]>`
      select task_id, count(*)::int as n from task_events where task_id = any(${ids}::int[]) and event_type = 'running' group by task_id`;
    expect(starts).toHaveLength(ids.length);
    for (const s of starts) expect(s.n).toBe(1);
    const audited = await sql<{ n: number }[]>`
      select count(*)::int as n from events where entity_type = 'task' and action = 'running' and entity_id = any(${ids}::int[])`;
    expect(audited[0]!.n).toBe(ids.length);
  }, 120_000);

  it('LISTEN/NOTIFY: a task submitted on api #1 to idle workers starts without waiting for the poll', async () => {
    const res = await api(1, 'POST', '/api/v1/exports', { scope: { kind: 'classes' } });
    expect(res.status, res.text).toBe(202);
    const [row] = await settled([(res.body as { id: number }).id]);
    expect(row!.status).toBe('succeeded');
  }, 120_000);

  it('login lockouts are shared through Redis: 5 failures on api #1 lock the name out on api #2', async () => {
    const name = uniq('mp-user');
    const password = `pw-${uniq()}`;
    const user = { name, password };
    const approval = await api(1, 'POST', '/api/v1/iam/credential-approvals', {
      password: ADMIN_PASSWORD,
      operation: { kind: 'create_user', user },
    });
    expect(approval.status, approval.text).toBe(201);
    const made = await api(1, 'POST', '/api/v1/iam/users', user, {
      'x-svc-credential-approval': (approval.body as { approval: string }).approval,
    });
    expect(made.status, made.text).toBe(201);

    const from = { 'x-forwarded-for': `198.51.100.${randomInt(1, 255)}` };
    const attempt = (n: 1 | 2, pw: string) =>
      call(apis[n - 1]!.base, 'POST', '/api/v0/auth/login', { body: { name, password: pw }, headers: from });
    for (let i = 0; i < 5; i++) expect((await attempt(1, 'wrong-password')).status).toBe(401);
    const locked = await attempt(2, password);
    expect(locked.status, locked.text).toBe(429);
    expect(locked.body).toMatchObject({ reason: 'login_rate_limited' });
    // the same name from another address is not locked out, on either process
    const elsewhere = await call(apis[1]!.base, 'POST', '/api/v0/auth/login', {
      body: { name, password },
      headers: { 'x-forwarded-for': `203.0.113.${randomInt(1, 255)}` },
    });
    expect(elsewhere.status, elsewhere.text).toBe(200);
  }, 60_000);

  it('token cache: a logout on api #1 is refused there at once and on api #2 once its NOTIFY arrives', async () => {
    const login = await call(apis[0]!.base, 'POST', '/api/v0/auth/login', { body: { name: 'admin', password: ADMIN_PASSWORD } });
    expect(login.status, login.text).toBe(200);
    const fresh = (login.body as { token: string }).token;
    const validate = (n: 1 | 2) => call(apis[n - 1]!.base, 'GET', '/api/v0/auth/validate', { token: fresh });
    // used twice on each process, so both hold it in their token caches
    for (const n of [1, 2, 1, 2] as const) expect((await validate(n)).status).toBe(200);
    expect((await call(apis[0]!.base, 'POST', '/api/v0/auth/logout', { token: fresh })).status).toBe(200);
    expect((await validate(1)).status).toBe(401);
    await until('api #2 to refuse the logged-out token', async () => ((await validate(2)).status === 401 ? true : undefined));
  }, 60_000);

  it('every delivery is fenced: 12 events from both api processes reach the peer exactly once each', async () => {
    const { col, sub } = await subscribedCollection('/hook/fenced');
    for (let i = 0; i < 12; i++) await updateCollection(i % 2 === 0 ? 1 : 2, col);
    const events = await allDelivered(sub, 12);
    const seen = countBy(receivedOn('/hook/fenced').map((r) => r.eventId));
    expect([...seen.keys()].sort()).toEqual([...events].sort());
    for (const [id, n] of seen) expect(n, `event ${id}`).toBe(1);
  }, 120_000);

  it('kill -9 of a worker mid-task and mid-delivery loses nothing; SIGTERM then stops the rest with exit 0', async () => {
    const col = await created(await api(1, 'POST', '/api/v1/collections', { name: uniq('rt-col') }));
    const target = await created(
      await api(1, 'POST', '/api/v1/remote-targets', {
        collection_id: col,
        name: uniq('rt'),
        description: '',
        method: 'get',
        url_template: peer.url('/call'),
        allowed_subject_types: ['collection'],
        timeout_ms: 60_000,
      }),
    );
    const hooks = await subscribedCollection('/hook/kill');
    holding.add('/call');
    holding.add('/hook/kill');

    // one remote call held on each worker (1 task worker each), then one delivery held on each
    const calls: number[] = [];
    for (const n of [1, 2] as const) {
      calls.push(
        await created(await api(n, 'POST', `/api/v1/remote-targets/${target}/invoke`, { subject: { type: 'collection', id: col } })),
      );
    }
    await until('both remote calls to reach the peer', async () => (receivedOn('/call').length === 2 ? true : undefined));
    for (const n of [1, 2, 1] as const) await updateCollection(n, hooks.col);
    await until('a delivery held on each worker', async () => (receivedOn('/hook/kill').length === 2 ? true : undefined));

    const victim = workers[0]!;
    victim.child.kill('SIGKILL');
    expect(await victim.exited).toEqual({ code: null, signal: 'SIGKILL' });
    await until('the killed worker’s requests to drop', async () =>
      receivedOn('/call').some((r) => r.dropped) && receivedOn('/hook/kill').some((r) => r.dropped) ? true : undefined,
    );

    // deliveries: the survivor's held one is answered; the victim's runs out its lock and is delivered again
    holding.delete('/hook/kill');
    for (const r of receivedOn('/hook/kill')) answer(r);
    // tasks: the victim's task runs out its lease; the survivor recovers it when its own call ends
    const [lost] = await until('the killed worker’s task lease to run out', async () => {
      const rows = (await tasks(calls)).filter((r) => r.status === 'running' && r.locked_until !== null && r.locked_until < new Date());
      return rows.length === 1 ? rows : undefined;
    });
    holding.delete('/call');
    for (const r of receivedOn('/call')) answer(r);

    const final = await settled(calls);
    const byId = new Map(final.map((r) => [r.id, r]));
    expect(byId.get(lost!.id)).toMatchObject({ status: 'failed', attempts: 1, details: { reason: 'worker_lost' } });
    const survivor = final.find((r) => r.id !== lost!.id)!;
    expect(survivor).toMatchObject({ status: 'succeeded', attempts: 1 });
    // neither call was sent twice
    expect(receivedOn('/call')).toHaveLength(2);

    const events = await allDelivered(hooks.sub, 3);
    const hookRequests = receivedOn('/hook/kill');
    const seen = countBy(hookRequests.map((r) => r.eventId));
    const dropped = new Set(hookRequests.filter((r) => r.dropped).map((r) => r.eventId));
    expect([...seen.keys()].sort()).toEqual([...events].sort());
    // an event is sent again only when its earlier request went unanswered (the kill)
    for (const [id, n] of seen) expect(n, `event ${id}`).toBe(dropped.has(id) ? 2 : 1);

    const rest = [...apis.map((a) => a.p), workers[1]!];
    for (const p of rest) p.child.kill('SIGTERM');
    for (const p of rest) expect(await p.exited).toEqual({ code: 0, signal: null });
  }, 180_000);
});
