// Secrets go only where an administrator approved them (issue: a collection manager could send the
// administrators' secrets to a URL of their choice). The attack is tried as a principal who manages
// one collection and nothing else, against real peers: two local HTTPS servers (the approved one
// and the attacker's), Redis and RabbitMQ behind TLS proxies, and an SMTP server with implicit TLS.
// Remote targets: a secret alias is sent only to the origins approved beside its value, checked
// when the target is written and on every rendered URL before the secret is read. Event sinks: a
// subscription's routing must be listed in the sink's config.allowed_routing unless an unscoped
// administrator set it, checked when written and by the delivery worker before every send.
// Nothing reaches the attacker's peer, and no secret value appears in responses, stored rows,
// events or logs.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import amqplib, { type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import { Redis } from 'ioredis';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { principalWith } from './class-fixtures.ts';
import { createCollection, createSink, deliveriesOf, fanOutAll } from './event-fixtures.ts';
import { selfSignedCert, startPeer, type Peer, type SelfSignedCert } from './tls-fixtures.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { runDeliveryOnce } from '../src/workers/event-delivery.ts';

let good: Peer; // the destination an administrator approved
let evil: Peer; // the attacker's server
let proxyCert: SelfSignedCert;
let dir: string;
let t: TestApp;
const logs: string[] = [];
const servers: TlsServer[] = [];
const sockets = new Set<Socket>();

const RT_ALIAS = `RTSEC_${process.pid}_${Date.now()}`;
const RT_SECRET = `rt-secret-${uniq()}`;
const LATE_ALIAS = `RTLATE_${process.pid}_${Date.now()}`;
const LATE_SECRET = `rt-late-${uniq()}`;
const SINK_ALIAS = `SKSEC_${process.pid}_${Date.now()}`;
const SINK_SECRET = `sink-secret-${uniq()}`;
const HEADER_SECRET = `static-header-${uniq()}`;
const RABBIT_ALIAS = `SKRABBIT_${process.pid}_${Date.now()}`;
const REDIS_ALIAS = `SKREDIS_${process.pid}_${Date.now()}`;
const SMTP_ALIAS = `SKSMTP_${process.pid}_${Date.now()}`;
const REDIS_USER = uniq('svc-dest-user');
const REDIS_PASSWORD = `redis-secret-${uniq()}`;
const SMTP_PASSWORD = `smtp-secret-${uniq()}`;
const SECRETS = [RT_SECRET, LATE_SECRET, SINK_SECRET, REDIS_PASSWORD, SMTP_PASSWORD];
const ENV: Record<string, string> = {};

function setEnv(name: string, value: string): void {
  ENV[name] = value;
  process.env[name] = value;
}

const goodOrigin = () => `https://localhost:${good.port}`;
const evilUrl = (path = '/steal') => `https://127.0.0.1:${evil.port}${path}`;

