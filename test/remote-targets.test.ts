// Remote targets: CRUD, validation, permissions, list query, and invoke (queueing only; the
// executor runs in test/remote-targets-invoke.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { tokenFor, grant, userWith } from './iam-fixtures.ts';
import { compileTemplate, renderCall, renderTemplate, TemplateError } from '../src/domain/remote-targets.ts';

let t: TestApp;
let colA: number;
let colB: number;
let classA: number;
let classB: number;
let objA: number;
let objB: number;

async function post(path: string, body: unknown, token = t.adminToken) {
  return t.request('POST', path, { token, body });
}

async function createCollection(name = uniq('col'), parent?: number): Promise<number> {
  const res = await post('/api/v1/collections', { name, ...(parent ? { parent_collection_id: parent } : {}) });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

async function createClass(collectionId: number): Promise<number> {
  const res = await post('/api/v1/classes', { name: uniq('class'), collection_id: collectionId });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

async function createObject(classId: number, data: unknown = { a: 1 }): Promise<number> {
  const res = await post(`/api/v1/classes/${classId}/objects`, { name: uniq('obj'), json_data: data });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

function target(overrides: Record<string, unknown> = {}) {
  return {
    collection_id: colA,
    name: uniq('rt'),
    description: 'a target',
    method: 'post',
    url_template: 'https://hooks.example.com/{{ subject.id }}',
    headers_template: { 'Content-Type': 'application/json' },
    body_template: '{"id": {{ subject.id }}}',
    allowed_subject_types: ['collection'],
    ...overrides,
  };
}

async function createTarget(overrides: Record<string, unknown> = {}, token = t.adminToken) {
  const res = await post('/api/v1/remote-targets', target(overrides), token);
  expect(res.status, res.text).toBe(201);
  return res.body as Record<string, unknown> & { id: number; revision: number; name: string };
}

async function events(entityType: string, entityId: number) {
  return t.deps.sql<
    { action: string; actor_kind: string; task_id: number | null; collection_id: number | null; before: unknown; after: unknown }[]
  >`
    select action, actor_kind, task_id, collection_id, before, after from events
    where entity_type = ${entityType} and entity_id = ${entityId} order by id`;
}

beforeAll(async () => {
  t = await startTestApp();
  colA = await createCollection();
  colB = await createCollection();
  classA = await createClass(colA);
  classB = await createClass(colB);
  objA = await createObject(classA, { host: 'web-1', tags: ['x'] });
  objB = await createObject(classB);
});

afterAll(async () => {
  await t.close();
});

describe('createRemoteTarget', () => {
  it('201 with Location, ETag, defaults and a created event', async () => {
    const body = {
      collection_id: colA,
      name: uniq('rt'),
      description: 'd',
      method: 'get',
      url_template: 'https://example.com/x',
      allowed_subject_types: ['collection', 'class'],
    };
    const res = await post('/api/v1/remote-targets', body);
    expect(res.status, res.text).toBe(201);
    const rt = res.body as Record<string, unknown> & { id: number };
    expect(res.headers.get('location')).toBe(`/api/v1/remote-targets/${rt.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.remote_target\./);
    expect(rt).toMatchObject({
      ...body,
      class_id: null,
      headers_template: {},
      body_template: null,
      auth_config: { type: 'none' },
      timeout_ms: 10000,
      enabled: true,
      revision: 1,
    });
    const ev = await events('remote_target', rt.id);
    expect(ev.map((e) => e.action)).toEqual(['created']);
    expect(ev[0]!.collection_id).toBe(colA);
    expect(ev[0]!.after).toMatchObject({ id: rt.id, name: body.name });
  });

  it('201 for an object target with class_id and auth configs holding only aliases', async () => {
    const rt = await createTarget({
      allowed_subject_types: ['object'],
      class_id: classA,
      auth_config: { type: 'api_key_header', header: 'X-Api-Key', secret: 'MY_key_1' },
    });
    expect(rt.class_id).toBe(classA);
    expect(rt.auth_config).toEqual({ type: 'api_key_header', header: 'X-Api-Key', secret: 'MY_key_1' });
    const bearer = await createTarget({ auth_config: { type: 'bearer_secret', secret: 'TOKEN_A' } });
    expect(bearer.auth_config).toEqual({ type: 'bearer_secret', secret: 'TOKEN_A' });
  });

  it.each([
    ['a literal http URL', { url_template: 'http://example.com/' }],
    ['a literal URL with credentials', { url_template: 'https://user:pw@example.com/' }],
    ['a non-https scheme before the first tag', { url_template: 'http://{{ parameters.host }}/x' }],
    ['an object type without class_id', { allowed_subject_types: ['object'] }],
    ['class_id without the object type', { class_id: 1 }],
    ['a transport header (Host)', { headers_template: { Host: 'x', 'Content-Type': 'a/b' } }],
    ['a transport header (content-length)', { headers_template: { 'content-length': '1', 'Content-Type': 'a/b' } }],
    ['a transport header (Transfer-Encoding)', { headers_template: { 'Transfer-Encoding': 'chunked', 'Content-Type': 'a/b' } }],
    ['a transport header (Proxy-Authorization)', { headers_template: { 'Proxy-Authorization': 'x', 'Content-Type': 'a/b' } }],
    ['an API key in a transport header', { auth_config: { type: 'api_key_header', header: 'Connection', secret: 'A' } }],
    [
      'Authorization next to bearer_secret',
      { headers_template: { 'Content-Type': 'a/b', authorization: 'x' }, auth_config: { type: 'bearer_secret', secret: 'A' } },
    ],
    ['a body without Content-Type', { headers_template: {} }],
    ['a template syntax error', { url_template: 'https://x/{{ subject.id ' }],
    ['an unknown filter', { body_template: '{{ subject | nosuchfilter }}' }],
    ['an include tag (no filesystem)', { body_template: '{% include "secrets" %}' }],
    ['a render tag (no filesystem)', { body_template: '{% render "x" %}' }],
    ['a secret alias with other characters', { auth_config: { type: 'bearer_secret', secret: 'bad-alias' } }],
    ['empty allowed_subject_types', { allowed_subject_types: [] }],
    ['duplicate subject types', { allowed_subject_types: ['class', 'class'] }],
    ['an unknown subject type', { allowed_subject_types: ['user'] }],
    ['timeout_ms 0', { timeout_ms: 0 }],
    ['an unknown method', { method: 'put' }],
    ['an unknown member', { extra: 1 }],
    ['an unknown auth type', { auth_config: { type: 'basic', secret: 'A' } }],
  ])('400 for %s', async (_what, overrides) => {
    const res = await post('/api/v1/remote-targets', target(overrides));
    expect(res.status, res.text).toBe(400);
  });

  it('400 when class_id names a class of another collection; 404 for a missing class or collection', async () => {
    const other = await post('/api/v1/remote-targets', target({ allowed_subject_types: ['object'], class_id: classB }));
    expect(other.status, other.text).toBe(400);
    const missingClass = await post('/api/v1/remote-targets', target({ allowed_subject_types: ['object'], class_id: 2_000_000_000 }));
    expect(missingClass.status).toBe(404);
    const missingCol = await post('/api/v1/remote-targets', target({ collection_id: 2_000_000_000 }));
    expect(missingCol.status).toBe(404);
  });

  it('409 for a name already used in the collection; the same name elsewhere is fine', async () => {
    const rt = await createTarget();
    const again = await post('/api/v1/remote-targets', target({ name: rt.name }));
    expect(again.status).toBe(409);
    await createTarget({ name: rt.name, collection_id: colB });
  });

  it('403 without CreateRemoteTarget on the collection', async () => {
    const u = await userWith(t, [[colA, ['ReadRemoteTarget']]]);
    const res = await post('/api/v1/remote-targets', target(), u.token);
    expect(res.status).toBe(403);
    const none = await post('/api/v1/remote-targets', target(), null as unknown as string);
    expect(none.status).toBe(401);
  });
});

describe('getRemoteTarget', () => {
  it('200 with ETag; 404 for a missing target; 403 without ReadRemoteTarget', async () => {
    const rt = await createTarget();
    const res = await t.request('GET', `/api/v1/remote-targets/${rt.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(rt);
    expect(res.headers.get('etag')).toBeTruthy();
    expect((await t.request('GET', '/api/v1/remote-targets/2000000000')).status).toBe(404);
    const u = await userWith(t, [[colA, ['ReadCollection']]]);
    expect((await t.request('GET', `/api/v1/remote-targets/${rt.id}`, { token: u.token })).status).toBe(403);
    const reader = await userWith(t, [[colA, ['ReadRemoteTarget']]]);
    expect((await t.request('GET', `/api/v1/remote-targets/${rt.id}`, { token: reader.token })).status).toBe(200);
  });

  it('scoped tokens need an explicit collection entry', async () => {
    const rt = await createTarget();
    const reader = await userWith(t, [[colA, ['ReadRemoteTarget', 'ReadClass']]]);
    const colScoped = await tokenFor(t, reader.id, { resources: [{ kind: 'collection', id: colA }] });
    expect((await t.request('GET', `/api/v1/remote-targets/${rt.id}`, { token: colScoped })).status).toBe(200);
    const classScoped = await tokenFor(t, reader.id, { resources: [{ kind: 'class', id: classA }] });
    expect((await t.request('GET', `/api/v1/remote-targets/${rt.id}`, { token: classScoped })).status).toBe(403);
    const permScoped = await tokenFor(t, reader.id, { permissions: ['ReadClass'] });
    expect((await t.request('GET', `/api/v1/remote-targets/${rt.id}`, { token: permScoped })).status).toBe(403);
  });
});

describe('updateRemoteTarget', () => {
  it('200 advances revision with an updated event; a no-op changes nothing', async () => {
    const rt = await createTarget();
    const res = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { body: { description: 'new', enabled: false } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ description: 'new', enabled: false, revision: 2 });
    const same = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { body: { description: 'new' } });
    expect(same.status).toBe(200);
    expect((same.body as { revision: number }).revision).toBe(2);
    const empty = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { body: {} });
    expect((empty.body as { revision: number }).revision).toBe(2);
    const ev = await events('remote_target', rt.id);
    expect(ev.map((e) => e.action)).toEqual(['created', 'updated']);
    expect(ev[1]!.before).toMatchObject({ description: 'a target', enabled: true });
    expect(ev[1]!.after).toMatchObject({ description: 'new', enabled: false });
  });

  it('body_template: omitted keeps it, null clears it', async () => {
    const rt = await createTarget();
    const kept = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { body: { name: uniq('renamed') } });
    expect((kept.body as { body_template: string }).body_template).toBe(rt.body_template);
    const cleared = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { body: { body_template: null } });
    expect(cleared.status).toBe(200);
    expect((cleared.body as { body_template: null }).body_template).toBeNull();
  });

  it('the result is validated as a whole; 412 for a stale If-Match; 200 with the current one', async () => {
    const rt = await createTarget();
    const bad = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { body: { allowed_subject_types: ['object'] } });
    expect(bad.status).toBe(400);
    const okObj = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, {
      body: { allowed_subject_types: ['object'], class_id: classA },
    });
    expect(okObj.status, okObj.text).toBe(200);
    const stale = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, {
      body: { description: 'x' },
      headers: { 'if-match': `"svc-v1.remote_target.${Buffer.from(String(rt.id)).toString('base64url')}.1"` },
    });
    expect(stale.status).toBe(412);
    const fresh = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, {
      body: { description: 'x' },
      headers: { 'if-match': okObj.headers.get('etag')! },
    });
    expect(fresh.status).toBe(200);
  });

  it('moving needs UpdateRemoteTarget here and CreateRemoteTarget on the destination', async () => {
    const rt = await createTarget();
    const u = await userWith(t, [
      [colA, ['UpdateRemoteTarget']],
      [colB, ['ReadRemoteTarget']],
    ]);
    expect((await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { token: u.token, body: { collection_id: colB } })).status).toBe(
      403,
    );
    await grant(t, colB, u.groupId, ['CreateRemoteTarget']);
    const moved = await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { token: u.token, body: { collection_id: colB } });
    expect(moved.status, moved.text).toBe(200);
    expect((moved.body as { collection_id: number }).collection_id).toBe(colB);
    const reader = await userWith(t, [[colA, ['ReadRemoteTarget']]]);
    expect((await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { token: reader.token, body: { description: 'x' } })).status).toBe(
      403,
    );
  });
});

