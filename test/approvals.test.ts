import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, ADMIN_PASSWORD, type TestApp } from './helpers.ts';
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

const create = (body: unknown, token = t.adminToken) => t.request('POST', '/api/v1/iam/credential-approvals', { token, body });
const get = (id: string, token = t.adminToken) => t.request('GET', `/api/v1/iam/credential-approvals/${id}`, { token });

interface Created {
  approval: string;
  token_expires_at: string | null;
  record: Record<string, unknown> & { id: string; created_at: string; expires_at: string };
}

describe('createCredentialApproval', () => {
  it('createCredentialApproval 201 for create_token returns the approval, its record and the resolved expiry', async () => {
    const h = await createHuman(t);
    const res = await create(
      { password: h.password, operation: { kind: 'create_token', principal_id: h.id, token: { name: 'n' } } },
      h.token,
    );
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = res.body as Created;
    expect(res.headers.get('location')).toBe(`/api/v1/iam/credential-approvals/${body.approval}`);
    const me = (await t.request('GET', '/api/v1/iam/me', { token: h.token })).body as { token: { id: number } };
    expect(body.record).toMatchObject({
      id: body.approval,
      kind: 'create_token',
      status: 'pending',
      approved_by: h.id,
      token_id: me.token.id,
      target_principal_id: h.id,
      target_token_id: null,
      target_restore_id: null,
      token_expires_at: body.token_expires_at,
      consumed_at: null,
    });
    const lifetime = Date.parse(body.record.expires_at) - Date.parse(body.record.created_at);
    expect(lifetime).toBeGreaterThan(0);
    expect(lifetime).toBeLessThanOrEqual(120_000);
    expect(Math.abs(Date.parse(body.token_expires_at!) - (Date.now() + 24 * 3600_000))).toBeLessThan(60_000);
    const [ev] = await t.deps.sql<{ action: string; text: string }[]>`
      select action, to_jsonb(e)::text as text from events e
      where entity_type = 'credential_approval' and actor_user_id = ${h.id} order by id desc limit 1`;
    expect(ev!.action).toBe('created');
    expect(ev!.text).not.toContain(h.password);
    expect(ev!.text).not.toContain(body.approval);
  });

  it('createCredentialApproval 201 for renew_token, create_user and update_user with their targets', async () => {
    const h = await createHuman(t);
    const tokenId = ((await t.request('GET', '/api/v1/iam/me', { token: h.token })).body as { token: { id: number } }).token.id;
    const renew = await create(
      { password: h.password, operation: { kind: 'renew_token', principal_id: h.id, token_id: tokenId, token: {} } },
      h.token,
    );
    expect(renew.status, renew.text).toBe(201);
    expect((renew.body as Created).record).toMatchObject({ kind: 'renew_token', target_principal_id: h.id, target_token_id: tokenId });
    const cu = await create({
      password: ADMIN_PASSWORD,
      operation: { kind: 'create_user', user: { name: 'someone', password: 'pw-123456' } },
    });
    expect(cu.status, cu.text).toBe(201);
    expect(cu.body).toMatchObject({
      token_expires_at: null,
      record: { kind: 'create_user', target_principal_id: null, token_expires_at: null },
    });
    const uu = await create(
      { password: h.password, operation: { kind: 'update_user', user_id: h.id, user: { password: 'new-password-1' } } },
      h.token,
    );
    expect(uu.status, uu.text).toBe(201);
    expect((uu.body as Created).record).toMatchObject({ kind: 'update_user', target_principal_id: h.id });
  });

  it('createCredentialApproval 403 for a wrong password (the bearer token stays valid), then 429 from the login rate limit', async () => {
    const h = await createHuman(t);
    const op = { kind: 'create_token', principal_id: h.id, token: {} };
    const res = await create({ password: 'not-my-password', operation: op }, h.token);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ reason: 'reauthentication_failed' });
    expect((await t.request('GET', '/api/v0/auth/validate', { token: h.token })).status).toBe(200);
    for (let i = 0; i < 4; i++) expect((await create({ password: 'not-my-password', operation: op }, h.token)).status).toBe(403);
    const limited = await create({ password: h.password, operation: op }, h.token);
    expect(limited.status).toBe(429);
    // Release the lockout again so the rest of this file is unaffected.
    await t.request('DELETE', '/api/v0/meta/login-rate-limit');
    expect((await create({ password: h.password, operation: op }, h.token)).status).toBe(201);
  });

  it('createCredentialApproval 403 for service accounts and scoped tokens', async () => {
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    const op = { kind: 'create_token', principal_id: sa.id, token: {} };
    expect((await create({ password: 'x', operation: op }, saToken)).status).toBe(403);
    const scoped = await scopedTokenFor(t, adminId);
    expect((await create({ password: ADMIN_PASSWORD, operation: op }, scoped)).status).toBe(403);
    expect((await create({ password: ADMIN_PASSWORD, operation: op }, null as unknown as string)).status).toBe(401);
  });

  it('createCredentialApproval 404 for a missing principal, token or user', async () => {
    const h = await createHuman(t);
    for (const operation of [
      { kind: 'create_token', principal_id: 2_000_000_000, token: {} },
      { kind: 'renew_token', principal_id: h.id, token_id: 2_000_000_000, token: {} },
      { kind: 'update_user', user_id: 2_000_000_000, user: { email: 'a@example.com' } },
    ]) {
      const res = await create({ password: ADMIN_PASSWORD, operation });
      expect(res.status, JSON.stringify(operation)).toBe(404);
    }
  });

  it('createCredentialApproval 409 for minting for a disabled service account', async () => {
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    expect((await t.request('POST', `/api/v1/iam/service-accounts/${sa.id}/disable`)).status).toBe(200);
    const res = await create({ password: ADMIN_PASSWORD, operation: { kind: 'create_token', principal_id: sa.id, token: {} } });
    expect(res.status).toBe(409);
  });

  it('createCredentialApproval 400 for a malformed request', async () => {
    for (const body of [
      { password: ADMIN_PASSWORD },
      { password: '', operation: { kind: 'create_user', user: { name: 'x', password: 'y' } } },
      { password: ADMIN_PASSWORD, operation: { kind: 'launch_rocket' } },
      { password: ADMIN_PASSWORD, operation: { kind: 'create_token', principal_id: adminId, token: { ttl: 5 } } },
      { password: ADMIN_PASSWORD, operation: { kind: 'create_token', principal_id: adminId, token: {} }, extra: true },
    ]) {
      const res = await create(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
  });
});

