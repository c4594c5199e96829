import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { approve, createHuman, eventsOf, scopedTokenFor, type Human } from './iam-fixtures.ts';

let t: TestApp;
let plain: Human;
let adminId: number;

beforeAll(async () => {
  t = await startTestApp();
  plain = await createHuman(t);
  const me = await t.request('GET', '/api/v1/iam/users', { query: { name: 'admin', identity_scope: 'local' } });
  adminId = (me.body as { id: number }[])[0]!.id;
});
afterAll(async () => {
  await t.close();
});

async function createUserRaw(body: Record<string, unknown>, approval?: string, token = t.adminToken) {
  return t.request('POST', '/api/v1/iam/users', {
    token,
    body,
    headers: approval ? { 'x-svc-credential-approval': approval } : {},
  });
}

describe('createUser', () => {
  it('createUser 201 with Location, ETag and no password; the event has no secret', async () => {
    const name = uniq('alice');
    const body = { name, password: 'correct horse battery', email: 'a@example.org', proper_name: 'Alice' };
    const res = await createUserRaw(body, await approve(t, { kind: 'create_user', user: body }));
    expect(res.status).toBe(201);
    const user = res.body as Record<string, unknown>;
    expect(user).toMatchObject({ name, identity_scope: 'local', email: 'a@example.org', proper_name: 'Alice', revision: 1 });
    expect(res.headers.get('location')).toBe(`/api/v1/iam/users/${String(user.id)}`);
    expect(res.headers.get('etag')).toBe(`"svc-v1.user.${Buffer.from(String(user.id)).toString('base64url')}.1"`);
    expect(JSON.stringify(user)).not.toContain('correct horse');
    const [ev] = await eventsOf(t, 'user', user.id as number);
    expect(ev).toMatchObject({ action: 'created', after_revision: 1 });
    // the snapshot is the user as answered and read (its id and times reserved before the insert)
    expect(ev!.after).toEqual(user);
    expect((await t.request('GET', `/api/v1/iam/users/${String(user.id)}`)).body).toEqual(user);
    expect(JSON.stringify(ev)).not.toMatch(/correct horse|argon2|password_hash/);
    // The stored hash is Argon2id, and the new user can log in.
    const [row] = await t.deps.sql<{ password_hash: string }[]>`select password_hash from users where principal_id = ${user.id as number}`;
    expect(row!.password_hash).toMatch(/^\$argon2id\$/);
    await t.login(name, 'correct horse battery');
  });

  it('createUser 201 without optional members gives null email and proper_name', async () => {
    const body = { name: uniq('bob'), password: 'pw' };
    const res = await createUserRaw(body, await approve(t, { kind: 'create_user', user: body }));
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ email: null, proper_name: null });
  });

  it('createUser 403 reauthentication_required without an approval, or with one for another body; not consumed by a failure', async () => {
    const body = { name: uniq('carol'), password: 'pw' };
    const none = await createUserRaw(body);
    expect(none.status).toBe(403);
    expect(none.body).toMatchObject({ reason: 'reauthentication_required' });
    const other = await approve(t, { kind: 'create_user', user: { ...body, password: 'other' } });
    const mismatch = await createUserRaw(body, other);
    expect(mismatch.status).toBe(403);
    expect(mismatch.body).toMatchObject({ reason: 'reauthentication_required' });
    // One use only.
    const ok = await approve(t, { kind: 'create_user', user: body });
    expect((await createUserRaw(body, ok)).status).toBe(201);
    const again = { ...body, name: uniq('carol') };
    expect((await createUserRaw(again, ok)).status).toBe(403);
  });

  it('createUser 409 for a name taken in scope local (the approval stays unused)', async () => {
    const body = { name: plain.name, password: 'pw' };
    const approval = await approve(t, { kind: 'create_user', user: body });
    const res = await createUserRaw(body, approval);
    expect(res.status).toBe(409);
    const record = await t.request('GET', `/api/v1/iam/credential-approvals/${approval}`);
    expect(record.status).toBe(200);
    expect(record.body).toMatchObject({ status: 'pending', consumed_at: null });
  });

  it('createUser 400 for a missing password, an empty or over-long name, or unknown members', async () => {
    for (const body of [
      { name: uniq() },
      { name: '', password: 'x' },
      { name: 'x'.repeat(256), password: 'x' },
      { name: uniq(), password: 'x', admin: true },
    ]) {
      const res = await createUserRaw(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
  });

  it('createUser 403 for a non-admin and for a scoped admin token; 401 without a token', async () => {
    const body = { name: uniq(), password: 'pw' };
    expect((await createUserRaw(body, undefined, plain.token)).status).toBe(403);
    expect((await createUserRaw(body, undefined, await scopedTokenFor(t, adminId))).status).toBe(403);
    const anon = await t.request('POST', '/api/v1/iam/users', { token: null, body });
    expect(anon.status).toBe(401);
  });
});