describe('remote target audit snapshots', () => {
  it('each event holds the target as the write answered it and a read shows it (created, updated, moved, deleted)', async () => {
    const created = await createTarget({ headers_template: { 'X-B': 'b', 'Content-Type': 'application/json', A: 'a' } });
    const updated = await t.request('PATCH', `/api/v1/remote-targets/${created.id}`, {
      body: { description: 'changed', headers_template: { Zz: '1', 'Content-Type': 'text/plain', y: '2' }, timeout_ms: 2500 },
    });
    expect(updated.status, updated.text).toBe(200);
    const moved = await t.request('PATCH', `/api/v1/remote-targets/${created.id}`, { body: { collection_id: colB } });
    expect(moved.status, moved.text).toBe(200);
    const read = await t.request('GET', `/api/v1/remote-targets/${created.id}`);
    expect(read.body).toEqual(moved.body);
    expect((await t.request('DELETE', `/api/v1/remote-targets/${created.id}`)).status).toBe(204);
    const evs = await events('remote_target', created.id);
    expect(evs.map((e) => [e.action, e.collection_id])).toEqual([
      ['created', colA],
      ['updated', colA],
      ['updated', colB],
      ['deleted', colB],
    ]);
    expect(evs.map((e) => [e.before, e.after])).toEqual([
      [null, created],
      [created, updated.body],
      [updated.body, moved.body],
      [moved.body, null],
    ]);
  });
});