/** A TLS-terminating proxy on 127.0.0.1 in front of a local plaintext port. */
async function tlsProxy(upstreamPort: number): Promise<number> {
  const server = createTlsServer({ key: proxyCert.key, cert: proxyCert.cert }, (client) => {
    const upstream: Socket = netConnect(upstreamPort, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  servers.push(server);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok((server.address() as AddressInfo).port)));
}

beforeAll(async () => {
  good = await startPeer({ prefix: 'svc-dest-good-' });
  evil = await startPeer({ prefix: 'svc-dest-evil-' });
  proxyCert = selfSignedCert('svc-dest-proxy-');
  dir = mkdtempSync(join(tmpdir(), 'svc-dest-'));
  const ca = join(dir, 'ca.pem');
  writeFileSync(ca, [good.caFile, evil.caFile, proxyCert.caFile].map((f) => readFileSync(f, 'utf8')).join('\n'));

  setEnv(`SVC_REMOTE_TARGET_SECRET_${RT_ALIAS}`, RT_SECRET);
  setEnv(`SVC_REMOTE_TARGET_ORIGINS_${RT_ALIAS}`, `${goodOrigin()}, https://api.example.com`);
  setEnv(`SVC_REMOTE_TARGET_SECRET_${LATE_ALIAS}`, LATE_SECRET);
  setEnv(`SVC_EVENT_SINK_SECRET_${SINK_ALIAS}`, SINK_SECRET);
  setEnv(`SVC_EVENT_SINK_SECRET_${RABBIT_ALIAS}`, 'guest');
  setEnv(`SVC_EVENT_SINK_SECRET_${REDIS_ALIAS}`, REDIS_PASSWORD);
  setEnv(`SVC_EVENT_SINK_SECRET_${SMTP_ALIAS}`, SMTP_PASSWORD);

  t = await startTestApp({
    SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: true,
    SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: true,
    SVC_OUTBOUND_CA_FILE: ca,
    SVC_EVENT_DELIVERY_MAX_ATTEMPTS: 3,
  });
  // every log line of the requests and workers below, to check that no secret is logged
  t.deps.log = pino({ level: 'trace' }, { write: (line: string) => void logs.push(line) });
});

afterAll(async () => {
  for (const name of Object.keys(ENV)) delete process.env[name];
  for (const s of sockets) s.destroy();
  await Promise.all(servers.map((s) => new Promise<void>((ok) => s.close(() => ok()))));
  await Promise.all([good?.close(), evil?.close(), t?.close()]);
  if (proxyCert) rmSync(proxyCert.dir, { recursive: true, force: true });
  if (dir) rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  good.seen.length = 0;
  evil.seen.length = 0;
});

/** No secret value in any stored row that could reach a reader, nor in the logs so far. */
async function expectNoSecretStored(): Promise<void> {
  expect(logs.length, 'the request and worker logs are captured').toBeGreaterThan(0);
  for (const secret of SECRETS) {
    const like = `%${secret}%`;
    const [row] = await t.deps.sql<{ n: number }[]>`
      select (select count(*) from remote_call_results r where to_jsonb(r)::text like ${like})
        + (select count(*) from tasks k where to_jsonb(k)::text like ${like})
        + (select count(*) from task_events e where to_jsonb(e)::text like ${like})
        + (select count(*) from events e where to_jsonb(e)::text like ${like})
        + (select count(*) from event_deliveries d where to_jsonb(d)::text like ${like})
        + (select count(*) from remote_targets r where to_jsonb(r)::text like ${like})
        + (select count(*) from event_sinks k where to_jsonb(k)::text like ${like})
        + (select count(*) from event_subscriptions s where to_jsonb(s)::text like ${like}) as n`;
    expect(Number(row!.n), 'a secret value was stored').toBe(0);
    expect(
      logs.filter((l) => l.includes(secret)),
      'a secret value was logged',
    ).toEqual([]);
  }
}

function expectNoSecretIn(text: string): void {
  for (const secret of SECRETS) expect(text).not.toContain(secret);
}

// ---- remote targets ---------------------------------------------------------------------------

describe('remote targets: a secret goes only to the origins approved for its alias', () => {
  let col: number;
  let manager: { id: number; token: string };

  beforeAll(async () => {
    col = await createCollection(t);
    manager = await principalWith(t, [
      [col, ['ReadCollection', 'ReadRemoteTarget', 'CreateRemoteTarget', 'UpdateRemoteTarget', 'ExecuteRemoteTarget']],
    ]);
  });

  const target = (overrides: Record<string, unknown> = {}) => ({
    collection_id: col,
    name: uniq('rt'),
    description: '',
    method: 'get',
    url_template: `${goodOrigin()}/x`,
    allowed_subject_types: ['collection'],
    auth_config: { type: 'bearer_secret', secret: RT_ALIAS },
    ...overrides,
  });

  async function invokeAndRun(targetId: number, parameters: Record<string, unknown> = {}, token = manager.token) {
    const inv = await t.request('POST', `/api/v1/remote-targets/${targetId}/invoke`, {
      token,
      body: { subject: { type: 'collection', id: col }, parameters },
    });
    expect(inv.status, inv.text).toBe(202);
    const taskId = (inv.body as { id: number }).id;
    expect((await runTaskOnce(t.deps, { taskIds: [taskId] }))?.id).toBe(taskId);
    const res = await t.request('GET', `/api/v1/tasks/${taskId}`, { token });
    expect(res.status).toBe(200);
    expectNoSecretIn(res.text);
    return res.body as { status: string; details: { error?: { reason: string; message: string } } };
  }

  it('createRemoteTarget 400: a manager (and an admin) pointing an approved secret at another origin, by bearer or API-key header', async () => {
    for (const auth of [
      { type: 'bearer_secret', secret: RT_ALIAS },
      { type: 'api_key_header', header: 'X-Api-Key', secret: RT_ALIAS },
    ]) {
      for (const token of [manager.token, t.adminToken]) {
        const res = await t.request('POST', '/api/v1/remote-targets', {
          token,
          body: target({ url_template: evilUrl(), auth_config: auth }),
        });
        expect(res.status, res.text).toBe(400);
        const details = (res.body as { details: { path: string; message: string }[] }).details;
        expect(details.map((d) => d.path)).toEqual(['body.url_template']);
        expect(details[0]!.message).toContain(RT_ALIAS);
        expectNoSecretIn(res.text);
      }
    }
    // the same URL without a secret is fine: only secrets are bound to origins
    const plain = await t.request('POST', '/api/v1/remote-targets', {
      token: manager.token,
      body: target({ url_template: evilUrl(), auth_config: { type: 'none' } }),
    });
    expect(plain.status, plain.text).toBe(201);
  });

  it('createRemoteTarget 400: with a secret, no template tag may decide scheme, host or port', async () => {
    for (const url_template of [
      'https://{{ parameters.host }}/x',
      `https://localhost:{{ parameters.port }}/x`,
      `${goodOrigin()}{{ parameters.rest }}`,
      `{{ parameters.url }}`,
    ]) {
      const res = await t.request('POST', '/api/v1/remote-targets', { token: manager.token, body: target({ url_template }) });
      expect(res.status, `${url_template} ${res.text}`).toBe(400);
      expect((res.body as { details: { path: string; message: string }[] }).details[0]!.message).toMatch(/literal https origin/);
    }
    const templatedPath = await t.request('POST', '/api/v1/remote-targets', {
      token: manager.token,
      body: target({ url_template: `${goodOrigin()}/{{ parameters.rest }}?q={{ subject.id }}` }),
    });
    expect(templatedPath.status, templatedPath.text).toBe(201);
    const noSecret = await t.request('POST', '/api/v1/remote-targets', {
      token: manager.token,
      body: target({ url_template: 'https://{{ parameters.host }}/x', auth_config: { type: 'none' } }),
    });
    expect(noSecret.status, noSecret.text).toBe(201);
  });

  it('updateRemoteTarget 400: re-pointing an approved target at another origin; the target is unchanged', async () => {
    const created = await t.request('POST', '/api/v1/remote-targets', { token: manager.token, body: target() });
    expect(created.status, created.text).toBe(201);
    const id = (created.body as { id: number }).id;
    const res = await t.request('PATCH', `/api/v1/remote-targets/${id}`, { token: manager.token, body: { url_template: evilUrl() } });
    expect(res.status, res.text).toBe(400);
    const got = await t.request('GET', `/api/v1/remote-targets/${id}`, { token: manager.token });
    expect(got.body).toMatchObject({ url_template: `${goodOrigin()}/x`, revision: 1 });
    // adding a secret to a target of another origin is the same attack
    const plain = await t.request('POST', '/api/v1/remote-targets', {
      token: manager.token,
      body: target({ url_template: evilUrl(), auth_config: { type: 'none' } }),
    });
    const addSecret = await t.request('PATCH', `/api/v1/remote-targets/${(plain.body as { id: number }).id}`, {
      token: manager.token,
      body: { auth_config: { type: 'bearer_secret', secret: RT_ALIAS } },
    });
    expect(addSecret.status, addSecret.text).toBe(400);
  });

  it('the approved path: the call carries the secret to the approved origin; nothing leaks', async () => {
    const created = await t.request('POST', '/api/v1/remote-targets', {
      token: manager.token,
      body: target({ url_template: `${goodOrigin()}/in/{{ subject.id }}` }),
    });
    expect(created.status, created.text).toBe(201);
    const task = await invokeAndRun((created.body as { id: number }).id);
    expect(task.status).toBe('succeeded');
    expect(good.seen).toHaveLength(1);
    expect(good.seen[0]!.url).toBe(`/in/${col}`);
    expect(good.seen[0]!.headers.authorization).toBe(`Bearer ${RT_SECRET}`);
    expect(evil.seen).toHaveLength(0);
    await expectNoSecretStored();
  });

  it('send time: a target written while the alias had no known approvals is refused (blocked_destination), nothing sent', async () => {
    // this process cannot see approvals for LATE_ALIAS (e.g. they live only on worker hosts), so
    // the write is accepted; the worker finds no approved origin and sends nothing
    const created = await t.request('POST', '/api/v1/remote-targets', {
      token: manager.token,
      body: target({ url_template: evilUrl(), auth_config: { type: 'bearer_secret', secret: LATE_ALIAS } }),
    });
    expect(created.status, created.text).toBe(201);
    const task = await invokeAndRun((created.body as { id: number }).id);
    expect(task.status).toBe('failed');
    expect(task.details.error).toEqual({
      reason: 'blocked_destination',
      message: `no destination origin is approved for the secret alias ${LATE_ALIAS}`,
    });
    expect(evil.seen).toHaveLength(0);
    await expectNoSecretStored();
  });

  it('send time: per-call rendered URLs of a stored row go only to approved origins; approvals withdrawn later are honoured', async () => {
    // a row as the service stored it before origins were bound to secrets: the host is templated
    const [row] = await t.deps.sql<{ id: number }[]>`
      insert into remote_targets (collection_id, name, description, method, url_template, headers_template, auth_config,
        allowed_subject_types, timeout_ms, enabled)
      values (${col}, ${uniq('legacy')}, '', 'get', 'https://{{ parameters.host }}/steal', '{}'::jsonb,
        ${t.deps.sql.json({ type: 'bearer_secret', secret: RT_ALIAS })}, ${['collection']}::text[], 5000, true)
      returning id`;
    const refused = await invokeAndRun(row!.id, { host: `127.0.0.1:${evil.port}` });
    expect(refused.status).toBe('failed');
    expect(refused.details.error).toEqual({
      reason: 'blocked_destination',
      message: `the destination origin is not approved for the secret alias ${RT_ALIAS}`,
    });
    expect(evil.seen).toHaveLength(0);

    const approved = await invokeAndRun(row!.id, { host: `localhost:${good.port}` });
    expect(approved.status).toBe('succeeded');
    expect(good.seen.map((s) => s.headers.authorization)).toEqual([`Bearer ${RT_SECRET}`]);

    // the operator withdraws the approval: the next call of the same target sends nothing
    const before = process.env[`SVC_REMOTE_TARGET_ORIGINS_${RT_ALIAS}`]!;
    process.env[`SVC_REMOTE_TARGET_ORIGINS_${RT_ALIAS}`] = 'https://api.example.com';
    try {
      const withdrawn = await invokeAndRun(row!.id, { host: `localhost:${good.port}` });
      expect(withdrawn.details.error?.reason).toBe('blocked_destination');
      expect(good.seen).toHaveLength(1);
    } finally {
      process.env[`SVC_REMOTE_TARGET_ORIGINS_${RT_ALIAS}`] = before;
    }
    await expectNoSecretStored();
  });

  it('file secret source: <alias>.origins beside the secret is the approval list', async () => {
    const root = join(dir, 'secrets');
    mkdirSync(join(root, 'remote-target'), { recursive: true });
    writeFileSync(join(root, 'remote-target', 'file_rt'), `${RT_SECRET}\n`);
    writeFileSync(join(root, 'remote-target', 'file_rt.origins'), `# approved for file_rt\n${goodOrigin()}/\n`);
    const fileApp = await startTestApp({
      SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: true,
      SVC_OUTBOUND_CA_FILE: join(dir, 'ca.pem'),
      SVC_SECRET_SOURCE: 'file',
      SVC_SECRET_FILE_ROOT: root,
    });
    try {
      const auth = { type: 'bearer_secret', secret: 'file_rt' };
      const refused = await fileApp.request('POST', '/api/v1/remote-targets', {
        token: manager.token,
        body: target({ url_template: evilUrl(), auth_config: auth }),
      });
      expect(refused.status, refused.text).toBe(400);
      const ok = await fileApp.request('POST', '/api/v1/remote-targets', { token: manager.token, body: target({ auth_config: auth }) });
      expect(ok.status, ok.text).toBe(201);
    } finally {
      await fileApp.close();
    }
  });
});

// ---- event sinks: shared steps ----------------------------------------------------------------

interface Scene {
  col: number;
  manager: { id: number; token: string };
}

async function scene(): Promise<Scene> {
  const col = await createCollection(t);
  const manager = await principalWith(t, [[col, ['ReadCollection', 'ManageEventSubscription']]]);
  return { col, manager };
}

function subscribe(s: Scene, sinkId: number, routing: Record<string, unknown>, token = s.manager.token) {
  return t.request('POST', `/api/v1/collections/${s.col}/event-subscriptions`, {
    token,
    body: { sink_id: sinkId, name: uniq('sub'), entity_types: ['collection'], actions: ['updated'], routing },
  });
}

function expectNotAllowed(res: { status: number; text: string; body: unknown }, ...paths: string[]): void {
  expect(res.status, res.text).toBe(403);
  const body = res.body as { reason: string; details: { path: string }[] };
  expect(body.reason).toBe('destination_not_allowed');
  expect(body.details.map((d) => d.path)).toEqual(paths);
  expectNoSecretIn(res.text);
}

/** A collection.updated event of the scene's collection, fanned out and delivered; the deliveries of `subId`. */
async function deliver(s: Scene, sinkId: number, subId: number) {
  const res = await t.request('PATCH', `/api/v1/collections/${s.col}`, { body: { description: uniq('d') } });
  expect(res.status).toBe(200);
  await fanOutAll(t);
  while ((await runDeliveryOnce(t.deps, { sinkIds: [sinkId] })) > 0) {
    // until every due row of the sink is done
  }
  const rows = await deliveriesOf(t, subId);
  for (const r of rows) expectNoSecretIn(r.last_error ?? '');
  return rows;
}

/**
 * A manager's subscription row changed directly in the database, as rows written before the
 * destination rule may look: routing that names another destination, and no administrator approval
 * (the manager's own writes never carry one).
 */
async function forgeRouting(subId: number, routing: Record<string, unknown>): Promise<void> {
  await t.deps.sql`update event_subscriptions set routing = ${t.deps.sql.json(routing as never)} where id = ${subId}`;
}

function idOf(res: { status: number; text: string; body: unknown }): number {
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

// ---- webhook ----------------------------------------------------------------------------------

describe('webhook sinks: routing.url only where the sink allows it or an unscoped administrator set it', () => {
  const secretSink = (config: Record<string, unknown> = {}) =>
    createSink(t, { secret_ref: SINK_ALIAS, config: { headers: { 'X-Admin-Key': HEADER_SECRET }, ...config } });

  it('write time: a manager cannot point an admin sink at their own URL (create 403, update 403); an admin can', async () => {
    const s = await scene();
    const sink = (await secretSink()).id;
    expectNotAllowed(await subscribe(s, sink, { url: evilUrl() }), 'body.routing.url');

    // the admin's own subscription in the manager's collection, re-pointed by the manager
    const adminSub = await subscribe(s, sink, { url: `${goodOrigin()}/hook` }, t.adminToken);
    const subId = idOf(adminSub);
    expect(adminSub.body).toMatchObject({ routing_admin_approved: true });
    const repoint = await t.request('PATCH', `/api/v1/collections/${s.col}/event-subscriptions/${subId}`, {
      token: s.manager.token,
      body: { routing: { url: evilUrl() } },
    });
    expectNotAllowed(repoint, 'body.routing.url');
    // other members stay the manager's to change, and the administrator's approval stays
    const renamed = await t.request('PATCH', `/api/v1/collections/${s.col}/event-subscriptions/${subId}`, {
      token: s.manager.token,
      body: { description: 'renamed by the manager' },
    });
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.body).toMatchObject({ routing: { url: `${goodOrigin()}/hook` }, routing_admin_approved: true });
    const [row] = await deliver(s, sink, subId);
    expect(row).toMatchObject({ status: 'succeeded' });
    expect(good.seen.map((r) => r.headers.authorization)).toEqual([`Bearer ${SINK_SECRET}`]);
    expect(evil.seen).toHaveLength(0);
  });

  it('write time: config.allowed_routing.urls lists prefixes; outside them 403, inside 201 and delivered with the secret', async () => {
    const s = await scene();
    const sink = (await secretSink({ allowed_routing: { urls: [`${goodOrigin()}/hooks/`] } })).id;
    expectNotAllowed(await subscribe(s, sink, { url: evilUrl('/hooks/x') }), 'body.routing.url');
    expectNotAllowed(await subscribe(s, sink, { url: `${goodOrigin()}/other` }), 'body.routing.url');
    expectNotAllowed(await subscribe(s, sink, { url: `${goodOrigin()}/hooks/../admin` }), 'body.routing.url');
    const subId = idOf(await subscribe(s, sink, { url: `${goodOrigin()}/hooks/team-a?x=1` }));
    const [row] = await deliver(s, sink, subId);
    expect(row).toMatchObject({ status: 'succeeded' });
    expect(good.seen).toHaveLength(1);
    expect(good.seen[0]!.url).toBe('/hooks/team-a?x=1');
    expect(good.seen[0]!.headers.authorization).toBe(`Bearer ${SINK_SECRET}`);
    expect(good.seen[0]!.headers['x-admin-key']).toBe(HEADER_SECRET);
    await expectNoSecretStored();
  });

  it('send time: a list shortened after the subscription was written, or a row written before the rule, sends nothing (dead at once)', async () => {
    const s = await scene();
    // an allowance the administrator later withdraws
    const { id: sink, etag } = await secretSink({ allowed_routing: { urls: [`${goodOrigin()}/`, evilUrl('/')] } });
    const subId = idOf(await subscribe(s, sink, { url: evilUrl() }));
    const patch = await t.request('PATCH', `/api/v1/event-sinks/${sink}`, {
      headers: { 'if-match': etag },
      body: { config: { headers: { 'X-Admin-Key': HEADER_SECRET }, allowed_routing: { urls: [`${goodOrigin()}/`] } } },
    });
    expect(patch.status, patch.text).toBe(200);
    const [row] = await deliver(s, sink, subId);
    expect(row).toMatchObject({ status: 'dead', attempts: 1 });
    expect(row!.last_error).toMatch(/routing\.url is not an approved destination/);
    expect(row!.last_error).not.toContain(String(evil.port));

    // a subscription row that names the attacker without any approval (written before this rule)
    const legacy = idOf(await subscribe(s, sink, { url: `${goodOrigin()}/in` }));
    await forgeRouting(legacy, { url: evilUrl('/legacy') });
    const rows = await deliver(s, sink, legacy);
    expect(rows.map((r) => r.status)).toEqual(['dead']);
    expect(evil.seen).toHaveLength(0);
    await expectNoSecretStored();
  });

  it('a manager may attach a sink whose destination the administrator fixed (url_secret_ref) with empty routing', async () => {
    setEnv(`SVC_EVENT_SINK_SECRET_${SINK_ALIAS}_URL`, `${goodOrigin()}/fixed`);
    const s = await scene();
    const sink = (await createSink(t, { secret_ref: SINK_ALIAS, config: { url_secret_ref: `${SINK_ALIAS}_URL` } })).id;
    const subId = idOf(await subscribe(s, sink, {}));
    const [row] = await deliver(s, sink, subId);
    expect(row).toMatchObject({ status: 'succeeded' });
    expect(good.seen.map((r) => [r.url, r.headers.authorization])).toEqual([['/fixed', `Bearer ${SINK_SECRET}`]]);
  });

  it('allowed_routing is a config member of webhook, redis_stream and email sinks, validated per kind (201 / 400)', async () => {
    for (const [kind, config] of [
      ['webhook', { allowed_routing: { urls: ['http://plain.example/'] } }],
      ['webhook', { allowed_routing: { urls: ['https://user:pw@h.example/'] } }],
      ['webhook', { allowed_routing: { streams: ['x'] } }],
      ['webhook', { allowed_routing: { urls: 'https://h.example/' } }],
      ['amqp', { uri: 'amqps://mq.example.com/', exchange: 'e', allowed_routing: {} }],
      ['redis_stream', { uri: 'rediss://r.example.com/0', allowed_routing: { streams: [''] } }],
      [
        'email',
        {
          uri: 'smtps://m.example.com',
          from: 'a@example.com',
          subject_template: 's',
          body_template: 'b',
          allowed_routing: { addresses: ['nobody'] },
        },
      ],
    ] as const) {
      const res = await t.request('POST', '/api/v1/event-sinks', { body: { name: uniq('sink'), kind, config } });
      expect(res.status, `${kind} ${JSON.stringify(config)} ${res.text}`).toBe(400);
    }
    for (const [kind, config] of [
      ['webhook', { allowed_routing: { urls: ['https://hooks.example.com/inventory/', 'https://other.example.com:8443'] } }],
      ['redis_stream', { uri: 'rediss://r.example.com/0', allowed_routing: { streams: ['inventory.*', 'audit'] } }],
      [
        'email',
        {
          uri: 'smtps://m.example.com',
          from: 'a@example.com',
          subject_template: 's',
          body_template: 'b',
          allowed_routing: { addresses: ['@example.com', 'ops@partner.example'] },
        },
      ],
    ] as const) {
      const res = await t.request('POST', '/api/v1/event-sinks', { body: { name: uniq('sink'), kind, config } });
      expect(res.status, `${kind} ${res.text}`).toBe(201);
      expect((res.body as { config: unknown }).config).toEqual(config);
    }
  });
});

// ---- amqp -------------------------------------------------------------------------------------

describe('amqp sinks: the administrator fixes the exchange; subscriptions route nowhere else', () => {
  let rabbit: ChannelModel;
  let ch: Channel;
  let proxyPort: number;
  let exchange: string;
  const received: ConsumeMessage[] = [];

  beforeAll(async () => {
    rabbit = await amqplib.connect('amqp://guest:guest@127.0.0.1:5672');
    ch = await rabbit.createChannel();
    proxyPort = await tlsProxy(5672);
    exchange = uniq('svc-dest-x');
    await ch.assertExchange(exchange, 'topic', { durable: false });
    const q = await ch.assertQueue('', { exclusive: true, autoDelete: true });
    await ch.bindQueue(q.queue, exchange, '#');
    await ch.consume(q.queue, (m) => void (m && received.push(m)), { noAck: true });
  });

  afterAll(async () => {
    await ch?.deleteExchange(exchange).catch(() => {});
    await rabbit?.close();
  });

  it('write: routing members are refused (400); empty routing is allowed. send: a forged routing is dead, nothing published', async () => {
    const s = await scene();
    const sink = (
      await createSink(t, {
        kind: 'amqp',
        secret_ref: RABBIT_ALIAS,
        config: { uri: `amqps://guest:{secret}@localhost:${proxyPort}/`, exchange, durable: false },
      })
    ).id;
    const refused = await subscribe(s, sink, { exchange: 'attacker' });
    expect(refused.status, refused.text).toBe(400);
    const subId = idOf(await subscribe(s, sink, {}));
    const [ok] = await deliver(s, sink, subId);
    expect(ok).toMatchObject({ status: 'succeeded' });
    // the confirmed message reaches the consumer shortly after the confirm
    for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(received.map((m) => m.properties.messageId)).toEqual([ok!.event_id]);

    await forgeRouting(subId, { exchange: 'attacker' });
    const rows = await deliver(s, sink, subId);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'dead']);
    expect(rows[1]!.last_error).toMatch(/routing\.exchange is not an approved destination/);
    // refused before any connection to the broker: nothing more was published
    expect(received).toHaveLength(1);
    await expectNoSecretStored();
  });
});

