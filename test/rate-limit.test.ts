import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, ADMIN_PASSWORD, type TestApp } from './helpers.ts';
import { createHuman, scopedTokenFor } from './iam-fixtures.ts';
import { DEFAULT_LIMITER_CONFIG, keysFor, subnetOf, normalizeIp, type LimiterConfig } from '../src/domain/rate-limit.ts';
import { closeLoginLimiter, limiterConfig } from '../src/services/login-limiter.ts';
import { MemoryLoginLimiter, type AttemptTicket, type LoginLimiter } from '../src/services/login-limiter-memory.ts';
import { RedisLoginLimiter } from '../src/services/login-limiter-redis.ts';

const REDIS_URL = process.env.SVC_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const cfg: LimiterConfig = DEFAULT_LIMITER_CONFIG;

/**
 * A fresh /24 in 10/8 for every call (a random start, then the next network: tests of one limiter
 * never share a network, however many they draw; concurrent runs on one Redis start apart), and an
 * address inside it.
 */
let netSeq = randomBytes(2).readUInt16BE(0);
function randomNet(): string {
  netSeq = (netSeq + 1) % 65_536;
  return `10.${netSeq >> 8}.${netSeq & 255}`;
}
function randomIp(): string {
  return `${randomNet()}.${(randomBytes(1)[0]! % 250) + 1}`;
}

async function admitted(l: LoginLimiter, name: string, ip: string): Promise<AttemptTicket> {
  const a = await l.admit(name, ip);
  if (!a.ok) throw new Error(`expected admission, got retry after ${a.retryAfter}`);
  return a.ticket;
}

async function failTimes(l: LoginLimiter, name: string, ip: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await l.failed(await admitted(l, name, ip));
}

