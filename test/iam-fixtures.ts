// Fixtures for the identity tests (users, groups, service accounts, principals, settings).
// Tokens for service accounts and scoped tokens are stored with the same insertToken the token
// endpoints use; credential approvals go through the approval endpoint (POST /iam/credential-approvals).
import { expect } from 'vitest';
import { insertToken, type TokenScopeValue } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import { uniq, ADMIN_PASSWORD, type TestApp } from './helpers.ts';

export interface Human {
  id: number;
  name: string;
  password: string;
  token: string;
}

/** A fresh credential approval for `operation`, asked for with `token` and its owner's password. */
export async function approve(
  t: TestApp,
  operation: Record<string, unknown>,
  token = t.adminToken,
  password = ADMIN_PASSWORD,
): Promise<string> {
  const res = await t.request('POST', '/api/v1/iam/credential-approvals', { token, body: { password, operation } });
  if (res.status !== 201) throw new Error(`credential approval failed: ${res.status} ${res.text}`);
  return (res.body as { approval: string }).approval;
}

/** A new local human (created by the admin through the API) and a login token. */
export async function createHuman(
  t: TestApp,
  opts: { name?: string; email?: string | null; proper_name?: string | null } = {},
): Promise<Human> {
  const name = opts.name ?? uniq('user');
  const password = `pw-${uniq()}`;
  const body: Record<string, unknown> = { name, password };
  if (opts.email !== undefined) body.email = opts.email;
  if (opts.proper_name !== undefined) body.proper_name = opts.proper_name;
  const approval = await approve(t, { kind: 'create_user', user: body });
  const res = await t.request('POST', '/api/v1/iam/users', { body, headers: { 'x-svc-credential-approval': approval } });
  expect(res.status, res.text).toBe(201);
  const id = (res.body as { id: number }).id;
  return { id, name, password, token: await t.login(name, password) };
}

export async function createGroup(t: TestApp, name = uniq('group')): Promise<{ id: number; name: string }> {
  const res = await t.request('POST', '/api/v1/iam/groups', { body: { name } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: number; name: string };
}

export async function addMember(t: TestApp, groupId: number, principalId: number): Promise<void> {
  const res = await t.request('POST', `/api/v1/iam/groups/${groupId}/members/${principalId}`);
  expect(res.status, res.text).toBe(201);
}

/** Grants `perms` on a collection to a group through the permissions API. */
export async function grant(t: TestApp, collectionId: number, groupId: number, perms: string[]): Promise<void> {
  const res = await t.request('POST', `/api/v1/collections/${collectionId}/permissions/group/${groupId}`, { body: perms });
  expect(res.status, res.text).toBe(200);
}

/** A human in a fresh group holding `perms` on each collection given. */
export async function userWith(t: TestApp, grants: [number, string[]][]): Promise<Human & { groupId: number }> {
  const h = await createHuman(t);
  const g = await createGroup(t);
  await addMember(t, g.id, h.id);
  for (const [cid, perms] of grants) await grant(t, cid, g.id, perms);
  return { ...h, groupId: g.id };
}

export async function adminGroupId(t: TestApp): Promise<number> {
  const [g] = await t.deps.sql<{ id: number }[]>`
    select id from groups where name = ${t.deps.config.SVC_ADMIN_GROUPNAME} and identity_scope = ${t.deps.config.SVC_ADMIN_IDENTITY_SCOPE}`;
  return g!.id;
}

/** A human in the admin group with an unscoped login token. */
export async function createAdmin(t: TestApp): Promise<Human> {
  const h = await createHuman(t);
  await addMember(t, await adminGroupId(t), h.id);
  return h;
}

/** A bearer token stored directly for any principal (service accounts cannot log in). */
export async function tokenFor(t: TestApp, principalId: number, scope: TokenScopeValue | null = null): Promise<string> {
  const raw = newRawToken();
  await insertToken(t.deps.sql, {
    principalId,
    hash: hashToken(t.deps.tokenKey, raw),
    expiresAt: new Date(Date.now() + 3600_000),
    scope,
    name: 'fixture',
  });
  return raw;
}

/** A scoped token (permission scope only) for a principal. */
export function scopedTokenFor(t: TestApp, principalId: number): Promise<string> {
  return tokenFor(t, principalId, { permissions: ['ReadCollection'] });
}

export async function createServiceAccount(
  t: TestApp,
  ownerGroupId: number,
  token = t.adminToken,
  name = uniq('sa'),
): Promise<{ id: number; name: string; revision: number }> {
  const res = await t.request('POST', '/api/v1/iam/service-accounts', { token, body: { name, owner_group_id: ownerGroupId } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: number; name: string; revision: number };
}

export { eventsOf } from './helpers.ts';