// ---- redis_stream -----------------------------------------------------------------------------

describe('redis_stream sinks: routing.stream only as allowed', () => {
  let redis: Redis;
  let proxyPort: number;
  const keys: string[] = [];

  beforeAll(async () => {
    redis = new Redis({ host: '127.0.0.1', port: 6379 });
    proxyPort = await tlsProxy(6379);
    await redis.call('ACL', 'SETUSER', REDIS_USER, 'on', `>${REDIS_PASSWORD}`, '~*', '+@all');
  });

  afterAll(async () => {
    if (keys.length) await redis.del(...keys);
    await redis.call('ACL', 'DELUSER', REDIS_USER);
    redis.disconnect();
  });

  const key = (prefix: string) => {
    const k = uniq(prefix);
    keys.push(k);
    return k;
  };

  it('write: another stream is 403 without or outside allowed_routing.streams; send: a forged or withdrawn stream gets nothing', async () => {
    const s = await scene();
    const prefix = uniq('svc-dest-ok');
    const { id: sink, etag } = await createSink(t, {
      kind: 'redis_stream',
      secret_ref: REDIS_ALIAS,
      config: { uri: `rediss://${REDIS_USER}:{secret}@localhost:${proxyPort}/0` },
    });
    const victim = key('svc-dest-victim');
    expectNotAllowed(await subscribe(s, sink, { stream: victim }), 'body.routing.stream');

    const patch = await t.request('PATCH', `/api/v1/event-sinks/${sink}`, {
      headers: { 'if-match': etag },
      body: { config: { uri: `rediss://${REDIS_USER}:{secret}@localhost:${proxyPort}/0`, allowed_routing: { streams: [`${prefix}-*`] } } },
    });
    expect(patch.status, patch.text).toBe(200);
    expectNotAllowed(await subscribe(s, sink, { stream: victim }), 'body.routing.stream');
    const mine = key(`${prefix}-`);
    const subId = idOf(await subscribe(s, sink, { stream: mine }));
    const [ok] = await deliver(s, sink, subId);
    expect(ok).toMatchObject({ status: 'succeeded' });
    expect(await redis.xlen(mine)).toBe(1);

    await forgeRouting(subId, { stream: victim });
    const rows = await deliver(s, sink, subId);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'dead']);
    expect(await redis.exists(victim)).toBe(0);
    await expectNoSecretStored();
  });
});