describe('rate-limit domain rules', () => {
  it('derives /24 and /64 subnets and normalizes addresses', () => {
    expect(subnetOf('192.168.7.200', cfg)).toBe('192.168.7.0/24');
    expect(subnetOf('2001:db8:1:2:3:4:5:6', cfg)).toBe('2001:db8:1:2::/64');
    expect(subnetOf('2001:db8::1', cfg)).toBe('2001:db8::/64');
    expect(normalizeIp('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(normalizeIp('2001:0db8:0000:0000:0000:0000:0000:0001')).toBe('2001:db8::1');
    const keys = keysFor(cfg, 'alice', '10.0.0.9');
    expect(keys.map((k) => [k.scope, k.identifier, k.threshold])).toEqual([
      ['user_ip', 'alice@10.0.0.9', 5],
      ['ip', '10.0.0.9', 20],
      ['subnet', '10.0.0.0/24', 100],
      ['user', 'alice', 20],
    ]);
    expect(keysFor(cfg, 'alice', '10.9.9.9')[3]!.id).toBe(keys[3]!.id);
    expect(keys.every((k) => /^[A-Za-z0-9_-]{43}$/.test(k.id))).toBe(true);
  });
});

// The same behavior is required of both backends.
const backends: [string, (clock: () => number) => Promise<LoginLimiter>][] = [
  ['memory', (clock) => Promise.resolve(new MemoryLoginLimiter(cfg, clock))],
  [
    'redis',
    async (clock) => {
      const l = new RedisLoginLimiter({ url: REDIS_URL, prefix: `svc-test:${uniq('rl')}:`, now: clock });
      expect(await l.ready()).toBe(true);
      return l;
    },
  ],
];

describe.each(backends)('%s limiter', (_name, make) => {
  let now = Date.parse('2031-05-01T00:00:00Z');
  const clock = () => now;
  let l: LoginLimiter;
  beforeAll(async () => {
    l = await make(clock);
  });
  afterAll(async () => {
    await l.clear();
    await l.close();
  });

  it('locks (name, IP) after 5 failures for 300 s, then doubles the lockout', async () => {
    const ip = randomIp();
    const name = uniq('n');
    await failTimes(l, name, ip, 5);
    const denied = await l.admit(name, ip);
    expect(denied).toEqual({ ok: false, retryAfter: 300 });
    now += 299_000;
    expect(await l.admit(name, ip)).toEqual({ ok: false, retryAfter: 1 });
    now += 1_000;
    // Lockout over: failures from before its end do not count again.
    await failTimes(l, name, ip, 4);
    await l.abandon(await admitted(l, name, ip));
    await l.failed(await admitted(l, name, ip));
    expect(await l.admit(name, ip)).toEqual({ ok: false, retryAfter: 600 });
    // Another name from the same address is still admitted.
    await l.abandon(await admitted(l, uniq('other'), ip));
  });

  it('caps the lockout at one day', async () => {
    const ip = randomIp();
    const name = uniq('n');
    let expected = 300;
    for (let round = 0; round < 10; round++) {
      await failTimes(l, name, ip, 5);
      const a = await l.admit(name, ip);
      expect(a).toEqual({ ok: false, retryAfter: expected });
      now += expected * 1000;
      expected = Math.min(expected * 2, 86_400);
    }
  });

  it('forgets failures outside the 300 s sliding window', async () => {
    const ip = randomIp();
    const name = uniq('n');
    await failTimes(l, name, ip, 4);
    now += 301_000;
    await failTimes(l, name, ip, 4);
    await l.abandon(await admitted(l, name, ip));
  });

  it('locks an address after 20 failures across names and a /24 after 100 across addresses', async () => {
    const ip = randomIp();
    for (let i = 0; i < 20; i++) await failTimes(l, uniq('spray'), ip, 1);
    expect(await l.admit(uniq('fresh'), ip)).toEqual({ ok: false, retryAfter: 300 });
    const net = randomNet();
    for (let i = 0; i < 100; i++) await failTimes(l, uniq('spray'), `${net}.${(i % 5) + 1}`, 1);
    expect(await l.admit(uniq('fresh'), `${net}.200`)).toEqual({ ok: false, retryAfter: 300 });
    expect((await l.admit(uniq('fresh'), `${randomNet()}.9`)).ok).toBe(true);
  });

  it('a success forgets the (name, IP) failures', async () => {
    const ip = randomIp();
    const name = uniq('n');
    await failTimes(l, name, ip, 4);
    await l.succeeded(await admitted(l, name, ip));
    await failTimes(l, name, ip, 4);
    await l.abandon(await admitted(l, name, ip));
  });

  it('counts attempts in flight, so no more than the threshold reach the password check', async () => {
    const ip = randomIp();
    const name = uniq('n');
    const results = await Promise.all(Array.from({ length: 50 }, () => l.admit(name, ip)));
    const tickets = results.flatMap((r) => (r.ok ? [r.ticket] : []));
    expect(tickets).toHaveLength(5);
    expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.retryAfter === 1)).toBe(true);
    await Promise.all(tickets.map((t) => l.failed(t)));
    expect(await l.admit(name, ip)).toEqual({ ok: false, retryAfter: 300 });
  });

  it('abandoned attempts release their reservation', async () => {
    const ip = randomIp();
    const name = uniq('n');
    const tickets = await Promise.all(Array.from({ length: 5 }, () => admitted(l, name, ip)));
    expect((await l.admit(name, ip)).ok).toBe(false);
    await Promise.all(tickets.map((t) => l.abandon(t)));
    await l.abandon(await admitted(l, name, ip));
  });

  it('bounds one name across addresses: over 20 failures its attempts are spaced 5 s apart, never locked', async () => {
    const name = uniq('victim');
    // One failure from each of 20 addresses in 20 networks: no (name, IP), IP or subnet key is near its threshold.
    for (let i = 0; i < 20; i++) await failTimes(l, name, randomIp(), 1);
    expect(await l.admit(name, randomIp())).toEqual({ ok: false, retryAfter: 5 });
    // Other names, from the same and other addresses, are unaffected.
    await l.abandon(await admitted(l, uniq('other'), randomIp()));
    now += 4_000;
    expect(await l.admit(name, randomIp())).toEqual({ ok: false, retryAfter: 1 });
    now += 1_000;
    // The interval is over: one attempt (from a fresh address) is admitted, and only one at a time.
    const owner = await admitted(l, name, randomIp());
    expect(await l.admit(name, randomIp())).toEqual({ ok: false, retryAfter: 1 });
    await l.succeeded(owner);
    // A failed attempt starts the next interval; the wait never grows beyond it, however long the guessing goes on.
    for (let i = 0; i < 30; i++) {
      await l.failed(await admitted(l, name, randomIp()));
      expect(await l.admit(name, randomIp())).toEqual({ ok: false, retryAfter: 5 });
      now += 5_000;
    }
    const entry = (await l.snapshot({ include: 'all', scope: 'user', q: name })).entries;
    expect(entry).toHaveLength(1);
    expect(entry[0]).toMatchObject({ scope: 'user', identifier: name, name, ip: null, subnet: null, threshold: 20, locked: false });
    expect(entry[0]!.failures).toBe(50);
    expect(entry[0]!.lockout_count).toBe(0);
    // Once the failures leave the window the name is at full speed again.
    now += 301_000;
    for (let i = 0; i < 19; i++) await failTimes(l, name, randomIp(), 1);
    await l.abandon(await admitted(l, name, randomIp()));
  });

  it('snapshot lists tracked keys, locked first; release and clear remove them', async () => {
    const ip = randomIp();
    const name = uniq('snap');
    await failTimes(l, name, ip, 5);
    const other = uniq('snap');
    await failTimes(l, other, ip, 1);
    const locked = await l.snapshot({ include: 'locked', q: name.toUpperCase() });
    expect(locked.entries.map((e) => [e.scope, e.identifier, e.failures, e.locked, e.lockout_count])).toEqual([
      ['user_ip', `${name}@${ip}`, 5, true, 1],
    ]);
    expect(locked.entries[0]!.locked_until!.getTime()).toBe(now + 300_000);
    const all = await l.snapshot({ include: 'all', q: `${ip}` });
    const mine = all.entries.filter((e) => e.identifier.endsWith(`@${ip}`) || e.identifier === ip);
    expect(mine[0]!.identifier).toBe(`${name}@${ip}`);
    expect(mine.map((e) => e.identifier).sort()).toEqual([`${name}@${ip}`, `${other}@${ip}`, ip].sort());
    const byScope = await l.snapshot({ include: 'all', scope: 'ip', q: ip });
    expect(byScope.entries).toHaveLength(1);
    expect(byScope.entries[0]).toMatchObject({ scope: 'ip', name: null, ip, subnet: null, failures: 6, threshold: 20, locked: false });
    expect(await l.releaseEntry(locked.entries[0]!.id)).toBe(true);
    expect(await l.releaseEntry(locked.entries[0]!.id)).toBe(false);
    await l.abandon(await admitted(l, name, ip));
    expect(await l.clear()).toBeGreaterThanOrEqual(3);
    expect((await l.snapshot({ include: 'all' })).total).toBe(0);
  });
});