describe('listUsers', () => {
  it('listUsers 200 filters, sorts and pages with the paging headers', async () => {
    const prefix = uniq('list');
    for (const n of ['a', 'b', 'c']) await createHuman(t, { name: `${prefix}-${n}`, email: `${n}@list.example` });
    const first = await t.request('GET', '/api/v1/iam/users', { query: { name__startswith: prefix, sort: '-name', limit: 2 } });
    expect(first.status).toBe(200);
    expect((first.body as { name: string }[]).map((u) => u.name)).toEqual([`${prefix}-c`, `${prefix}-b`]);
    expect(first.headers.get('x-total-count')).toBe('3');
    expect(first.headers.get('x-page-limit')).toBe('2');
    const cursor = first.headers.get('x-next-cursor')!;
    const second = await t.request('GET', '/api/v1/iam/users', { query: { name__startswith: prefix, sort: '-name', limit: 2, cursor } });
    expect((second.body as { name: string }[]).map((u) => u.name)).toEqual([`${prefix}-a`]);
    expect(second.headers.get('x-next-cursor')).toBeNull();
    const byEmail = await t.request('GET', '/api/v1/iam/users', { query: { email: 'b@list.example', include_total: false } });
    expect((byEmail.body as { name: string }[]).map((u) => u.name)).toEqual([`${prefix}-b`]);
    expect(byEmail.headers.get('x-total-count')).toBeNull();
  });

  it('listUsers never lists service accounts', async () => {
    const res = await t.request('GET', '/api/v1/iam/users', { query: { limit: 250 } });
    const ids = (res.body as { id: number }[]).map((u) => u.id);
    const sas = await t.deps.sql<{ id: number }[]>`select id from principals where kind = 'service_account'`;
    for (const s of sas) expect(ids).not.toContain(s.id);
  });

  it('listUsers 400 for an unknown filter, operator or a bad limit', async () => {
    const queries: Record<string, string | number>[] = [
      { password: 'x' },
      { name__gt: 'x' },
      { limit: 0 },
      { sort: 'password' },
      { cursor: 'nope!' },
    ];
    for (const query of queries) {
      const res = await t.request('GET', '/api/v1/iam/users', { query });
      expect(res.status, JSON.stringify(query)).toBe(400);
    }
  });

  it('listUsers 403 for a non-admin and a scoped admin token; 401 without a token', async () => {
    expect((await t.request('GET', '/api/v1/iam/users', { token: plain.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/iam/users', { token: await scopedTokenFor(t, adminId) })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/iam/users', { token: null })).status).toBe(401);
  });
});

describe('getUser', () => {
  it('getUser 200 for an admin and for the user itself, with the ETag', async () => {
    const a = await t.request('GET', `/api/v1/iam/users/${plain.id}`);
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({ id: plain.id, name: plain.name });
    expect(a.headers.get('etag')).toMatch(/^"svc-v1\.user\./);
    const self = await t.request('GET', `/api/v1/iam/users/${plain.id}`, { token: plain.token });
    expect(self.status).toBe(200);
  });

  it('getUser 403 for another user without admin', async () => {
    const res = await t.request('GET', `/api/v1/iam/users/${adminId}`, { token: plain.token });
    expect(res.status).toBe(403);
  });

  it('getUser 404 for an unknown id and 400 for a non-positive or non-integer id', async () => {
    expect((await t.request('GET', '/api/v1/iam/users/999999')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/iam/users/0')).status).toBe(400);
    expect((await t.request('GET', '/api/v1/iam/users/abc')).status).toBe(400);
  });
});

describe('updateUser', () => {
  it('updateUser 200 changes email and proper_name, advances the revision and records before/after', async () => {
    const u = await createHuman(t, { email: 'old@example.org' });
    const res = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, { body: { email: 'new@example.org', proper_name: 'New Name' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ email: 'new@example.org', proper_name: 'New Name', revision: 2 });
    const evs = await eventsOf(t, 'user', u.id);
    expect(evs.at(-1)).toMatchObject({
      action: 'updated',
      before_revision: 1,
      after_revision: 2,
      before: { email: 'old@example.org' },
      after: { email: 'new@example.org' },
    });
    expect(evs.at(-1)!.after).toEqual(res.body);
    const cleared = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, { body: { email: null } });
    expect(cleared.body).toMatchObject({ email: null, revision: 3 });
    expect((await eventsOf(t, 'user', u.id)).at(-1)!.after).toEqual(cleared.body);
    expect((await t.request('GET', `/api/v1/iam/users/${u.id}`)).body).toEqual(cleared.body);
  });

  it('updateUser 200 for the user itself', async () => {
    const u = await createHuman(t);
    const res = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, { token: u.token, body: { proper_name: 'Self' } });
    expect(res.status).toBe(200);
  });

  it('updateUser 200 no-op: no revision or updated_at change and no event', async () => {
    const u = await createHuman(t, { email: 'same@example.org' });
    const before = await t.request('GET', `/api/v1/iam/users/${u.id}`);
    const count = (await eventsOf(t, 'user', u.id)).length;
    for (const body of [{}, { email: 'same@example.org' }, { proper_name: null }]) {
      const res = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, { body });
      expect(res.status).toBe(200);
      expect(res.body).toEqual(before.body);
    }
    expect((await eventsOf(t, 'user', u.id)).length).toBe(count);
  });

  it('updateUser password change needs an approval (403), then works and records no secret', async () => {
    const u = await createHuman(t);
    const body = { password: 'brand-new-password' };
    const denied = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, { token: u.token, body });
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ reason: 'reauthentication_required' });
    const approval = await approve(t, { kind: 'update_user', user_id: u.id, user: body }, u.token, u.password);
    const res = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, {
      token: u.token,
      body,
      headers: { 'x-svc-credential-approval': approval },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ revision: 2 });
    await t.login(u.name, 'brand-new-password');
    const loginOld = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: u.name, password: u.password } });
    expect(loginOld.status).toBe(401);
    const ev = (await eventsOf(t, 'user', u.id)).at(-1)!;
    expect(ev.metadata).toMatchObject({ password_changed: true });
    expect(JSON.stringify(ev)).not.toMatch(/brand-new-password|argon2/);
  });

  it('updateUser password change: the lock answers before the approval (404, 412, 403 provider-managed), and its refusal leaves the approval usable', async () => {
    const u = await createHuman(t);
    const body = { password: 'another-new-password' };
    const path = `/api/v1/iam/users/${u.id}`;
    // no approval presented: the lock's refusals answer, not reauthentication_required
    expect((await t.request('PATCH', '/api/v1/iam/users/999999', { body })).status).toBe(404);
    const etag = (await t.request('GET', path)).headers.get('etag')!;
    expect((await t.request('PATCH', path, { body: { proper_name: 'moved on' } })).status).toBe(200);
    const stale = await t.request('PATCH', path, { body, headers: { 'if-match': etag } });
    expect(stale.status, stale.text).toBe(412);
    // an approval presented with a stale If-Match: 412, and the approval is still there to use
    const approval = await approve(t, { kind: 'update_user', user_id: u.id, user: body }, u.token, u.password);
    const headers = { 'x-svc-credential-approval': approval };
    expect((await t.request('PATCH', path, { token: u.token, body, headers: { ...headers, 'if-match': etag } })).status).toBe(412);
    const res = await t.request('PATCH', path, { token: u.token, body, headers });
    expect(res.status, res.text).toBe(200);
    await t.deps.sql`update principals set provider_managed = true where id = ${u.id}`;
    const managed = await t.request('PATCH', path, { body: { password: 'yet-another-password' } });
    expect(managed.status).toBe(403);
    expect(managed.body).not.toMatchObject({ reason: 'reauthentication_required' });
  });

  it('updateUser 412 with a stale If-Match (current ETag returned), 200 with the current one, 400 with a weak one', async () => {
    const u = await createHuman(t);
    const cur = await t.request('GET', `/api/v1/iam/users/${u.id}`);
    const etag = cur.headers.get('etag')!;
    const ok = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, { body: { proper_name: 'A' }, headers: { 'if-match': etag } });
    expect(ok.status).toBe(200);
    const stale = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, { body: { proper_name: 'B' }, headers: { 'if-match': etag } });
    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ reason: 'stale_resource' });
    expect(stale.headers.get('etag')).toBe(ok.headers.get('etag'));
    const weak = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, {
      body: { proper_name: 'B' },
      headers: { 'if-match': `W/${etag}` },
    });
    expect(weak.status).toBe(400);
  });

  it('updateUser 403 for another user without admin, 403 for a provider-managed user, 404 unknown, 400 unknown member', async () => {
    const u = await createHuman(t);
    expect((await t.request('PATCH', `/api/v1/iam/users/${adminId}`, { token: u.token, body: { proper_name: 'x' } })).status).toBe(403);
    await t.deps.sql`update principals set provider_managed = true where id = ${u.id}`;
    const managed = await t.request('PATCH', `/api/v1/iam/users/${u.id}`, { body: { proper_name: 'x' } });
    expect(managed.status).toBe(403);
    expect((await t.request('PATCH', '/api/v1/iam/users/999999', { body: { proper_name: 'x' } })).status).toBe(404);
    expect((await t.request('PATCH', `/api/v1/iam/users/${plain.id}`, { body: { name: 'rename' } })).status).toBe(400);
  });
});