// ---- email ------------------------------------------------------------------------------------

describe('email sinks: recipients, cc and bcc only as allowed', () => {
  let port: number;
  const rcpts: string[][] = [];

  beforeAll(async () => {
    const server = new SMTPServer({
      secure: true,
      key: proxyCert.key,
      cert: proxyCert.cert,
      authMethods: ['PLAIN', 'LOGIN'],
      logger: false,
      onAuth(auth, _session, cb) {
        if (auth.username === 'mailer' && auth.password === SMTP_PASSWORD) cb(null, { user: 'mailer' });
        else cb(new Error('Invalid username or password'));
      },
      onData(stream, session, cb) {
        stream.on('data', () => {});
        stream.on('end', () => {
          rcpts.push(session.envelope.rcptTo.map((r) => r.address));
          cb();
        });
      },
    });
    server.on('error', () => {});
    const tls = server.server as unknown as TlsServer;
    servers.push(tls);
    port = await new Promise<number>((ok) => tls.listen(0, '127.0.0.1', () => ok((tls.address() as AddressInfo).port)));
  });

  it('write: an outside address in recipients, cc or bcc is 403; send: a forged bcc gets nothing and the mail is not sent', async () => {
    const s = await scene();
    const config = {
      uri: `smtps://mailer:{secret}@localhost:${port}`,
      from: 'Inventory <inventory@corp.example>',
      subject_template: '{{ summary }}',
      body_template: '{{ summary }}',
    };
    const { id: sink, etag } = await createSink(t, { kind: 'email', secret_ref: SMTP_ALIAS, config });
    expectNotAllowed(await subscribe(s, sink, { recipients: ['attacker@evil.example'] }), 'body.routing.recipients.0');

    const patch = await t.request('PATCH', `/api/v1/event-sinks/${sink}`, {
      headers: { 'if-match': etag },
      body: { config: { ...config, allowed_routing: { addresses: ['@corp.example', 'auditor@partner.example'] } } },
    });
    expect(patch.status, patch.text).toBe(200);
    expectNotAllowed(
      await subscribe(s, sink, {
        to: ['ops@corp.example'],
        cc: ['Auditor <auditor@partner.example>', 'x@evil.example'],
        bcc: ['y@corp.example.evil'],
      }),
      'body.routing.cc.1',
      'body.routing.bcc.0',
    );
    const subId = idOf(await subscribe(s, sink, { recipients: ['Ops <OPS@corp.example>'], cc: ['auditor@partner.example'] }));
    const [ok] = await deliver(s, sink, subId);
    expect(ok).toMatchObject({ status: 'succeeded' });
    expect(rcpts).toEqual([['OPS@corp.example', 'auditor@partner.example']]);

    await forgeRouting(subId, { recipients: ['ops@corp.example'], bcc: ['attacker@evil.example'] });
    const rows = await deliver(s, sink, subId);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'dead']);
    expect(rows[1]!.last_error).toMatch(/routing\.bcc\.0 is not an approved destination/);
    expect(rcpts).toHaveLength(1);
    await expectNoSecretStored();
  });
});
