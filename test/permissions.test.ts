import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { insertToken, type TokenScopeValue } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import type { Permission } from '../src/domain/authz.ts';

// Identity fixtures straight in SQL, so these tests depend only on the collection endpoints.
let t: TestApp;

async function group(grants: [number, Permission[]][] = []): Promise<number> {
  const [g] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
  for (const [cid, ps] of grants) {
    await t.deps.sql`insert into collection_permissions (collection_id, group_id, permission)
      select ${cid}, ${g!.id}, p from unnest(${ps}::text[]) p`;
  }
  return g!.id;
}

async function user(groups: number[], scope: TokenScopeValue | null = null, kind: 'human' | 'service_account' = 'human') {
  const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values (${kind}, ${uniq('u')}) returning id`;
  if (kind === 'human') await t.deps.sql`insert into users (principal_id) values (${p!.id})`;
  else await t.deps.sql`insert into service_accounts (principal_id, owner_group_id) values (${p!.id}, ${groups[0]!})`;
  for (const g of groups) await t.deps.sql`insert into group_members (group_id, principal_id) values (${g}, ${p!.id})`;
  const raw = newRawToken();
  await insertToken(t.deps.sql, {
    principalId: p!.id,
    hash: hashToken(t.deps.tokenKey, raw),
    expiresAt: new Date(Date.now() + 3600_000),
    scope,
  });
  return { id: p!.id, token: raw };
}

async function collection(parent: number | null = null): Promise<number> {
  const res = await t.request('POST', '/api/v1/collections', { body: { name: uniq('c'), parent_collection_id: parent } });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

async function permissionEvents(cid: number, gid: number) {
  const rows = await t.deps.sql<{ action: string; entity_name: string }[]>`
    select action, entity_name from events where entity_type = 'permission' and collection_id = ${cid} and entity_id = ${gid} order by id`;
  return rows.map((r) => `${r.action}:${r.entity_name}`);
}

const base = (cid: number, gid: number) => `/api/v1/collections/${cid}/permissions/group/${gid}`;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

describe('group grant mutations', () => {
  it('grantCollectionGroupPermission 200 grants once; a repeated grant is a no-op without an event', async () => {
    const c = await collection();
    const g = await group();
    const first = await t.request('POST', `${base(c, g)}/ReadObject`);
    expect(first.status).toBe(200);
    expect(first.body).toEqual(['ReadObject']);
    const again = await t.request('POST', `${base(c, g)}/ReadObject`);
    expect(again.body).toEqual(['ReadObject']);
    expect(await permissionEvents(c, g)).toEqual(['granted:ReadObject']);
  });

  it('revokeCollectionGroupPermission 204; revoking what is not held is a no-op without an event', async () => {
    const c = await collection();
    const g = await group([[c, ['ReadObject', 'ReadClass']]]);
    expect((await t.request('DELETE', `${base(c, g)}/ReadObject`)).status).toBe(204);
    expect((await t.request('DELETE', `${base(c, g)}/ReadObject`)).status).toBe(204);
    expect((await t.request('GET', base(c, g))).body).toEqual(['ReadClass']);
    expect(await permissionEvents(c, g)).toEqual(['revoked:ReadObject']);
  });

  it('addCollectionGroupPermissions 200 adds only missing names and returns the set in enum order', async () => {
    const c = await collection();
    const g = await group([[c, ['ReadObject']]]);
    const res = await t.request('POST', base(c, g), { body: ['ReadObject', 'UpdateCollection', 'ReadCollection'] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(['ReadCollection', 'UpdateCollection', 'ReadObject']);
    expect((await t.request('POST', base(c, g), { body: [] })).body).toEqual(['ReadCollection', 'UpdateCollection', 'ReadObject']);
    expect(await permissionEvents(c, g)).toEqual(['granted:ReadCollection', 'granted:UpdateCollection']);
  });

  it('replaceCollectionGroupPermissions 200 grants the missing and revokes the rest; an unchanged set is a no-op', async () => {
    const c = await collection();
    const g = await group([[c, ['ReadObject', 'ReadClass']]]);
    const res = await t.request('PUT', base(c, g), { body: ['ReadClass', 'ReadAudit'] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(['ReadClass', 'ReadAudit']);
    expect(await permissionEvents(c, g)).toEqual(['revoked:ReadObject', 'granted:ReadAudit']);
    await t.request('PUT', base(c, g), { body: ['ReadAudit', 'ReadClass'] });
    expect((await permissionEvents(c, g)).length).toBe(2);
    const empty = await t.request('PUT', base(c, g), { body: [] });
    expect(empty.body).toEqual([]);
    expect(await permissionEvents(c, g)).toEqual(['revoked:ReadObject', 'granted:ReadAudit', 'revoked:ReadClass', 'revoked:ReadAudit']);
  });

  it('revokeAllCollectionGroupPermissions 204 removes the grants here, never those on ancestors', async () => {
    const parent = await collection();
    const c = await collection(parent);
    const g = await group([
      [parent, ['ReadCollection']],
      [c, ['ReadObject', 'ReadClass']],
    ]);
    expect((await t.request('DELETE', base(c, g))).status).toBe(204);
    expect((await t.request('GET', base(c, g))).body).toEqual([]);
    expect((await t.request('GET', base(parent, g))).body).toEqual(['ReadCollection']);
    expect((await t.request('DELETE', base(c, g))).status).toBe(204);
    expect(await permissionEvents(c, g)).toEqual(['revoked:ReadClass', 'revoked:ReadObject']);
  });

  it('grant mutations 400 for unknown or duplicate permission names', async () => {
    const c = await collection();
    const g = await group();
    expect((await t.request('POST', `${base(c, g)}/Fly`)).status).toBe(400);
    expect((await t.request('POST', base(c, g), { body: ['ReadObject', 'ReadObject'] })).status).toBe(400);
    expect((await t.request('PUT', base(c, g), { body: ['Fly'] })).status).toBe(400);
    expect((await t.request('PUT', base(c, g), { body: { ReadObject: true } })).status).toBe(400);
  });

  it('grant mutations 403 without DelegateCollection, also for a token scoped to another collection', async () => {
    const c = await collection();
    const other = await collection();
    const g = await group();
    const reader = await user([await group([[c, ['ReadCollection', 'UpdateCollection']]])]);
    expect((await t.request('POST', `${base(c, g)}/ReadObject`, { token: reader.token })).status).toBe(403);
    expect((await t.request('PUT', base(c, g), { token: reader.token, body: [] })).status).toBe(403);
    expect((await t.request('DELETE', base(c, g), { token: reader.token })).status).toBe(403);
    const delegator = await group([[c, ['DelegateCollection']]]);
    const scoped = await user([delegator], { resources: [{ kind: 'collection', id: other }] });
    expect((await t.request('POST', `${base(c, g)}/ReadObject`, { token: scoped.token })).status).toBe(403);
    const unscoped = await user([delegator]);
    expect((await t.request('POST', `${base(c, g)}/ReadObject`, { token: unscoped.token })).status).toBe(200);
  });

  it('grant mutations 404 for a missing collection or group', async () => {
    const c = await collection();
    const g = await group();
    expect((await t.request('POST', `${base(2_000_000_000, g)}/ReadObject`)).status).toBe(404);
    expect((await t.request('POST', `${base(c, 2_000_000_000)}/ReadObject`)).status).toBe(404);
    expect((await t.request('PUT', base(c, 2_000_000_000), { body: [] })).status).toBe(404);
    expect((await t.request('DELETE', base(c, 2_000_000_000))).status).toBe(404);
    expect((await t.request('DELETE', `${base(c, 2_000_000_000)}/ReadObject`)).status).toBe(404);
  });

  it('grant mutations 401 without a token', async () => {
    const c = await collection();
    const g = await group();
    expect((await t.request('POST', `${base(c, g)}/ReadObject`, { token: null })).status).toBe(401);
  });
});

describe('reading grants', () => {
  it('getCollectionGroupPermissions 200 (empty when none), 403 without ReadCollection, 404 for a missing group', async () => {
    const c = await collection();
    const g = await group();
    expect((await t.request('GET', base(c, g))).body).toEqual([]);
    const stranger = await user([await group()]);
    expect((await t.request('GET', base(c, g), { token: stranger.token })).status).toBe(403);
    expect((await t.request('GET', base(c, 2_000_000_000))).status).toBe(404);
    expect((await t.request('GET', base(2_000_000_000, g))).status).toBe(404);
  });

  it('listCollectionPermissions 200 lists direct rows sorted by group then permission order, paged', async () => {
    const c = await collection();
    const g1 = await group([[c, ['ReadObject', 'ReadCollection']]]);
    const g2 = await group([[c, ['ReadAudit']]]);
    const res = await t.request('GET', `/api/v1/collections/${c}/permissions`);
    expect(res.status).toBe(200);
    const rows = res.body as { collection_id: number; group_id: number; permission: string }[];
    expect(rows.map((r) => [r.group_id, r.permission])).toEqual([
      [g1, 'ReadCollection'],
      [g1, 'ReadObject'],
      [g2, 'ReadAudit'],
    ]);
    expect(rows.every((r) => r.collection_id === c)).toBe(true);
    expect(res.headers.get('x-total-count')).toBe('3');
    const p1 = await t.request('GET', `/api/v1/collections/${c}/permissions`, { query: { limit: 2, sort: '-group_id' } });
    const p2 = await t.request('GET', `/api/v1/collections/${c}/permissions`, {
      query: { limit: 2, sort: '-group_id', cursor: p1.headers.get('x-next-cursor')! },
    });
    const paged = [...(p1.body as typeof rows), ...(p2.body as typeof rows)].map((r) => [r.group_id, r.permission]);
    expect(paged).toEqual([
      [g2, 'ReadAudit'],
      [g1, 'ReadObject'],
      [g1, 'ReadCollection'],
    ]);
  });

  it('listCollectionPermissions 400 for an unknown sort or filter, 403 without ReadCollection, 404 when missing', async () => {
    const c = await collection();
    expect((await t.request('GET', `/api/v1/collections/${c}/permissions`, { query: { sort: 'colour' } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/collections/${c}/permissions`, { query: { group_id: 1 } })).status).toBe(400);
    const stranger = await user([await group()]);
    expect((await t.request('GET', `/api/v1/collections/${c}/permissions`, { token: stranger.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/collections/2000000000/permissions')).status).toBe(404);
  });

  it("listCollectionPrincipalPermissions 200 lists the direct rows of the principal's groups only", async () => {
    const parent = await collection();
    const c = await collection(parent);
    const mine = await group([
      [c, ['ReadObject']],
      [parent, ['ReadCollection']],
    ]);
    await group([[c, ['DeleteObject']]]);
    const sa = await user([mine], null, 'service_account');
    const res = await t.request('GET', `/api/v1/collections/${c}/permissions/principal/${sa.id}`);
    expect(res.status).toBe(200);
    expect((res.body as { group_id: number; permission: string }[]).map((r) => [r.group_id, r.permission])).toEqual([[mine, 'ReadObject']]);
  });

  it('listCollectionPrincipalPermissions 403 without ReadCollection, 404 for a missing principal or collection', async () => {
    const c = await collection();
    const stranger = await user([await group()]);
    expect(
      (await t.request('GET', `/api/v1/collections/${c}/permissions/principal/${stranger.id}`, { token: stranger.token })).status,
    ).toBe(403);
    expect((await t.request('GET', `/api/v1/collections/${c}/permissions/principal/2000000000`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/collections/2000000000/permissions/principal/${stranger.id}`)).status).toBe(404);
  });

  it('listEffectiveCollectionPrincipalPermissions 200 lists direct and inherited rows with depth', async () => {
    const a = await collection();
    const b = await collection(a);
    const c = await collection(b);
    const g1 = await group([
      [a, ['ReadCollection']],
      [c, ['ReadObject']],
    ]);
    const g2 = await group([[b, ['UpdateCollection', 'ReadCollection']]]);
    await group([[b, ['DeleteCollection']]]);
    const u = await user([g1, g2]);
    const res = await t.request('GET', `/api/v1/collections/${c}/permissions/effective/principal/${u.id}`, { token: u.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { target_collection_id: c, source_collection_id: c, group_id: g1, permission: 'ReadObject', depth: 0, inherited: false },
      { target_collection_id: c, source_collection_id: b, group_id: g2, permission: 'ReadCollection', depth: 1, inherited: true },
      { target_collection_id: c, source_collection_id: b, group_id: g2, permission: 'UpdateCollection', depth: 1, inherited: true },
      { target_collection_id: c, source_collection_id: a, group_id: g1, permission: 'ReadCollection', depth: 2, inherited: true },
    ]);
    expect(res.headers.get('x-total-count')).toBe('4');
    const p1 = await t.request('GET', `/api/v1/collections/${c}/permissions/effective/principal/${u.id}`, { query: { limit: 3 } });
    const p2 = await t.request('GET', `/api/v1/collections/${c}/permissions/effective/principal/${u.id}`, {
      query: { limit: 3, cursor: p1.headers.get('x-next-cursor')! },
    });
    expect([...(p1.body as unknown[]), ...(p2.body as unknown[])]).toEqual(res.body);
  });

  it('listEffectiveCollectionPrincipalPermissions 403 without ReadCollection, 404 for a missing principal', async () => {
    const c = await collection();
    const stranger = await user([await group()]);
    expect(
      (await t.request('GET', `/api/v1/collections/${c}/permissions/effective/principal/${stranger.id}`, { token: stranger.token })).status,
    ).toBe(403);
    expect((await t.request('GET', `/api/v1/collections/${c}/permissions/effective/principal/2000000000`)).status).toBe(404);
  });
});
