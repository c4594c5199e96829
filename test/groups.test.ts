import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { addMember, createGroup, createHuman, createServiceAccount, eventsOf, scopedTokenFor, type Human } from './iam-fixtures.ts';

let t: TestApp;
let plain: Human;

beforeAll(async () => {
  t = await startTestApp();
  plain = await createHuman(t);
});
afterAll(async () => {
  await t.close();
});

async function providerGroup(): Promise<number> {
  const [g] = await t.deps.sql<{ id: number }[]>`
    insert into groups (name, identity_scope, managed_by, external_key) values (${uniq('ldap')}, 'ldap', 'ldap', 'cn=x') returning id`;
  return g!.id;
}

describe('createGroup', () => {
  it('createGroup 201 in scope local with Location, ETag and a created event', async () => {
    const name = uniq('ops');
    const res = await t.request('POST', '/api/v1/iam/groups', { body: { name, description: 'Operators' } });
    expect(res.status).toBe(201);
    const g = res.body as { id: number };
    expect(res.body).toMatchObject({
      name,
      description: 'Operators',
      identity_scope: 'local',
      managed_by: null,
      external_key: null,
      revision: 1,
    });
    expect(res.headers.get('location')).toBe(`/api/v1/iam/groups/${g.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.group\..+\.1"$/);
    expect((await eventsOf(t, 'group', g.id))[0]).toMatchObject({ action: 'created', after: { name } });
  });

  it('createGroup 409 for a duplicate name, 400 for an empty name or unknown member', async () => {
    const g = await createGroup(t);
    const dup = await t.request('POST', '/api/v1/iam/groups', { body: { name: g.name } });
    expect(dup.status).toBe(409);
    expect((await t.request('POST', '/api/v1/iam/groups', { body: { name: '' } })).status).toBe(400);
    expect((await t.request('POST', '/api/v1/iam/groups', { body: { name: uniq(), scope: 'x' } })).status).toBe(400);
  });

  it('createGroup 403 for a non-admin and a scoped admin token; 401 without a token', async () => {
    expect((await t.request('POST', '/api/v1/iam/groups', { token: plain.token, body: { name: uniq() } })).status).toBe(403);
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
    const scoped = await scopedTokenFor(t, admin!.id);
    expect((await t.request('POST', '/api/v1/iam/groups', { token: scoped, body: { name: uniq() } })).status).toBe(403);
    expect((await t.request('POST', '/api/v1/iam/groups', { token: null, body: { name: uniq() } })).status).toBe(401);
  });
});

describe('listGroups and getGroup', () => {
  it('listGroups 200 for any human, with filters, sort and paging headers', async () => {
    const prefix = uniq('lg');
    for (const n of ['x', 'y', 'z']) await createGroup(t, `${prefix}-${n}`);
    const res = await t.request('GET', '/api/v1/iam/groups', {
      token: plain.token,
      query: { name__startswith: prefix, sort: 'name.desc', limit: 2 },
    });
    expect(res.status).toBe(200);
    expect((res.body as { name: string }[]).map((g) => g.name)).toEqual([`${prefix}-z`, `${prefix}-y`]);
    expect(res.headers.get('x-total-count')).toBe('3');
    expect(res.headers.get('x-next-cursor')).toBeTruthy();
    const local = await t.request('GET', '/api/v1/iam/groups', { query: { identity_scope: 'local', name: 'admins' } });
    expect((local.body as { name: string }[]).map((g) => g.name)).toEqual(['admins']);
  });

  it('listGroups 400 for an unknown filter or a non-sortable field', async () => {
    expect((await t.request('GET', '/api/v1/iam/groups', { query: { color: 'x' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/iam/groups', { query: { sort: 'managed_by' } })).status).toBe(400);
  });

  it('listGroups 403 for a scoped token, 401 without a token', async () => {
    expect((await t.request('GET', '/api/v1/iam/groups', { token: await scopedTokenFor(t, plain.id) })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/iam/groups', { token: null })).status).toBe(401);
  });

  it('getGroup 200 with ETag for any human, 404 unknown, 400 bad id', async () => {
    const g = await createGroup(t);
    const res = await t.request('GET', `/api/v1/iam/groups/${g.id}`, { token: plain.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: g.id, name: g.name });
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.group\./);
    expect((await t.request('GET', '/api/v1/iam/groups/999999')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/iam/groups/-1')).status).toBe(400);
  });
});

describe('updateGroup', () => {
  it('updateGroup 200 renames and changes the description with an event; null clears the description', async () => {
    const g = await createGroup(t);
    const name = uniq('renamed');
    const res = await t.request('PATCH', `/api/v1/iam/groups/${g.id}`, { body: { name, description: 'D' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name, description: 'D', revision: 2 });
    const ev = (await eventsOf(t, 'group', g.id)).at(-1);
    expect(ev).toMatchObject({ action: 'updated', before: { name: g.name }, after: { name }, before_revision: 1, after_revision: 2 });
    // the answer and the event's snapshot are the row as stored (built before the write, not read after it)
    const stored = await t.request('GET', `/api/v1/iam/groups/${g.id}`);
    expect(stored.body).toEqual(res.body);
    expect(ev!.after).toEqual(res.body);
    const cleared = await t.request('PATCH', `/api/v1/iam/groups/${g.id}`, { body: { description: null } });
    expect(cleared.body).toMatchObject({ description: '', revision: 3 });
  });

  it('updateGroup 200 no-op keeps revision and updated_at and writes no event', async () => {
    const g = await createGroup(t);
    const before = await t.request('GET', `/api/v1/iam/groups/${g.id}`);
    const n = (await eventsOf(t, 'group', g.id)).length;
    const res = await t.request('PATCH', `/api/v1/iam/groups/${g.id}`, { body: { name: g.name, description: '' } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(before.body);
    expect((await eventsOf(t, 'group', g.id)).length).toBe(n);
  });

  it('updateGroup 409 for a taken name, 412 stale If-Match, 404 unknown, 403 non-admin, 403 provider-managed', async () => {
    const a = await createGroup(t);
    const b = await createGroup(t);
    expect((await t.request('PATCH', `/api/v1/iam/groups/${a.id}`, { body: { name: b.name } })).status).toBe(409);
    const stale = await t.request('PATCH', `/api/v1/iam/groups/${a.id}`, {
      body: { description: 'x' },
      headers: { 'if-match': `"svc-v1.group.${Buffer.from(String(a.id)).toString('base64url')}.7"` },
    });
    expect(stale.status).toBe(412);
    expect(stale.headers.get('etag')).toBe(`"svc-v1.group.${Buffer.from(String(a.id)).toString('base64url')}.1"`);
    expect((await t.request('PATCH', '/api/v1/iam/groups/999999', { body: { description: 'x' } })).status).toBe(404);
    expect((await t.request('PATCH', `/api/v1/iam/groups/${a.id}`, { token: plain.token, body: { description: 'x' } })).status).toBe(403);
    const managed = await providerGroup();
    expect((await t.request('PATCH', `/api/v1/iam/groups/${managed}`, { body: { description: 'x' } })).status).toBe(403);
  });
});

describe('deleteGroup', () => {
  it('deleteGroup 204 removes the group and its memberships with an event', async () => {
    const g = await createGroup(t);
    await addMember(t, g.id, plain.id);
    const res = await t.request('DELETE', `/api/v1/iam/groups/${g.id}`);
    expect(res.status).toBe(204);
    expect((await t.request('GET', `/api/v1/iam/groups/${g.id}`)).status).toBe(404);
    expect((await t.deps.sql`select 1 from group_members where group_id = ${g.id}`).length).toBe(0);
    expect((await eventsOf(t, 'group', g.id)).at(-1)).toMatchObject({ action: 'deleted', metadata: { removed_member_ids: [plain.id] } });
  });

  it('deleteGroup 204 records each of its grants as revoked, in the collection it was on, before the group', async () => {
    const g = await createGroup(t);
    const cols: number[] = [];
    for (let i = 0; i < 2; i++) {
      const [c] = await t.deps.sql<{ id: number }[]>`insert into collections (name) values (${uniq('col')}) returning id`;
      cols.push(c!.id);
      const res = await t.request('PUT', `/api/v1/collections/${c!.id}/permissions/group/${g.id}`, {
        body: ['ReadCollection', 'ReadAudit'],
      });
      expect(res.status, res.text).toBe(200);
    }
    const [mark] = await t.deps.sql<{ id: number }[]>`select max(id)::int as id from events`;
    expect((await t.request('DELETE', `/api/v1/iam/groups/${g.id}`)).status).toBe(204);
    expect(await t.deps.sql`select 1 from collection_permissions where group_id = ${g.id}`).toHaveLength(0);
    const ev = await t.deps.sql<
      { entity_type: string; action: string; entity_name: string; collection_id: number | null; before: unknown }[]
    >`
      select entity_type, action, entity_name, collection_id, before from events where id > ${mark!.id} order by id`;
    expect(ev.map((e) => [e.entity_type, e.action, e.entity_name, e.collection_id])).toEqual([
      ['permission', 'revoked', 'ReadCollection', cols[0]],
      ['permission', 'revoked', 'ReadAudit', cols[0]],
      ['permission', 'revoked', 'ReadCollection', cols[1]],
      ['permission', 'revoked', 'ReadAudit', cols[1]],
      ['group', 'deleted', g.name, null],
    ]);
    expect(ev[0]!.before).toMatchObject({ collection_id: cols[0], group_id: g.id, permission: 'ReadCollection' });
  });

  it('deleteGroup 409 listing the service accounts it owns', async () => {
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const res = await t.request('DELETE', `/api/v1/iam/groups/${g.id}`);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({
      reason: 'group_owns_service_accounts',
      details: [{ path: `service_accounts/${sa.id}`, message: sa.name }],
    });
    expect((res.body as { message: string }).message).toContain(sa.name);
    expect((await t.request('GET', `/api/v1/iam/groups/${g.id}`)).status).toBe(200);
  });

  it('deleteGroup 412 stale If-Match, 404 unknown, 403 non-admin, 403 provider-managed', async () => {
    const g = await createGroup(t);
    expect((await t.request('DELETE', `/api/v1/iam/groups/${g.id}`, { headers: { 'if-match': '"svc-v1.group.MQ.9"' } })).status).toBe(412);
    expect((await t.request('DELETE', '/api/v1/iam/groups/999999')).status).toBe(404);
    expect((await t.request('DELETE', `/api/v1/iam/groups/${g.id}`, { token: plain.token })).status).toBe(403);
    expect((await t.request('DELETE', `/api/v1/iam/groups/${await providerGroup()}`)).status).toBe(403);
  });
});

describe('group members', () => {
  it('addGroupMember 201 with Location and an added event; repeating it is a no-op 201 without an event', async () => {
    const g = await createGroup(t);
    const u = await createHuman(t);
    const res = await t.request('POST', `/api/v1/iam/groups/${g.id}/members/${u.id}`);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ id: u.id, kind: 'human', name: u.name });
    expect(res.headers.get('location')).toBe(`/api/v1/iam/groups/${g.id}/members/${u.id}`);
    const again = await t.request('POST', `/api/v1/iam/groups/${g.id}/members/${u.id}`);
    expect(again.status).toBe(201);
    const evs = await eventsOf(t, 'group_membership', g.id);
    expect(evs.map((e) => e.action)).toEqual(['added']);
    expect(evs[0]).toMatchObject({ after: { group_id: g.id, principal_id: u.id }, metadata: { principal_id: u.id } });
  });

  it('removeGroupMember 204 with a removed event; removing a non-member is a no-op 204 without an event', async () => {
    const g = await createGroup(t);
    const u = await createHuman(t);
    await addMember(t, g.id, u.id);
    expect((await t.request('DELETE', `/api/v1/iam/groups/${g.id}/members/${u.id}`)).status).toBe(204);
    expect((await t.request('DELETE', `/api/v1/iam/groups/${g.id}/members/${u.id}`)).status).toBe(204);
    expect((await eventsOf(t, 'group_membership', g.id)).map((e) => e.action)).toEqual(['added', 'removed']);
  });

  it('membership changes change admin authority immediately', async () => {
    const u = await createHuman(t);
    expect((await t.request('GET', '/api/v1/iam/users', { token: u.token })).status).toBe(403);
    const [admins] = await t.deps.sql<{ id: number }[]>`select id from groups where name = 'admins' and identity_scope = 'local'`;
    await addMember(t, admins!.id, u.id);
    expect((await t.request('GET', '/api/v1/iam/users', { token: u.token })).status).toBe(200);
    await t.request('DELETE', `/api/v1/iam/groups/${admins!.id}/members/${u.id}`);
    expect((await t.request('GET', '/api/v1/iam/users', { token: u.token })).status).toBe(403);
  });

  it('addGroupMember and removeGroupMember 404 for an unknown group or principal, 403 non-admin, 403 provider-managed group', async () => {
    const g = await createGroup(t);
    for (const method of ['POST', 'DELETE']) {
      expect((await t.request(method, `/api/v1/iam/groups/999999/members/${plain.id}`)).status).toBe(404);
      expect((await t.request(method, `/api/v1/iam/groups/${g.id}/members/999999`)).status).toBe(404);
      expect((await t.request(method, `/api/v1/iam/groups/${g.id}/members/${plain.id}`, { token: plain.token })).status).toBe(403);
      expect((await t.request(method, `/api/v1/iam/groups/${await providerGroup()}/members/${plain.id}`)).status).toBe(403);
      expect((await t.request(method, `/api/v1/iam/groups/${g.id}/members/0`)).status).toBe(400);
    }
  });

  it('listGroupMembers 200 for an admin and for a member, sorted and paged; 403 for a non-member; 404 unknown', async () => {
    const g = await createGroup(t);
    const prefix = uniq('m');
    const a = await createHuman(t, { name: `${prefix}-a` });
    const b = await createHuman(t, { name: `${prefix}-b` });
    await addMember(t, g.id, a.id);
    await addMember(t, g.id, b.id);
    const sa = await createServiceAccount(t, g.id);
    await addMember(t, g.id, sa.id);
    const res = await t.request('GET', `/api/v1/iam/groups/${g.id}/members`, { query: { sort: '-name', limit: 2 } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-total-count')).toBe('3');
    const names = (res.body as { name: string }[]).map((m) => m.name);
    expect(names).toEqual([sa.name, b.name].sort().reverse());
    const byMember = await t.request('GET', `/api/v1/iam/groups/${g.id}/members`, { token: a.token });
    expect(byMember.status).toBe(200);
    expect((byMember.body as { kind: string }[]).map((m) => m.kind).sort()).toEqual(['human', 'human', 'service_account']);
    expect((await t.request('GET', `/api/v1/iam/groups/${g.id}/members`, { token: plain.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/iam/groups/999999/members')).status).toBe(404);
    expect((await t.request('GET', `/api/v1/iam/groups/${g.id}/members`, { query: { name: 'x' } })).status).toBe(400);
  });
});