describe('deleteUser', () => {
  it('deleteUser 204 removes the user, its tokens and memberships, and records the deletion', async () => {
    const u = await createHuman(t);
    const g = await t.request('POST', '/api/v1/iam/groups', { body: { name: uniq('g') } });
    const gid = (g.body as { id: number }).id;
    await t.request('POST', `/api/v1/iam/groups/${gid}/members/${u.id}`);
    const res = await t.request('DELETE', `/api/v1/iam/users/${u.id}`);
    expect(res.status).toBe(204);
    expect((await t.request('GET', `/api/v1/iam/users/${u.id}`)).status).toBe(404);
    expect((await t.request('GET', '/api/v0/auth/validate', { token: u.token })).status).toBe(401);
    const rows = await t.deps
      .sql`select 1 from group_members where principal_id = ${u.id} union all select 1 from tokens where principal_id = ${u.id}`;
    expect(rows.length).toBe(0);
    const ev = (await eventsOf(t, 'user', u.id)).at(-1)!;
    expect(ev).toMatchObject({ action: 'deleted', before: { id: u.id, name: u.name }, metadata: { removed_from_group_ids: [gid] } });
    expect(ev.after).toBeNull();
  });

  it('deleteUser 412 with a stale If-Match, 404 unknown, 403 non-admin, 403 provider-managed', async () => {
    const u = await createHuman(t);
    const stale = await t.request('DELETE', `/api/v1/iam/users/${u.id}`, { headers: { 'if-match': '"svc-v1.user.eA.99"' } });
    expect(stale.status).toBe(412);
    expect((await t.request('DELETE', '/api/v1/iam/users/999999')).status).toBe(404);
    expect((await t.request('DELETE', `/api/v1/iam/users/${u.id}`, { token: plain.token })).status).toBe(403);
    await t.deps.sql`update principals set provider_managed = true where id = ${u.id}`;
    expect((await t.request('DELETE', `/api/v1/iam/users/${u.id}`)).status).toBe(403);
  });
});