describe('login rate limiting over HTTP', () => {
  let t: TestApp;
  beforeAll(async () => {
    // Trust the test client as a proxy so that each test can log in from its own address.
    t = await startTestApp({ SVC_TRUSTED_PROXIES: '127.0.0.1' });
  });
  afterAll(async () => {
    await t.close();
  });
  const login = (name: string, password: string, ip: string) =>
    t.request('POST', '/api/v0/auth/login', { token: null, body: { name, password }, headers: { 'x-forwarded-for': ip } });

  it('login 429 with Retry-After after 5 failures of one name from one address', async () => {
    const user = await createHuman(t);
    const ip = randomIp();
    for (let i = 0; i < 5; i++) expect((await login(user.name, 'wrong-password', ip)).status).toBe(401);
    const res = await login(user.name, user.password, ip);
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('300');
    expect(res.body).toMatchObject({ error: 'Too Many Requests', reason: 'login_rate_limited' });
    // Another address is not affected.
    expect((await login(user.name, user.password, randomIp())).status).toBe(200);
  });

  it('login 400 for over-length fields before any bookkeeping', async () => {
    const ip = randomIp();
    const long = 'x'.repeat(256);
    for (let i = 0; i < 30; i++) expect((await login(long, 'pw', ip)).status).toBe(400);
    const pw = await login('admin', 'p'.repeat(4097), ip);
    expect(pw.status).toBe(400);
    const state = await t.request('GET', '/api/v0/meta/login-rate-limit', { query: { include: 'all', q: ip } });
    expect(state.status).toBe(200);
    expect((state.body as { total: number }).total).toBe(0);
    // 255 characters outside the BMP are 255 characters, not 510.
    expect((await login('😀'.repeat(255), 'pw', ip)).status).toBe(401);
  });

  it('login under 200 parallel wrong-password attempts from one address: only the threshold reaches the password check', async () => {
    const user = await createHuman(t);
    const ip = randomIp();
    const same = await Promise.all(Array.from({ length: 200 }, () => login(user.name, 'wrong-password', ip)));
    expect(same.filter((r) => r.status === 401)).toHaveLength(5);
    expect(same.filter((r) => r.status === 429)).toHaveLength(195);
    // The 201st attempt, even with the right password, never reaches the password check.
    const next = await login(user.name, user.password, ip);
    expect(next.status).toBe(429);
    expect(Number(next.headers.get('retry-after'))).toBeGreaterThan(290);

    const ip2 = randomIp();
    const spray = await Promise.all(Array.from({ length: 200 }, (_, i) => login(`${user.name}-${i}`, 'wrong-password', ip2)));
    expect(spray.filter((r) => r.status === 401)).toHaveLength(20);
    expect(spray.filter((r) => r.status === 429)).toHaveLength(180);
    expect((await login(user.name, user.password, ip2)).status).toBe(429);
  });

  it('getLoginRateLimitState 200 shows the configuration and filtered entries', async () => {
    const ip = randomIp();
    const name = uniq('victim');
    for (let i = 0; i < 5; i++) await login(name, 'wrong', ip);
    const res = await t.request('GET', '/api/v0/meta/login-rate-limit', { query: { q: name } });
    expect(res.status).toBe(200);
    const body = res.body as { config: Record<string, unknown>; entries: Record<string, unknown>[]; total: number; truncated: boolean };
    expect(body.config).toEqual({
      backend: 'memory',
      max_failures_per_user_ip: 5,
      max_failures_per_ip: 20,
      max_failures_per_subnet: 100,
      max_failures_per_user: 20,
      user_interval_seconds: 5,
      subnet_prefix_v4: 24,
      subnet_prefix_v6: 64,
      window_seconds: 300,
      lockout_base_seconds: 300,
      lockout_max_seconds: 86400,
    });
    expect(body.entries).toHaveLength(1);
    expect(body.entries[0]).toMatchObject({ scope: 'user_ip', identifier: `${name}@${ip}`, name, ip, failures: 5, locked: true });
    expect(body.truncated).toBe(false);
    const bySubnet = await t.request('GET', '/api/v0/meta/login-rate-limit', {
      query: { include: 'all', scope: 'subnet', q: subnetOf(ip, cfg) },
    });
    expect((bySubnet.body as { entries: { subnet: string }[] }).entries[0]!.subnet).toBe(subnetOf(ip, cfg));
  });

  it('getLoginRateLimitState 400 for an unknown include value', async () => {
    const res = await t.request('GET', '/api/v0/meta/login-rate-limit', { query: { include: 'some' } });
    expect(res.status).toBe(400);
  });

  it('releaseLoginRateLimitEntry 200 unlocks one key; 404 once gone; 400 for a malformed id', async () => {
    const user = await createHuman(t);
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await login(user.name, 'wrong', ip);
    expect((await login(user.name, user.password, ip)).status).toBe(429);
    const state = await t.request('GET', '/api/v0/meta/login-rate-limit', { query: { q: `${user.name}@${ip}` } });
    const id = (state.body as { entries: { id: string }[] }).entries[0]!.id;
    const del = await t.request('DELETE', `/api/v0/meta/login-rate-limit/${id}`);
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ cleared: 1 });
    expect((await login(user.name, user.password, ip)).status).toBe(200);
    expect((await t.request('DELETE', `/api/v0/meta/login-rate-limit/${id}`)).status).toBe(404);
    expect((await t.request('DELETE', '/api/v0/meta/login-rate-limit/not-an-id')).status).toBe(400);
  });

  it('clearLoginRateLimits 200 releases every lockout', async () => {
    const user = await createHuman(t);
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await login(user.name, 'wrong', ip);
    const res = await t.request('DELETE', '/api/v0/meta/login-rate-limit');
    expect(res.status).toBe(200);
    expect((res.body as { cleared: number }).cleared).toBeGreaterThanOrEqual(3);
    expect((await login(user.name, user.password, ip)).status).toBe(200);
    const again = await t.request('DELETE', '/api/v0/meta/login-rate-limit');
    expect(again.body).toMatchObject({ cleared: expect.any(Number) });
  });

  it('login-rate-limit operations 401 without a token and 403 for non-admins and scoped admin tokens', async () => {
    const user = await createHuman(t);
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
    const scoped = await scopedTokenFor(t, admin!.id);
    for (const [method, path] of [
      ['GET', '/api/v0/meta/login-rate-limit'],
      ['DELETE', '/api/v0/meta/login-rate-limit'],
      ['DELETE', `/api/v0/meta/login-rate-limit/${'A'.repeat(43)}`],
    ] as const) {
      expect((await t.request(method, path, { token: null })).status).toBe(401);
      expect((await t.request(method, path, { token: user.token })).status).toBe(403);
      expect((await t.request(method, path, { token: scoped })).status).toBe(403);
    }
  });
});

