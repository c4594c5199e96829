// Operations (#10): /metrics after real traffic (families, labels, no ids in labels), its optional
// token and allowlist, the metrics-only listener of SVC_METRICS_BIND, the request log line (and
// what it never holds), X-Request-Id kept or replaced, and the security headers.
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, listen, startTestApp, uniq, type TestApp } from './helpers.ts';
import { checkResponse } from './contract-check.ts';
import { createCollection, createSink, createSubscription, fanOutAll, startPeer, type Peer } from './event-fixtures.ts';
import { createHuman } from './iam-fixtures.ts';
import { WORKER_UNIT, createDatabase, freePort, killAll, spawnService, unitCommand, until } from './process-fixtures.ts';
import { createLogger } from '../src/log.ts';
import { loadConfig } from '../src/config.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { runDeliveryOnce } from '../src/workers/event-delivery.ts';
import { serveMetrics } from '../src/http/metrics-listener.ts';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition, the type of each family and the families with HELP text. */
function parseExposition(text: string): { types: Map<string, string>; help: Set<string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const help = new Set<string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types.set(name!, type!);
      continue;
    }
    if (line.startsWith('# HELP ')) {
      const [, , name, first] = line.split(' ');
      if (first) help.add(name!);
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    expect(m, line).not.toBeNull();
    const labels: Record<string, string> = {};
    for (const l of (m![2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m![1]!, labels, value: Number(m![3]) });
  }
  return { types, help, samples };
}

