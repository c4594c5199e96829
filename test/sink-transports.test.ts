// The amqp, redis_stream and email sink transports against real peers: RabbitMQ and Redis on the
// machine (plaintext, reached through a TLS-terminating proxy started here with a certificate
// generated at test time) and an SMTP server with implicit TLS. Each test asserts what arrived.
import { randomBytes, randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer as createNetServer, connect as netConnect, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import amqplib, { type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import { Redis } from 'ioredis';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Config } from '../src/config.ts';
import { ApiError } from '../src/domain/errors.ts';
import { amqpTransport } from '../src/sinks/amqp.ts';
import { emailTransport } from '../src/sinks/email.ts';
import { redisStreamTransport } from '../src/sinks/redis-stream.ts';
import type { EventEnvelope, SendInput, SendResult, SinkDefinition, SinkKind, SinkTransport } from '../src/sinks/types.ts';
import { testConfig, uniq } from './helpers.ts';
import { selfSignedCert } from './tls-fixtures.ts';

const RABBIT_URL = 'amqp://guest:guest@127.0.0.1:5672';
const REDIS = { host: '127.0.0.1', port: 6379 };

let dir: string;
let caFile: string;
let key: Buffer;
let cert: Buffer;
let config: Config;
const servers: (NetServer | TlsServer)[] = [];
const sockets = new Set<Socket>();

function listen(server: NetServer | TlsServer): Promise<number> {
  servers.push(server);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok((server.address() as AddressInfo).port)));
}

/** Connections each TLS proxy accepted, and those still open, by the proxy's port. */
const proxied = new Map<number, { accepted: number; open: Set<Socket> }>();

