import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.ts';
import { addMember, createGroup, createHuman, createServiceAccount, scopedTokenFor, tokenFor } from './iam-fixtures.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const validate = (token: string) => t.request('GET', '/api/v0/auth/validate', { token });

async function tokenEvents(id: number): Promise<string[]> {
  const rows = await t.deps.sql<
    { action: string }[]
  >`select action from events where entity_type = 'token' and entity_id = ${id} order by id`;
  return rows.map((r) => r.action);
}

async function tokenIdOf(token: string): Promise<number> {
  const me = await t.request('GET', '/api/v1/iam/me', { token });
  return (me.body as { token: { id: number } }).token.id;
}

describe('login', () => {
  it('login 200 records a token.created event for the user', async () => {
    const h = await createHuman(t);
    const token = await t.login(h.name, h.password);
    const id = await tokenIdOf(token);
    const [ev] = await t.deps.sql<{ action: string; actor_user_id: number; text: string }[]>`
      select action, actor_user_id, to_jsonb(e)::text as text from events e where entity_type = 'token' and entity_id = ${id}`;
    expect(ev).toMatchObject({ action: 'created', actor_user_id: h.id });
    expect(ev!.text).not.toContain(token);
  });

  it('login 401 for a service account (no password) with the generic message', async () => {
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const res = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: sa.name, password: 'anything' } });
    expect(res.status).toBe(401);
    expect((res.body as { message: string }).message).toBe('login failed: invalid credentials');
  });

  it('login 400 for unknown members and malformed JSON', async () => {
    expect((await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: 'a', password: 'b', extra: 1 } })).status).toBe(400);
    expect((await t.request('POST', '/api/v0/auth/login', { token: null, rawBody: '{"name":' })).status).toBe(400);
  });
});

describe('validateToken', () => {
  it('validateToken 200 advances last_used_at; 401 for revoked, expired, unknown and disabled-owner tokens alike', async () => {
    const h = await createHuman(t);
    const id = await tokenIdOf(h.token);
    await t.deps.sql`update tokens set last_used_at = null where id = ${id}`;
    expect((await validate(h.token)).status).toBe(200);
    const [row] = await t.deps.sql<{ last_used_at: Date | null }[]>`select last_used_at from tokens where id = ${id}`;
    expect(row!.last_used_at).not.toBeNull();

    const expired = await t.login(h.name, h.password);
    await t.deps.sql`update tokens set expires_at = now() - interval '1 second' where id = ${await tokenIdOf(expired)}`;
    // A legacy row without expires_at expires SVC_TOKEN_LIFETIME_HOURS after issue.
    const legacy = await t.login(h.name, h.password);
    await t.deps.sql`update tokens set expires_at = null, issued = now() - interval '25 hours' where id = ${await tokenIdOf(legacy)}`;
    const legacyFresh = await t.login(h.name, h.password);
    await t.deps.sql`update tokens set expires_at = null, issued = now() - interval '23 hours' where id = ${await tokenIdOf(legacyFresh)}`;
    expect((await validate(legacyFresh)).status).toBe(200);
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await validate(saToken)).status).toBe(200);
    await t.deps.sql`update service_accounts set disabled_at = now() where principal_id = ${sa.id}`;
    const messages = new Set<string>();
    for (const token of [expired, legacy, saToken, 'A'.repeat(43)]) {
      const res = await validate(token);
      expect(res.status).toBe(401);
      messages.add((res.body as { message: string }).message);
    }
    expect(messages.size).toBe(1);
    expect((await t.request('GET', '/api/v0/auth/validate', { token: null })).status).toBe(401);
  });
});

describe('logout', () => {
  it('logout 200 revokes the presented token (also for scoped and service-account tokens); reuse is 401', async () => {
    const h = await createHuman(t);
    const other = await t.login(h.name, h.password);
    const id = await tokenIdOf(h.token);
    const res = await t.request('POST', '/api/v0/auth/logout', { token: h.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ message: expect.any(String) });
    expect((await validate(h.token)).status).toBe(401);
    expect((await t.request('POST', '/api/v0/auth/logout', { token: h.token })).status).toBe(401);
    expect((await validate(other)).status).toBe(200);
    expect(await tokenEvents(id)).toEqual(['created', 'revoked']);

    const scoped = await scopedTokenFor(t, h.id);
    expect((await t.request('POST', '/api/v0/auth/logout', { token: scoped })).status).toBe(200);
    expect((await validate(scoped)).status).toBe(401);
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await t.request('POST', '/api/v0/auth/logout', { token: saToken })).status).toBe(200);
    expect((await validate(saToken)).status).toBe(401);
  });
});