function find(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** Every label name of the service's own families (the default process/Node ones have theirs). */
const OWN_LABELS = new Set(['method', 'route', 'status_class', 'outcome', 'kind', 'status', 'transport', 'sink_kind', 'le']);

let t: TestApp;
let peer: Peer;
const logLines: Record<string, unknown>[] = [];
const rawLog: string[] = [];

beforeAll(async () => {
  peer = await startPeer();
  t = await startTestApp({ SVC_OUTBOUND_CA_FILE: peer.caFile, SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: true });
  t.deps.log = createLogger(
    'info',
    new Writable({
      write(chunk: Buffer, _enc, done) {
        const text = chunk.toString();
        rawLog.push(text);
        logLines.push(JSON.parse(text) as Record<string, unknown>);
        done();
      },
    }),
  );
});

afterAll(async () => {
  await peer?.close();
  await t?.close();
});

describe('getMetrics after real traffic', () => {
  let names: string[] = [];
  let ids: number[] = [];
  let text = '';

  beforeAll(async () => {
    // objects created, a failed login, a bad token, a task run, a webhook delivery
    const col = await createCollection(t);
    const name = uniq('metrics-col');
    const named = await t.request('POST', '/api/v1/collections', { body: { name } });
    expect(named.status, named.text).toBe(201);
    ids = [col, (named.body as { id: number }).id];
    names = [name];
    expect((await t.request('GET', `/api/v1/collections/${col}`)).status).toBe(200);
    const failed = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: 'admin', password: 'wrong-password' } });
    expect(failed.status).toBe(401);
    expect((await t.request('GET', '/api/v1/collections', { token: 'not-a-real-token' })).status).toBe(401);
    expect((await t.request('GET', '/no/such/path')).status).toBe(404);

    const sub = await t.request('POST', '/api/v1/backups', { body: {} });
    expect(sub.status, sub.text).toBe(202);
    const done = await runTaskOnce(t.deps, { taskIds: [(sub.body as { id: number }).id] });
    expect(done?.status).toBe('succeeded');

    peer.respond = (_req, res) => {
      res.statusCode = 200;
      res.end('ok');
    };
    const sinkId = (await createSink(t)).id;
    const subCol = await createCollection(t);
    await createSubscription(t, subCol, {
      sink_id: sinkId,
      entity_types: ['collection'],
      actions: ['updated'],
      routing: { url: peer.url() },
    });
    expect((await t.request('PATCH', `/api/v1/collections/${subCol}`, { body: { description: uniq('d') } })).status).toBe(200);
    await fanOutAll(t);
    expect(await runDeliveryOnce(t.deps, { sinkIds: [sinkId] })).toBe(1);
    expect(peer.seen.length).toBe(1);

    const res = await t.request('GET', '/metrics', { token: null });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    text = res.text;
  });

  it('200: HTTP requests by method, OpenAPI route template and status class; duration histogram; in flight', () => {
    const { types, samples } = parseExposition(text);
    expect(types.get('svc_http_requests_total')).toBe('counter');
    expect(types.get('svc_http_request_duration_seconds')).toBe('histogram');
    expect(types.get('svc_http_requests_in_flight')).toBe('gauge');
    const created = find(samples, 'svc_http_requests_total', { method: 'POST', route: '/api/v1/collections', status_class: '2xx' });
    expect(created[0]?.value).toBeGreaterThanOrEqual(3);
    expect(
      find(samples, 'svc_http_requests_total', { method: 'GET', route: '/api/v1/collections/{collection_id}', status_class: '2xx' }),
    ).toHaveLength(1);
    expect(find(samples, 'svc_http_requests_total', { method: 'POST', route: '/api/v0/auth/login', status_class: '4xx' })).toHaveLength(1);
    expect(find(samples, 'svc_http_requests_total', { route: 'unmatched', status_class: '4xx' })).toHaveLength(1);
    expect(
      find(samples, 'svc_http_request_duration_seconds_bucket', { route: '/api/v1/collections', le: '+Inf' })[0]?.value,
    ).toBeGreaterThan(0);
    // one series of the histogram: cumulative buckets at the declared bounds, +Inf = _count = the counter, a positive _sum
    const series = { method: 'POST', route: '/api/v1/collections', status_class: '2xx' };
    const buckets = find(samples, 'svc_http_request_duration_seconds_bucket', series);
    expect(buckets.map((b) => b.labels.le)).toEqual([
      '0.005',
      '0.01',
      '0.025',
      '0.05',
      '0.1',
      '0.25',
      '0.5',
      '1',
      '2.5',
      '5',
      '10',
      '30',
      '+Inf',
    ]);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
    expect(buckets.at(-1)!.value).toBe(created[0]!.value);
    expect(find(samples, 'svc_http_request_duration_seconds_count', series)[0]?.value).toBe(created[0]!.value);
    expect(find(samples, 'svc_http_request_duration_seconds_sum', series)[0]?.value).toBeGreaterThan(0);
    // the scrape itself is in flight while it is rendered
    expect(find(samples, 'svc_http_requests_in_flight')[0]?.value).toBeGreaterThanOrEqual(1);
  });

  it('200: database pool, transactions, tasks, fan-out, deliveries, limiter, tokens, process and Node runtime', () => {
    const { types, samples } = parseExposition(text);
    const one = (name: string, labels: Record<string, string> = {}) => {
      const s = find(samples, name, labels);
      expect(s, `${name} ${JSON.stringify(labels)}`).toHaveLength(1);
      return s[0]!.value;
    };
    expect(one('svc_db_pool_max')).toBe(t.deps.config.SVC_DB_POOL_MAX);
    expect(one('svc_db_pool_size')).toBeGreaterThanOrEqual(1);
    expect(one('svc_db_pool_in_use')).toBeGreaterThanOrEqual(0);
    expect(one('svc_db_pool_waiting')).toBeGreaterThanOrEqual(0);
    expect(one('svc_db_list_pool_max')).toBe(t.deps.config.SVC_DB_LIST_POOL_MAX);
    expect(one('svc_db_list_pool_size')).toBeGreaterThanOrEqual(0);
    expect(one('svc_db_list_pool_in_use')).toBeGreaterThanOrEqual(0);
    expect(one('svc_db_list_pool_waiting')).toBeGreaterThanOrEqual(0);
    expect(types.get('svc_db_pool_acquire_timeouts_total')).toBe('counter');
    expect(one('svc_db_pool_acquire_wait_seconds_count')).toBeGreaterThan(0);
    expect(one('svc_db_transaction_duration_seconds_count', { outcome: 'commit' })).toBeGreaterThan(0);
    expect(one('svc_database_up')).toBe(1);

    expect(one('svc_task_duration_seconds_count', { kind: 'backup', status: 'succeeded' })).toBeGreaterThanOrEqual(1);
    expect(types.get('svc_tasks_active')).toBe('gauge');
    expect(one('svc_events_newest_id')).toBeGreaterThan(0);
    expect(one('svc_event_fanout_lag_events')).toBeGreaterThanOrEqual(0);
    expect(one('svc_event_fanout_oldest_pending_age_seconds')).toBeGreaterThanOrEqual(0);
    expect(one('svc_event_deliveries_total', { transport: 'webhook', outcome: 'succeeded' })).toBeGreaterThanOrEqual(1);
    for (const status of ['pending', 'in_flight', 'failed'])
      expect(one('svc_event_delivery_backlog', { sink_kind: 'webhook', status })).toBeGreaterThanOrEqual(0);
    expect(one('svc_event_deliveries_dead', { sink_kind: 'webhook' })).toBeGreaterThanOrEqual(0);

    expect(types.get('svc_login_limiter_blocks_total')).toBe('counter');
    expect(one('svc_token_validations_total', { outcome: 'valid' })).toBeGreaterThan(0);
    expect(one('svc_token_validations_total', { outcome: 'invalid' })).toBeGreaterThanOrEqual(1);

    expect(one('svc_process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(one('svc_process_start_time_seconds')).toBeGreaterThan(0);
    expect(types.get('svc_nodejs_heap_size_used_bytes')).toBe('gauge');
    expect(types.get('svc_nodejs_eventloop_lag_seconds')).toBe('gauge');
  });

  it('200: labels carry no ids, names or addresses', () => {
    const { samples } = parseExposition(text);
    const own = samples.filter((s) => !/^svc_(process|nodejs)_/.test(s.name));
    for (const s of own) for (const k of Object.keys(s.labels)) expect(OWN_LABELS.has(k), `${s.name} label ${k}`).toBe(true);
    const values = new Set(
      own.flatMap((s) =>
        Object.entries(s.labels)
          .filter(([k]) => k !== 'le')
          .map(([, v]) => v),
      ),
    );
    for (const v of values) {
      expect(v, 'a number as a label value').not.toMatch(/^\d+$/);
      expect(v, 'an address as a label value').not.toMatch(/\d+\.\d+\.\d+\.\d+|::/);
      expect(v, 'a uuid as a label value').not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/);
    }
    for (const n of [...names, 'admin']) expect(text).not.toContain(n);
    for (const id of ids) expect([...values].some((v) => v.includes(`/${id}`))).toBe(false);
    for (const s of own)
      if (s.labels.route) expect(s.labels.route === 'unmatched' || s.labels.route.startsWith('/'), s.labels.route).toBe(true);
  });

  it("200: names follow Prometheus's conventions (what `promtool check metrics` lints)", () => {
    // prom-client's runtime gauges keep the names Node.js dashboards query; promtool warns of these three.
    const promClientGaugesNamedTotal = new Set([
      'svc_nodejs_active_handles_total',
      'svc_nodejs_active_requests_total',
      'svc_nodejs_active_resources_total',
    ]);
    const { types, help } = parseExposition(text);
    expect(types.size).toBeGreaterThan(20);
    for (const [name, type] of types) {
      expect(name, 'snake_case with the svc_ prefix').toMatch(/^svc_[a-z0-9_]+$/);
      expect(help.has(name), `${name} has HELP text`).toBe(true);
      expect(name, 'base units (seconds, bytes)').not.toMatch(/_(milliseconds|ms|microseconds|kilobytes|megabytes)(_|$)/);
      expect(name, 'no type in the name').not.toMatch(/_(gauge|counter|histogram|summary)(_|$)/);
      if (type === 'counter') expect(name, 'a counter ends in _total').toMatch(/_total$/);
      else if (!promClientGaugesNamedTotal.has(name)) expect(name, `a ${type} does not end in _total`).not.toMatch(/_total$/);
    }
  });
  it('a login the limiter refuses counts in svc_login_limiter_blocks_total', async () => {
    const limited = await startTestApp({ SVC_LOGIN_RATE_LIMIT_MAX_FAILURES_PER_USER: 1 });
    try {
      const before = find(
        parseExposition((await limited.request('GET', '/metrics', { token: null })).text).samples,
        'svc_login_limiter_blocks_total',
      )[0]!.value;
      const user = uniq('nobody');
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        statuses.push(
          (await limited.request('POST', '/api/v0/auth/login', { token: null, body: { name: user, password: 'wrong-password' } })).status,
        );
      }
      expect(statuses).toContain(429);
      const after = find(
        parseExposition((await limited.request('GET', '/metrics', { token: null })).text).samples,
        'svc_login_limiter_blocks_total',
      )[0]!.value;
      expect(after - before).toBeGreaterThanOrEqual(statuses.filter((s) => s === 429).length);
    } finally {
      await limited.close();
    }
  });
});

