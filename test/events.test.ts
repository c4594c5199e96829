// Audit read API: GET /api/v1/events and its wrappers. Events are written with appendEvent (the
// service's own write path); collections, classes, objects, groups and grants are fixture rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { appendEvent } from '../src/db/events.ts';
import { type NewEvent } from '../src/domain/new-event.ts';
import { SYSTEM_ACTOR, type Actor } from '../src/domain/actor.ts';
import { insertToken, type TokenScopeValue } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

interface Ev {
  id: number;
  event_id: string;
  entity_type: string;
  entity_id: number | null;
  entity_name: string | null;
  collection_id: number | null;
  action: string;
  actor_kind: string;
  actor_user_id: number | null;
  initiator_user_id: number | null;
  before: unknown;
  after: unknown;
  before_revision: number | null;
  after_revision: number | null;
  metadata: Record<string, unknown>;
  summary: string | null;
  schema_version: number;
  provenance: { actor: { kind: string; principal: { id: number; name: string | null } | null } };
  occurred_at: string;
}

// ---- fixtures -------------------------------------------------------------------------------

async function human(): Promise<{ id: number; name: string }> {
  const name = uniq('ev-user');
  const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values ('human', ${name}) returning id`;
  await t.deps.sql`insert into users (principal_id) values (${p!.id})`;
  return { id: p!.id, name };
}

async function tokenFor(principalId: number, scope: TokenScopeValue | null = null): Promise<string> {
  const raw = newRawToken();
  await insertToken(t.deps.sql, { principalId, hash: hashToken(t.deps.tokenKey, raw), expiresAt: new Date(Date.now() + 3600_000), scope });
  return raw;
}

async function group(): Promise<number> {
  const [g] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('ev-group')}) returning id`;
  return g!.id;
}

async function member(groupId: number, principalId: number): Promise<void> {
  await t.deps.sql`insert into group_members (group_id, principal_id) values (${groupId}, ${principalId})`;
}

async function adminPrincipal(): Promise<{ id: number; name: string }> {
  const h = await human();
  const [g] = await t.deps.sql<{ id: number }[]>`select id from groups where name = 'admins' and identity_scope = 'local'`;
  await member(g!.id, h.id);
  return h;
}

async function collection(parent: number | null = null): Promise<number> {
  const [c] = await t.deps.sql<{ id: number }[]>`
    insert into collections (name, parent_collection_id) values (${uniq('ev-coll')}, ${parent}) returning id`;
  return c!.id;
}

async function grant(collectionId: number, groupId: number, permission: string): Promise<void> {
  await t.deps
    .sql`insert into collection_permissions (collection_id, group_id, permission) values (${collectionId}, ${groupId}, ${permission})`;
}

async function klass(collectionId: number): Promise<number> {
  const [k] = await t.deps.sql<{ id: number }[]>`
    insert into classes (name, collection_id) values (${uniq('ev-class')}, ${collectionId}) returning id`;
  return k!.id;
}

async function object(classId: number, collectionId: number): Promise<number> {
  const [o] = await t.deps.sql<{ id: number }[]>`
    insert into objects (name, collection_id, class_id, json_data) values (${uniq('ev-obj')}, ${collectionId}, ${classId}, '{}'::jsonb) returning id`;
  return o!.id;
}

async function ev(e: Partial<NewEvent> & { entityType?: string }, actor: Actor = SYSTEM_ACTOR): Promise<number> {
  const { id } = await appendEvent(t.deps.sql, actor, { entityType: 'test_thing', entityId: null, action: 'created', ...e });
  return id;
}

function userActor(u: { id: number; name: string }): Actor {
  return { kind: 'user', principalId: u.id, principalName: u.name };
}

/** A non-admin with ReadAudit on `collectionId` (through a group), and a token. */
async function auditor(...collectionIds: number[]): Promise<{ id: number; name: string; token: string; group: number }> {
  const u = await human();
  const g = await group();
  await member(g, u.id);
  for (const c of collectionIds) await grant(c, g, 'ReadAudit');
  return { ...u, group: g, token: await tokenFor(u.id) };
}

async function dbNow(): Promise<string> {
  const [r] = await t.deps.sql<{ ts: string }[]>`
    select to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as ts`;
  return r!.ts;
}

async function list(path: string, token: string, query: Record<string, string | number | boolean> = {}) {
  const res = await t.request('GET', path, { token, query });
  return { res, body: res.body as Ev[], total: res.headers.get('x-total-count') };
}