describe('deleteRemoteTarget', () => {
  it('204 then 404, with a deleted event; 403 without DeleteRemoteTarget', async () => {
    const rt = await createTarget();
    const u = await userWith(t, [[colA, ['ReadRemoteTarget', 'UpdateRemoteTarget']]]);
    expect((await t.request('DELETE', `/api/v1/remote-targets/${rt.id}`, { token: u.token })).status).toBe(403);
    expect((await t.request('DELETE', `/api/v1/remote-targets/${rt.id}`)).status).toBe(204);
    expect((await t.request('GET', `/api/v1/remote-targets/${rt.id}`)).status).toBe(404);
    expect((await t.request('DELETE', `/api/v1/remote-targets/${rt.id}`)).status).toBe(404);
    expect((await events('remote_target', rt.id)).map((e) => e.action)).toEqual(['created', 'deleted']);
  });

  it('a class that a target names cannot be deleted (409) until the target lets go of it', async () => {
    const k = await createClass(colA);
    const rt = await createTarget({ allowed_subject_types: ['object'], class_id: k });
    expect((await t.request('DELETE', `/api/v1/classes/${k}`)).status).toBe(409);
    await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { body: { allowed_subject_types: ['collection'], class_id: null } });
    expect((await t.request('DELETE', `/api/v1/classes/${k}`)).status).toBe(204);
  });

  it('a collection that still has targets cannot be deleted (409)', async () => {
    const col = await createCollection();
    await createTarget({ collection_id: col });
    expect((await t.request('DELETE', `/api/v1/collections/${col}`)).status).toBe(409);
  });
});

