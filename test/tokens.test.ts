import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, ADMIN_PASSWORD, type TestApp } from './helpers.ts';
import {
  addMember,
  adminGroupId,
  approve,
  createGroup,
  createHuman,
  createServiceAccount,
  scopedTokenFor,
  tokenFor,
  type Human,
} from './iam-fixtures.ts';
import { purgeTokens, tokenPurgeLoop } from '../src/workers/token-purge.ts';
import { hashToken } from '../src/domain/token-secret.ts';

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

type Body = Record<string, unknown>;
const tokensPath = (pid: number) => `/api/v1/iam/principals/${pid}/tokens`;

/** Approve and mint in one go, as `caller` (a human with password). */
async function mint(
  pid: number,
  body: Body,
  caller: { token: string; password: string } = { token: t.adminToken, password: ADMIN_PASSWORD },
) {
  const approval = await approve(t, { kind: 'create_token', principal_id: pid, token: body }, caller.token, caller.password);
  return t.request('POST', tokensPath(pid), { token: caller.token, body, headers: { 'x-svc-credential-approval': approval } });
}

async function mintOk(
  pid: number,
  body: Body = {},
  caller?: { token: string; password: string },
): Promise<{ raw: string; id: number; expires_at: string }> {
  const res = await mint(pid, body, caller);
  expect(res.status, res.text).toBe(201);
  const id = Number(/\/tokens\/(\d+)$/.exec(res.headers.get('location') ?? '')![1]);
  const b = res.body as { token: string; expires_at: string };
  return { raw: b.token, id, expires_at: b.expires_at };
}

async function renew(
  pid: number,
  tid: number,
  body: Body = {},
  caller: { token: string; password: string } = { token: t.adminToken, password: ADMIN_PASSWORD },
) {
  const approval = await approve(t, { kind: 'renew_token', principal_id: pid, token_id: tid, token: body }, caller.token, caller.password);
  return t.request('POST', `${tokensPath(pid)}/${tid}/renew`, {
    token: caller.token,
    body,
    headers: { 'x-svc-credential-approval': approval },
  });
}

async function ids(pid: number, state?: string, token = t.adminToken): Promise<number[]> {
  const res = await t.request('GET', tokensPath(pid), { token, query: state ? { state } : {} });
  expect(res.status, res.text).toBe(200);
  return (res.body as { id: number }[]).map((x) => x.id);
}

async function collectionId(): Promise<number> {
  const [c] = await t.deps.sql<{ id: number }[]>`insert into collections (name) values (${uniq('col')}) returning id`;
  return c!.id;
}

const self = (h: Human) => ({ token: h.token, password: h.password });