describe('logoutToken', () => {
  it('logoutToken 200 revokes an own token by value; a repeat is a no-op without an event', async () => {
    const h = await createHuman(t);
    const victim = await t.login(h.name, h.password);
    const id = await tokenIdOf(victim);
    expect((await t.request('POST', '/api/v0/auth/logout/token', { token: h.token, body: { token: victim } })).status).toBe(200);
    expect((await validate(victim)).status).toBe(401);
    expect((await validate(h.token)).status).toBe(200);
    expect((await t.request('POST', '/api/v0/auth/logout/token', { token: h.token, body: { token: victim } })).status).toBe(200);
    expect(await tokenEvents(id)).toEqual(['created', 'revoked']);
  });

  it("logoutToken 200 for an admin revoking another user's token; 404 for a non-admin or an unknown token", async () => {
    const h = await createHuman(t);
    const other = await createHuman(t);
    const res = await t.request('POST', '/api/v0/auth/logout/token', { token: other.token, body: { token: h.token } });
    expect(res.status).toBe(404);
    expect((await validate(h.token)).status).toBe(200);
    expect((await t.request('POST', '/api/v0/auth/logout/token', { token: other.token, body: { token: 'B'.repeat(43) } })).status).toBe(
      404,
    );
    expect((await t.request('POST', '/api/v0/auth/logout/token', { body: { token: h.token } })).status).toBe(200);
    expect((await validate(h.token)).status).toBe(401);
  });

  it('logoutToken 403 for service accounts and scoped tokens; 400 without the token member', async () => {
    const h = await createHuman(t);
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await t.request('POST', '/api/v0/auth/logout/token', { token: saToken, body: { token: saToken } })).status).toBe(403);
    const scoped = await scopedTokenFor(t, h.id);
    expect((await t.request('POST', '/api/v0/auth/logout/token', { token: scoped, body: { token: scoped } })).status).toBe(403);
    expect((await t.request('POST', '/api/v0/auth/logout/token', { token: h.token, body: {} })).status).toBe(400);
    expect((await t.request('POST', '/api/v0/auth/logout/token', { token: null, body: { token: 'x' } })).status).toBe(401);
  });
});

describe('logoutUser', () => {
  it('logoutUser 200 by an admin revokes every token of the user, one event each', async () => {
    const h = await createHuman(t);
    const second = await t.login(h.name, h.password);
    const ids = [await tokenIdOf(h.token), await tokenIdOf(second)];
    const res = await t.request('POST', `/api/v0/auth/logout/uid/${h.id}`);
    expect(res.status).toBe(200);
    expect((await validate(h.token)).status).toBe(401);
    expect((await validate(second)).status).toBe(401);
    for (const id of ids) expect(await tokenEvents(id)).toEqual(['created', 'revoked']);
  });

  it('logoutUser 200 for oneself and for an owner-group member of a service account', async () => {
    const h = await createHuman(t);
    const keep = await t.login(h.name, h.password);
    expect((await t.request('POST', `/api/v0/auth/logout/uid/${h.id}`, { token: keep })).status).toBe(200);
    expect((await validate(keep)).status).toBe(401);

    const owner = await createHuman(t);
    const g = await createGroup(t);
    await addMember(t, g.id, owner.id);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await t.request('POST', `/api/v0/auth/logout/uid/${sa.id}`, { token: owner.token })).status).toBe(200);
    expect((await validate(saToken)).status).toBe(401);
    expect((await validate(owner.token)).status).toBe(200);
  });

  it('logoutUser 403 for another human, a service account and a scoped token; 404 for an unknown principal', async () => {
    const h = await createHuman(t);
    const other = await createHuman(t);
    expect((await t.request('POST', `/api/v0/auth/logout/uid/${h.id}`, { token: other.token })).status).toBe(403);
    expect((await validate(h.token)).status).toBe(200);
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await t.request('POST', `/api/v0/auth/logout/uid/${sa.id}`, { token: saToken })).status).toBe(403);
    const scoped = await scopedTokenFor(t, h.id);
    expect((await t.request('POST', `/api/v0/auth/logout/uid/${h.id}`, { token: scoped })).status).toBe(403);
    expect((await t.request('POST', '/api/v0/auth/logout/uid/2000000000')).status).toBe(404);
    expect((await t.request('POST', '/api/v0/auth/logout/uid/0')).status).toBe(400);
  });
});

describe('logoutAll', () => {
  it('logoutAll 200 revokes every token of the caller and no one else', async () => {
    const h = await createHuman(t);
    const other = await createHuman(t);
    const second = await t.login(h.name, h.password);
    const res = await t.request('POST', '/api/v0/auth/logout_all', { token: h.token });
    expect(res.status).toBe(200);
    expect((await validate(h.token)).status).toBe(401);
    expect((await validate(second)).status).toBe(401);
    expect((await validate(other.token)).status).toBe(200);
  });

  it('logoutAll 403 for a service account and a scoped token', async () => {
    const h = await createHuman(t);
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await t.request('POST', '/api/v0/auth/logout_all', { token: saToken })).status).toBe(403);
    const scoped = await scopedTokenFor(t, h.id);
    expect((await t.request('POST', '/api/v0/auth/logout_all', { token: scoped })).status).toBe(403);
    expect((await validate(h.token)).status).toBe(200);
    expect((await t.request('POST', '/api/v0/auth/logout_all', { token: null })).status).toBe(401);
  });
});

describe('listAuthProviders', () => {
  it('listAuthProviders 200 without authentication includes local', async () => {
    const res = await t.request('GET', '/api/v0/auth/providers', { token: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ providers: ['local'] });
  });
});