describe('Redis-backed login limits', () => {
  let a: TestApp;
  let b: TestApp;
  const prefix = `svc-test:${uniq('shared')}:`;
  beforeAll(async () => {
    a = await startTestApp({ SVC_TRUSTED_PROXIES: '127.0.0.1' });
    b = await startTestApp({ SVC_TRUSTED_PROXIES: '127.0.0.1' });
    for (const t of [a, b]) {
      const l = new RedisLoginLimiter({ url: REDIS_URL, prefix });
      expect(await l.ready()).toBe(true);
      t.deps.services.loginLimiter = l;
    }
  });
  afterAll(async () => {
    await (a.deps.services.loginLimiter as LoginLimiter).clear();
    for (const t of [a, b]) {
      await (t.deps.services.loginLimiter as LoginLimiter).close();
      await t.close();
    }
  });

  it('login 429 on one instance after failures on another; state and release are shared', async () => {
    const user = await createHuman(a);
    const ip = randomIp();
    const login = (t: TestApp, password: string) =>
      t.request('POST', '/api/v0/auth/login', { token: null, body: { name: user.name, password }, headers: { 'x-forwarded-for': ip } });
    for (let i = 0; i < 5; i++) expect((await login(i % 2 ? a : b, 'wrong')).status).toBe(401);
    expect((await login(a, user.password)).status).toBe(429);
    expect((await login(b, user.password)).status).toBe(429);
    const state = await b.request('GET', '/api/v0/meta/login-rate-limit', { query: { q: `${user.name}@${ip}` } });
    expect(state.status).toBe(200);
    const body = state.body as { config: { backend: string }; entries: { id: string; locked: boolean }[] };
    expect(body.config.backend).toBe('redis');
    expect(body.entries).toHaveLength(1);
    expect((await a.request('DELETE', `/api/v0/meta/login-rate-limit/${body.entries[0]!.id}`)).status).toBe(200);
    expect((await login(b, user.password)).status).toBe(200);
  });

  it('200 parallel wrong-password logins across two instances: only 5 reach the password check', async () => {
    const user = await createHuman(a);
    const ip = randomIp();
    const all = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        (i % 2 ? a : b).request('POST', '/api/v0/auth/login', {
          token: null,
          body: { name: user.name, password: 'wrong' },
          headers: { 'x-forwarded-for': ip },
        }),
      ),
    );
    expect(all.filter((r) => r.status === 401)).toHaveLength(5);
    expect(all.filter((r) => r.status === 429)).toHaveLength(195);
  });
});