describe('getMetrics protection (SVC_METRICS_TOKEN, SVC_METRICS_ALLOW)', () => {
  it('401 without or with a wrong bearer token when SVC_METRICS_TOKEN is set; 200 with it (an API token is not it)', async () => {
    const secret = `metrics-${uniq()}`;
    const guarded = await startTestApp({ SVC_METRICS_TOKEN: secret });
    try {
      expect((await guarded.request('GET', '/metrics', { token: null })).status).toBe(401);
      expect((await guarded.request('GET', '/metrics', { token: 'wrong' })).status).toBe(401);
      expect((await guarded.request('GET', '/metrics')).status).toBe(401);
      const ok = await guarded.request('GET', '/metrics', { token: secret });
      expect(ok.status).toBe(200);
      expect(ok.text).toContain('svc_http_requests_total');
    } finally {
      await guarded.close();
    }
  });

  it('403 from an address outside SVC_METRICS_ALLOW; 200 from inside it (real sockets)', async () => {
    for (const [allow, status] of [
      ['10.0.0.0/8, 2001:db8::/32', 403],
      ['10.0.0.0/8, 127.0.0.0/8, ::1', 200],
    ] as const) {
      const app = await startTestApp({ SVC_METRICS_ALLOW: allow });
      const served = await listen(app);
      try {
        const res = await fetch(`http://127.0.0.1:${served.port}/metrics`);
        const text = await res.text();
        checkResponse('GET', '/metrics', res.status, res.headers, text);
        expect(res.status, text).toBe(status);
      } finally {
        await served.close();
        await app.close();
      }
    }
  });
});

