import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import {
  addMember,
  adminGroupId,
  createGroup,
  createHuman,
  createServiceAccount,
  eventsOf,
  scopedTokenFor,
  tokenFor,
  type Human,
} from './iam-fixtures.ts';

let t: TestApp;
let owner: Human; // member of `team`
let outsider: Human; // member of no group
let team: { id: number; name: string };
let other: { id: number; name: string };
let adminId: number;

beforeAll(async () => {
  t = await startTestApp();
  owner = await createHuman(t);
  outsider = await createHuman(t);
  team = await createGroup(t);
  other = await createGroup(t);
  await addMember(t, team.id, owner.id);
  const [a] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
  adminId = a!.id;
});
afterAll(async () => {
  await t.close();
});

const SA = '/api/v1/iam/service-accounts';

describe('createServiceAccount', () => {
  it('createServiceAccount 201 by an admin for any group, with Location, ETag and a created event', async () => {
    const name = uniq('robot');
    const res = await t.request('POST', SA, { body: { name, owner_group_id: other.id, description: 'builds' } });
    expect(res.status).toBe(201);
    const sa = res.body as { id: number };
    expect(res.body).toMatchObject({
      name,
      description: 'builds',
      identity_scope: 'local',
      owner_group_id: other.id,
      created_by: adminId,
      disabled_at: null,
      revision: 1,
    });
    expect(res.headers.get('location')).toBe(`${SA}/${sa.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.service_account\..+\.1"$/);
    expect((await eventsOf(t, 'service_account', sa.id))[0]).toMatchObject({ action: 'created', after: { name } });
  });

  it('createServiceAccount 201 by a non-admin human for a group they belong to; 403 for another group', async () => {
    const ok = await t.request('POST', SA, { token: owner.token, body: { name: uniq('robot'), owner_group_id: team.id } });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ created_by: owner.id, description: '' });
    const denied = await t.request('POST', SA, { token: owner.token, body: { name: uniq('robot'), owner_group_id: other.id } });
    expect(denied.status).toBe(403);
  });

  it('createServiceAccount 404 for an unknown owner group, 409 for a taken name, 400 for bad bodies', async () => {
    expect((await t.request('POST', SA, { body: { name: uniq(), owner_group_id: 999999 } })).status).toBe(404);
    expect((await t.request('POST', SA, { body: { name: owner.name, owner_group_id: team.id } })).status).toBe(409);
    expect((await t.request('POST', SA, { body: { name: uniq() } })).status).toBe(400);
    expect((await t.request('POST', SA, { body: { name: uniq(), owner_group_id: 'x' } })).status).toBe(400);
    expect((await t.request('POST', SA, { body: { name: uniq(), owner_group_id: team.id, password: 'x' } })).status).toBe(400);
  });

  it('createServiceAccount 403 for a service account (even an admin-group member) and a scoped token; 401 without a token', async () => {
    const sa = await createServiceAccount(t, team.id);
    await addMember(t, await adminGroupId(t), sa.id);
    await addMember(t, team.id, sa.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await t.request('POST', SA, { token: saToken, body: { name: uniq(), owner_group_id: team.id } })).status).toBe(403);
    const scoped = await scopedTokenFor(t, adminId);
    expect((await t.request('POST', SA, { token: scoped, body: { name: uniq(), owner_group_id: team.id } })).status).toBe(403);
    expect((await t.request('POST', SA, { token: null, body: { name: uniq(), owner_group_id: team.id } })).status).toBe(401);
  });

  it('a service account cannot log in with a password', async () => {
    const sa = await createServiceAccount(t, team.id);
    const res = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: sa.name, password: 'anything' } });
    expect(res.status).toBe(401);
  });
});

describe('listServiceAccounts', () => {
  it('listServiceAccounts 200: an admin sees all, a member sees its groups accounts, an outsider none', async () => {
    const mine = await createServiceAccount(t, team.id);
    const theirs = await createServiceAccount(t, other.id);
    const all = await t.request('GET', SA, { query: { id: `${mine.id},${theirs.id}` } });
    expect((all.body as { id: number }[]).map((s) => s.id)).toEqual([mine.id, theirs.id]);
    expect(all.headers.get('x-total-count')).toBe('2');
    const member = await t.request('GET', SA, { token: owner.token, query: { id: `${mine.id},${theirs.id}` } });
    expect((member.body as { id: number }[]).map((s) => s.id)).toEqual([mine.id]);
    expect(member.headers.get('x-total-count')).toBe('1');
    const none = await t.request('GET', SA, { token: outsider.token });
    expect(none.status).toBe(200);
    expect(none.body).toEqual([]);
    expect(none.headers.get('x-total-count')).toBe('0');
  });

  it('listServiceAccounts filters by owner_group_id and disabled_at and sorts by name', async () => {
    const g = await createGroup(t);
    const prefix = uniq('ls');
    const a = await createServiceAccount(t, g.id, t.adminToken, `${prefix}-a`);
    const b = await createServiceAccount(t, g.id, t.adminToken, `${prefix}-b`);
    await t.request('POST', `${SA}/${a.id}/disable`);
    const res = await t.request('GET', SA, { query: { owner_group_id: g.id, sort: '-name' } });
    expect((res.body as { name: string }[]).map((s) => s.name)).toEqual([b.name, a.name]);
    const disabled = await t.request('GET', SA, { query: { owner_group_id: g.id, disabled_at__is_null: 'false' } });
    expect((disabled.body as { id: number }[]).map((s) => s.id)).toEqual([a.id]);
    expect((await t.request('GET', SA, { query: { sort: 'owner_group_id' } })).status).toBe(400);
    expect((await t.request('GET', SA, { query: { secret: 'x' } })).status).toBe(400);
  });
});

describe('getServiceAccount and updateServiceAccount', () => {
  it('getServiceAccount 200 for an admin and an owner-group member; 403 for an outsider; 404 unknown or a user id', async () => {
    const sa = await createServiceAccount(t, team.id);
    expect((await t.request('GET', `${SA}/${sa.id}`)).status).toBe(200);
    const byOwner = await t.request('GET', `${SA}/${sa.id}`, { token: owner.token });
    expect(byOwner.status).toBe(200);
    expect(byOwner.headers.get('etag')).toMatch(/^"svc-v1\.service_account\./);
    expect((await t.request('GET', `${SA}/${sa.id}`, { token: outsider.token })).status).toBe(403);
    expect((await t.request('GET', `${SA}/999999`)).status).toBe(404);
    expect((await t.request('GET', `${SA}/${owner.id}`)).status).toBe(404);
  });

  it('a service account never manages itself (403), even in its owner group and the admin group', async () => {
    const sa = await createServiceAccount(t, team.id);
    await addMember(t, team.id, sa.id);
    await addMember(t, await adminGroupId(t), sa.id);
    const token = await tokenFor(t, sa.id);
    expect((await t.request('GET', `${SA}/${sa.id}`, { token })).status).toBe(403);
    expect((await t.request('PATCH', `${SA}/${sa.id}`, { token, body: { description: 'me' } })).status).toBe(403);
    expect((await t.request('POST', `${SA}/${sa.id}/disable`, { token })).status).toBe(403);
    expect((await t.request('DELETE', `${SA}/${sa.id}`, { token })).status).toBe(403);
  });

  it('updateServiceAccount 200 changes description and owner with an event; null clears the description', async () => {
    const sa = await createServiceAccount(t, team.id);
    const res = await t.request('PATCH', `${SA}/${sa.id}`, { body: { description: 'nightly', owner_group_id: other.id } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ description: 'nightly', owner_group_id: other.id, revision: 2 });
    expect((await eventsOf(t, 'service_account', sa.id)).at(-1)).toMatchObject({
      action: 'updated',
      before: { owner_group_id: team.id },
      after: { owner_group_id: other.id },
    });
    const cleared = await t.request('PATCH', `${SA}/${sa.id}`, { body: { description: null } });
    expect(cleared.body).toMatchObject({ description: '', revision: 3 });
  });

  it('each audit snapshot is the account as the write answered it and a read shows it (created, updated, deleted)', async () => {
    const created = await t.request('POST', SA, {
      token: owner.token,
      body: { name: uniq('robot'), owner_group_id: team.id, description: 'a' },
    });
    expect(created.status, created.text).toBe(201);
    const id = (created.body as { id: number }).id;
    const updated = await t.request('PATCH', `${SA}/${id}`, { token: owner.token, body: { description: 'b' } });
    expect(updated.status, updated.text).toBe(200);
    expect((await t.request('GET', `${SA}/${id}`, { token: owner.token })).body).toEqual(updated.body);
    expect((await t.request('DELETE', `${SA}/${id}`, { token: owner.token })).status).toBe(204);
    const evs = await eventsOf(t, 'service_account', id);
    expect(evs.map((e) => [e.action, e.before ?? null, e.after ?? null])).toEqual([
      ['created', null, created.body],
      ['updated', created.body, updated.body],
      ['deleted', updated.body, null],
    ]);
    expect(evs[2]).toMatchObject({ metadata: { owner_group_id: team.id, removed_from_group_ids: [] } });
  });

  it('updateServiceAccount by an owner member: 200 within their groups, 403 moving it to a group they are not in', async () => {
    const sa = await createServiceAccount(t, team.id);
    expect((await t.request('PATCH', `${SA}/${sa.id}`, { token: owner.token, body: { description: 'x' } })).status).toBe(200);
    expect((await t.request('PATCH', `${SA}/${sa.id}`, { token: owner.token, body: { owner_group_id: other.id } })).status).toBe(403);
    expect((await t.request('PATCH', `${SA}/${sa.id}`, { token: outsider.token, body: { description: 'y' } })).status).toBe(403);
  });

  it('updateServiceAccount 200 no-op without revision change or event', async () => {
    const sa = await createServiceAccount(t, team.id);
    const n = (await eventsOf(t, 'service_account', sa.id)).length;
    const res = await t.request('PATCH', `${SA}/${sa.id}`, { body: { description: '', owner_group_id: team.id } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ revision: 1 });
    expect((await eventsOf(t, 'service_account', sa.id)).length).toBe(n);
  });

  it('updateServiceAccount 404 for an unknown new owner group or account, 412 stale If-Match, 400 unknown member', async () => {
    const sa = await createServiceAccount(t, team.id);
    expect((await t.request('PATCH', `${SA}/${sa.id}`, { body: { owner_group_id: 999999 } })).status).toBe(404);
    expect((await t.request('PATCH', `${SA}/999999`, { body: { description: 'x' } })).status).toBe(404);
    const stale = await t.request('PATCH', `${SA}/${sa.id}`, {
      body: { description: 'x' },
      headers: { 'if-match': '"svc-v1.service_account.MQ.5"' },
    });
    expect(stale.status).toBe(412);
    expect(stale.headers.get('etag')).toMatch(/\.1"$/);
    expect((await t.request('PATCH', `${SA}/${sa.id}`, { body: { name: 'x' } })).status).toBe(400);
  });
});

describe('disableServiceAccount', () => {
  it('disableServiceAccount 200 with more tokens than one statement records events for (250): each revoked and recorded', async () => {
    const sa = await createServiceAccount(t, team.id);
    await t.deps.sql`
      insert into tokens (principal_id, token_hash, name, expires_at)
      select ${sa.id}::int, decode(md5(${uniq('h')} || g::text), 'hex'), 'bulk', now() + interval '1 hour' from generate_series(1, 250) g`;
    const res = await t.request('POST', `${SA}/${sa.id}/disable`);
    expect(res.status, res.text).toBe(200);
    const [left] = await t.deps.sql<
      { n: number }[]
    >`select count(*)::int as n from tokens where principal_id = ${sa.id} and revoked_at is null`;
    expect(left!.n).toBe(0);
    const [recorded] = await t.deps.sql<{ n: number }[]>`
      select count(*)::int as n from events where entity_type = 'token' and action = 'revoked' and (metadata->>'principal_id')::int = ${sa.id}`;
    expect(recorded!.n).toBe(250);
    expect((await eventsOf(t, 'service_account', sa.id)).at(-1)).toMatchObject({ action: 'disabled' });
  });

  it('disableServiceAccount 200 revokes all tokens, cancels queued tasks only, and records events; repeating is a no-op', async () => {
    const sa = await createServiceAccount(t, team.id);
    const token = await tokenFor(t, sa.id);
    expect((await t.request('GET', '/api/v0/auth/validate', { token })).status).toBe(200);
    const [queued] = await t.deps.sql<
      { id: number }[]
    >`insert into tasks (kind, status, submitted_by) values ('remote_call', 'queued', ${sa.id}) returning id`;
    const [running] = await t.deps.sql<
      { id: number }[]
    >`insert into tasks (kind, status, submitted_by) values ('remote_call', 'running', ${sa.id}) returning id`;
    const res = await t.request('POST', `${SA}/${sa.id}/disable`, { token: owner.token });
    expect(res.status).toBe(200);
    const body = res.body as { disabled_at: string | null; revision: number };
    expect(body.disabled_at).not.toBeNull();
    expect(body.revision).toBe(2);
    expect((await t.request('GET', '/api/v0/auth/validate', { token })).status).toBe(401);
    const tokens = await t.deps.sql<{ revoked_at: Date | null }[]>`select revoked_at from tokens where principal_id = ${sa.id}`;
    expect(tokens.every((r) => r.revoked_at !== null)).toBe(true);
    const tasks = await t.deps.sql<
      { id: number; status: string }[]
    >`select id, status from tasks where submitted_by = ${sa.id} order by id`;
    expect(tasks).toEqual([
      { id: queued!.id, status: 'cancelled' },
      { id: running!.id, status: 'running' },
    ]);
    const ev = (await eventsOf(t, 'service_account', sa.id)).at(-1)!;
    expect(ev).toMatchObject({ action: 'disabled', before: { disabled_at: null }, metadata: { cancelled_task_ids: [queued!.id] } });
    expect((await eventsOf(t, 'task', queued!.id)).map((e) => e.action)).toContain('cancelled');
    const revokedEvents = await t.deps.sql<{ after: Record<string, unknown> }[]>`
      select after from events where entity_type = 'token' and action = 'revoked' and (metadata->>'principal_id')::int = ${sa.id}`;
    expect(revokedEvents.length).toBe(1);
    expect(JSON.stringify(revokedEvents)).not.toContain(token);
    // the snapshots are the rows as stored: the account as answered and read, the token's revocation time
    expect(ev.after).toEqual(res.body);
    expect((await t.request('GET', `${SA}/${sa.id}`, { token: owner.token })).body).toEqual(res.body);
    const [stored] = await t.deps.sql<{ revoked_at: Date }[]>`select revoked_at from tokens where principal_id = ${sa.id}`;
    expect(revokedEvents[0]!.after.revoked_at).toBe(stored!.revoked_at.toISOString());
    expect(body.disabled_at).toBe(stored!.revoked_at.toISOString());
    const n = (await eventsOf(t, 'service_account', sa.id)).length;
    const again = await t.request('POST', `${SA}/${sa.id}/disable`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(res.body);
    expect((await eventsOf(t, 'service_account', sa.id)).length).toBe(n);
  });

  it('disableServiceAccount 403 outsider, 404 unknown, 412 stale If-Match', async () => {
    const sa = await createServiceAccount(t, team.id);
    expect((await t.request('POST', `${SA}/${sa.id}/disable`, { token: outsider.token })).status).toBe(403);
    expect((await t.request('POST', `${SA}/999999/disable`)).status).toBe(404);
    expect((await t.request('POST', `${SA}/${sa.id}/disable`, { headers: { 'if-match': '"svc-v1.service_account.MQ.5"' } })).status).toBe(
      412,
    );
  });
});

describe('deleteServiceAccount', () => {
  it('deleteServiceAccount 204 by an owner member removes account, tokens and memberships, with an event', async () => {
    const sa = await createServiceAccount(t, team.id);
    const token = await tokenFor(t, sa.id);
    await addMember(t, other.id, sa.id);
    const res = await t.request('DELETE', `${SA}/${sa.id}`, { token: owner.token });
    expect(res.status).toBe(204);
    expect((await t.request('GET', `${SA}/${sa.id}`)).status).toBe(404);
    expect((await t.request('GET', '/api/v0/auth/validate', { token })).status).toBe(401);
    expect((await t.deps.sql`select 1 from group_members where principal_id = ${sa.id}`).length).toBe(0);
    expect((await eventsOf(t, 'service_account', sa.id)).at(-1)).toMatchObject({
      action: 'deleted',
      before: { name: sa.name },
      metadata: { removed_from_group_ids: [other.id] },
    });
    // The owner group no longer owns anything and can be deleted.
    const g = await createGroup(t);
    const sa2 = await createServiceAccount(t, g.id);
    await t.request('DELETE', `${SA}/${sa2.id}`);
    expect((await t.request('DELETE', `/api/v1/iam/groups/${g.id}`)).status).toBe(204);
  });

  it('deleteServiceAccount 403 outsider, 404 unknown, 412 stale If-Match', async () => {
    const sa = await createServiceAccount(t, team.id);
    expect((await t.request('DELETE', `${SA}/${sa.id}`, { token: outsider.token })).status).toBe(403);
    expect((await t.request('DELETE', `${SA}/999999`)).status).toBe(404);
    expect((await t.request('DELETE', `${SA}/${sa.id}`, { headers: { 'if-match': '"svc-v1.service_account.MQ.5"' } })).status).toBe(412);
  });
});

describe('IAM gates on every identity operation', () => {
  it('a service account in the admin group and a scoped admin token get 403 everywhere', async () => {
    const sa = await createServiceAccount(t, team.id);
    await addMember(t, await adminGroupId(t), sa.id);
    const saToken = await tokenFor(t, sa.id);
    const scoped = await scopedTokenFor(t, adminId);
    const target = await createServiceAccount(t, team.id);
    const g = await createGroup(t);
    const calls: [string, string, unknown?][] = [
      ['GET', '/api/v1/iam/users'],
      ['POST', '/api/v1/iam/users', { name: uniq(), password: 'p' }],
      ['GET', `/api/v1/iam/users/${owner.id}`],
      ['PATCH', `/api/v1/iam/users/${owner.id}`, { proper_name: 'x' }],
      ['DELETE', `/api/v1/iam/users/${owner.id}`],
      ['GET', '/api/v1/iam/groups'],
      ['POST', '/api/v1/iam/groups', { name: uniq() }],
      ['GET', `/api/v1/iam/groups/${g.id}`],
      ['PATCH', `/api/v1/iam/groups/${g.id}`, { description: 'x' }],
      ['DELETE', `/api/v1/iam/groups/${g.id}`],
      ['GET', `/api/v1/iam/groups/${g.id}/members`],
      ['POST', `/api/v1/iam/groups/${g.id}/members/${owner.id}`],
      ['DELETE', `/api/v1/iam/groups/${g.id}/members/${owner.id}`],
      ['GET', SA],
      ['POST', SA, { name: uniq(), owner_group_id: team.id }],
      ['GET', `${SA}/${target.id}`],
      ['PATCH', `${SA}/${target.id}`, { description: 'x' }],
      ['POST', `${SA}/${target.id}/disable`],
      ['DELETE', `${SA}/${target.id}`],
      ['GET', `/api/v1/iam/principals/${owner.id}/groups`],
      ['GET', `/api/v1/iam/principals/${owner.id}/permissions`],
    ];
    for (const [method, path, body] of calls) {
      for (const token of [saToken, scoped]) {
        const res = await t.request(method, path, { token, body });
        expect(res.status, `${method} ${path}`).toBe(403);
      }
    }
    // Nothing changed.
    expect((await t.request('GET', `${SA}/${target.id}`)).body).toMatchObject({ disabled_at: null, revision: 1 });
    expect((await t.request('GET', `/api/v1/iam/groups/${g.id}`)).status).toBe(200);
  });
});