describe('getCredentialApproval', () => {
  it('getCredentialApproval 200 pending, then consumed once the approved request used it', async () => {
    const h = await createHuman(t);
    const body = { name: 'via-approval' };
    const created = (await create({ password: h.password, operation: { kind: 'create_token', principal_id: h.id, token: body } }, h.token))
      .body as Created;
    const before = await get(created.approval, h.token);
    expect(before.status).toBe(200);
    expect(before.headers.get('cache-control')).toBe('no-store');
    expect(before.body).toEqual(created.record);
    const minted = await t.request('POST', `/api/v1/iam/principals/${h.id}/tokens`, {
      token: h.token,
      body,
      headers: { 'x-svc-credential-approval': created.approval },
    });
    expect(minted.status).toBe(201);
    const after = (await get(created.approval, h.token)).body as Record<string, unknown>;
    expect(after).toMatchObject({ status: 'consumed' });
    expect(after.consumed_at).not.toBeNull();
    const events = await t.deps.sql<
      { action: string; entity_id: number; entity_name: string; summary: string; after: unknown; metadata: unknown }[]
    >`
      select action, entity_id, entity_name, summary, after, metadata
      from events where entity_type = 'credential_approval' and actor_user_id = ${h.id} order by id`;
    expect(events.map((a) => a.action)).toEqual(['created', 'consumed']);
    // the consumed event (written by the consuming statement) shows the approval as stored, to the ms
    const [made, used] = events;
    expect(used).toEqual({
      action: 'consumed',
      entity_id: made!.entity_id,
      entity_name: 'create_token',
      summary: 'credential approval for create_token used',
      after: { ...(made!.after as object), consumed_at: after.consumed_at },
      metadata: made!.metadata,
    });
  });

  it('getCredentialApproval 200 expired after 120 s, and an expired approval no longer authorizes', async () => {
    const h = await createHuman(t);
    const created = (await create({ password: h.password, operation: { kind: 'create_token', principal_id: h.id, token: {} } }, h.token))
      .body as Created;
    await t.deps.sql`
      update credential_approvals set created_at = created_at - interval '1 hour', expires_at = expires_at - interval '1 hour'
      where approved_by = ${h.id}`;
    expect((await get(created.approval, h.token)).body).toMatchObject({ status: 'expired', consumed_at: null });
    const res = await t.request('POST', `/api/v1/iam/principals/${h.id}/tokens`, {
      token: h.token,
      body: {},
      headers: { 'x-svc-credential-approval': created.approval },
    });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ reason: 'reauthentication_required' });
  });

  it('getCredentialApproval 404 for another principal, an unknown and a malformed id', async () => {
    const h = await createHuman(t);
    const created = (await create({ password: h.password, operation: { kind: 'create_token', principal_id: h.id, token: {} } }, h.token))
      .body as Created;
    expect((await get(created.approval)).status).toBe(404);
    expect((await get('C'.repeat(43), h.token)).status).toBe(404);
    expect((await get('short', h.token)).status).toBe(404);
  });

  it('getCredentialApproval 403 for service accounts and scoped tokens, 401 without a token', async () => {
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    expect((await get('C'.repeat(43), await tokenFor(t, sa.id))).status).toBe(403);
    expect((await get('C'.repeat(43), await scopedTokenFor(t, adminId))).status).toBe(403);
    expect((await t.request('GET', `/api/v1/iam/credential-approvals/${'C'.repeat(43)}`, { token: null })).status).toBe(401);
  });
});