describe('listRemoteTargets', () => {
  it('shows only collections with ReadRemoteTarget; filters, sorts, pages and counts', async () => {
    const col1 = await createCollection();
    const col2 = await createCollection();
    const a = await createTarget({ collection_id: col1, name: uniq('alpha'), method: 'get', body_template: null, headers_template: {} });
    const b = await createTarget({ collection_id: col1, name: uniq('beta'), method: 'post' });
    const c = await createTarget({ collection_id: col2, name: uniq('gamma'), method: 'post' });
    const u = await userWith(t, [[col1, ['ReadRemoteTarget']]]);
    const mine = await t.request('GET', '/api/v1/remote-targets', { token: u.token });
    expect(mine.status).toBe(200);
    expect((mine.body as { id: number }[]).map((r) => r.id)).toEqual([a.id, b.id]);
    expect(mine.headers.get('x-total-count')).toBe('2');

    const byKind = await t.request('GET', '/api/v1/remote-targets', { query: { kind: 'post', collections: `${col1},${col2}` } });
    expect((byKind.body as { id: number }[]).map((r) => r.id)).toEqual([b.id, c.id]);
    const byName = await t.request('GET', '/api/v1/remote-targets', { query: { name__startswith: a.name } });
    expect((byName.body as { id: number }[]).map((r) => r.id)).toEqual([a.id]);
    const sorted = await t.request('GET', '/api/v1/remote-targets', { query: { collection_id: col1, sort: '-name' } });
    expect((sorted.body as { id: number }[]).map((r) => r.id)).toEqual([b.id, a.id]);

    const page1 = await t.request('GET', '/api/v1/remote-targets', { query: { collection_id: `${col1},${col2}`, limit: 2 } });
    expect((page1.body as unknown[]).length).toBe(2);
    const cursor = page1.headers.get('x-next-cursor')!;
    expect(cursor).toBeTruthy();
    const page2 = await t.request('GET', '/api/v1/remote-targets', { query: { collection_id: `${col1},${col2}`, limit: 2, cursor } });
    expect((page2.body as { id: number }[]).map((r) => r.id)).toEqual([c.id]);
    expect(page2.headers.get('x-next-cursor')).toBeNull();

    expect((await t.request('GET', '/api/v1/remote-targets', { query: { url_template: 'x' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/remote-targets', { query: { kind: 'put' } })).status).toBe(400);
  });

  it('scoped tokens list only collections named in the scope', async () => {
    const col1 = await createCollection();
    const col2 = await createCollection();
    const a = await createTarget({ collection_id: col1 });
    await createTarget({ collection_id: col2 });
    const u = await userWith(t, [
      [col1, ['ReadRemoteTarget']],
      [col2, ['ReadRemoteTarget']],
    ]);
    const scoped = await tokenFor(t, u.id, { resources: [{ kind: 'collection', id: col1 }] });
    const res = await t.request('GET', '/api/v1/remote-targets', { token: scoped });
    expect((res.body as { id: number }[]).map((r) => r.id)).toEqual([a.id]);
    expect(res.headers.get('x-total-count')).toBe('1');
  });
});

describe('invokeRemoteTarget (queueing)', () => {
  const invoke = (id: number, body: unknown, opts: { token?: string; key?: string } = {}) =>
    t.request('POST', `/api/v1/remote-targets/${id}/invoke`, {
      token: opts.token ?? t.adminToken,
      body,
      headers: opts.key !== undefined ? { 'idempotency-key': opts.key } : {},
    });

  it('202 queues a remote_call task with Location, a task.queued and a remote_target.invoked event', async () => {
    const rt = await createTarget({ allowed_subject_types: ['object', 'collection'], class_id: classA });
    const res = await invoke(rt.id, { subject: { type: 'object', class_id: classA, object_id: objA }, parameters: { p: 1 } });
    expect(res.status, res.text).toBe(202);
    const task = res.body as { id: number; kind: string; status: string; submitted_by: number };
    expect(task).toMatchObject({ kind: 'remote_call', status: 'queued' });
    expect(res.headers.get('location')).toBe(`/api/v1/tasks/${task.id}`);
    const [row] = await t.deps.sql<{ request: unknown; token_scoped: boolean; submitted_token_id: number | null }[]>`
      select request, token_scoped, submitted_token_id from tasks where id = ${task.id}`;
    expect(row!.request).toEqual({
      target_id: rt.id,
      subject: { type: 'object', class_id: classA, object_id: objA },
      parameters: { p: 1 },
      body_override: {},
    });
    expect(row!.token_scoped).toBe(false);
    expect(row!.submitted_token_id).toBeGreaterThan(0);
    expect((await events('task', task.id)).map((e) => [e.action, e.actor_kind, e.collection_id])).toEqual([['queued', 'user', colA]]);
    const inv = (await events('remote_target', rt.id)).filter((e) => e.action === 'invoked');
    expect(inv).toHaveLength(1);
    expect(inv[0]!.task_id).toBe(task.id);
    // written in one statement with the task, after the task's own event
    const order = await t.deps.sql<{ action: string }[]>`
      select action from events where (entity_type = 'task' and entity_id = ${task.id}) or (entity_type = 'remote_target' and entity_id = ${rt.id} and action = 'invoked') order by id`;
    expect(order.map((e) => e.action)).toEqual(['queued', 'invoked']);
    const got = await t.request('GET', `/api/v1/tasks/${task.id}`);
    expect(got.status).toBe(200);
  });

  it('Idempotency-Key: same submission → the same task; another submission → 409; bad length → 400', async () => {
    const rt = await createTarget();
    const key = uniq('key');
    const body = { subject: { type: 'collection', id: colA } };
    const a = await invoke(rt.id, body, { key });
    const b = await invoke(rt.id, body, { key });
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect((b.body as { id: number }).id).toBe((a.body as { id: number }).id);
    const c = await invoke(rt.id, { ...body, parameters: { other: true } }, { key });
    expect(c.status).toBe(409);
    expect((await invoke(rt.id, body, { key: 'k'.repeat(256) })).status).toBe(400);
    expect((await events('remote_target', rt.id)).filter((e) => e.action === 'invoked')).toHaveLength(1);
  });

  it('400: disabled target, subject type not allowed, wrong subject members', async () => {
    const rt = await createTarget({ allowed_subject_types: ['collection'] });
    expect((await invoke(rt.id, { subject: { type: 'class', id: classA } })).status).toBe(400);
    expect((await invoke(rt.id, { subject: { type: 'collection', id: colA, class_id: classA } })).status).toBe(400);
    expect((await invoke(rt.id, { subject: { type: 'collection' } })).status).toBe(400);
    expect((await invoke(rt.id, { subject: { type: 'nope', id: 1 } })).status).toBe(400);
    expect((await invoke(rt.id, {})).status).toBe(400);
    const obj = await createTarget({ allowed_subject_types: ['object'], class_id: classA });
    expect((await invoke(obj.id, { subject: { type: 'object', id: objA } })).status).toBe(400);
    expect((await invoke(obj.id, { subject: { type: 'object', object_id: objA } })).status).toBe(400);
    await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { body: { enabled: false } });
    const disabled = await invoke(rt.id, { subject: { type: 'collection', id: colA } });
    expect(disabled.status).toBe(400);
    expect((disabled.body as { message: string }).message).toMatch(/disabled/);
  });

  it('404: missing target or subject, subject outside the target collection', async () => {
    const rt = await createTarget({ allowed_subject_types: ['object', 'collection', 'class'], class_id: classA });
    expect((await invoke(2_000_000_000, { subject: { type: 'collection', id: colA } })).status).toBe(404);
    expect((await invoke(rt.id, { subject: { type: 'collection', id: 2_000_000_000 } })).status).toBe(404);
    expect((await invoke(rt.id, { subject: { type: 'object', class_id: classA, object_id: 2_000_000_000 } })).status).toBe(404);
    expect((await invoke(rt.id, { subject: { type: 'collection', id: colB } })).status).toBe(404);
    expect((await invoke(rt.id, { subject: { type: 'class', id: classB } })).status).toBe(404);
    expect((await invoke(rt.id, { subject: { type: 'class', id: classA } })).status).toBe(202);
  });

  it('400 unsupported subject combination: an object of another class than class_id, or class_id not the target class', async () => {
    const rt = await createTarget({ allowed_subject_types: ['object', 'collection', 'class'], class_id: classA });
    for (const subject of [
      { type: 'object', class_id: classA, object_id: objB },
      { type: 'object', class_id: classB, object_id: objB },
      { type: 'object', class_id: classB, object_id: objA },
    ]) {
      const res = await invoke(rt.id, { subject });
      expect(res.status, `${JSON.stringify(subject)} ${res.text}`).toBe(400);
      expect((res.body as { details: { message: string }[] }).details[0]!.message).toMatch(/^unsupported subject combination/);
    }
    expect((await invoke(rt.id, { subject: { type: 'object', class_id: classA, object_id: objA } })).status).toBe(202);
  });

  it('relation subjects: the target collection must hold one of the endpoints', async () => {
    const classA2 = await createClass(colA);
    const relRes = await post('/api/v1/relations/classes', { from_class_id: classA, to_class_id: classB });
    expect(relRes.status, relRes.text).toBe(201);
    const rel = (relRes.body as { id: number }).id;
    const objRes = await post('/api/v1/relations/objects', { class_relation_id: rel, from_object_id: objA, to_object_id: objB });
    expect(objRes.status, objRes.text).toBe(201);
    const orel = (objRes.body as { id: number }).id;
    const rt = await createTarget({ allowed_subject_types: ['class_relation', 'object_relation'] });
    expect((await invoke(rt.id, { subject: { type: 'class_relation', id: rel } })).status).toBe(202);
    expect((await invoke(rt.id, { subject: { type: 'object_relation', id: orel } })).status).toBe(202);
    const elsewhere = await createCollection();
    const rt2 = await createTarget({ collection_id: elsewhere, allowed_subject_types: ['class_relation'] });
    expect((await invoke(rt2.id, { subject: { type: 'class_relation', id: rel } })).status).toBe(404);
    void classA2;
  });

  it('relation subjects: reading one needs its read permission at both ends, whichever end is refused', async () => {
    const [from, to] = [await createClass(colA), await createClass(colB)];
    const relRes = await post('/api/v1/relations/classes', { from_class_id: from, to_class_id: to });
    expect(relRes.status, relRes.text).toBe(201);
    const rel = (relRes.body as { id: number }).id;
    const [fromObj, toObj] = [await createObject(from), await createObject(to)];
    const objRes = await post('/api/v1/relations/objects', { class_relation_id: rel, from_object_id: fromObj, to_object_id: toObj });
    expect(objRes.status, objRes.text).toBe(201);
    const orel = (objRes.body as { id: number }).id;
    const rt = await createTarget({ allowed_subject_types: ['class_relation', 'object_relation'] });
    const subjects = [
      { type: 'class_relation', id: rel },
      { type: 'object_relation', id: orel },
    ];
    const reads = ['ReadClassRelation', 'ReadObjectRelation'];
    // the from end (colA, which also holds the target) alone, the to end (colB) alone, both
    const fromOnly = await userWith(t, [[colA, ['ExecuteRemoteTarget', ...reads]]]);
    const toOnly = await userWith(t, [
      [colA, ['ExecuteRemoteTarget']],
      [colB, reads],
    ]);
    const both = await userWith(t, [
      [colA, ['ExecuteRemoteTarget', ...reads]],
      [colB, reads],
    ]);
    for (const subject of subjects) {
      for (const [who, status] of [
        [fromOnly, 403],
        [toOnly, 403],
        [both, 202],
      ] as const) {
        const res = await invoke(rt.id, { subject }, { token: who.token });
        expect(res.status, `${subject.type} ${res.text}`).toBe(status);
      }
    }
    // a relation that is not there is 404 as that relation, whatever its ends' checks found
    for (const [type, noun] of [
      ['class_relation', 'class relation'],
      ['object_relation', 'object relation'],
    ]) {
      const res = await invoke(rt.id, { subject: { type, id: 2_000_000_000 } }, { token: both.token });
      expect(res.status, res.text).toBe(404);
      expect((res.body as { message: string }).message).toContain(noun);
    }
  });

  it('403 without ExecuteRemoteTarget or without read permission on the subject; ReadRemoteTarget is not needed', async () => {
    const rt = await createTarget({ allowed_subject_types: ['object', 'collection'], class_id: classA });
    const noExec = await userWith(t, [[colA, ['ReadRemoteTarget', 'ReadCollection', 'ReadObject']]]);
    expect((await invoke(rt.id, { subject: { type: 'collection', id: colA } }, { token: noExec.token })).status).toBe(403);
    const noRead = await userWith(t, [[colA, ['ExecuteRemoteTarget', 'ReadCollection']]]);
    expect((await invoke(rt.id, { subject: { type: 'object', class_id: classA, object_id: objA } }, { token: noRead.token })).status).toBe(
      403,
    );
    const ok = await invoke(rt.id, { subject: { type: 'collection', id: colA } }, { token: noRead.token });
    expect(ok.status, ok.text).toBe(202);
    expect((ok.body as { submitted_by: number }).submitted_by).toBe(noRead.id);
  });

  it('a scoped token records its scope snapshot on the task', async () => {
    const rt = await createTarget();
    const u = await userWith(t, [[colA, ['ExecuteRemoteTarget', 'ReadCollection']]]);
    const scope = { permissions: ['ExecuteRemoteTarget', 'ReadCollection'], resources: [{ kind: 'collection' as const, id: colA }] };
    const token = await tokenFor(t, u.id, scope);
    const res = await invoke(rt.id, { subject: { type: 'collection', id: colA } }, { token });
    expect(res.status, res.text).toBe(202);
    const [row] = await t.deps.sql<{ token_scoped: boolean; token_scope: unknown; submitted_token_id: number }[]>`
      select token_scoped, token_scope, submitted_token_id from tasks where id = ${(res.body as { id: number }).id}`;
    expect(row!.token_scoped).toBe(true);
    expect(row!.token_scope).toEqual(scope);
    const outOfScope = await tokenFor(t, u.id, { resources: [{ kind: 'collection', id: colB }] });
    expect((await invoke(rt.id, { subject: { type: 'collection', id: colA } }, { token: outOfScope })).status).toBe(403);
  });

  it('429 beyond SVC_REMOTE_CALL_MAX_ACTIVE_TASKS_PER_USER active remote calls', async () => {
    const small = await startTestApp({ SVC_REMOTE_CALL_MAX_ACTIVE_TASKS_PER_USER: 2 });
    try {
      const rt = await createTarget();
      const u = await userWith(t, [[colA, ['ExecuteRemoteTarget', 'ReadCollection']]]);
      const call = (key?: string) =>
        small.request('POST', `/api/v1/remote-targets/${rt.id}/invoke`, {
          token: u.token,
          body: { subject: { type: 'collection', id: colA } },
          headers: key ? { 'idempotency-key': key } : {},
        });
      expect((await call('first')).status).toBe(202);
      expect((await call()).status).toBe(202);
      const third = await call();
      expect(third.status).toBe(429);
      // the same key and submission still returns the original task
      expect((await call('first')).status).toBe(202);
      // finished tasks do not count
      await t.deps.sql`update tasks set status = 'failed', finished_at = now() where submitted_by = ${u.id} and kind = 'remote_call'`;
      expect((await call()).status).toBe(202);
    } finally {
      await small.close();
    }
  });
});

describe('templates (liquidjs, Jinja-style)', () => {
  const limits = { fuel: 1000, recursionLimit: 3 };

  it('renders URL, headers and body; unknown variables render empty; get without body sends none, post sends an empty one', () => {
    const scope = { subject: { id: 7, name: 'a b' }, parameters: { q: 'x&y' } };
    const call = renderCall(
      {
        method: 'get',
        url_template: 'https://h/{{ subject.id }}?n={{ subject.name | url_encode }}&q={{ parameters.q | url_encode }}&m={{ nope.x }}',
        headers_template: { 'X-N': '{{ subject.name }}' },
        body_template: null,
      },
      scope,
      limits,
    );
    expect(call).toEqual({ method: 'get', url: 'https://h/7?n=a+b&q=x%26y&m=', headers: { 'X-N': 'a b' }, body: null });
    expect(renderCall({ method: 'post', url_template: 'https://h/', headers_template: {}, body_template: null }, scope, limits).body).toBe(
      '',
    );
    expect(renderTemplate('{{ parameters | json }}', scope, limits)).toBe('{"q":"x&y"}');
  });

  it('fuel, nesting depth, removed filesystem tags, prototype access and header injection', () => {
    expect(() => renderTemplate('{% for i in (1..5000) %}{{ i }}{% endfor %}', {}, limits)).toThrow(/fuel/);
    expect(renderTemplate('{% for i in (1..10) %}{{ i }}{% endfor %}', {}, limits)).toBe('12345678910');
    expect(() => compileTemplate('{% if a %}{% if b %}{% if c %}{% if d %}x{% endif %}{% endif %}{% endif %}{% endif %}', limits)).toThrow(
      TemplateError,
    );
    for (const tag of ['{% include "a" %}', '{% render "a" %}', '{% layout "a" %}', '{% liquid echo 1 %}']) {
      expect(() => compileTemplate(tag, limits), tag).toThrow(TemplateError);
    }
    expect(renderTemplate('{{ subject.constructor }}{{ subject.__proto__ }}', { subject: { id: 1 } }, limits)).toBe('');
    expect(() =>
      renderCall(
        { method: 'get', url_template: 'https://h/', headers_template: { 'X-A': '{{ parameters.v }}' }, body_template: null },
        { parameters: { v: 'a\r\nInjected: 1' } },
        limits,
      ),
    ).toThrow(TemplateError);
  });
});