describe('metrics settings', () => {
  it('a bad SVC_METRICS_ALLOW or SVC_METRICS_BIND stops start-up naming it; the listener may not take the API port', () => {
    expect(() => loadConfig({ SVC_METRICS_ALLOW: '10.0.0.0/8, scraper.local' })).toThrow(/SVC_METRICS_ALLOW/);
    expect(() => loadConfig({ SVC_METRICS_ALLOW: '10.0.0.0/33' })).toThrow(/SVC_METRICS_ALLOW/);
    expect(() => loadConfig({ SVC_METRICS_BIND: 'nowhere' })).toThrow(/SVC_METRICS_BIND/);
    expect(() => loadConfig({ SVC_METRICS_BIND: '127.0.0.1:8080' })).toThrow(/SVC_METRICS_BIND must use another port/);
    expect(loadConfig({ SVC_METRICS_BIND: '127.0.0.1:8080', SVC_RUNTIME_ROLE: 'worker' }).SVC_METRICS_BIND).toBe('127.0.0.1:8080');
    expect(loadConfig({ SVC_METRICS_ALLOW: '10.0.0.0/8, ::1' }).SVC_METRICS_ALLOW).toBe('10.0.0.0/8, ::1');
    const defaults = loadConfig({});
    expect([defaults.SVC_METRICS_TOKEN, defaults.SVC_METRICS_ALLOW, defaults.SVC_METRICS_BIND]).toEqual([undefined, '', undefined]);
  });
});

