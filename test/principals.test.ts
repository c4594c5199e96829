import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { addMember, createGroup, createHuman, createServiceAccount, tokenFor, type Human } from './iam-fixtures.ts';

let t: TestApp;
let alice: Human;
let bob: Human;
let adminId: number;

beforeAll(async () => {
  t = await startTestApp();
  alice = await createHuman(t);
  bob = await createHuman(t);
  const [a] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
  adminId = a!.id;
});
afterAll(async () => {
  await t.close();
});

async function collection(): Promise<number> {
  const [c] = await t.deps.sql<{ id: number }[]>`insert into collections (name) values (${uniq('c')}) returning id`;
  return c!.id;
}

async function grant(collectionId: number, groupId: number, ...permissions: string[]): Promise<void> {
  for (const p of permissions)
    await t.deps.sql`insert into collection_permissions (collection_id, group_id, permission) values (${collectionId}, ${groupId}, ${p})`;
}

describe('listPrincipalGroups', () => {
  it('listPrincipalGroups 200 for the human itself and an admin, sorted and paged', async () => {
    const u = await createHuman(t);
    const prefix = uniq('pg');
    const groups = [];
    for (const n of ['a', 'b', 'c']) {
      const g = await createGroup(t, `${prefix}-${n}`);
      await addMember(t, g.id, u.id);
      groups.push(g);
    }
    const self = await t.request('GET', `/api/v1/iam/principals/${u.id}/groups`, { token: u.token });
    expect(self.status).toBe(200);
    expect((self.body as { id: number }[]).map((g) => g.id)).toEqual(groups.map((g) => g.id));
    expect(self.headers.get('x-total-count')).toBe('3');
    const page = await t.request('GET', `/api/v1/iam/principals/${u.id}/groups`, { query: { sort: '-name', limit: 2 } });
    expect((page.body as { name: string }[]).map((g) => g.name)).toEqual([`${prefix}-c`, `${prefix}-b`]);
    const rest = await t.request('GET', `/api/v1/iam/principals/${u.id}/groups`, {
      query: { sort: '-name', limit: 2, cursor: page.headers.get('x-next-cursor')! },
    });
    expect((rest.body as { name: string }[]).map((g) => g.name)).toEqual([`${prefix}-a`]);
  });

  it('listPrincipalGroups 403 for another human without admin; 404 unknown; 400 for a filter', async () => {
    expect((await t.request('GET', `/api/v1/iam/principals/${bob.id}/groups`, { token: alice.token })).status).toBe(403);
    expect((await t.request('GET', `/api/v1/iam/principals/${adminId}/groups`, { token: alice.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/iam/principals/999999/groups')).status).toBe(404);
    expect((await t.request('GET', `/api/v1/iam/principals/${alice.id}/groups`, { query: { name: 'x' } })).status).toBe(400);
  });

  it('listPrincipalGroups for a service account: 200 for an admin and an owner-group member, 403 for others and itself', async () => {
    const team = await createGroup(t);
    await addMember(t, team.id, alice.id);
    const sa = await createServiceAccount(t, team.id);
    const g = await createGroup(t);
    await addMember(t, g.id, sa.id);
    const byMember = await t.request('GET', `/api/v1/iam/principals/${sa.id}/groups`, { token: alice.token });
    expect(byMember.status).toBe(200);
    expect((byMember.body as { id: number }[]).map((x) => x.id)).toEqual([g.id]);
    expect((await t.request('GET', `/api/v1/iam/principals/${sa.id}/groups`)).status).toBe(200);
    expect((await t.request('GET', `/api/v1/iam/principals/${sa.id}/groups`, { token: bob.token })).status).toBe(403);
    const own = await tokenFor(t, sa.id);
    expect((await t.request('GET', `/api/v1/iam/principals/${sa.id}/groups`, { token: own })).status).toBe(403);
  });
});

describe('listPrincipalPermissions', () => {
  it('listPrincipalPermissions 200 groups direct rows by granting group, omitting groups that grant nothing', async () => {
    const u = await createHuman(t);
    const g1 = await createGroup(t);
    const g2 = await createGroup(t);
    const empty = await createGroup(t);
    const notMine = await createGroup(t);
    for (const g of [g1, g2, empty]) await addMember(t, g.id, u.id);
    const c1 = await collection();
    const c2 = await collection();
    await grant(c2, g1.id, 'ReadObject', 'CreateClass');
    await grant(c1, g1.id, 'ReadCollection');
    await grant(c1, g2.id, 'UpdateCollection');
    await grant(c1, notMine.id, 'DeleteCollection');
    const res = await t.request('GET', `/api/v1/iam/principals/${u.id}/permissions`, { token: u.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      {
        group: { id: g1.id, name: g1.name, identity_scope: 'local' },
        permissions: [
          { collection_id: c1, permission: 'ReadCollection' },
          { collection_id: c2, permission: 'CreateClass' },
          { collection_id: c2, permission: 'ReadObject' },
        ],
      },
      {
        group: { id: g2.id, name: g2.name, identity_scope: 'local' },
        permissions: [{ collection_id: c1, permission: 'UpdateCollection' }],
      },
    ]);
    const byAdmin = await t.request('GET', `/api/v1/iam/principals/${u.id}/permissions`);
    expect(byAdmin.body).toEqual(res.body);
  });

  it('listPrincipalPermissions 200 empty for a principal without grants', async () => {
    const res = await t.request('GET', `/api/v1/iam/principals/${bob.id}/permissions`, { token: bob.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
  });

  it('listPrincipalPermissions 403 for another human without admin, 404 unknown, 400 bad id', async () => {
    expect((await t.request('GET', `/api/v1/iam/principals/${alice.id}/permissions`, { token: bob.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/iam/principals/999999/permissions')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/iam/principals/x/permissions')).status).toBe(400);
  });

  it('listPrincipalPermissions for a service account: owner-group member 200, others 403', async () => {
    const team = await createGroup(t);
    await addMember(t, team.id, bob.id);
    const sa = await createServiceAccount(t, team.id);
    const runtime = await createGroup(t);
    await addMember(t, runtime.id, sa.id);
    const c = await collection();
    await grant(c, runtime.id, 'ReadClass');
    const res = await t.request('GET', `/api/v1/iam/principals/${sa.id}/permissions`, { token: bob.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      {
        group: { id: runtime.id, name: runtime.name, identity_scope: 'local' },
        permissions: [{ collection_id: c, permission: 'ReadClass' }],
      },
    ]);
    const outsider = await createHuman(t);
    expect((await t.request('GET', `/api/v1/iam/principals/${sa.id}/permissions`, { token: outsider.token })).status).toBe(403);
  });
});