describe('createPrincipalToken', () => {
  it('createPrincipalToken 201 returns the raw token once with the approved expiry, Location, ETag and no-store', async () => {
    const h = await createHuman(t);
    const body = { name: 'ci', description: 'for CI', scope: { permissions: ['ReadCollection', 'ReadClass'] } };
    const approvalRes = await t.request('POST', '/api/v1/iam/credential-approvals', {
      token: h.token,
      body: { password: h.password, operation: { kind: 'create_token', principal_id: h.id, token: body } },
    });
    expect(approvalRes.status).toBe(201);
    const resolved = (approvalRes.body as { token_expires_at: string }).token_expires_at;
    const res = await t.request('POST', tokensPath(h.id), {
      token: h.token,
      body,
      headers: { 'x-svc-credential-approval': (approvalRes.body as { approval: string }).approval },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const { token, expires_at } = res.body as { token: string; expires_at: string };
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(expires_at)).toBe(Date.parse(resolved));
    expect(Date.parse(expires_at) - Date.now()).toBeGreaterThan(23.9 * 3600_000);
    const id = Number(/\/api\/v1\/iam\/principals\/\d+\/tokens\/(\d+)$/.exec(res.headers.get('location')!)![1]);
    expect(res.headers.get('etag')).toBe(`"svc-v1.token.${Buffer.from(String(id)).toString('base64url')}.1"`);
    // The new token works and carries exactly its scope.
    const me = await t.request('GET', '/api/v1/iam/me', { token });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({
      token: { id, name: 'ci', description: 'for CI', scope: { permissions: ['ReadCollection', 'ReadClass'] } },
    });
    // Its event never holds the raw token or its hash.
    const [ev] = await t.deps.sql<{ action: string; text: string }[]>`
      select action, (to_jsonb(e) - 'id')::text as text from events e where entity_type = 'token' and entity_id = ${id}`;
    expect(ev!.action).toBe('created');
    expect(ev!.text).not.toContain(token);
    expect(ev!.text).not.toContain(hashToken(t.deps.tokenKey, token).toString('hex'));
    expect(ev!.text).not.toContain(hashToken(t.deps.tokenKey, token).toString('base64'));
  });

  it('createPrincipalToken 201 honors a requested expires_at and stores resource scopes', async () => {
    const h = await createHuman(t);
    const cid = await collectionId();
    const expires = new Date(Date.now() + 2 * 3600_000).toISOString();
    const m = await mintOk(h.id, { expires_at: expires, scope: { resources: [{ kind: 'collection', id: cid }] } }, self(h));
    expect(Date.parse(m.expires_at)).toBe(Date.parse(expires));
    const got = await t.request('GET', `${tokensPath(h.id)}/${m.id}`, { token: h.token });
    expect(got.body).toMatchObject({
      scope: { resources: [{ kind: 'collection', id: cid }] },
      active: true,
      expired: false,
      revoked_at: null,
    });
  });

  it('createPrincipalToken 201 by an admin for another human and by an owner-group member for a service account', async () => {
    const h = await createHuman(t);
    await mintOk(h.id, { name: 'by-admin' });
    const owner = await createHuman(t);
    const g = await createGroup(t);
    await addMember(t, g.id, owner.id);
    const sa = await createServiceAccount(t, g.id);
    const m = await mintOk(sa.id, { name: 'sa-token' }, self(owner));
    expect((await t.request('GET', '/api/v0/auth/validate', { token: m.raw })).status).toBe(200);
  });

  it("createPrincipalToken 403 without, with a used, with a mismatching or with another token's approval", async () => {
    const h = await createHuman(t);
    const body = { name: 'x' };
    const none = await t.request('POST', tokensPath(h.id), { token: h.token, body });
    expect(none.status).toBe(403);
    expect(none.body).toMatchObject({ reason: 'reauthentication_required' });
    const approval = await approve(t, { kind: 'create_token', principal_id: h.id, token: body }, h.token, h.password);
    const other = await t.request('POST', tokensPath(h.id), {
      token: h.token,
      body: { name: 'y' },
      headers: { 'x-svc-credential-approval': approval },
    });
    expect(other.status).toBe(403);
    expect(other.body).toMatchObject({ reason: 'reauthentication_required' });
    // Same human, another bearer token: the approval is bound to the token that asked.
    const second = await t.login(h.name, h.password);
    const wrongBearer = await t.request('POST', tokensPath(h.id), {
      token: second,
      body,
      headers: { 'x-svc-credential-approval': approval },
    });
    expect(wrongBearer.status).toBe(403);
    const ok = await t.request('POST', tokensPath(h.id), { token: h.token, body, headers: { 'x-svc-credential-approval': approval } });
    expect(ok.status).toBe(201);
    const reused = await t.request('POST', tokensPath(h.id), { token: h.token, body, headers: { 'x-svc-credential-approval': approval } });
    expect(reused.status).toBe(403);
    expect(reused.body).toMatchObject({ reason: 'reauthentication_required' });
  });

  it('createPrincipalToken 403 for another human without admin, a service account and a scoped token', async () => {
    const h = await createHuman(t);
    const other = await createHuman(t);
    expect((await t.request('POST', tokensPath(h.id), { token: other.token, body: {} })).status).toBe(403);
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    // A service account never manages tokens, not even its own.
    expect((await t.request('POST', tokensPath(sa.id), { token: saToken, body: {} })).status).toBe(403);
    expect((await t.request('GET', tokensPath(sa.id), { token: saToken })).status).toBe(403);
    // A human outside the owner group cannot manage the account's tokens.
    expect((await t.request('GET', tokensPath(sa.id), { token: h.token })).status).toBe(403);
    const scoped = await scopedTokenFor(t, adminId);
    expect((await t.request('POST', tokensPath(h.id), { token: scoped, body: {} })).status).toBe(403);
    expect((await t.request('GET', tokensPath(h.id), { token: scoped })).status).toBe(403);
  });

  it('createPrincipalToken 400 for unknown members and a scope whose resource vanished after approval', async () => {
    const h = await createHuman(t);
    const bad = await t.request('POST', tokensPath(h.id), { token: h.token, body: { name: 'x', color: 'red' } });
    expect(bad.status).toBe(400);
    const cid = await collectionId();
    const body = { scope: { resources: [{ kind: 'collection', id: cid }] } };
    const approval = await approve(t, { kind: 'create_token', principal_id: h.id, token: body }, h.token, h.password);
    await t.deps.sql`delete from collections where id = ${cid}`;
    const res = await t.request('POST', tokensPath(h.id), { token: h.token, body, headers: { 'x-svc-credential-approval': approval } });
    expect(res.status).toBe(400);
    expect((res.body as { message: string }).message).toContain('does not exist');
  });

  it('createPrincipalToken 404 for an unknown principal', async () => {
    const res = await t.request('POST', tokensPath(2_000_000_000), { body: {} });
    expect(res.status).toBe(404);
  });

  it('createPrincipalToken 409 for a service account disabled after the approval', async () => {
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const approval = await approve(t, { kind: 'create_token', principal_id: sa.id, token: {} });
    expect((await t.request('POST', `/api/v1/iam/service-accounts/${sa.id}/disable`)).status).toBe(200);
    const res = await t.request('POST', tokensPath(sa.id), { body: {}, headers: { 'x-svc-credential-approval': approval } });
    expect(res.status).toBe(409);
  });
});

describe('an approved mint or renewal refused after its approval went out', () => {
  // The owner's check, the token's lock and the approval's consumption go out together; a refusal
  // by any of them rolls the consumption back, and the check's refusal is the answer.
  const statusOf = async (approval: string, token: string) =>
    ((await t.request('GET', `/api/v1/iam/credential-approvals/${approval}`, { token })).body as { status: string }).status;

  it('403 when the caller lost the right to manage the tokens after approving; the approval stays pending', async () => {
    const a = await createHuman(t);
    const h = await createHuman(t);
    const admins = await adminGroupId(t);
    await addMember(t, admins, a.id);
    const approval = await approve(t, { kind: 'create_token', principal_id: h.id, token: {} }, a.token, a.password);
    expect((await t.request('DELETE', `/api/v1/iam/groups/${admins}/members/${a.id}`)).status).toBe(204);
    // refused by both the owner's check and the approval's (none presented): the check answers
    const neither = await t.request('POST', tokensPath(h.id), { token: a.token, body: {} });
    expect(neither.status, neither.text).toBe(403);
    expect(neither.body).not.toMatchObject({ reason: 'reauthentication_required' });
    const res = await t.request('POST', tokensPath(h.id), { token: a.token, body: {}, headers: { 'x-svc-credential-approval': approval } });
    expect(res.status, res.text).toBe(403);
    expect(res.body).not.toMatchObject({ reason: 'reauthentication_required' });
    expect(await statusOf(approval, a.token)).toBe('pending');
    // given back the right, the same approval mints
    await addMember(t, admins, a.id);
    const again = await t.request('POST', tokensPath(h.id), {
      token: a.token,
      body: {},
      headers: { 'x-svc-credential-approval': approval },
    });
    expect(again.status, again.text).toBe(201);
    expect(await statusOf(approval, a.token)).toBe('consumed');
  });

  it('renewal: 404 for a token of another principal and 409 for a revoked one; the approval stays pending', async () => {
    const h = await createHuman(t);
    const orig = await mintOk(h.id, {}, self(h));
    const approval = await approve(t, { kind: 'renew_token', principal_id: h.id, token_id: orig.id, token: {} }, h.token, h.password);
    const headers = { 'x-svc-credential-approval': approval };
    const other = await createHuman(t);
    // the token's check answers before the approval's (which names other ids, and cannot match)
    const mismatch = await t.request('POST', `${tokensPath(other.id)}/${orig.id}/renew`, { body: {}, headers });
    expect(mismatch.status, mismatch.text).toBe(404);
    expect((await t.request('POST', `${tokensPath(h.id)}/${orig.id}/revoke`, { token: h.token })).status).toBe(204);
    const revoked = await t.request('POST', `${tokensPath(h.id)}/${orig.id}/renew`, { token: h.token, body: {}, headers });
    expect(revoked.status, revoked.text).toBe(409);
    expect(await statusOf(approval, h.token)).toBe('pending');
  });
});

describe('token scope validation at mint (through the approval)', () => {
  const cases: [string, unknown][] = [
    ['an empty scope object', {}],
    ['empty permissions', { permissions: [] }],
    ['an unknown permission', { permissions: ['ReadCollection', 'Teleport'] }],
    ['a duplicate permission', { permissions: ['ReadClass', 'ReadClass'] }],
    ['a non-scope permission', { permissions: ['ReadAudit'] }],
    ['empty resources', { resources: [] }],
    ['a zero id', { resources: [{ kind: 'collection', id: 0 }] }],
    ['a negative id', { resources: [{ kind: 'object', id: -3 }] }],
    ['an unknown kind', { resources: [{ kind: 'group', id: 1 }] }],
    ['a nonexistent collection', { resources: [{ kind: 'collection', id: 2_000_000_000 }] }],
    ['a nonexistent class', { resources: [{ kind: 'class', id: 2_000_000_001 }] }],
    ['a nonexistent object', { resources: [{ kind: 'object', id: 2_000_000_002 }] }],
    ['an id beyond int32', { resources: [{ kind: 'object', id: 2 ** 40 }] }],
    ['1,001 resources', { resources: Array.from({ length: 1001 }, (_, i) => ({ kind: 'collection', id: i + 1 })) }],
    ['an unknown scope member', { permissions: ['ReadClass'], groups: [] }],
  ];
  it.each(cases)('createCredentialApproval 400 for %s', async (_label, scope) => {
    const res = await t.request('POST', '/api/v1/iam/credential-approvals', {
      body: { password: ADMIN_PASSWORD, operation: { kind: 'create_token', principal_id: adminId, token: { scope } } },
    });
    expect(res.status, res.text).toBe(400);
  });

  it('createCredentialApproval 400 for a duplicate resource and names it', async () => {
    const cid = await collectionId();
    const res = await t.request('POST', '/api/v1/iam/credential-approvals', {
      body: {
        password: ADMIN_PASSWORD,
        operation: {
          kind: 'create_token',
          principal_id: adminId,
          token: {
            scope: {
              resources: [
                { kind: 'collection', id: cid },
                { kind: 'collection', id: cid },
              ],
            },
          },
        },
      },
    });
    expect(res.status).toBe(400);
    expect((res.body as { details: { path: string }[] }).details[0]!.path).toBe('scope.resources.1');
  });

  it('createPrincipalToken 201 with existing collection, class and object resources and 1,000 entries', async () => {
    const cid = await collectionId();
    const [k] = await t.deps.sql<{ id: number }[]>`insert into classes (name, collection_id) values (${uniq('cls')}, ${cid}) returning id`;
    const [o] = await t.deps.sql<{ id: number }[]>`
      insert into objects (name, collection_id, class_id, json_data) values (${uniq('obj')}, ${cid}, ${k!.id}, '{}') returning id`;
    const scope = {
      permissions: ['ReadObject'],
      resources: [
        { kind: 'collection', id: cid },
        { kind: 'class', id: k!.id },
        { kind: 'object', id: o!.id },
      ],
    };
    const m = await mintOk(adminId, { scope });
    const got = await t.request('GET', `${tokensPath(adminId)}/${m.id}`);
    expect((got.body as { scope: unknown }).scope).toEqual(scope);
    const many = await t.deps.sql<{ id: number }[]>`
      insert into collections (name) select ${uniq('many')} || '-' || g from generate_series(1, 1000) g returning id`;
    const big = await mintOk(adminId, { scope: { resources: many.map((r) => ({ kind: 'collection', id: r.id })) } });
    const gotBig = await t.request('GET', `${tokensPath(adminId)}/${big.id}`);
    expect((gotBig.body as { scope: { resources: unknown[] } }).scope.resources).toHaveLength(1000);
  });
});

describe('token lifetime bounds', () => {
  it('createCredentialApproval 400 for an expiry in the past or beyond the maximum lifetime', async () => {
    for (const expires_at of [new Date(Date.now() - 1000).toISOString(), new Date(Date.now() + 8761 * 3600_000).toISOString()]) {
      const res = await t.request('POST', '/api/v1/iam/credential-approvals', {
        body: { password: ADMIN_PASSWORD, operation: { kind: 'create_token', principal_id: adminId, token: { expires_at } } },
      });
      expect(res.status, expires_at).toBe(400);
    }
  });

  it('createPrincipalToken uses SVC_TOKEN_LIFETIME_HOURS and SVC_MAX_TOKEN_LIFETIME_HOURS', async () => {
    const other = await startTestApp({ SVC_TOKEN_LIFETIME_HOURS: 2, SVC_MAX_TOKEN_LIFETIME_HOURS: 3 });
    try {
      const op = (token: Body) => ({ password: ADMIN_PASSWORD, operation: { kind: 'create_token', principal_id: adminId, token } });
      const res = await other.request('POST', '/api/v1/iam/credential-approvals', { token: other.adminToken, body: op({}) });
      expect(res.status).toBe(201);
      const resolved = Date.parse((res.body as { token_expires_at: string }).token_expires_at);
      expect(Math.abs(resolved - (Date.now() + 2 * 3600_000))).toBeLessThan(60_000);
      const tooLong = new Date(Date.now() + 3.5 * 3600_000).toISOString();
      expect(
        (await other.request('POST', '/api/v1/iam/credential-approvals', { token: other.adminToken, body: op({ expires_at: tooLong }) }))
          .status,
      ).toBe(400);
      const cfg = await other.request('GET', '/api/v1/config', { token: null });
      expect(cfg.body).toMatchObject({ authentication: { default_token_lifetime_hours: 2, max_token_lifetime_hours: 3 } });
    } finally {
      await other.close();
    }
  });
});

describe('listPrincipalTokens', () => {
  it('listPrincipalTokens 200 filters by state (overlapping subsets), newest first, with paging headers', async () => {
    const h = await createHuman(t);
    const login = (await ids(h.id))[0]!;
    const a = await mintOk(h.id, { name: 'a' }, self(h));
    const b = await mintOk(h.id, { name: 'b' }, self(h));
    const c = await mintOk(h.id, { name: 'c' }, self(h));
    // b is revoked, c expired, and a token both revoked and expired.
    expect((await t.request('POST', `${tokensPath(h.id)}/${b.id}/revoke`, { token: h.token })).status).toBe(204);
    await t.deps.sql`update tokens set expires_at = now() - interval '1 minute', issued = now() - interval '2 minutes' where id = ${c.id}`;
    const d = await mintOk(h.id, { name: 'd' }, self(h));
    await t.deps
      .sql`update tokens set expires_at = now() - interval '1 minute', issued = now() - interval '3 minutes', revoked_at = now() where id = ${d.id}`;
    expect(await ids(h.id)).toEqual([a.id, login]);
    expect(await ids(h.id, 'active')).toEqual([a.id, login]);
    expect(await ids(h.id, 'revoked')).toEqual([b.id, d.id]);
    expect(await ids(h.id, 'expired')).toEqual([c.id, d.id]);
    expect(await ids(h.id, 'all')).toEqual([b.id, a.id, login, c.id, d.id]);

    const page1 = await t.request('GET', tokensPath(h.id), { token: h.token, query: { state: 'all', limit: 2 } });
    expect(page1.headers.get('x-total-count')).toBe('5');
    expect(page1.headers.get('x-page-limit')).toBe('2');
    const cursor = page1.headers.get('x-next-cursor')!;
    const page2 = await t.request('GET', tokensPath(h.id), { token: h.token, query: { state: 'all', limit: 2, cursor } });
    expect((page2.body as { id: number }[]).map((x) => x.id)).toEqual([login, c.id]);
    const sorted = await t.request('GET', tokensPath(h.id), {
      token: h.token,
      query: { state: 'all', sort: 'name', include_total: false },
    });
    expect((sorted.body as { name: string }[]).map((x) => x.name)).toEqual(['a', 'b', 'c', 'd', 'login']);
    expect(sorted.headers.get('x-total-count')).toBeNull();
    const rows = (await t.request('GET', tokensPath(h.id), { token: h.token, query: { state: 'all' } })).body as Record<string, unknown>[];
    expect(rows.find((r) => r.id === d.id)).toMatchObject({ active: false, expired: true });
    expect(rows.find((r) => r.id === b.id)).toMatchObject({ active: false, expired: false });
    expect(Object.keys(rows[0]!).sort()).toEqual(
      [
        'id',
        'principal_id',
        'name',
        'description',
        'issued',
        'expires_at',
        'last_used_at',
        'revoked_at',
        'active',
        'expired',
        'revision',
        'scope',
      ].sort(),
    );
  });

  it("listPrincipalTokens 200 marks a disabled service account's tokens inactive", async () => {
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const m = await mintOk(sa.id, {});
    await t.deps.sql`update service_accounts set disabled_at = now() where principal_id = ${sa.id}`;
    const rows = (await t.request('GET', tokensPath(sa.id), { query: { state: 'all' } })).body as { id: number; active: boolean }[];
    expect(rows.find((r) => r.id === m.id)!.active).toBe(false);
    expect(await ids(sa.id, 'active')).toEqual([]);
  });

  it('listPrincipalTokens 400 for an unknown state or sort field', async () => {
    expect((await t.request('GET', tokensPath(adminId), { query: { state: 'gone' } })).status).toBe(400);
    expect((await t.request('GET', tokensPath(adminId), { query: { sort: 'token_hash' } })).status).toBe(400);
  });

  it('listPrincipalTokens 401 and 404', async () => {
    expect((await t.request('GET', tokensPath(adminId), { token: null })).status).toBe(401);
    expect((await t.request('GET', tokensPath(2_000_000_000))).status).toBe(404);
  });
});

describe('getPrincipalToken', () => {
  it('getPrincipalToken 200 with ETag for active, expired and revoked rows', async () => {
    const h = await createHuman(t);
    const m = await mintOk(h.id, { name: 'g' }, self(h));
    const res = await t.request('GET', `${tokensPath(h.id)}/${m.id}`, { token: h.token });
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe(`"svc-v1.token.${Buffer.from(String(m.id)).toString('base64url')}.1"`);
    expect(res.body).toMatchObject({ id: m.id, principal_id: h.id, name: 'g', active: true, expired: false, scope: null });
    await t.deps.sql`update tokens set expires_at = now() - interval '1 second', issued = now() - interval '1 minute' where id = ${m.id}`;
    expect((await t.request('GET', `${tokensPath(h.id)}/${m.id}`, { token: h.token })).body).toMatchObject({
      active: false,
      expired: true,
    });
  });

  it('getPrincipalToken 404 when the token belongs to another principal or does not exist', async () => {
    const h = await createHuman(t);
    const other = await createHuman(t);
    const m = await mintOk(other.id, {}, self(other));
    expect((await t.request('GET', `${tokensPath(h.id)}/${m.id}`)).status).toBe(404);
    expect((await t.request('GET', `${tokensPath(h.id)}/${m.id}`, { token: h.token })).status).toBe(404);
    expect((await t.request('GET', `${tokensPath(h.id)}/2000000000`)).status).toBe(404);
  });

  it('getPrincipalToken 403 for another human, 400 for a non-integer id', async () => {
    const h = await createHuman(t);
    const other = await createHuman(t);
    const m = await mintOk(h.id, {}, self(h));
    expect((await t.request('GET', `${tokensPath(h.id)}/${m.id}`, { token: other.token })).status).toBe(403);
    expect((await t.request('GET', `${tokensPath(h.id)}/abc`)).status).toBe(400);
  });

  it('getPrincipalToken 401 with an expired token looking itself up', async () => {
    const h = await createHuman(t);
    const m = await mintOk(h.id, {}, self(h));
    await t.deps.sql`update tokens set expires_at = now() - interval '1 second', issued = now() - interval '1 minute' where id = ${m.id}`;
    expect((await t.request('GET', `${tokensPath(h.id)}/${m.id}`, { token: m.raw })).status).toBe(401);
  });
});

describe('renewPrincipalToken', () => {
  it('renewPrincipalToken 201 mints a new token with the same name, description and exact scope; the original is unchanged', async () => {
    const h = await createHuman(t);
    const scope = { permissions: ['ReadCollection'] };
    const orig = await mintOk(h.id, { name: 'r', description: 'renew me', scope }, self(h));
    const before = (await t.request('GET', `${tokensPath(h.id)}/${orig.id}`, { token: h.token })).body;
    const res = await renew(h.id, orig.id, {}, self(h));
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const newId = Number(/\/tokens\/(\d+)$/.exec(res.headers.get('location')!)![1]);
    expect(newId).not.toBe(orig.id);
    const renewed = (await t.request('GET', `${tokensPath(h.id)}/${newId}`, { token: h.token })).body;
    expect(renewed).toMatchObject({ name: 'r', description: 'renew me', scope, active: true });
    expect((await t.request('GET', `${tokensPath(h.id)}/${orig.id}`, { token: h.token })).body).toEqual(before);
    const [ev] = await t.deps.sql<
      { action: string; summary: string; after: Record<string, unknown>; metadata: Record<string, unknown> }[]
    >`select action, summary, after, metadata from events where entity_type = 'token' and entity_id = ${newId}`;
    expect(ev!.action).toBe('renewed');
    expect(ev!.after.renewed_from_token_id).toBe(orig.id);
    expect(ev!.metadata.renewed_from_token_id).toBe(orig.id);
    expect(ev!.summary).toBe(`token ${orig.id} renewed as token ${newId} for ${h.name}`);
    // the snapshot is the new token as stored (its id reserved beside the checks, its issued time the insert's)
    const { last_used_at: _used, active: _active, expired: _expired, ...wire } = renewed as Record<string, unknown>;
    expect(ev!.after).toEqual({ ...wire, renewed_from_token_id: orig.id });
    expect(JSON.stringify(ev)).not.toContain((res.body as { token: string }).token);
    expect((await t.request('GET', '/api/v0/auth/validate', { token: (res.body as { token: string }).token })).status).toBe(200);
  });

  it('renewPrincipalToken 201 for an expired token, with an explicit expires_at', async () => {
    const h = await createHuman(t);
    const orig = await mintOk(h.id, {}, self(h));
    await t.deps
      .sql`update tokens set expires_at = now() - interval '1 second', issued = now() - interval '1 minute' where id = ${orig.id}`;
    const expires_at = new Date(Date.now() + 3600_000).toISOString();
    const res = await renew(h.id, orig.id, { expires_at }, self(h));
    expect(res.status).toBe(201);
    expect(Date.parse((res.body as { expires_at: string }).expires_at)).toBe(Date.parse(expires_at));
  });

  it('renewPrincipalToken 201 with no body at all', async () => {
    const h = await createHuman(t);
    const orig = await mintOk(h.id, {}, self(h));
    const approval = await approve(t, { kind: 'renew_token', principal_id: h.id, token_id: orig.id, token: {} }, h.token, h.password);
    const res = await t.request('POST', `${tokensPath(h.id)}/${orig.id}/renew`, {
      token: h.token,
      headers: { 'x-svc-credential-approval': approval },
    });
    expect(res.status, res.text).toBe(201);
  });

  it('renewPrincipalToken 409 for a token revoked after the approval', async () => {
    const h = await createHuman(t);
    const orig = await mintOk(h.id, {}, self(h));
    const approval = await approve(t, { kind: 'renew_token', principal_id: h.id, token_id: orig.id, token: {} }, h.token, h.password);
    expect((await t.request('POST', `${tokensPath(h.id)}/${orig.id}/revoke`, { token: h.token })).status).toBe(204);
    const res = await t.request('POST', `${tokensPath(h.id)}/${orig.id}/renew`, {
      token: h.token,
      body: {},
      headers: { 'x-svc-credential-approval': approval },
    });
    expect(res.status).toBe(409);
    // Approving the renewal of a revoked token is refused up front too.
    const again = await t.request('POST', '/api/v1/iam/credential-approvals', {
      token: h.token,
      body: { password: h.password, operation: { kind: 'renew_token', principal_id: h.id, token_id: orig.id, token: {} } },
    });
    expect(again.status).toBe(409);
  });

  it('renewPrincipalToken 403 without an approval, 404 on a principal/token mismatch, 400 for unknown members', async () => {
    const h = await createHuman(t);
    const other = await createHuman(t);
    const orig = await mintOk(h.id, {}, self(h));
    const none = await t.request('POST', `${tokensPath(h.id)}/${orig.id}/renew`, { token: h.token, body: {} });
    expect(none.status).toBe(403);
    expect(none.body).toMatchObject({ reason: 'reauthentication_required' });
    expect((await t.request('POST', `${tokensPath(other.id)}/${orig.id}/renew`, { body: {} })).status).toBe(404);
    expect((await t.request('POST', `${tokensPath(h.id)}/${orig.id}/renew`, { body: { name: 'x' } })).status).toBe(400);
  });
});

describe('revokePrincipalToken', () => {
  it('revokePrincipalToken 204 soft-revokes; the token stops validating; a repeat is a no-op', async () => {
    const h = await createHuman(t);
    const m = await mintOk(h.id, {}, self(h));
    const res = await t.request('POST', `${tokensPath(h.id)}/${m.id}/revoke`, { token: h.token });
    expect(res.status).toBe(204);
    expect((await t.request('GET', '/api/v0/auth/validate', { token: m.raw })).status).toBe(401);
    const row = (await t.request('GET', `${tokensPath(h.id)}/${m.id}`, { token: h.token })).body as Record<string, unknown>;
    expect(row).toMatchObject({ active: false, revision: 2 });
    expect(row.revoked_at).not.toBeNull();
    expect((await t.request('POST', `${tokensPath(h.id)}/${m.id}/revoke`, { token: h.token })).status).toBe(204);
    const events = await t.deps.sql<{ action: string; before: Record<string, unknown>; after: Record<string, unknown> }[]>`
      select action, before, after from events where entity_type = 'token' and entity_id = ${m.id} order by id`;
    expect(events.map((e) => e.action)).toEqual(['created', 'revoked']);
    expect(events[1]!.before.revoked_at).toBeNull();
    expect(events[1]!.after.revoked_at).not.toBeNull();
    expect((await t.request('GET', `${tokensPath(h.id)}/${m.id}`, { token: h.token })).body).toMatchObject({ revision: 2 });
    // the snapshot is the token as revoked, to the millisecond of its revoked_at
    const { last_used_at: _used, active: _active, expired: _expired, ...wire } = row;
    expect(events[1]!.after).toEqual({ ...wire, renewed_from_token_id: null });
  });

  it("a login's and a mint's created events hold the token as stored (its id and issued time from the insert)", async () => {
    const h = await createHuman(t);
    const me = await t.request('GET', '/api/v1/iam/me', { token: h.token });
    const loginId = (me.body as { token: { id: number } }).token.id;
    const minted = await mintOk(h.id, { name: 'snap' }, self(h));
    for (const id of [loginId, minted.id]) {
      const row = (await t.request('GET', `${tokensPath(h.id)}/${id}`)).body as Record<string, unknown>;
      const [event] = await t.deps.sql<{ entity_id: number; after: Record<string, unknown> }[]>`
        select entity_id, after from events where entity_type = 'token' and entity_id = ${id} and action = 'created'`;
      const { last_used_at: _used, active: _active, expired: _expired, ...wire } = row;
      expect(event!.after).toEqual({ ...wire, renewed_from_token_id: null });
    }
  });

  it('a logout records the revoked token as stored; logging out with a revoked token is 401', async () => {
    const h = await createHuman(t);
    const me = await t.request('GET', '/api/v1/iam/me', { token: h.token });
    const id = (me.body as { token: { id: number } }).token.id;
    expect((await t.request('POST', '/api/v0/auth/logout', { token: h.token })).status).toBe(200);
    expect((await t.request('POST', '/api/v0/auth/logout', { token: h.token })).status).toBe(401);
    const row = (await t.request('GET', `${tokensPath(h.id)}/${id}`)).body as Record<string, unknown>;
    expect(row).toMatchObject({ active: false, revision: 2 });
    const [event] = await t.deps.sql<{ after: Record<string, unknown>; metadata: Record<string, unknown> }[]>`
      select after, metadata from events where entity_type = 'token' and entity_id = ${id} and action = 'revoked'`;
    const { last_used_at: _used, active: _active, expired: _expired, ...wire } = row;
    expect(event!.after).toEqual({ ...wire, renewed_from_token_id: null });
    expect(event!.metadata).toMatchObject({ via: 'logout', principal_id: h.id });
  });

  it('revokePrincipalToken 412 for a stale If-Match, with the current ETag; 204 for the current one', async () => {
    const h = await createHuman(t);
    const m = await mintOk(h.id, {}, self(h));
    const etag = (await t.request('GET', `${tokensPath(h.id)}/${m.id}`)).headers.get('etag')!;
    const stale = `"svc-v1.token.${Buffer.from(String(m.id)).toString('base64url')}.7"`;
    const res = await t.request('POST', `${tokensPath(h.id)}/${m.id}/revoke`, { headers: { 'if-match': stale } });
    expect(res.status).toBe(412);
    expect(res.body).toMatchObject({ reason: 'stale_resource' });
    expect(res.headers.get('etag')).toBe(etag);
    expect((await t.request('POST', `${tokensPath(h.id)}/${m.id}/revoke`, { headers: { 'if-match': 'W/"weak"' } })).status).toBe(400);
    expect((await t.request('POST', `${tokensPath(h.id)}/${m.id}/revoke`, { headers: { 'if-match': etag } })).status).toBe(204);
  });

  it('revokePrincipalToken 403 for another human, 404 on a mismatch, 401 without a token', async () => {
    const h = await createHuman(t);
    const other = await createHuman(t);
    const m = await mintOk(h.id, {}, self(h));
    expect((await t.request('POST', `${tokensPath(h.id)}/${m.id}/revoke`, { token: other.token })).status).toBe(403);
    expect((await t.request('POST', `${tokensPath(other.id)}/${m.id}/revoke`)).status).toBe(404);
    expect((await t.request('POST', `${tokensPath(h.id)}/${m.id}/revoke`, { token: null })).status).toBe(401);
  });
});

describe('token purge', () => {
  it('purgeTokens deletes tokens past retention after their terminal time, writing token.purged with the exact scope first', async () => {
    const h = await createHuman(t);
    const cid = await collectionId();
    const scope = { permissions: ['ReadObject', 'ReadClass'], resources: [{ kind: 'collection', id: cid }] };
    const revokedOld = await mintOk(h.id, { scope }, self(h));
    const expiredOld = await mintOk(h.id, {}, self(h));
    const recent = await mintOk(h.id, {}, self(h));
    const longLived = await mintOk(h.id, {}, self(h));
    await t.deps
      .sql`update tokens set issued = now() - interval '40 days', revoked_at = now() - interval '31 days' where id = ${revokedOld.id}`;
    await t.deps
      .sql`update tokens set issued = now() - interval '40 days', expires_at = now() - interval '30 days 1 hour' where id = ${expiredOld.id}`;
    await t.deps
      .sql`update tokens set issued = now() - interval '40 days', expires_at = now() - interval '29 days' where id = ${recent.id}`;
    // Revoked recently although issued long ago: the terminal time is the revocation.
    await t.deps
      .sql`update tokens set issued = now() - interval '40 days', expires_at = now() + interval '1 day', revoked_at = now() - interval '1 day' where id = ${longLived.id}`;
    expect(await purgeTokens(t.deps)).toBeGreaterThanOrEqual(2);
    const left = await t.deps.sql<
      { id: number }[]
    >`select id from tokens where principal_id = ${h.id} and id = any(${[revokedOld.id, expiredOld.id, recent.id, longLived.id]}::int[])`;
    expect(left.map((r) => r.id).sort()).toEqual([recent.id, longLived.id].sort());
    expect((await t.request('GET', `${tokensPath(h.id)}/${revokedOld.id}`, { token: h.token })).status).toBe(404);
    const [ev] = await t.deps.sql<
      { actor_kind: string; actor_user_id: number | null; before: Record<string, unknown>; after: unknown; text: string }[]
    >`
      select actor_kind, actor_user_id, before, after, to_jsonb(e)::text as text from events e
      where entity_type = 'token' and entity_id = ${revokedOld.id} and action = 'purged'`;
    expect(ev).toMatchObject({ actor_kind: 'system', actor_user_id: null, after: null });
    expect(ev!.before.scope).toEqual(scope);
    expect(ev!.text).not.toContain(revokedOld.raw);
  });

  it('purgeTokens works in batches of SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE', async () => {
    const h = await createHuman(t);
    const made: number[] = [];
    for (let i = 0; i < 23; i++) made.push((await mintOk(h.id, {}, self(h))).id);
    await t.deps
      .sql`update tokens set issued = now() - interval '90 days', expires_at = now() - interval '60 days' where id = any(${made}::int[])`;
    const deps = { ...t.deps, config: { ...t.deps.config, SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE: 10 } };
    expect(await purgeTokens(deps)).toBeGreaterThanOrEqual(23);
    const [n] = await t.deps.sql<{ n: number }[]>`select count(*)::int as n from tokens where id = any(${made}::int[])`;
    expect(n!.n).toBe(0);
    const [e] = await t.deps.sql<{ n: number }[]>`
      select count(*)::int as n from events where entity_type = 'token' and action = 'purged' and entity_id = any(${made}::int[])`;
    expect(e!.n).toBe(23);
  });
});

describe('token purge worker loop', () => {
  it('tokenPurgeLoop purges when enabled, at most once per interval, and not at all when disabled', async () => {
    const h = await createHuman(t);
    const old = async () => {
      const m = await mintOk(h.id, {}, self(h));
      await t.deps.sql`update tokens set issued = now() - interval '90 days', revoked_at = now() - interval '60 days' where id = ${m.id}`;
      return m.id;
    };
    const exists = async (id: number) => (await t.deps.sql`select 1 from tokens where id = ${id}`).length === 1;
    const signal = new AbortController().signal;
    const disabled = { ...t.deps, config: { ...t.deps.config, SVC_TOKEN_RETENTION_PURGE_ENABLED: false } };
    const first = await old();
    await tokenPurgeLoop.tick(disabled, signal);
    expect(await exists(first)).toBe(true);
    const enabled = { ...t.deps, config: { ...t.deps.config, SVC_TOKEN_RETENTION_PURGE_INTERVAL_SECONDS: 3600 } };
    await tokenPurgeLoop.tick(enabled, signal);
    expect(await exists(first)).toBe(false);
    const second = await old();
    await tokenPurgeLoop.tick(enabled, signal);
    expect(await exists(second)).toBe(true);
  });
});