// Guessing one account's password from many addresses (each address trusted-proxy forwarded),
// through the login endpoint, with each backend; the limiter's clock is the test's.
describe.each(['memory', 'redis'] as const)('login account bound over HTTP (%s)', (backend) => {
  let t: TestApp;
  let now = Date.now();
  beforeAll(async () => {
    t = await startTestApp({ SVC_TRUSTED_PROXIES: '127.0.0.1' });
    const config = limiterConfig(t.deps.config);
    if (backend === 'memory') t.deps.services.loginLimiter = new MemoryLoginLimiter(config, () => now);
    else {
      const l = new RedisLoginLimiter({ url: REDIS_URL, prefix: `svc-test:${uniq('acct')}:`, config, now: () => now });
      expect(await l.ready()).toBe(true);
      t.deps.services.loginLimiter = l;
    }
  });
  afterAll(async () => {
    await (t.deps.services.loginLimiter as LoginLimiter).clear();
    await (t.deps.services.loginLimiter as LoginLimiter).close();
    await t.close();
  });
  const login = (name: string, password: string, ip: string) =>
    t.request('POST', '/api/v0/auth/login', { token: null, body: { name, password }, headers: { 'x-forwarded-for': ip } });

  it('login 429 with a Retry-After of a few seconds once one name failed 20 times from 20 addresses; the owner logs in after it', async () => {
    const victim = await createHuman(t);
    const bystander = await createHuman(t);
    for (let i = 0; i < 20; i++) expect((await login(victim.name, `guess-${i}`, randomIp())).status).toBe(401);
    const slowed = await login(victim.name, 'guess-20', randomIp());
    expect(slowed.status).toBe(429);
    expect(slowed.headers.get('retry-after')).toBe('5');
    expect(slowed.body).toMatchObject({ error: 'Too Many Requests', reason: 'login_rate_limited' });
    // Within the interval even the right password waits (it never reaches the password check)...
    const early = await login(victim.name, victim.password, randomIp());
    expect(early.status).toBe(429);
    expect(Number(early.headers.get('retry-after'))).toBeLessThanOrEqual(5);
    // ...other accounts do not.
    expect((await login(bystander.name, bystander.password, randomIp())).status).toBe(200);
    now += 5_000;
    expect((await login(victim.name, victim.password, randomIp())).status).toBe(200);
    // The guessing goes on at one try per interval, never locked for longer.
    expect((await login(victim.name, 'guess-21', randomIp())).status).toBe(401);
    const next = await login(victim.name, 'guess-22', randomIp());
    expect(next.status).toBe(429);
    expect(next.headers.get('retry-after')).toBe('5');
    now += 5_000;
    expect((await login(victim.name, victim.password, randomIp())).status).toBe(200);
    const state = await t.request('GET', '/api/v0/meta/login-rate-limit', { query: { include: 'all', scope: 'user', q: victim.name } });
    expect(state.status).toBe(200);
    expect((state.body as { entries: unknown[] }).entries).toEqual([
      expect.objectContaining({ scope: 'user', identifier: victim.name, failures: 21, threshold: 20, locked: false, locked_until: null }),
    ]);
  });
});

