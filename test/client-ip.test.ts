// SVC_TRUSTED_PROXIES with CIDR blocks over a real socket: the login limiter counts failures under
// the address the trusted chain names, and under the socket peer when the peer is not trusted.
// (src/http/client-ip.test.ts covers the address rules themselves.)
import { randomInt } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { listen, startTestApp, uniq, type Listening, type TestApp } from './helpers.ts';
import { checkResponse } from './contract-check.ts';
import { closeLoginLimiter } from '../src/services/login-limiter.ts';
import { loadConfig, ConfigError } from '../src/config.ts';

const opened: { t: TestApp; served: Listening }[] = [];

afterAll(async () => {
  for (const { t, served } of opened) {
    await served.close();
    await closeLoginLimiter(t.deps);
    await t.close();
  }
});

async function served(trusted: string): Promise<{ t: TestApp; base: string }> {
  const t = await startTestApp({ SVC_TRUSTED_PROXIES: trusted });
  const served = await listen(t);
  opened.push({ t, served });
  return { t, base: `http://127.0.0.1:${served.port}` };
}

async function failLogin(base: string, name: string, xff: string): Promise<void> {
  const res = await fetch(`${base}/api/v0/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': xff },
    body: JSON.stringify({ name, password: 'wrong-password' }),
  });
  const checked = checkResponse('POST', '/api/v0/auth/login', res.status, res.headers, await res.text());
  expect(checked.status).toBe(401);
}

async function limiterAddresses(t: TestApp, name: string): Promise<string[]> {
  const res = await t.request('GET', '/api/v0/meta/login-rate-limit', { query: { include: 'all', scope: 'user_ip', q: name } });
  expect(res.status, res.text).toBe(200);
  return (res.body as { entries: { ip: string }[] }).entries.map((e) => e.ip);
}

const docIp = () => `198.51.100.${randomInt(1, 255)}`;

describe('SVC_TRUSTED_PROXIES with CIDR blocks (real HTTP)', () => {
  it('login from a peer inside a trusted block: the failure counts against the forwarded client address', async () => {
    const { t, base } = await served('10.0.0.0/8, 127.0.0.0/8, 2001:db8::/32');
    const name = uniq('cidr');
    const client = docIp();
    // client → an inner proxy (10.x, trusted) → the test client (127.0.0.1, trusted by its block)
    await failLogin(base, name, `203.0.113.77, ${client}, 10.20.30.40`);
    expect(await limiterAddresses(t, name)).toEqual([client]);
  });

  it('login from a peer outside every trusted block: the failure counts against the peer', async () => {
    const { t, base } = await served('10.0.0.0/8, 2001:db8::/32');
    const name = uniq('cidr');
    await failLogin(base, name, `${docIp()}, 10.20.30.40`);
    expect(await limiterAddresses(t, name)).toEqual(['127.0.0.1']);
  });

  it('a malformed SVC_TRUSTED_PROXIES stops start-up naming the setting and the entry', () => {
    expect(() => loadConfig({ SVC_TRUSTED_PROXIES: '10.0.0.0/8, 10.0.0.0/40' })).toThrow(ConfigError);
    expect(() => loadConfig({ SVC_TRUSTED_PROXIES: 'lb.internal' })).toThrow(/SVC_TRUSTED_PROXIES: "lb.internal"/);
  });
});