describe('SVC_METRICS_BIND: the metrics-only listener (worker processes)', () => {
  it('serves GET /metrics (with the same token rule) and nothing else', async () => {
    const secret = `metrics-${uniq()}`;
    const server = await serveMetrics({ config: { ...t.deps.config, SVC_METRICS_TOKEN: secret }, sql: t.deps.sql }, '127.0.0.1', 0);
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const denied = await fetch(`${base}/metrics`);
      expect(denied.status).toBe(401);
      expect(((await denied.json()) as { error: string }).error).toBe('Unauthorized');
      const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${secret}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      const { samples } = parseExposition(await res.text());
      expect(find(samples, 'svc_database_up')[0]?.value).toBe(1);
      expect(find(samples, 'svc_db_pool_max')).toHaveLength(1);
      expect((await fetch(`${base}/api/v1/collections`)).status).toBe(404);
      const post = await fetch(`${base}/metrics`, { method: 'POST' });
      expect(post.status).toBe(405);
      expect(post.headers.get('allow')).toBe('GET, HEAD');
      const head = await fetch(`${base}/metrics`, { method: 'HEAD', headers: { authorization: `Bearer ${secret}` } });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe('');
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()));
    }
  });
});

describe('SVC_METRICS_BIND on a worker process (the unit command of deploy/svc-worker@.service)', () => {
  it('the worker serves GET /metrics on that listener from its start, with the database figures once migrated; SIGTERM closes it, exit 0', async () => {
    const db = await createDatabase('svc_metrics');
    const port = await freePort();
    const worker = spawnService(unitCommand(WORKER_UNIT, '1'), {
      SVC_DATABASE_URL: db.url,
      SVC_METRICS_BIND: `127.0.0.1:${port}`,
      SVC_LOG_LEVEL: 'info',
    });
    try {
      await worker.waitForOutput(/metrics listener \(GET \/metrics\) started/);
      const text = await until('the worker metrics with the database figures', async () => {
        const res = await fetch(`http://127.0.0.1:${port}/metrics`);
        const body = await res.text();
        return res.status === 200 && /^svc_database_up 1$/m.test(body) && /^svc_events_newest_id /m.test(body) ? body : undefined;
      });
      const { types } = parseExposition(text);
      for (const family of [
        'svc_db_pool_max',
        'svc_task_duration_seconds',
        'svc_event_deliveries_total',
        'svc_process_resident_memory_bytes',
      ]) {
        expect(types.has(family), family).toBe(true);
      }
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toEqual({ code: 0, signal: null });
      await expect(fetch(`http://127.0.0.1:${port}/metrics`)).rejects.toThrow();
    } finally {
      await killAll([worker]);
      await db.drop();
    }
  });
});