// ---- listEvents ---------------------------------------------------------------------------------

describe('listEvents', () => {
  it('listEvents 200 returns the full envelope with snapshots to an unscoped admin, newest first', async () => {
    const c = await collection();
    const a = await ev({
      entityType: 'collection',
      entityId: c,
      entityName: 'x',
      collectionId: c,
      action: 'created',
      after: { n: 1 },
      afterRevision: 1,
    });
    const b = await ev({
      entityType: 'collection',
      entityId: c,
      entityName: 'x',
      collectionId: c,
      action: 'updated',
      before: { n: 1 },
      after: { n: 2 },
      beforeRevision: 1,
      afterRevision: 2,
      summary: 'changed',
    });
    const { res, body, total } = await list('/api/v1/events', t.adminToken, { collection_id: c });
    expect(res.status).toBe(200);
    expect(total).toBe('2');
    expect(res.headers.get('x-page-limit')).toBe('100');
    expect(res.headers.get('x-next-cursor')).toBeNull();
    expect(body.map((e) => e.id)).toEqual([b, a]);
    expect(body[0]).toMatchObject({
      entity_type: 'collection',
      entity_id: c,
      collection_id: c,
      action: 'updated',
      actor_kind: 'system',
      actor_user_id: null,
      before: { n: 1 },
      after: { n: 2 },
      before_revision: 1,
      after_revision: 2,
      summary: 'changed',
      schema_version: 2,
    });
    expect(body[0]!.event_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('listEvents 200 shows collection events only where the caller has ReadAudit, inherited from an ancestor', async () => {
    const parent = await collection();
    const child = await collection(parent);
    const other = await collection();
    const readOnly = await collection();
    const u = await auditor(parent);
    const g2 = await group();
    await member(g2, u.id);
    await grant(readOnly, g2, 'ReadCollection'); // not ReadAudit
    const inParent = await ev({ collectionId: parent, entityId: parent });
    const inChild = await ev({ collectionId: child, entityId: child });
    await ev({ collectionId: other, entityId: other });
    await ev({ collectionId: readOnly, entityId: readOnly });
    const { res, body, total } = await list('/api/v1/events', u.token);
    expect(res.status).toBe(200);
    expect(body.map((e) => e.id)).toEqual([inChild, inParent]);
    expect(total).toBe('2');
  });

  it('listEvents 200 hides collection-less events from everyone but unscoped admins', async () => {
    const name = uniq('lonely');
    const id = await ev({ entityName: name });
    const c = await collection();
    const u = await auditor(c);
    expect((await list('/api/v1/events', u.token, { entity_name: name })).body).toEqual([]);
    const admin = await adminPrincipal();
    const scopedAdmin = await tokenFor(admin.id, { resources: [{ kind: 'collection', id: c }] });
    const scoped = await list('/api/v1/events', scopedAdmin, { entity_name: name });
    expect(scoped.body).toEqual([]);
    expect(scoped.total).toBe('0');
    const full = await list('/api/v1/events', await tokenFor(admin.id), { entity_name: name });
    expect(full.body.map((e) => e.id)).toEqual([id]);
  });

  it('listEvents 200 shows related-collection events with before/after redacted unless the own collection is also readable', async () => {
    const own = await collection();
    const related = await collection();
    const entityId = 900_000 + own;
    const id = await ev({
      collectionId: own,
      relatedCollectionIds: [related],
      entityType: 'object',
      entityId,
      before: { secretish: 1 },
      after: { secretish: 2 },
      summary: 'moved',
    });
    // The whole list; one entity's page in id order (selected without the subquery of plain rows:
    // listEventRows) and sorted by another key (with it).
    const ways: Record<string, string | number>[] = [
      {},
      { entity_type: 'object', entity_id: entityId },
      { entity_type: 'object', entity_id: entityId, sort: 'occurred_at' },
    ];
    for (const query of ways) {
      const relatedOnly = await auditor(related);
      const r1 = await list('/api/v1/events', relatedOnly.token, query);
      expect(r1.body.map((e) => e.id)).toEqual([id]);
      expect(r1.body[0]).toMatchObject({ before: null, after: null, summary: 'moved', collection_id: own });
      expect(r1.body[0]!.metadata).toEqual({ related_collection_ids: [related] });
      expect(r1.total).toBe('1');
      const both = await auditor(own, related);
      const r2 = await list('/api/v1/events', both.token, query);
      expect(r2.body[0]).toMatchObject({ id, before: { secretish: 1 }, after: { secretish: 2 } });
      const ownOnly = await auditor(own);
      expect((await list('/api/v1/events', ownOnly.token, query)).body[0]).toMatchObject({ id, before: { secretish: 1 } });
      const neither = await auditor(await collection());
      expect((await list('/api/v1/events', neither.token, query)).body).toEqual([]);
    }
  });

  it('listEvents 200 limits scoped tokens: resource scope needs the explicit collection entry, permission scopes hold no ReadAudit', async () => {
    const parent = await collection();
    const child = await collection(parent);
    const k = await klass(parent);
    const u = await auditor(parent);
    const inParent = await ev({ collectionId: parent });
    await ev({ collectionId: child });
    const byCollection = await tokenFor(u.id, { resources: [{ kind: 'collection', id: parent }] });
    expect((await list('/api/v1/events', byCollection)).body.map((e) => e.id)).toEqual([inParent]);
    const byClass = await tokenFor(u.id, { resources: [{ kind: 'class', id: k }] });
    expect((await list('/api/v1/events', byClass)).body).toEqual([]);
    const byPermission = await tokenFor(u.id, { permissions: ['ReadCollection'] });
    const p = await list('/api/v1/events', byPermission);
    expect(p.body).toEqual([]);
    expect(p.total).toBe('0');
    const admin = await adminPrincipal();
    const adminScoped = await tokenFor(admin.id, { resources: [{ kind: 'collection', id: child }] });
    const a = await list('/api/v1/events', adminScoped, { collection_id__in: `${parent},${child}` });
    expect(a.body.map((e) => e.collection_id)).toEqual([child]);
  });

  it('listEvents 200 applies every audit filter', async () => {
    const c = await collection();
    const actor = await human();
    const initiator = await human();
    const worker: Actor = {
      kind: 'worker',
      principalId: null,
      principalName: null,
      initiatorId: initiator.id,
      initiatorName: initiator.name,
      taskId: 77,
    };
    const e1 = await ev({ collectionId: c, entityType: 'object', entityId: 5, action: 'created', afterRevision: 1 }, userActor(actor));
    const e2 = await ev(
      { collectionId: c, entityType: 'object', entityId: 5, action: 'updated', beforeRevision: 1, afterRevision: 2 },
      worker,
    );
    const e3 = await ev({ collectionId: c, entityType: 'class', entityId: 6, action: 'deleted', beforeRevision: 3 });
    const ids = async (q: Record<string, string | number>) =>
      (await list('/api/v1/events', t.adminToken, { collection_id: c, ...q })).body.map((e) => e.id);
    expect(await ids({ entity_type: 'object' })).toEqual([e2, e1]);
    expect(await ids({ entity_id: 6 })).toEqual([e3]);
    expect(await ids({ action: 'updated' })).toEqual([e2]);
    expect(await ids({ actor_kind: 'user' })).toEqual([e1]);
    expect(await ids({ actor_kind: 'system' })).toEqual([e3]);
    expect(await ids({ actor_user_id: actor.id })).toEqual([e1]);
    expect(await ids({ initiator_user_id: initiator.id })).toEqual([e2]);
    expect(await ids({ before_revision: 1 })).toEqual([e2]);
    expect(await ids({ after_revision: 1 })).toEqual([e1]);
    expect(await ids({ task_id: 77 })).toEqual([e2]);
    expect(await ids({ entity_type__in: 'class,object', action__not_equals: 'created' })).toEqual([e3, e2]);
    const res = await list('/api/v1/events', t.adminToken, { collection_id: c, initiator_user_id: initiator.id });
    expect(res.body[0]).toMatchObject({ actor_kind: 'worker', actor_user_id: null, task_id: 77, initiator_user_id: initiator.id });
  });

  it('listEvents 200 bounds occurred_at strictly with occurred_after and occurred_before (RFC 3339 or YYYY-MM-DD)', async () => {
    const c = await collection();
    const early = await ev({ collectionId: c });
    const t1 = await dbNow();
    const middle = await ev({ collectionId: c });
    const t2 = await dbNow();
    const late = await ev({ collectionId: c });
    const ids = async (q: Record<string, string>) =>
      (await list('/api/v1/events', t.adminToken, { collection_id: c, ...q })).body.map((e) => e.id);
    expect(await ids({ occurred_after: t1 })).toEqual([late, middle]);
    expect(await ids({ occurred_before: t2 })).toEqual([middle, early]);
    expect(await ids({ occurred_after: t1, occurred_before: t2 })).toEqual([middle]);
    expect(await ids({ occurred_after: t1.replace('Z', '+00:00') })).toEqual([late, middle]);
    expect(await ids({ occurred_after: '2000-01-01' })).toEqual([late, middle, early]);
    expect(await ids({ occurred_before: '2000-01-01' })).toEqual([]);
    expect(await ids({ occurred_at__gte: t1 })).toEqual([late, middle]);
  });

  it('listEvents 200 sorts by id or occurred_at in both directions and pages with a cursor', async () => {
    const c = await collection();
    const made: number[] = [];
    for (let i = 0; i < 5; i++) made.push(await ev({ collectionId: c }));
    const ids = async (sort: string) => (await list('/api/v1/events', t.adminToken, { collection_id: c, sort })).body.map((e) => e.id);
    expect(await ids('id')).toEqual(made);
    expect(await ids('-id')).toEqual([...made].reverse());
    expect(await ids('occurred_at')).toEqual(made);
    expect(await ids('-occurred_at')).toEqual([...made].reverse());
    expect(await ids('occurred_at.desc')).toEqual([...made].reverse());

    const seen: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 5; page++) {
      const query: Record<string, string | number> = { collection_id: c, limit: 2, sort: '-occurred_at' };
      if (cursor) query.cursor = cursor;
      const r = await list('/api/v1/events', t.adminToken, query);
      expect(r.res.status).toBe(200);
      expect(r.total).toBe('5');
      expect(r.res.headers.get('x-page-limit')).toBe('2');
      seen.push(...r.body.map((e) => e.id));
      cursor = r.res.headers.get('x-next-cursor');
      if (!cursor) break;
    }
    expect(seen).toEqual([...made].reverse());
    const noTotal = await list('/api/v1/events', t.adminToken, { collection_id: c, include_total: false });
    expect(noTotal.total).toBeNull();
  });

  it('listEvents 400 for bad filters, sorts, cursors and limits', async () => {
    const bad: Record<string, string | number>[] = [
      { occurred_after: 'yesterday' },
      { occurred_before: '2024-02-30' },
      { occurred_after__gt: '2024-01-01' },
      { nonsense: 'x' },
      { sort: 'entity_type' },
      { sort: 'summary' },
      { cursor: 'not-a-cursor' },
      { actor_kind: 'robot' },
      { entity_id: 'abc' },
      { before_revision: 0 },
      { limit: 0 },
      { action__gt: 'a' },
    ];
    for (const q of bad) {
      const res = await t.request('GET', '/api/v1/events', { query: q });
      expect(res.status, JSON.stringify(q)).toBe(400);
      expect(res.body).toMatchObject({ error: 'Bad Request' });
    }
  });

  it('listEvents 400 for a cursor reused with different filters', async () => {
    const c = await collection();
    for (let i = 0; i < 3; i++) await ev({ collectionId: c });
    const first = await list('/api/v1/events', t.adminToken, { collection_id: c, limit: 1 });
    const cursor = first.res.headers.get('x-next-cursor')!;
    expect(cursor).toBeTruthy();
    const res = await t.request('GET', '/api/v1/events', { query: { collection_id: c, limit: 1, cursor, action: 'created' } });
    expect(res.status).toBe(400);
  });

  it('listEvents 401 without a token', async () => {
    const res = await t.request('GET', '/api/v1/events', { token: null });
    expect(res.status).toBe(401);
  });
});

// ---- wrappers -------------------------------------------------------------------------------

describe('listCollectionEvents', () => {
  it('listCollectionEvents 200 returns the events attached to the collection (not related-only ones)', async () => {
    const c = await collection();
    const other = await collection();
    const own = await ev({ collectionId: c, entityType: 'collection', entityId: c });
    await ev({ collectionId: other, relatedCollectionIds: [c] });
    const u = await auditor(c);
    const r = await list(`/api/v1/collections/${c}/events`, u.token);
    expect(r.res.status).toBe(200);
    expect(r.body.map((e) => e.id)).toEqual([own]);
    expect(r.total).toBe('1');
    const filtered = await list(`/api/v1/collections/${c}/events`, u.token, { action: 'deleted' });
    expect(filtered.body).toEqual([]);
  });

  it('listCollectionEvents 403 without ReadAudit or with a permission-scoped token', async () => {
    const c = await collection();
    const u = await human();
    const g = await group();
    await member(g, u.id);
    await grant(c, g, 'ReadCollection');
    const res = await t.request('GET', `/api/v1/collections/${c}/events`, { token: await tokenFor(u.id) });
    expect(res.status).toBe(403);
    const a = await auditor(c);
    const scoped = await tokenFor(a.id, { permissions: ['ReadCollection'] });
    expect((await t.request('GET', `/api/v1/collections/${c}/events`, { token: scoped })).status).toBe(403);
  });

  it('listCollectionEvents 404 for a missing collection, 400 for a bad id or filter', async () => {
    expect((await t.request('GET', '/api/v1/collections/999999999/events')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/collections/abc/events')).status).toBe(400);
    const c = await collection();
    expect((await t.request('GET', `/api/v1/collections/${c}/events`, { query: { occurred_after: 'x' } })).status).toBe(400);
  });

  it('listCollectionEvents 401 without a token', async () => {
    const c = await collection();
    expect((await t.request('GET', `/api/v1/collections/${c}/events`, { token: null })).status).toBe(401);
  });
});

describe('listClassEvents', () => {
  it('listClassEvents 200 returns class and class_schema events of that class only', async () => {
    const c = await collection();
    const k = await klass(c);
    const o = await object(k, c);
    const created = await ev({ collectionId: c, entityType: 'class', entityId: k, action: 'created', after: { id: k } });
    const schema = await ev({ collectionId: c, entityType: 'class_schema', entityId: k, action: 'activated' });
    await ev({ collectionId: c, entityType: 'object', entityId: o });
    await ev({ collectionId: c, entityType: 'object', entityId: k }); // same id, other entity type
    const u = await auditor(c);
    const r = await list(`/api/v1/classes/${k}/events`, u.token);
    expect(r.res.status).toBe(200);
    expect(r.body.map((e) => e.id)).toEqual([schema, created]);
    expect(r.body[1]!.after).toEqual({ id: k });
    expect((await list(`/api/v1/classes/${k}/events`, u.token, { entity_type: 'class_schema' })).body.map((e) => e.id)).toEqual([schema]);
  });

  it('listClassEvents 403 without ReadAudit on the class collection, 404 for a missing class', async () => {
    const c = await collection();
    const k = await klass(c);
    const u = await auditor(await collection());
    expect((await t.request('GET', `/api/v1/classes/${k}/events`, { token: u.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/classes/999999999/events')).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/${k}/events`, { query: { sort: 'action' } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/classes/${k}/events`, { token: null })).status).toBe(401);
  });
});

describe('listObjectEvents', () => {
  it('listObjectEvents 200 returns object and object_validation events of that object', async () => {
    const c = await collection();
    const k = await klass(c);
    const o = await object(k, c);
    const o2 = await object(k, c);
    const a = await ev({ collectionId: c, entityType: 'object', entityId: o, action: 'created' });
    const b = await ev({ collectionId: c, entityType: 'object_validation', entityId: o, action: 'failed' });
    await ev({ collectionId: c, entityType: 'object', entityId: o2 });
    const u = await auditor(c);
    const r = await list(`/api/v1/classes/${k}/${o}/events`, u.token, { sort: 'id' });
    expect(r.res.status).toBe(200);
    expect(r.body.map((e) => e.id)).toEqual([a, b]);
    expect(r.total).toBe('2');
  });

  it('listObjectEvents 404 when the class/object pair does not match or the object is missing', async () => {
    const c = await collection();
    const k = await klass(c);
    const k2 = await klass(c);
    const o = await object(k, c);
    expect((await t.request('GET', `/api/v1/classes/${k2}/${o}/events`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/${k}/999999999/events`)).status).toBe(404);
  });

  it('listObjectEvents 403 without ReadAudit on the object collection; 400 and 401', async () => {
    const c = await collection();
    const k = await klass(c);
    const o = await object(k, c);
    const u = await auditor(await collection());
    expect((await t.request('GET', `/api/v1/classes/${k}/${o}/events`, { token: u.token })).status).toBe(403);
    expect((await t.request('GET', `/api/v1/classes/${k}/${o}/events`, { query: { limit: -1 } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/classes/${k}/${o}/events`, { token: null })).status).toBe(401);
  });
});

describe('listUserEvents and listGroupEvents', () => {
  it('listUserEvents 200 returns user and principal-settings events of that user to an unscoped admin', async () => {
    const u = await human();
    const a = await ev({ entityType: 'user', entityId: u.id, entityName: u.name, action: 'created', after: { id: u.id } });
    const b = await ev({ entityType: 'principal', entityId: u.id, action: 'updated' });
    await ev({ entityType: 'group', entityId: u.id });
    const r = await list(`/api/v1/iam/users/${u.id}/events`, t.adminToken);
    expect(r.res.status).toBe(200);
    expect(r.body.map((e) => e.id)).toEqual([b, a]);
    expect(r.body[1]!.after).toEqual({ id: u.id });
    expect((await list(`/api/v1/iam/users/${u.id}/events`, t.adminToken, { action: 'created' })).body.map((e) => e.id)).toEqual([a]);
  });

  it('listUserEvents 403 for non-admins and scoped admin tokens, 404 for a missing user', async () => {
    const u = await human();
    const own = await tokenFor(u.id);
    expect((await t.request('GET', `/api/v1/iam/users/${u.id}/events`, { token: own })).status).toBe(403);
    const admin = await adminPrincipal();
    const scoped = await tokenFor(admin.id, { permissions: ['ReadCollection'] });
    expect((await t.request('GET', `/api/v1/iam/users/${u.id}/events`, { token: scoped })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/iam/users/999999999/events')).status).toBe(404);
    expect((await t.request('GET', `/api/v1/iam/users/${u.id}/events`, { token: null })).status).toBe(401);
    expect((await t.request('GET', `/api/v1/iam/users/${u.id}/events`, { query: { sort: 'x' } })).status).toBe(400);
  });

  it('listGroupEvents 200 returns group and membership events of that group', async () => {
    const g = await group();
    const a = await ev({ entityType: 'group', entityId: g, action: 'created' });
    const b = await ev({ entityType: 'group_membership', entityId: g, action: 'added' });
    await ev({ entityType: 'user', entityId: g });
    const r = await list(`/api/v1/iam/groups/${g}/events`, t.adminToken, { sort: 'id' });
    expect(r.res.status).toBe(200);
    expect(r.body.map((e) => e.id)).toEqual([a, b]);
    expect(r.total).toBe('2');
  });

  it('listGroupEvents 403 for non-admins, 404 for a missing group, 401 without a token', async () => {
    const g = await group();
    const u = await human();
    expect((await t.request('GET', `/api/v1/iam/groups/${g}/events`, { token: await tokenFor(u.id) })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/iam/groups/999999999/events')).status).toBe(404);
    expect((await t.request('GET', `/api/v1/iam/groups/${g}/events`, { token: null })).status).toBe(401);
  });
});

describe('listRemoteTargetEvents', () => {
  async function target(collectionId: number): Promise<number> {
    const [r] = await t.deps.sql<{ id: number }[]>`
      insert into remote_targets (collection_id, name, method, url_template, allowed_subject_types)
      values (${collectionId}, ${uniq('ev-rt')}, 'post', 'https://example.test/hook', array['collection']::text[]) returning id`;
    return r!.id;
  }

  it('listRemoteTargetEvents 200 returns the events whose entity is the target', async () => {
    const c = await collection();
    const rt = await target(c);
    const a = await ev({ collectionId: c, entityType: 'remote_target', entityId: rt, action: 'created' });
    const b = await ev({ collectionId: c, entityType: 'remote_target', entityId: rt, action: 'invoked' });
    await ev({ collectionId: c, entityType: 'class', entityId: rt });
    const u = await auditor(c);
    const r = await list(`/api/v1/remote-targets/${rt}/events`, u.token);
    expect(r.res.status).toBe(200);
    expect(r.body.map((e) => e.id)).toEqual([b, a]);
    expect((await list(`/api/v1/remote-targets/${rt}/events`, u.token, { action: 'invoked' })).body.map((e) => e.id)).toEqual([b]);
    expect((await list(`/api/v1/remote-targets/${rt}/events`, u.token, { entity_type: 'class' })).body).toEqual([]);
  });

  it('listRemoteTargetEvents 403 without ReadAudit, 404 for a missing target, 400 and 401', async () => {
    const c = await collection();
    const rt = await target(c);
    const u = await auditor(await collection());
    expect((await t.request('GET', `/api/v1/remote-targets/${rt}/events`, { token: u.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/remote-targets/999999999/events')).status).toBe(404);
    expect((await t.request('GET', `/api/v1/remote-targets/${rt}/events`, { query: { occurred_before: 'soon' } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/remote-targets/${rt}/events`, { token: null })).status).toBe(401);
  });
});