describe('Redis limiter unavailable', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ SVC_TRUSTED_PROXIES: '127.0.0.1' });
    // Nothing listens on port 1: every Redis command fails at once.
    t.deps.services.loginLimiter = new RedisLoginLimiter({ url: 'redis://127.0.0.1:1', prefix: `svc-test:${uniq('down')}:` });
  });
  afterAll(async () => {
    await (t.deps.services.loginLimiter as LoginLimiter).close();
    await t.close();
  });

  it('getLoginRateLimitState, clearLoginRateLimits and releaseLoginRateLimitEntry 503', async () => {
    for (const [method, path] of [
      ['GET', '/api/v0/meta/login-rate-limit'],
      ['DELETE', '/api/v0/meta/login-rate-limit'],
      ['DELETE', `/api/v0/meta/login-rate-limit/${'A'.repeat(43)}`],
    ] as const) {
      const res = await t.request(method, path);
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ reason: 'limiter_unavailable' });
    }
  });

  it('login falls back to local limits: 200 for the right password, 429 after 5 failures', async () => {
    const ip = randomIp();
    const login = (password: string) =>
      t.request('POST', '/api/v0/auth/login', { token: null, body: { name: 'admin', password }, headers: { 'x-forwarded-for': ip } });
    expect((await login(ADMIN_PASSWORD)).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await login('wrong')).status).toBe(401);
    const res = await login(ADMIN_PASSWORD);
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('300');
  });
});