describe('request log', () => {
  it('one INFO line per request: ids, method, route template, status, duration, principal, bytes; never a credential or query value', async () => {
    const { id: userId, name, password, token } = await createHuman(t);
    const querySecret = `q-${uniq()}`;
    logLines.length = 0;
    rawLog.length = 0;

    const me = await t.request('GET', `/api/v1/collections`, {
      token,
      query: { token: querySecret },
      headers: { 'x-correlation-id': 'corr-1' },
    });
    const wrong = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name, password: `${password}-wrong` } });
    expect(wrong.status).toBe(401);
    const head = await t.app.fetch(
      new Request('http://test.local/api/v1/collections', { method: 'HEAD', headers: { authorization: `Bearer ${token}` } }),
    );
    expect(head.status).toBe(200);
    const got = await t.request('GET', '/api/v1/collections', { token });

    const lines = logLines.filter((l) => l.msg === 'request');
    expect(lines).toHaveLength(4);
    // a HEAD: its Content-Length states the GET's body, none of which was sent
    expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(got.text)));
    expect(lines[2]).toMatchObject({ method: 'HEAD', route: '/api/v1/collections', status: 200, principal_id: userId, bytes: 0 });
    expect(lines[3]).toMatchObject({ method: 'GET', route: '/api/v1/collections', status: 200, bytes: Buffer.byteLength(got.text) });
    expect(lines[0]).toMatchObject({
      level: 30,
      request_id: me.headers.get('x-request-id'),
      correlation_id: 'corr-1',
      method: 'GET',
      route: '/api/v1/collections',
      status: me.status,
      principal_id: userId,
      bytes: Buffer.byteLength(me.text),
    });
    expect(typeof lines[0]!.duration_ms).toBe('number');
    expect(lines[1]).toMatchObject({ route: '/api/v0/auth/login', status: 401, principal_id: null, correlation_id: null });
    const all = rawLog.join('');
    for (const secret of [password, querySecret, token, t.adminToken]) expect(all).not.toContain(secret);
  });
});

describe('X-Request-Id', () => {
  it('a valid incoming X-Request-Id is kept (response, log, audit event); an invalid one is replaced by a UUID', async () => {
    const kept = `gw-${uniq()}`;
    const res = await t.request('POST', '/api/v1/collections', { body: { name: uniq('rid') }, headers: { 'x-request-id': kept } });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-request-id')).toBe(kept);
    const [ev] = await t.deps.sql<{ request_id: string }[]>`
      select request_id from events where entity_type = 'collection' and entity_id = ${(res.body as { id: number }).id} order by id limit 1`;
    expect(ev?.request_id).toBe(kept);
    expect(logLines.some((l) => l.msg === 'request' && l.request_id === kept)).toBe(true);

    for (const bad of ['has space', 'x'.repeat(129), 'semi;colon']) {
      const r = await t.request('GET', '/healthz', { token: null, headers: { 'x-request-id': bad } });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
  });
});

describe('security headers', () => {
  it('nosniff and no-referrer on every response; no-store on authenticated responses and the login response', async () => {
    const cases = [
      await t.request('GET', '/healthz', { token: null }),
      await t.request('GET', '/no/such/path', { token: null }),
      await t.request('GET', '/api/v1/collections'),
      await t.request('GET', '/api/v1/collections', { token: null }),
      await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: 'admin', password: ADMIN_PASSWORD } }),
    ];
    for (const r of cases) {
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('referrer-policy')).toBe('no-referrer');
      expect(r.headers.get('content-security-policy')).toBe("default-src 'none'; frame-ancestors 'none'");
    }
    expect(cases[0]!.headers.get('cache-control')).toBeNull();
    expect(cases[2]!.status).toBe(200);
    expect(cases[2]!.headers.get('cache-control')).toBe('no-store');
    expect(cases[4]!.status).toBe(200);
    expect(cases[4]!.headers.get('cache-control')).toBe('no-store');
  });

  it('/docs and its assets carry a CSP that admits only their own scripts (the page has no inline script)', async () => {
    const page = await t.request('GET', '/docs', { token: null });
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-eval');
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
    expect(page.text).not.toMatch(/<script>(?!<\/script>)|<script(?![^>]*\bsrc=)[^>]*>/);
    for (const file of ['swagger-ui-bundle.js', 'init.js', 'swagger-ui.css']) {
      const asset = await t.app.fetch(new Request(`http://test.local/docs/assets/${file}`));
      expect(asset.status).toBe(200);
      expect(asset.headers.get('x-content-type-options')).toBe('nosniff');
      expect(asset.headers.get('content-security-policy')).toBe(csp);
    }
  });
});
