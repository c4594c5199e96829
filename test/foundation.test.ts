import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve } from '@hono/node-server';
import YAML from 'yaml';
import { startTestApp, ADMIN_PASSWORD, type TestApp } from './helpers.ts';
import { checkResponse, ContractViolation } from './contract-check.ts';
import { handlers } from '../src/handlers/index.ts';
import { operations } from '../generated/operations.ts';
import { loadConfig, ConfigError, SETTINGS } from '../src/config.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

describe('probes and documents', () => {
  it('getHealth 200', async () => {
    const res = await t.request('GET', '/healthz', { token: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('getHealth is answered in the same turn: app.fetch returns the Response itself, not a promise', async () => {
    // What lets @hono/node-server write /healthz while it handles the request's read (README
    // "Throughput"); an operation that awaits something answers with a promise.
    const res = t.app.fetch(new Request('http://127.0.0.1/healthz'));
    expect(res).toBeInstanceOf(Response);
    const health = res as Response;
    const checked = checkResponse('GET', '/healthz', health.status, health.headers, await health.text());
    expect(checked.status).toBe(200);
    expect(checked.body).toEqual({ status: 'ok' });
    const ready = t.app.fetch(new Request('http://127.0.0.1/readyz'));
    expect(ready).toBeInstanceOf(Promise);
    const readyRes = await ready;
    expect(checkResponse('GET', '/readyz', readyRes.status, readyRes.headers, await readyRes.text()).status).toBe(200);
  });

  it('getReadiness 200 once migrated', async () => {
    const res = await t.request('GET', '/readyz', { token: null });
    expect(res.status).toBe(200);
  });

  it('getOpenApiDocument 200 is the contract', async () => {
    const res = await t.request('GET', '/api-doc/openapi.json', { token: null });
    expect(res.status).toBe(200);
    const doc = res.body as { openapi: string; info: { version: string }; servers: { url: string; description?: string }[] };
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('0.0.18');
    // One server entry, the deployment base `/` (its description tells generated clients their base URL).
    expect(doc.servers.map((s) => s.url)).toEqual(['/']);
  });

  it('getApiReference 200 serves a page whose assets are local', async () => {
    const res = await t.request('GET', '/docs', { token: null });
    expect(res.status).toBe(200);
    expect(res.text).toContain('/docs/assets/swagger-ui-bundle.js');
    expect(res.text).not.toMatch(/https?:\/\//);
    const asset = await t.app.fetch(new Request('http://test.local/docs/assets/swagger-ui-bundle.js'));
    expect(asset.status).toBe(200);
    expect((await asset.text()).length).toBeGreaterThan(100_000);
  });

  it('getMetrics 200 in Prometheus text format', async () => {
    const res = await t.request('GET', '/metrics', { token: null });
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/^# HELP svc_/m);
  });

  it('unknown path 404 and wrong method 405 carry the error body', async () => {
    const a = await t.app.fetch(new Request('http://test.local/api/v1/nothing-here'));
    expect(a.status).toBe(404);
    expect(await a.json()).toMatchObject({ error: 'Not Found' });
    const b = await t.app.fetch(new Request('http://test.local/healthz', { method: 'DELETE' }));
    expect(b.status).toBe(405);
    expect(b.headers.get('x-request-id')).toBeTruthy();
    // RFC 9110: a 405 names the methods the path takes
    expect(b.headers.get('allow')).toBe('GET, HEAD');
    const c = await t.app.fetch(
      new Request('http://test.local/api/v1/collections', { method: 'PUT', headers: { authorization: `Bearer ${t.adminToken}` } }),
    );
    expect(c.status).toBe(405);
    expect(c.headers.get('allow')).toBe('GET, HEAD, POST');
    // a templated path: the methods of every route it matched
    const d = await t.app.fetch(
      new Request('http://test.local/api/v1/collections/1', { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}` } }),
    );
    expect(d.status).toBe(405);
    expect(d.headers.get('allow')).toBe('GET, HEAD, PATCH, DELETE');
  });

  it('HEAD answers wherever GET does: its status and headers, no body (as a load balancer probes)', async () => {
    for (const path of ['/healthz', '/readyz', '/api-doc/openapi.json', '/docs', '/metrics']) {
      const head = await t.app.fetch(new Request(`http://test.local${path}`, { method: 'HEAD' }));
      expect(head.status, path).toBe(200);
      expect(await head.text(), path).toBe('');
      expect(head.headers.get('x-request-id'), path).toBeTruthy();
      // the length its GET sends (RFC 9110 8.6), for a client sizing a download or a cache
      if (path !== '/metrics') {
        const got = await t.app.fetch(new Request(`http://test.local${path}`));
        expect(head.headers.get('content-length'), path).toBe(String((await got.arrayBuffer()).byteLength));
      } else expect(Number(head.headers.get('content-length')), path).toBeGreaterThan(0);
    }
    // an operation with a bearer token: authorised as its GET is
    const denied = await t.app.fetch(new Request('http://test.local/api/v1/collections', { method: 'HEAD' }));
    expect(denied.status).toBe(401);
    const listed = await t.app.fetch(
      new Request('http://test.local/api/v1/collections', { method: 'HEAD', headers: { authorization: `Bearer ${t.adminToken}` } }),
    );
    expect(listed.status).toBe(200);
    expect(listed.headers.get('content-type')).toBe('application/json');
    expect(await listed.text()).toBe('');
    // a stream (server-sent events): its headers, no body, no length (its producer is cancelled)
    const streamed = await t.app.fetch(
      new Request('http://test.local/api/v1/search/stream?q=anything', {
        method: 'HEAD',
        headers: { authorization: `Bearer ${t.adminToken}` },
      }),
    );
    expect(streamed.status).toBe(200);
    expect(streamed.headers.get('content-type')).toBe('text/event-stream');
    expect(streamed.headers.get('content-length')).toBeNull();
    expect(await streamed.text()).toBe('');
    const listedGet = await t.request('GET', '/api/v1/collections');
    expect(listed.headers.get('content-length')).toBe(String(Buffer.byteLength(JSON.stringify(listedGet.body))));
    const missing = await t.app.fetch(
      new Request('http://test.local/api/v1/collections/999999999', {
        method: 'HEAD',
        headers: { authorization: `Bearer ${t.adminToken}` },
      }),
    );
    expect(missing.status).toBe(404);
  });
});

describe('login and validateToken', () => {
  it('login 200 returns a token that validates', async () => {
    const res = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: 'admin', password: ADMIN_PASSWORD } });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const { token, expires_at } = res.body as { token: string; expires_at: string };
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(expires_at)).toBeGreaterThan(Date.now() + 23 * 3600_000);
    const v = await t.request('GET', '/api/v0/auth/validate', { token });
    expect(v.status).toBe(200);
  });

  it('login 401 for a wrong password, an unknown user or an unknown scope, with one message', async () => {
    const a = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: 'admin', password: 'wrong' } });
    const b = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: 'nobody-here', password: 'wrong' } });
    const c = await t.request('POST', '/api/v0/auth/login', {
      token: null,
      body: { name: 'admin', password: ADMIN_PASSWORD, identity_scope: 'nowhere' },
    });
    expect([a.status, b.status, c.status]).toEqual([401, 401, 401]);
    expect((a.body as { message: string }).message).toBe((b.body as { message: string }).message);
  });

  it('login 400 for over-length fields, unknown members and malformed JSON', async () => {
    const long = 'x'.repeat(256);
    const a = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: long, password: 'p' } });
    expect(a.status).toBe(400);
    const b = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: 'admin', password: 'p', extra: 1 } });
    expect(b.status).toBe(400);
    const c = await t.request('POST', '/api/v0/auth/login', { token: null, rawBody: '{"name":' });
    expect(c.status).toBe(400);
    expect(c.body).toMatchObject({ error: 'Bad Request' });
    // 255 astral characters are 510 UTF-16 units but still within the limit: a normal 401.
    const d = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: '😀'.repeat(255), password: 'p' } });
    expect(d.status).toBe(401);
  });

  it('validateToken 401 without, with a malformed and with an unknown token', async () => {
    for (const token of [null, 'not a token', 'A'.repeat(43)]) {
      const res = await t.request('GET', '/api/v0/auth/validate', { token });
      expect(res.status).toBe(401);
    }
  });

  it('every response carries x-request-id and echoes nothing secret', async () => {
    const res = await t.request('GET', '/api/v0/auth/validate');
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('the contract', () => {
  it('every operation of openapi.yaml has a handler', () => {
    const doc = YAML.parse(readFileSync('openapi.yaml', 'utf8')) as { paths: Record<string, Record<string, { operationId?: string }>> };
    const ids = Object.values(doc.paths).flatMap((item) =>
      Object.values(item)
        .map((op) => op?.operationId)
        .filter(Boolean),
    );
    expect(new Set(ids)).toEqual(new Set(Object.keys(operations)));
    expect(Object.keys(handlers).sort()).toEqual(Object.keys(operations).sort());
  });

  it('the response checker rejects a response that breaks the contract', () => {
    const h = new Headers({ 'content-type': 'application/json', 'x-request-id': 'x' });
    expect(() => checkResponse('GET', '/healthz', 200, h, '{"status":"fine"}')).toThrow(ContractViolation);
    expect(() => checkResponse('GET', '/healthz', 200, h, '{"status":"ok","extra":1}')).toThrow(ContractViolation);
    expect(() => checkResponse('POST', '/api/v0/auth/login', 200, h, '{"token":"x","expires_at":"2026-01-01T00:00:00Z"}')).toThrow(
      /Cache-Control/,
    );
    expect(() => checkResponse('GET', '/healthz', 200, new Headers({ 'content-type': 'text/plain', 'x-request-id': 'x' }), 'ok')).toThrow(
      ContractViolation,
    );
    expect(() => checkResponse('GET', '/healthz', 200, h, '{"status":"ok"}')).not.toThrow();
  });
});

describe('configuration', () => {
  it('a bad value names the setting', () => {
    expect(() => loadConfig({ SVC_TOKEN_LIFETIME_HOURS: 'soon' })).toThrow(ConfigError);
    expect(() => loadConfig({ SVC_TOKEN_LIFETIME_HOURS: 'soon' })).toThrow(/SVC_TOKEN_LIFETIME_HOURS/);
    expect(() => loadConfig({ SVC_BIND: 'nowhere' })).toThrow(/SVC_BIND/);
    expect(() => loadConfig({ SVC_RUNTIME_ROLE: 'both' })).toThrow(/SVC_RUNTIME_ROLE/);
    expect(() => loadConfig({ SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE: '5' })).toThrow(/SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE/);
    expect(loadConfig({}).SVC_BIND).toBe('127.0.0.1:8080');
    expect(loadConfig({ DATABASE_URL: 'postgres://x/y' }).SVC_DATABASE_URL).toBe('postgres://x/y');
  });

  it('the README documents every setting', () => {
    const readme = readFileSync('README.md', 'utf8');
    for (const name of Object.keys(SETTINGS)) expect(readme, name).toContain(name);
  });
});

describe('audit stream', () => {
  it('events are append-only', async () => {
    const sql = t.deps.sql;
    await expect(sql`update events set summary = 'changed' where id = (select min(id) from events)`).rejects.toThrow(/append-only/);
    await expect(sql`delete from events where id = (select min(id) from events)`).rejects.toThrow(/append-only/);
  });

  it('login writes a token.created event without the raw token', async () => {
    const token = await t.login('admin', ADMIN_PASSWORD);
    const rows = await t.deps.sql<
      { after: unknown }[]
    >`select after from events where entity_type = 'token' and action = 'created' order by id desc limit 5`;
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) expect(JSON.stringify(r.after)).not.toContain(token);
  });
});

describe('real HTTP', () => {
  it('serves over a socket', async () => {
    const server = serve({ fetch: t.app.fetch, hostname: '127.0.0.1', port: 0 });
    await new Promise<void>((ok) => server.once('listening', () => ok()));
    const addr = server.address() as { port: number };
    try {
      const res = await fetch(`http://127.0.0.1:${addr.port}/healthz`);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toBeTruthy();
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()));
    }
  });
});
