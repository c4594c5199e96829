// Fixtures for the class, object, computed-field and aggregate tests: collections, groups,
// grants, principals and tokens straight in SQL (these tests exercise classes and objects, not
// the collection or IAM endpoints).
import { expect } from 'vitest';
import type { TokenScopeValue } from '../src/db/tokens.ts';
import type { Permission } from '../src/domain/authz.ts';
import { uniq, type TestApp } from './helpers.ts';
import { tokenFor } from './iam-fixtures.ts';

export async function collection(t: TestApp, parent: number | null = null): Promise<number> {
  const [c] = await t.deps.sql<{ id: number }[]>`
    insert into collections (name, parent_collection_id) values (${uniq('col')}, ${parent}) returning id`;
  return c!.id;
}

/** A principal in a new group holding `perms` on each given collection; returns its id and a token. */
export async function principalWith(
  t: TestApp,
  grants: [number, Permission[]][],
  opts: { kind?: 'human' | 'service_account'; scope?: TokenScopeValue | null } = {},
): Promise<{ id: number; token: string; groupId: number }> {
  const kind = opts.kind ?? 'human';
  const [g] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
  for (const [cid, ps] of grants) {
    await t.deps.sql`insert into collection_permissions (collection_id, group_id, permission)
      select ${cid}, ${g!.id}, p from unnest(${ps}::text[]) p`;
  }
  const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values (${kind}, ${uniq('p')}) returning id`;
  if (kind === 'human') await t.deps.sql`insert into users (principal_id) values (${p!.id})`;
  else await t.deps.sql`insert into service_accounts (principal_id, owner_group_id) values (${p!.id}, ${g!.id})`;
  await t.deps.sql`insert into group_members (group_id, principal_id) values (${g!.id}, ${p!.id})`;
  const token = await tokenFor(t, p!.id, opts.scope ?? null);
  return { id: p!.id, token, groupId: g!.id };
}

export { tokenFor };

/** A class schema requiring an integer `cpu`. */
export const CPU_SCHEMA = { type: 'object', properties: { cpu: { type: 'integer' } }, required: ['cpu'] };

export const ALL_CLASS_OBJECT: Permission[] = [
  'ReadCollection',
  'CreateClass',
  'ReadClass',
  'UpdateClass',
  'DeleteClass',
  'CreateObject',
  'ReadObject',
  'UpdateObject',
  'DeleteObject',
];

export interface Cls {
  id: number;
  name: string;
  revision: number;
}

export async function createClass(
  t: TestApp,
  collectionId: number,
  extra: Record<string, unknown> = {},
  token = t.adminToken,
): Promise<Cls> {
  const res = await t.request('POST', '/api/v1/classes', { token, body: { name: uniq('class'), collection_id: collectionId, ...extra } });
  expect(res.status, res.text).toBe(201);
  return res.body as Cls;
}

/** A row of `events` about an object, as the known-class tests read it (ids and times left out). */
export interface ObjectEventRow {
  entity_name: string;
  collection_id: number;
  actor_user_id: number;
  summary: string;
  before: Record<string, unknown>;
  after: Record<string, unknown>;
  before_revision: number;
  after_revision: number;
  metadata: Record<string, unknown>;
  provenance: unknown;
}

export interface Obj {
  id: number;
  name: string;
  revision: number;
  json_data: unknown;
  collection_id: number;
  svc_class_id: number;
}

export async function createObject(
  t: TestApp,
  classId: number,
  jsonData: unknown,
  extra: Record<string, unknown> = {},
  token = t.adminToken,
): Promise<Obj> {
  const res = await t.request('POST', `/api/v1/classes/${classId}/objects`, {
    token,
    body: { name: uniq('obj'), json_data: jsonData, ...extra },
  });
  expect(res.status, res.text).toBe(201);
  return res.body as Obj;
}

/** An object's ETag as a GET answers it. */
export async function etagOf(t: TestApp, classId: number, objectId: number): Promise<string> {
  const res = await t.request('GET', `/api/v1/classes/${classId}/${objectId}`);
  expect(res.status).toBe(200);
  return res.headers.get('etag')!;
}

export { eventsOf } from './helpers.ts';