/** A TLS-terminating proxy in front of a local plaintext port. */
async function tlsProxy(upstreamPort: number): Promise<number> {
  const seen = { accepted: 0, open: new Set<Socket>() };
  const server = createTlsServer({ key, cert }, (client) => {
    seen.accepted++;
    seen.open.add(client);
    client.on('close', () => seen.open.delete(client));
    const upstream: Socket = netConnect(upstreamPort, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const port = await listen(server);
  proxied.set(port, seen);
  return port;
}

/** A port that accepts connections and never answers. */
function silentPort(): Promise<number> {
  return listen(createNetServer((s) => s.on('error', () => {})));
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createNetServer();
  const port = await new Promise<number>((ok) => s.listen(0, '127.0.0.1', () => ok((s.address() as AddressInfo).port)));
  await new Promise<void>((ok) => s.close(() => ok()));
  return port;
}

beforeAll(() => {
  ({ dir, caFile, key, cert } = selfSignedCert('svc-sinks-'));
  config = testConfig({ SVC_OUTBOUND_CA_FILE: caFile, SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: true });
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await Promise.all(servers.map((s) => new Promise<void>((ok) => s.close(() => ok()))));
  rmSync(dir, { recursive: true, force: true });
});

function envelope(overrides: Partial<EventEnvelope> = {}): EventEnvelope {
  return {
    id: Math.floor(Math.random() * 1e9),
    event_id: randomUUID(),
    occurred_at: new Date().toISOString(),
    entity_type: 'object',
    entity_id: 42,
    entity_name: uniq('widget'),
    collection_id: 7,
    action: 'created',
    actor_kind: 'user',
    actor_user_id: 3,
    initiator_user_id: null,
    task_id: null,
    provenance: {
      actor: { kind: 'user', principal: { id: 3, name: 'alice' } },
      initiator: { principal_id: null, name: null },
      task_id: null,
    },
    request_id: randomUUID(),
    correlation_id: null,
    summary: 'object created',
    before: null,
    after: { name: 'w' },
    before_revision: null,
    after_revision: 1,
    metadata: {},
    schema_version: 2,
    ...overrides,
  };
}

function sink(kind: SinkKind, cfg: Record<string, unknown>, secretRef: string | null = null): SinkDefinition {
  return { id: 1, name: uniq('sink'), kind, config: cfg, secret_ref: secretRef };
}

function send(
  transport: SinkTransport,
  s: SinkDefinition,
  routing: Record<string, unknown>,
  opts: Partial<Omit<SendInput, 'sink' | 'routing'>> = {},
): Promise<SendResult> {
  return transport.send({
    sink: s,
    routing,
    envelope: opts.envelope ?? envelope(),
    purpose: opts.purpose ?? 'event',
    deliveryId: opts.deliveryId ?? 99,
    secret: opts.secret ?? null,
    urlSecret: null,
    timeoutMs: opts.timeoutMs ?? 5000,
    signal: opts.signal ?? new AbortController().signal,
    config: opts.config ?? config,
  });
}

function expectSafeError(result: SendResult, ...forbidden: string[]): string {
  expect(result.outcome === 'retry' || result.outcome === 'dead').toBe(true);
  const error = (result as { error: string }).error;
  for (const f of forbidden) expect(error).not.toContain(f);
  expect(error).not.toMatch(/(amqps?|rediss?|smtps?):\/\/[\w{]/);
  return error;
}

// ---- shared URI rules -------------------------------------------------------------------------

describe('validateConfig uri rules (all three kinds)', () => {
  const cases: [SinkTransport, string, Record<string, unknown>][] = [
    [amqpTransport, 'amqps', { exchange: 'x' }],
    [redisStreamTransport, 'rediss', {}],
    [emailTransport, 'smtps', { from: 'a@example.com', subject_template: 's', body_template: 'b' }],
  ];
  it.each(cases)('%# accepts a TLS URI and rejects plaintext, literal credentials and placeholder misuse', (t, scheme, rest) => {
    const plain = scheme.slice(0, -1);
    const problems = (uri: unknown, secretRef: string | null = null) => t.validateConfig({ ...rest, uri }, secretRef);
    expect(problems(`${scheme}://mq.example.com:1234/`)).toEqual([]);
    expect(problems(`${scheme}://user:{secret}@mq.example.com/`, 'alias')).toEqual([]);
    expect(problems(`${scheme}://:{secret}@mq.example.com`, 'alias')).toEqual([]);
    const one = (uri: unknown, secretRef: string | null = null) => {
      const p = problems(uri, secretRef);
      expect(p).toHaveLength(1);
      expect(p[0]!.path).toBe('config.uri');
      return p[0]!.message;
    };
    expect(one(undefined)).toMatch(/required/);
    expect(one(`${plain}://mq.example.com/`)).toMatch(/TLS scheme/);
    expect(one('https://mq.example.com/')).toMatch(/scheme/);
    expect(one('not a uri')).toMatch(/whitespace|valid/);
    expect(one(`${scheme}://user:pw@mq.example.com/`)).toMatch(/literal credentials/);
    expect(one(`${scheme}://user@mq.example.com/`)).toMatch(/literal credentials/);
    expect(one(`${scheme}://user:{secret}@mq.example.com/`)).toMatch(/no secret_ref/);
    expect(one(`${scheme}://mq.example.com/`, 'alias')).toMatch(/\{secret\} exactly once/);
    expect(one(`${scheme}://{secret}@mq.example.com/`, 'alias')).toMatch(/password/);
    expect(one(`${scheme}://user:x{secret}@mq.example.com/`, 'alias')).toMatch(/whole password/);
    expect(one(`${scheme}://u:{secret}@h/{secret}`, 'alias')).toMatch(/exactly once/);
    expect(one(`${scheme}://mq.example.com/#frag`)).toMatch(/fragment/);
    expect(one(`${scheme}://mq.example.com/?password=x`)).toMatch(/query parameter/);
  });

  it('amqp: vhost path, numeric query parameters; redis: database path; email: no path', () => {
    expect(amqpTransport.validateConfig({ uri: 'amqps://h/%2Fprod?heartbeat=30', exchange: 'x' }, null)).toEqual([]);
    expect(amqpTransport.validateConfig({ uri: 'amqps://h/a/b', exchange: 'x' }, null)[0]!.message).toMatch(/virtual host/);
    expect(amqpTransport.validateConfig({ uri: 'amqps://h/?heartbeat=soon', exchange: 'x' }, null)[0]!.message).toMatch(/integer/);
    expect(redisStreamTransport.validateConfig({ uri: 'rediss://h/3' }, null)).toEqual([]);
    expect(redisStreamTransport.validateConfig({ uri: 'rediss://h/main' }, null)[0]!.message).toMatch(/database number/);
    expect(
      emailTransport.validateConfig({ uri: 'smtps://h/x', from: 'a@b.c', subject_template: 's', body_template: 'b' }, null)[0]!.message,
    ).toMatch(/path/);
  });
});

// ---- amqp -------------------------------------------------------------------------------------

describe('amqp transport', () => {
  let rabbit: ChannelModel;
  let ch: Channel;
  let proxyPort: number;
  const exchanges: string[] = [];

  beforeAll(async () => {
    rabbit = await amqplib.connect(RABBIT_URL);
    ch = await rabbit.createChannel();
    proxyPort = await tlsProxy(5672);
  });

  afterAll(async () => {
    for (const x of exchanges) await ch.deleteExchange(x).catch(() => {});
    await rabbit.close();
  });

  /** An exchange with an exclusive queue bound to '#', collecting what arrives. */
  async function boundExchange(
    type = 'topic',
    durable = true,
  ): Promise<{ exchange: string; received: ConsumeMessage[]; next(): Promise<ConsumeMessage> }> {
    const exchange = uniq('svc-test-x');
    exchanges.push(exchange);
    await ch.assertExchange(exchange, type, { durable });
    const q = await ch.assertQueue('', { exclusive: true, autoDelete: true });
    await ch.bindQueue(q.queue, exchange, '#');
    const received: ConsumeMessage[] = [];
    const waiters: ((m: ConsumeMessage) => void)[] = [];
    await ch.consume(
      q.queue,
      (m) => {
        if (!m) return;
        const w = waiters.shift();
        if (w) w(m);
        else received.push(m);
      },
      { noAck: true },
    );
    return {
      exchange,
      received,
      next: () => {
        const m = received.shift();
        if (m) return Promise.resolve(m);
        return new Promise((ok, fail) => {
          const t = setTimeout(() => fail(new Error('no message arrived')), 5000);
          waiters.push((msg) => {
            clearTimeout(t);
            ok(msg);
          });
        });
      },
    };
  }

  const uri = () => `amqps://guest:{secret}@localhost:${proxyPort}/`;

  it('send: publishes the envelope with routing key, message id and persistence, confirmed (succeeded)', async () => {
    const { exchange, next } = await boundExchange();
    const env = envelope({ entity_type: 'class', action: 'updated' });
    const result = await send(amqpTransport, sink('amqp', { uri: uri(), exchange }, 'rabbit'), {}, { envelope: env, secret: 'guest' });
    expect(result).toEqual({ outcome: 'succeeded' });
    const msg = await next();
    expect(JSON.parse(msg.content.toString('utf8'))).toEqual(env);
    expect(msg.fields.routingKey).toBe('class.updated');
    expect(msg.fields.exchange).toBe(exchange);
    expect(msg.properties.messageId).toBe(env.event_id);
    expect(msg.properties.deliveryMode).toBe(2);
    expect(msg.properties.contentType).toBe('application/json');
    expect(msg.properties.headers?.['x-svc-event-id']).toBe(env.event_id);
    expect(msg.properties.headers?.['x-svc-delivery-purpose']).toBeUndefined();
  });

  it('send: declares the exchange when asked; durable false publishes transient; test purpose is marked', async () => {
    const exchange = uniq('svc-test-x');
    exchanges.push(exchange);
    const cfg = { uri: uri(), exchange, declare_exchange: true, exchange_type: 'fanout', durable: false };
    // the first send creates the exchange (nothing bound yet, so the message is dropped)
    expect(await send(amqpTransport, sink('amqp', cfg, 'rabbit'), {}, { secret: 'guest' })).toEqual({ outcome: 'succeeded' });
    await ch.checkExchange(exchange);
    const q = await ch.assertQueue('', { exclusive: true, autoDelete: true });
    await ch.bindQueue(q.queue, exchange, '');
    const env = envelope();
    expect(await send(amqpTransport, sink('amqp', cfg, 'rabbit'), {}, { envelope: env, purpose: 'test', secret: 'guest' })).toEqual({
      outcome: 'succeeded',
    });
    const msg = await ch.get(q.queue, { noAck: true });
    expect(msg && JSON.parse(msg.content.toString()).event_id).toBe(env.event_id);
    expect(msg && msg.properties.deliveryMode).not.toBe(2);
    expect(msg && msg.properties.headers?.['x-svc-delivery-purpose']).toBe('test');
  });

  it('send: the secret is substituted into the URI; a wrong secret is a retried refusal without the secret in the text', async () => {
    const { exchange } = await boundExchange();
    const result = await send(amqpTransport, sink('amqp', { uri: uri(), exchange }, 'rabbit'), {}, { secret: 'wrong-secret-value' });
    expect(result.outcome).toBe('retry');
    expect(expectSafeError(result, 'wrong-secret-value', 'guest')).toMatch(/403|ACCESS|connection/);
  });

  it('send: mandatory and unroutable is a failed attempt (retry)', async () => {
    const exchange = uniq('svc-test-x');
    exchanges.push(exchange);
    await ch.assertExchange(exchange, 'topic', { durable: false });
    const result = await send(amqpTransport, sink('amqp', { uri: uri(), exchange, mandatory: true }, 'rabbit'), {}, { secret: 'guest' });
    expect(result).toEqual({ outcome: 'retry', error: expect.stringMatching(/unroutable/) });
    // without mandatory the broker drops it and confirms
    expect(await send(amqpTransport, sink('amqp', { uri: uri(), exchange }, 'rabbit'), {}, { secret: 'guest' })).toEqual({
      outcome: 'succeeded',
    });
  });

  it('send: a missing exchange retries (404); a mismatching declaration is dead (406)', async () => {
    const missing = await send(
      amqpTransport,
      sink('amqp', { uri: uri(), exchange: uniq('svc-test-missing') }, 'rabbit'),
      {},
      { secret: 'guest' },
    );
    expect(missing).toEqual({ outcome: 'retry', error: 'the broker refused the message (404 NOT_FOUND)' });
    const { exchange } = await boundExchange('fanout');
    const cfg = { uri: uri(), exchange, declare_exchange: true, exchange_type: 'topic' };
    expect(await send(amqpTransport, sink('amqp', cfg, 'rabbit'), {}, { secret: 'guest' })).toEqual({
      outcome: 'dead',
      error: 'the broker refused the message (406 PRECONDITION_FAILED)',
    });
  });

  it('kept connection: sends to one destination share one; another secret is not served by it', async () => {
    await amqpTransport.close!();
    const { exchange, next } = await boundExchange();
    const seen = proxied.get(proxyPort)!;
    const before = seen.accepted;
    for (let i = 0; i < 3; i++) {
      expect(await send(amqpTransport, sink('amqp', { uri: uri(), exchange }, 'rabbit'), {}, { secret: 'guest' })).toEqual({
        outcome: 'succeeded',
      });
    }
    for (let i = 0; i < 3; i++) await next();
    expect(seen.accepted).toBe(before + 1);
    const wrong = await send(amqpTransport, sink('amqp', { uri: uri(), exchange }, 'rabbit'), {}, { secret: 'wrong-secret-value' });
    expect(wrong.outcome).toBe('retry');
    expect(expectSafeError(wrong, 'wrong-secret-value')).toMatch(/ACCESS_REFUSED|403/);
    expect(seen.accepted).toBe(before + 2);
  });

  it('kept connection: a send that fails on it drops it; one the broker closed is not used again', async () => {
    await amqpTransport.close!();
    const { exchange, next } = await boundExchange();
    const seen = proxied.get(proxyPort)!;
    const before = seen.accepted;
    const missing = await send(
      amqpTransport,
      sink('amqp', { uri: uri(), exchange: uniq('svc-missing-x') }, 'rabbit'),
      {},
      { secret: 'guest' },
    );
    expect(missing.outcome).toBe('retry');
    const good = sink('amqp', { uri: uri(), exchange }, 'rabbit');
    expect(await send(amqpTransport, good, {}, { secret: 'guest' })).toEqual({ outcome: 'succeeded' });
    expect(seen.accepted).toBe(before + 2);
    // the broker (here the proxy in front of it) closes the connection while it is idle
    for (const socket of seen.open) socket.destroy();
    await vi.waitFor(() => expect(seen.open.size).toBe(0));
    await new Promise((r) => setTimeout(r, 50));
    expect(await send(amqpTransport, good, {}, { secret: 'guest' })).toEqual({ outcome: 'succeeded' });
    expect(seen.accepted).toBe(before + 3);
    await next();
    await next();
  });

  it('send: a payload above max_payload_bytes is dead before connecting', async () => {
    const { exchange, received } = await boundExchange();
    const result = await send(
      amqpTransport,
      sink('amqp', { uri: uri(), exchange, max_payload_bytes: 100 }, 'rabbit'),
      {},
      { secret: 'guest' },
    );
    expect(result).toEqual({ outcome: 'dead', error: expect.stringMatching(/above max_payload_bytes \(100\)/) });
    await new Promise((ok) => setTimeout(ok, 200));
    expect(received).toHaveLength(0);
  });

  it('send: a private destination is refused (dead) unless private targets are allowed', async () => {
    const strict = testConfig({ SVC_OUTBOUND_CA_FILE: caFile, SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: false });
    const result = await send(
      amqpTransport,
      sink('amqp', { uri: uri(), exchange: 'x' }, 'rabbit'),
      {},
      { secret: 'guest', config: strict },
    );
    expect(result).toEqual({ outcome: 'dead', error: 'the destination resolves to a refused address (loopback)' });
  });

  it('send: an unreachable broker, an untrusted certificate and a silent peer are retried', async () => {
    const port = await closedPort();
    const down = await send(amqpTransport, sink('amqp', { uri: `amqps://localhost:${port}/`, exchange: 'x' }), {});
    expect(down).toEqual({ outcome: 'retry', error: 'the connection to the broker failed (ECONNREFUSED)' });
    const noCa = testConfig({ SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: true });
    const untrusted = await send(
      amqpTransport,
      sink('amqp', { uri: uri(), exchange: 'x' }, 'rabbit'),
      {},
      { secret: 'guest', config: noCa },
    );
    expect(untrusted.outcome).toBe('retry');
    expect(expectSafeError(untrusted)).toMatch(/TLS/);
    const silent = await silentPort();
    const slow = await send(amqpTransport, sink('amqp', { uri: `amqps://localhost:${silent}/`, exchange: 'x' }), {}, { timeoutMs: 300 });
    expect(slow).toEqual({ outcome: 'retry', error: expect.stringMatching(/timeout/) });
  });

  it('send: a missing secret or an invalid stored config is dead', async () => {
    expect(await send(amqpTransport, sink('amqp', { uri: uri(), exchange: 'x' }, 'rabbit'), {}, { secret: null })).toEqual({
      outcome: 'dead',
      error: 'the sink secret could not be resolved',
    });
    const bad = await send(amqpTransport, sink('amqp', { uri: 'amqp://localhost/', exchange: 'x' }), {});
    expect(bad.outcome).toBe('dead');
    expect(expectSafeError(bad)).toMatch(/TLS scheme/);
  });

  it('validateConfig / validateRouting: exchange and members', () => {
    const v = (cfg: Record<string, unknown>) => amqpTransport.validateConfig({ uri: 'amqps://h/', ...cfg }, null).map((p) => p.path);
    expect(
      v({ exchange: 'events', exchange_type: 'topic', declare_exchange: true, durable: true, mandatory: false, max_payload_bytes: 10 }),
    ).toEqual([]);
    expect(v({ exchange: '' })).toEqual([]);
    expect(v({})).toEqual(['config.exchange']);
    expect(v({ exchange: 'bad name' })).toEqual(['config.exchange']);
    expect(v({ exchange: 'amq.topic', declare_exchange: true })).toEqual(['config.exchange']);
    expect(v({ exchange: 'e', exchange_type: 'match' })).toEqual(['config.exchange_type']);
    expect(v({ exchange: 'e', durable: 'yes', max_payload_bytes: 0 })).toEqual(['config.durable', 'config.max_payload_bytes']);
    expect(amqpTransport.validateRouting({}, {})).toEqual([]);
    expect(amqpTransport.validateRouting({ stream: 's' }, {}).map((p) => p.path)).toEqual(['routing.stream']);
  });

  it('render: the message body is the envelope', async () => {
    const env = envelope();
    expect(await amqpTransport.render(sink('amqp', { uri: 'amqps://h/', exchange: 'x' }), {}, env, 'event', config)).toEqual(env);
  });
});

// ---- redis_stream -----------------------------------------------------------------------------

describe('redis_stream transport', () => {
  let redis: Redis;
  let proxyPort: number;
  const keys: string[] = [];
  const user = uniq('svc-test-user');
  const password = `p@ss:w/rd%${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    redis = new Redis(REDIS);
    proxyPort = await tlsProxy(REDIS.port);
    await redis.call('ACL', 'SETUSER', user, 'on', `>${password}`, '~*', '+@all');
  });

  afterAll(async () => {
    if (keys.length) await redis.del(...keys);
    await redis.call('ACL', 'DELUSER', user);
    redis.disconnect();
  });

  const stream = () => {
    const k = uniq('svc-test-stream');
    keys.push(k);
    return k;
  };
  const uri = () => `rediss://${user}:{secret}@localhost:${proxyPort}/0`;

  it('send: XADD with the six fields, authenticated with the percent-encoded secret (succeeded)', async () => {
    const key = stream();
    const env = envelope();
    const result = await send(
      redisStreamTransport,
      sink('redis_stream', { uri: uri() }, 'redis'),
      { stream: key },
      { envelope: env, secret: password },
    );
    expect(result).toEqual({ outcome: 'succeeded' });
    const entries = await redis.xrange(key, '-', '+');
    expect(entries).toHaveLength(1);
    const fields = entries[0]![1];
    expect(fields).toEqual([
      'event_id',
      env.event_id,
      'entity_type',
      'object',
      'entity_name',
      env.entity_name,
      'action',
      'created',
      'actor_kind',
      'user',
      'payload',
      JSON.stringify(env),
    ]);
    const test = await send(
      redisStreamTransport,
      sink('redis_stream', { uri: uri() }, 'redis'),
      { stream: key },
      { purpose: 'test', secret: password },
    );
    expect(test).toEqual({ outcome: 'succeeded' });
    const [, second] = await redis.xrange(key, '-', '+');
    expect(second![1].slice(-2)).toEqual(['delivery_purpose', 'test']);
  });

  it('send: max_len trims the stream exactly when approximate_trim is false, and approximately by default', async () => {
    const key = stream();
    const s = sink('redis_stream', { uri: uri(), max_len: 2, approximate_trim: false }, 'redis');
    for (let i = 0; i < 4; i++)
      expect(await send(redisStreamTransport, s, { stream: key }, { secret: password })).toEqual({ outcome: 'succeeded' });
    expect(await redis.xlen(key)).toBe(2);
    const approx = stream();
    const a = sink('redis_stream', { uri: uri(), max_len: 1 }, 'redis');
    for (let i = 0; i < 3; i++)
      expect(await send(redisStreamTransport, a, { stream: approx }, { secret: password })).toEqual({ outcome: 'succeeded' });
    // "~" lets Redis keep whole macro nodes, so a tiny stream is not cut
    expect(await redis.xlen(approx)).toBe(3);
  });

  it('send: a wrong secret retries; a key of another type is dead', async () => {
    const wrong = await send(
      redisStreamTransport,
      sink('redis_stream', { uri: uri() }, 'redis'),
      { stream: stream() },
      { secret: 'nope-not-it' },
    );
    expect(wrong.outcome).toBe('retry');
    expect(expectSafeError(wrong, 'nope-not-it', user)).toMatch(/WRONGPASS|refused/);
    const key = stream();
    await redis.set(key, 'plain string');
    expect(await send(redisStreamTransport, sink('redis_stream', { uri: uri() }, 'redis'), { stream: key }, { secret: password })).toEqual({
      outcome: 'dead',
      error: 'the redis server refused the entry (WRONGTYPE)',
    });
  });

  it('kept client: sends to one destination share one connection; a refusal by the server keeps it; another secret is not served by it', async () => {
    await redisStreamTransport.close!();
    const seen = proxied.get(proxyPort)!;
    const before = seen.accepted;
    const s = sink('redis_stream', { uri: uri() }, 'redis');
    const key = stream();
    for (let i = 0; i < 3; i++)
      expect(await send(redisStreamTransport, s, { stream: key }, { secret: password })).toEqual({ outcome: 'succeeded' });
    const other = stream();
    await redis.set(other, 'plain string');
    expect((await send(redisStreamTransport, s, { stream: other }, { secret: password })).outcome).toBe('dead');
    expect(await send(redisStreamTransport, s, { stream: key }, { secret: password })).toEqual({ outcome: 'succeeded' });
    expect(await redis.xlen(key)).toBe(4);
    expect(seen.accepted).toBe(before + 1);
    const wrong = await send(redisStreamTransport, s, { stream: key }, { secret: 'nope-not-it' });
    expect(wrong.outcome).toBe('retry');
    expect(seen.accepted).toBe(before + 2);
    // closed by the server while idle: the next send connects again
    for (const socket of seen.open) socket.destroy();
    await vi.waitFor(() => expect(seen.open.size).toBe(0));
    await new Promise((r) => setTimeout(r, 50));
    expect(await send(redisStreamTransport, s, { stream: key }, { secret: password })).toEqual({ outcome: 'succeeded' });
    expect(seen.accepted).toBe(before + 3);
  });

  it('send: payload limit is dead; private destination refused; unreachable and silent peers retry', async () => {
    const key = stream();
    const big = await send(
      redisStreamTransport,
      sink('redis_stream', { uri: uri(), max_payload_bytes: 50 }, 'redis'),
      { stream: key },
      { secret: password },
    );
    expect(big).toEqual({ outcome: 'dead', error: expect.stringMatching(/above max_payload_bytes \(50\)/) });
    expect(await redis.exists(key)).toBe(0);
    const strict = testConfig({ SVC_OUTBOUND_CA_FILE: caFile });
    expect(
      await send(
        redisStreamTransport,
        sink('redis_stream', { uri: uri() }, 'redis'),
        { stream: key },
        { secret: password, config: strict },
      ),
    ).toEqual({
      outcome: 'dead',
      error: 'the destination resolves to a refused address (loopback)',
    });
    const down = await send(redisStreamTransport, sink('redis_stream', { uri: `rediss://localhost:${await closedPort()}` }), {
      stream: key,
    });
    expect(down).toEqual({ outcome: 'retry', error: expect.stringMatching(/ECONNREFUSED/) });
    const silent = await silentPort();
    const started = Date.now();
    const slow = await send(redisStreamTransport, sink('redis_stream', { uri: `rediss://localhost:${silent}`, io_timeout_ms: 300 }), {
      stream: key,
    });
    expect(slow).toEqual({ outcome: 'retry', error: expect.stringMatching(/timeout/) });
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('validateConfig / validateRouting / render', async () => {
    const v = (cfg: Record<string, unknown>) => redisStreamTransport.validateConfig({ uri: 'rediss://h', ...cfg }, null).map((p) => p.path);
    expect(v({ max_len: 1000, approximate_trim: true, max_payload_bytes: 5, io_timeout_ms: 100 })).toEqual([]);
    expect(v({ max_len: null })).toEqual([]);
    expect(v({ max_len: 0, approximate_trim: 'yes', io_timeout_ms: 0 })).toEqual([
      'config.max_len',
      'config.approximate_trim',
      'config.io_timeout_ms',
    ]);
    expect(redisStreamTransport.validateRouting({ stream: 'events' }, {})).toEqual([]);
    expect(redisStreamTransport.validateRouting({}, {}).map((p) => p.path)).toEqual(['routing.stream']);
    expect(redisStreamTransport.validateRouting({ stream: '' }, {}).map((p) => p.path)).toEqual(['routing.stream']);
    expect(redisStreamTransport.validateRouting({ stream: 's', url: 'https://x' }, {}).map((p) => p.path)).toEqual(['routing.url']);
    const env = envelope({ entity_name: null });
    expect(await redisStreamTransport.render(sink('redis_stream', { uri: 'rediss://h' }), { stream: 's' }, env, 'event', config)).toEqual({
      event_id: env.event_id,
      entity_type: 'object',
      entity_name: '',
      action: 'created',
      actor_kind: 'user',
      payload: JSON.stringify(env),
    });
  });
});

// ---- email ------------------------------------------------------------------------------------

interface Received {
  from: string;
  rcpt: string[];
  raw: string;
  headers: Record<string, string>;
  body: string;
  auth: { username?: string; password?: string } | null;
}

function parseMessage(raw: string): { headers: Record<string, string>; body: string } {
  const split = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ');
  const headers: Record<string, string> = {};
  for (const line of head.split('\r\n')) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  return { headers, body: raw.slice(split + 4) };
}

describe('email transport', () => {
  let port: number;
  const received: Received[] = [];
  const smtpUser = 'mailer';
  const smtpPassword = `s3cr:et/@%${randomBytes(3).toString('hex')}`;
  let rcptReply: ((address: string) => Error | null) | null = null;
  /** While set, messages are read but never answered (a stalled server). */
  let stallData = false;
  /** Connections the SMTP server accepted, and those still open. */
  const smtpConnections = { accepted: 0, open: new Set<Socket>() };

  beforeAll(async () => {
    const auths = new Map<string, { username?: string; password?: string }>();
    const server = new SMTPServer({
      secure: true,
      key,
      cert,
      authMethods: ['PLAIN', 'LOGIN'],
      logger: false,
      onAuth(auth, session, cb) {
        auths.set(session.id, { username: auth.username, password: auth.password ?? undefined });
        if (auth.username === smtpUser && auth.password === smtpPassword) cb(null, { user: smtpUser });
        else cb(new Error('Invalid username or password'));
      },
      onRcptTo(address: SMTPServerAddress, _session, cb) {
        const err = rcptReply?.(address.address) ?? null;
        cb(err ?? undefined);
      },
      onData(stream, session, cb) {
        if (stallData) {
          stream.resume();
          return;
        }
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          received.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            rcpt: session.envelope.rcptTo.map((r) => r.address),
            raw,
            ...parseMessage(raw),
            auth: auths.get(session.id) ?? null,
          });
          cb();
        });
      },
    });
    server.on('error', () => {});
    const tlsServer = server.server as unknown as TlsServer;
    tlsServer.on('connection', (socket: Socket) => {
      smtpConnections.accepted++;
      smtpConnections.open.add(socket);
      socket.on('close', () => smtpConnections.open.delete(socket));
    });
    port = await listen(tlsServer);
  });

  afterAll(() => emailTransport.close!());

  const baseConfig = () => ({
    uri: `smtps://${smtpUser}:{secret}@localhost:${port}`,
    from: 'Inventory <inventory@example.com>',
    reply_to: 'ops@example.com',
    subject_template: '{{ test_marker }}[{{ entity_type }}] {{ entity_name }} {{ action }}',
    body_template: 'Event {{ event_id }}\nSummary: {{ summary }}\nActor: {{ provenance.actor.principal.name }} ({{ event.actor_kind }})\n',
  });
  const routing = { recipients: ['Ops Team <ops-team@example.com>'], cc: ['cc@example.com'], bcc: ['hidden@example.com'] };

  function lastFor(eventId: string): Received {
    const r = received.find((m) => m.headers['x-svc-event-id'] === eventId);
    expect(r).toBeDefined();
    return r!;
  }

  it('send: renders subject and body, addresses To/Cc/Bcc, authenticates with the substituted secret (succeeded)', async () => {
    const env = envelope();
    const result = await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { envelope: env, secret: smtpPassword });
    expect(result).toEqual({ outcome: 'succeeded' });
    const m = lastFor(env.event_id);
    expect(m.auth).toEqual({ username: smtpUser, password: smtpPassword });
    expect(m.from).toBe('inventory@example.com');
    expect(m.rcpt.sort()).toEqual(['cc@example.com', 'hidden@example.com', 'ops-team@example.com']);
    expect(m.headers.subject).toBe(`[object] ${env.entity_name as string} created`);
    expect(m.headers.from).toBe('Inventory <inventory@example.com>');
    expect(m.headers.to).toBe('Ops Team <ops-team@example.com>');
    expect(m.headers.cc).toBe('cc@example.com');
    expect(m.headers.bcc).toBeUndefined();
    expect(m.headers['reply-to']).toBe('ops@example.com');
    expect(m.headers['message-id']).toBe(`<${env.event_id}@example.com>`);
    expect(m.headers['x-svc-delivery-purpose']).toBeUndefined();
    expect(m.body.replace(/\r\n/g, '\n')).toBe(`Event ${env.event_id}\nSummary: object created\nActor: alice (user)\n`);
  });

  it('send: test purpose marks the subject (test_marker), the header and the message id; alias to works', async () => {
    const env = envelope();
    const result = await send(
      emailTransport,
      sink('email', baseConfig(), 'smtp'),
      { to: ['ops@example.com'] },
      {
        envelope: env,
        purpose: 'test',
        deliveryId: 314,
        secret: smtpPassword,
      },
    );
    expect(result).toEqual({ outcome: 'succeeded' });
    const m = lastFor(env.event_id);
    expect(m.headers.subject).toMatch(/^\[TEST\] \[object\]/);
    expect(m.headers['x-svc-delivery-purpose']).toBe('test');
    expect(m.headers['message-id']).toBe(`<${env.event_id}-test-314@example.com>`);
    expect(m.rcpt).toEqual(['ops@example.com']);
  });

  it('send: a wrong secret retries; refused recipients are dead (5xx) or retried (4xx)', async () => {
    const wrong = await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { secret: 'not-the-password' });
    expect(wrong.outcome).toBe('retry');
    expect(expectSafeError(wrong, 'not-the-password', smtpUser)).toBe('the mail server refused the login (535)');
    try {
      rcptReply = () => Object.assign(new Error('mailbox unavailable'), { responseCode: 550 });
      expect(await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { secret: smtpPassword })).toEqual({
        outcome: 'dead',
        error: 'the mail server refused the message (550)',
      });
      rcptReply = () => Object.assign(new Error('try later'), { responseCode: 451 });
      expect(await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { secret: smtpPassword })).toEqual({
        outcome: 'retry',
        error: 'the mail server refused the message (451)',
      });
    } finally {
      rcptReply = null;
    }
  });

  it('send: templates that render an empty or multi-line subject, an empty body, or do not compile, are dead', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ subject_template: '{{ nothing }}' }, /subject_template: the subject rendered empty/],
      [{ subject_template: '{{ summary }}\nline two' }, /subject_template: the subject must render one line/],
      [{ body_template: '{% if false %}x{% endif %}  ' }, /body_template: the body rendered empty/],
      [{ subject_template: '{{ summary | nofilter }}' }, /configuration is invalid: subject_template: template syntax error/],
    ];
    for (const [cfg, pattern] of cases) {
      const s = sink('email', { ...baseConfig(), ...cfg }, 'smtp');
      const result = await send(emailTransport, s, routing, { secret: smtpPassword });
      expect(result.outcome).toBe('dead');
      expect((result as { error: string }).error).toMatch(pattern);
    }
  });

  it('send: payload limit is dead; private destination refused; unreachable or silent server retries', async () => {
    const before = received.length;
    const big = await send(emailTransport, sink('email', { ...baseConfig(), max_payload_bytes: 20 }, 'smtp'), routing, {
      secret: smtpPassword,
    });
    expect(big).toEqual({ outcome: 'dead', error: expect.stringMatching(/above max_payload_bytes \(20\)/) });
    const strict = testConfig({ SVC_OUTBOUND_CA_FILE: caFile });
    expect(await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { secret: smtpPassword, config: strict })).toEqual({
      outcome: 'dead',
      error: 'the destination resolves to a refused address (loopback)',
    });
    const down = await send(emailTransport, sink('email', { ...baseConfig(), uri: `smtps://localhost:${await closedPort()}` }), routing);
    expect(down.outcome).toBe('retry');
    expectSafeError(down);
    const silent = await silentPort();
    const started = Date.now();
    const slow = await send(emailTransport, sink('email', { ...baseConfig(), uri: `smtps://localhost:${silent}` }), routing, {
      timeoutMs: 300,
    });
    expect(slow).toEqual({ outcome: 'retry', error: expect.stringMatching(/timeout/) });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(received.length).toBe(before);
  });

  it('kept connection: messages to one destination share one, a refused message keeps it; another secret opens its own', async () => {
    await emailTransport.close!();
    await vi.waitFor(() => expect(smtpConnections.open.size).toBe(0));
    const before = smtpConnections.accepted;
    const sent: string[] = [];
    for (let i = 0; i < 3; i++) {
      const env = envelope();
      expect(await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { envelope: env, secret: smtpPassword })).toEqual({
        outcome: 'succeeded',
      });
      sent.push(env.event_id);
    }
    expect(smtpConnections.accepted).toBe(before + 1);
    const [first] = smtpConnections.open;
    try {
      rcptReply = () => Object.assign(new Error('mailbox unavailable'), { responseCode: 550 });
      expect((await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { secret: smtpPassword })).outcome).toBe('dead');
    } finally {
      rcptReply = null;
    }
    const after = envelope();
    expect(await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { envelope: after, secret: smtpPassword })).toEqual({
      outcome: 'succeeded',
    });
    // the refusal reset the connection's session (RSET) rather than closing it; the next message
    // goes on it, or on a second one when it came while the reset was under way
    expect(smtpConnections.open.has(first!)).toBe(true);
    expect(smtpConnections.accepted).toBeLessThanOrEqual(before + 2);
    // each message whole, with its own envelope, on the shared connection
    for (const id of [...sent, after.event_id])
      expect(lastFor(id).rcpt.sort()).toEqual(['cc@example.com', 'hidden@example.com', 'ops-team@example.com']);
    const accepted = smtpConnections.accepted;
    const wrong = await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { secret: 'not-the-password' });
    expect(wrong.outcome).toBe('retry');
    expect(smtpConnections.accepted).toBe(accepted + 1);
    await emailTransport.close!();
    await vi.waitFor(() => expect(smtpConnections.open.size).toBe(0));
  });

  it('kept connection: one the server closed is not used again; a send cut short by its deadline closes its connection', async () => {
    await emailTransport.close!();
    await vi.waitFor(() => expect(smtpConnections.open.size).toBe(0));
    const before = smtpConnections.accepted;
    const ok = () => send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { secret: smtpPassword });
    expect(await ok()).toEqual({ outcome: 'succeeded' });
    for (const socket of smtpConnections.open) socket.destroy();
    await vi.waitFor(() => expect(smtpConnections.open.size).toBe(0));
    await new Promise((r) => setTimeout(r, 50));
    expect(await ok()).toEqual({ outcome: 'succeeded' });
    expect(smtpConnections.accepted).toBe(before + 2);
    stallData = true;
    try {
      const stalled = await send(emailTransport, sink('email', baseConfig(), 'smtp'), routing, { secret: smtpPassword, timeoutMs: 300 });
      expect(stalled).toEqual({ outcome: 'retry', error: expect.stringMatching(/timeout/) });
    } finally {
      stallData = false;
    }
    expect(await ok()).toEqual({ outcome: 'succeeded' });
    expect(smtpConnections.accepted).toBe(before + 3);
    // the stalled one is ended at once and destroyed when the server has not closed its side in 5 s
    await vi.waitFor(() => expect(smtpConnections.open.size).toBe(1), { timeout: 8000 });
  });

  it('render: the preview payload; a template that cannot render this event is a 400', async () => {
    const env = envelope();
    const preview = await emailTransport.render(sink('email', baseConfig(), 'smtp'), routing, env, 'event', config);
    expect(preview).toEqual({
      from: 'Inventory <inventory@example.com>',
      reply_to: 'ops@example.com',
      to: ['Ops Team <ops-team@example.com>'],
      cc: ['cc@example.com'],
      bcc: ['hidden@example.com'],
      subject: `[object] ${env.entity_name as string} created`,
      body: `Event ${env.event_id}\nSummary: object created\nActor: alice (user)\n`,
    });
    const err = await emailTransport
      .render(sink('email', { ...baseConfig(), subject_template: '{{ summary }}\n{{ action }}' }), routing, env, 'event', config)
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect((err as ApiError).details).toEqual([
      { path: 'config.subject_template', message: 'subject_template: the subject must render one line' },
    ]);
  });

  it('validateConfig / validateRouting: addresses, templates, recipients', () => {
    const v = (cfg: Record<string, unknown>) =>
      emailTransport
        .validateConfig({ uri: 'smtps://mail.example.com', from: 'a@example.com', subject_template: 's', body_template: 'b', ...cfg }, null)
        .map((p) => p.path);
    expect(v({ reply_to: null, max_payload_bytes: 5000 })).toEqual([]);
    expect(v({ from: 'not an address' })).toEqual(['config.from']);
    expect(v({ from: 'a@example.com, b@example.com' })).toEqual(['config.from']);
    expect(v({ reply_to: 'x@y.z\r\nBcc: evil@example.com' })).toEqual(['config.reply_to']);
    expect(v({ subject_template: undefined, body_template: '' })).toEqual(['config.subject_template', 'config.body_template']);
    expect(v({ subject_template: '{% if %}', body_template: '{{ x | unknown_filter }}' })).toEqual([
      'config.subject_template',
      'config.body_template',
    ]);
    const r = (routing: Record<string, unknown>) => emailTransport.validateRouting(routing, {}).map((p) => p.path);
    expect(r({ recipients: ['a@example.com'], cc: [], bcc: ['Name <b@example.com>'] })).toEqual([]);
    expect(r({ to: ['a@example.com'] })).toEqual([]);
    expect(r({})).toEqual(['routing.recipients']);
    expect(r({ recipients: [] })).toEqual(['routing.recipients']);
    expect(r({ recipients: ['a@example.com'], to: ['b@example.com'] })).toEqual(['routing.to']);
    expect(r({ recipients: ['a@example.com', 'nope'], cc: 'x@example.com' })).toEqual(['routing.recipients.1', 'routing.cc']);
    expect(r({ recipients: ['a@example.com'], stream: 's' })).toEqual(['routing.stream']);
    expect(r({ recipients: Array.from({ length: 101 }, (_, i) => `u${i}@example.com`) })).toEqual(['routing.recipients']);
  });
});