describe('SVC_LOGIN_RATE_LIMIT_MAX_FAILURES_PER_USER and SVC_LOGIN_RATE_LIMIT_USER_INTERVAL_SECONDS', () => {
  it('set the account bound: getLoginRateLimitState shows them and login follows them', async () => {
    const t = await startTestApp({
      SVC_TRUSTED_PROXIES: '127.0.0.1',
      SVC_LOGIN_RATE_LIMIT_MAX_FAILURES_PER_USER: 3,
      SVC_LOGIN_RATE_LIMIT_USER_INTERVAL_SECONDS: 60,
    });
    try {
      const state = await t.request('GET', '/api/v0/meta/login-rate-limit');
      expect(state.status).toBe(200);
      expect((state.body as { config: unknown }).config).toMatchObject({ max_failures_per_user: 3, user_interval_seconds: 60 });
      const name = uniq('victim');
      const login = (ip: string) =>
        t.request('POST', '/api/v0/auth/login', { token: null, body: { name, password: 'guess' }, headers: { 'x-forwarded-for': ip } });
      for (let i = 0; i < 3; i++) expect((await login(randomIp())).status).toBe(401);
      const res = await login(randomIp());
      expect(res.status).toBe(429);
      // Seconds left of the 60 s interval since the latest failure, whatever time this test took.
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    } finally {
      await closeLoginLimiter(t.deps);
      await t.close();
    }
  });
});

describe('SVC_LOGIN_RATE_LIMIT_REDIS_URL', () => {
  it('getLoginRateLimitState 200 reports the redis backend when the setting names a server', async () => {
    const t = await startTestApp({ SVC_LOGIN_RATE_LIMIT_REDIS_URL: REDIS_URL });
    try {
      const limiter = t.deps.services.loginLimiter;
      expect(limiter).toBeInstanceOf(RedisLoginLimiter);
      expect(await (limiter as RedisLoginLimiter).ready()).toBe(true);
      const res = await t.request('GET', '/api/v0/meta/login-rate-limit', { query: { q: uniq('none') } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ config: { backend: 'redis' }, entries: [], total: 0 });
    } finally {
      await closeLoginLimiter(t.deps);
      await t.close();
    }
  });
});
