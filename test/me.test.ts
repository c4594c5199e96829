import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.ts';
import { createGroup, createHuman, createServiceAccount, scopedTokenFor, tokenFor } from './iam-fixtures.ts';

let t: TestApp;
let adminId: number;
beforeAll(async () => {
  t = await startTestApp();
  const [a] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
  adminId = a!.id;
});
afterAll(async () => {
  await t.close();
});

describe('getMe', () => {
  it('getMe 200 returns the principal and the current token, not the settings', async () => {
    const h = await createHuman(t);
    const res = await t.request('GET', '/api/v1/iam/me', { token: h.token });
    expect(res.status).toBe(200);
    const body = res.body as { principal: Record<string, unknown>; token: Record<string, unknown> };
    expect(body.principal).toMatchObject({ id: h.id, kind: 'human', name: h.name, identity_scope: 'local', revision: 1 });
    expect(body.token).toMatchObject({ name: 'login', description: null, scope: null });
    expect(body.token.last_used_at).not.toBeNull();
    expect(Object.keys(body.principal)).not.toContain('settings');
  });

  it('getMe 200 for a scoped token shows its scope, and for a service account', async () => {
    const scoped = await scopedTokenFor(t, adminId);
    const res = await t.request('GET', '/api/v1/iam/me', { token: scoped });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ principal: { id: adminId }, token: { scope: { permissions: ['ReadCollection'] } } });
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const sares = await t.request('GET', '/api/v1/iam/me', { token: await tokenFor(t, sa.id) });
    expect(sares.body).toMatchObject({ principal: { id: sa.id, kind: 'service_account', name: sa.name } });
  });

  it('getMe 401 without a valid token', async () => {
    expect((await t.request('GET', '/api/v1/iam/me', { token: null })).status).toBe(401);
    expect((await t.request('GET', '/api/v1/iam/me', { token: 'nope' })).status).toBe(401);
  });
});

describe('getPublicConfig', () => {
  it('getPublicConfig 200 without authentication', async () => {
    const res = await t.request('GET', '/api/v1/config', { token: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      authentication: { default_token_lifetime_hours: 24, max_token_lifetime_hours: 8760 },
      pagination: { default_page_limit: 100, max_page_limit: 250 },
    });
  });
});

describe('getAdminConfig', () => {
  it('getAdminConfig 200 lists every setting with secrets redacted', async () => {
    const res = await t.request('GET', '/api/v1/admin/config');
    expect(res.status).toBe(200);
    const body = res.body as { version: string; runtime_role: string; settings: Record<string, unknown> };
    expect(body.version).toBe('0.0.18');
    expect(body.runtime_role).toBe('all');
    expect(body.settings.SVC_ADMIN_PASSWORD).toBe('[redacted]');
    expect(body.settings.SVC_DATABASE_URL).toBe('[redacted]');
    expect(body.settings.SVC_TOKEN_LIFETIME_HOURS).toBe(24);
    expect(body.settings.SVC_LOGIN_RATE_LIMIT_REDIS_URL).toBeNull();
    expect(res.text).not.toContain('test-admin-password');
    expect(res.text).not.toContain('postgres://');
  });

  it('getAdminConfig 403 for a non-admin and for an admin with a scoped token; 401 without a token', async () => {
    const h = await createHuman(t);
    expect((await t.request('GET', '/api/v1/admin/config', { token: h.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/admin/config', { token: await scopedTokenFor(t, adminId) })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/admin/config', { token: null })).status).toBe(401);
  });
});

describe('getMetaDb', () => {
  it('getMetaDb 200 reports pool and database figures', async () => {
    const res = await t.request('GET', '/api/v0/meta/db');
    expect(res.status).toBe(200);
    const body = res.body as Record<string, number | string | null>;
    expect(body.backend).toBe('postgresql');
    expect(body.pool_size).toBe(t.deps.config.SVC_DB_POOL_MAX);
    expect(body.total_connections).toBeGreaterThanOrEqual(1);
    expect(body.database_size_bytes).toBeGreaterThan(0);
    expect(String(body.server_version)).toMatch(/^\d+/);
  });

  it('getMetaDb 403 for a non-admin, 401 without a token', async () => {
    const h = await createHuman(t);
    expect((await t.request('GET', '/api/v0/meta/db', { token: h.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v0/meta/db', { token: null })).status).toBe(401);
  });
});

describe('getMetaTasks', () => {
  it('getMetaTasks 200 counts tasks by status and kind with queue ages', async () => {
    // A queued task of a fresh principal (no worker runs in tests, and nobody else lists its tasks).
    const h = await createHuman(t);
    await t.deps.sql`
      insert into tasks (kind, status, submitted_by, created_at) values ('export', 'queued', ${h.id}, now() - interval '10 minutes')`;
    const res = await t.request('GET', '/api/v0/meta/tasks');
    expect(res.status).toBe(200);
    const body = res.body as {
      total: number;
      by_status: Record<string, number>;
      by_kind: Record<string, number>;
      active_by_kind: Record<string, number>;
      oldest_queued_age_seconds: number | null;
      workers: Record<string, unknown>;
    };
    expect(body.by_status.queued).toBeGreaterThanOrEqual(1);
    expect(body.by_kind.export).toBeGreaterThanOrEqual(1);
    expect(body.active_by_kind.export).toBeGreaterThanOrEqual(1);
    expect(body.total).toBe(Object.values(body.by_status).reduce((a, b) => a + b, 0));
    expect(body.oldest_queued_age_seconds).toBeGreaterThanOrEqual(600);
    expect(body.workers).toEqual({
      runtime_role: 'all',
      task_workers: t.deps.config.SVC_TASK_WORKERS,
      poll_interval_ms: t.deps.config.SVC_TASK_POLL_INTERVAL_MS,
    });
  });

  it('getMetaTasks 403 for a non-admin', async () => {
    const h = await createHuman(t);
    expect((await t.request('GET', '/api/v0/meta/tasks', { token: h.token })).status).toBe(403);
  });
});
