// Backups and restores. A restore replaces ALL data, so this file never touches the shared test
// database: it creates its own database on the same server, migrates it and runs the app there
// (the tests of this file run one after another in that database).
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestApp, uniq, type TestApp } from './helpers.ts';
import { createDatabase, type OwnDatabase } from './db-fixtures.ts';
import { addMember, adminGroupId, approve, createGroup, createHuman, createServiceAccount, tokenFor, type Human } from './iam-fixtures.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { insertTask } from '../src/db/tasks.ts';
import { withTx } from '../src/db/tx.ts';
import { SYSTEM_ACTOR } from '../src/domain/actor.ts';
import { openapiDocument } from '../src/http/openapi.ts';
import { EXCLUDED_TABLES, SECTIONS, countKey } from '../src/domain/backup-format.ts';
import { RESTORE_LOCK } from '../src/db/backups.ts';

type Doc = {
  backup_version: number;
  source_version: string;
  created_at: string;
  manifest: { item_counts: Record<string, number> };
  state: Record<string, Record<string, unknown>[]>;
  history: Record<string, Record<string, unknown>[]> | null;
};

let db: OwnDatabase | undefined;
let t: TestApp;
let user: Human; // a plain human, created before the first backup

beforeAll(async () => {
  db = await createDatabase('svc_backup', { migrate: true });
  t = await startTestApp({ SVC_DATABASE_URL: db.url });
  user = await createHuman(t);
});

afterAll(async () => {
  await t?.close();
  await db?.drop();
});

async function ok(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await t.request(method, path, { body });
  expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(300);
  return res.body as Record<string, unknown>;
}

/** Inventory, identities, sinks and history rows in every section. */
async function seed(): Promise<void> {
  const group = await createGroup(t);
  await addMember(t, group.id, user.id);
  await createServiceAccount(t, group.id);
  const top = (await ok('POST', '/api/v1/collections', { name: uniq('top') })).id as number;
  const child = (await ok('POST', '/api/v1/collections', { name: uniq('child'), parent_collection_id: top })).id as number;
  await ok('POST', `/api/v1/collections/${child}/permissions/group/${group.id}`, ['ReadCollection', 'ReadClass', 'ReadObject']);
  const a = (await ok('POST', '/api/v1/classes', {
    name: uniq('class'),
    collection_id: child,
    json_schema: { type: 'object' },
    validate_schema: true,
  })) as { id: number };
  const b = (await ok('POST', '/api/v1/classes', { name: uniq('class'), collection_id: child })) as { id: number };
  await ok('POST', `/api/v1/classes/${a.id}/computed-fields`, {
    key: 'total',
    operation: { type: 'sum', paths: ['/cpu', '/mem'] },
    result_type: 'number',
  });
  const o1 = (await ok('POST', `/api/v1/classes/${a.id}/objects`, { name: uniq('o'), json_data: { cpu: 4, mem: 1.5, tags: ['x'] } })) as {
    id: number;
  };
  const o2 = (await ok('POST', `/api/v1/classes/${b.id}/objects`, {
    name: uniq('o'),
    json_data: { nested: { deep: [1, null, 'z'] } },
  })) as {
    id: number;
  };
  const rel = (await ok('POST', '/api/v1/relations/classes', { from_class_id: a.id, to_class_id: b.id })) as { id: number };
  await ok('POST', '/api/v1/relations/objects', { class_relation_id: rel.id, from_object_id: o1.id, to_object_id: o2.id });
  await ok('POST', '/api/v1/remote-targets', {
    collection_id: child,
    name: uniq('rt'),
    description: 'a target',
    method: 'post',
    url_template: 'https://hooks.example.com/{{ subject.id }}',
    auth_config: { type: 'bearer_secret', secret: 'MY_ALIAS' },
    allowed_subject_types: ['collection'],
  });
  const sql = t.deps.sql;
  await sql`insert into export_templates (collection_id, name, template) values (${child}, ${uniq('tpl')}, 'hello {{ x }}')`;
  const [sink] = await sql<{ id: number }[]>`
    insert into event_sinks (name, kind, config, secret_ref, min_interval_ms)
    values (${uniq('sink')}, 'webhook', ${sql.json({ headers: { 'x-a': 'b' }, response: { rate_limit: true } })}, 'SINK_ALIAS', 250)
    returning id`;
  const [sub] = await sql<{ id: number }[]>`
    insert into event_subscriptions (collection_id, sink_id, name, entity_types, actions, routing)
    values (null, ${sink!.id}, ${uniq('sub')}, ${['group']}::text[], ${['created']}::text[], ${sql.json({ url: 'https://example.com/h' })})
    returning id`;
  const [ev, ev2] = await sql<{ event_id: string }[]>`select event_id from events order by id desc limit 2`;
  await sql`
    insert into event_deliveries (event_id, subscription_id, sink_id, status, attempts, last_error)
    values (${ev!.event_id}::uuid, ${sub!.id}, ${sink!.id}, 'dead', 10, 'timeout'),
           (${ev2!.event_id}::uuid, ${sub!.id}, ${sink!.id}, 'succeeded', 1, null)`;
  // Finished tasks with their history rows, and an unfinished one that a backup leaves out.
  const [me] = await sql<{ id: number }[]>`select id from principals where name = 'admin'`;
  const [imp] = await sql<{ id: number }[]>`
    insert into tasks (kind, status, submitted_by, request, token_scope, token_scoped, idempotency_key, finished_at, summary)
    values ('import', 'succeeded', ${me!.id}, ${sql.json({ password: 'request-secret' })}, ${sql.json({ permissions: ['ReadCollection'] })},
      true, 'idem-secret', now(), ${sql.json({ created: 1 })})
    returning id`;
  await sql`insert into task_events (task_id, event_type, message) values (${imp!.id}, 'succeeded', 'import task succeeded')`;
  await sql`
    insert into import_results (task_id, seq, item_ref, entity_kind, action, outcome, entity_id)
    values (${imp!.id}, 0, 'c1', 'collection', 'create', 'succeeded', ${top})`;
  await sql`
    insert into remote_call_results (task_id, target_id, subject_type, subject_id, method, url, response_status, success)
    values (${imp!.id}, 1, 'collection', ${top}, 'post', 'https://hooks.example.com/1', 200, true)`;
  await sql`insert into tasks (kind, status, submitted_by) values ('export', 'running', ${me!.id})`;
  await sql`
    insert into event_deliveries (event_id, subscription_id, sink_id, purpose, status, locked_until, claim_token)
    values (${ev!.event_id}::uuid, ${sub!.id}, ${sink!.id}, 'test', 'in_flight', now() + interval '1 minute', gen_random_uuid())`;
}

async function submitBackup(body?: unknown, token = t.adminToken, headers: Record<string, string> = {}) {
  return t.request('POST', '/api/v1/backups', { token, body, headers });
}

/** Submits a backup, runs it, and returns the task id, the output text and the parsed document. */
async function backup(body?: unknown): Promise<{ id: number; text: string; doc: Doc; res: Awaited<ReturnType<TestApp['request']>> }> {
  const sub = await submitBackup(body);
  expect(sub.status, sub.text).toBe(202);
  const id = (sub.body as { id: number }).id;
  const done = await runTaskOnce(t.deps, { taskIds: [id] });
  expect(done?.status, JSON.stringify(done?.details)).toBe('succeeded');
  const res = await t.request('GET', `/api/v1/backups/${id}/output`);
  expect(res.status, res.text).toBe(200);
  return { id, text: res.text, doc: JSON.parse(res.text) as Doc, res };
}

async function stage(doc: Doc | string, token = t.adminToken) {
  return t.request('POST', '/api/v1/restores', { token, rawBody: typeof doc === 'string' ? doc : JSON.stringify(doc) });
}

async function confirm(id: number, body: Record<string, unknown>, opts: { approve?: boolean; token?: string } = {}) {
  const token = opts.token ?? t.adminToken;
  const headers: Record<string, string> = {};
  if (opts.approve !== false)
    headers['x-svc-credential-approval'] = await approve(t, { kind: 'confirm_restore', restore_id: id, confirmation: body }, token);
  return t.request('POST', `/api/v1/restores/${id}/confirm`, { token, body, headers });
}

function sha(text: string, enc: 'hex' | 'base64' = 'hex'): string {
  return createHash('sha256').update(text, 'utf8').digest(enc);
}

async function relogin(): Promise<void> {
  t.adminToken = await t.login('admin', ADMIN_PASSWORD);
}

async function holdingRestoreLock<T>(fn: () => Promise<T>): Promise<T> {
  const conn = await t.deps.sql.reserve();
  try {
    await conn`select pg_advisory_lock(${RESTORE_LOCK[0]}, ${RESTORE_LOCK[1]})`;
    return await fn();
  } finally {
    await conn`select pg_advisory_unlock(${RESTORE_LOCK[0]}, ${RESTORE_LOCK[1]})`;
    conn.release();
  }
}

describe('backup format table list', () => {
  it('every table of the database is a section or explicitly excluded, and every column is written or omitted', async () => {
    const tables = await t.deps.sql<{ table_name: string }[]>`
      select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`;
    const known = new Set([...SECTIONS.map((s) => s.table), ...EXCLUDED_TABLES.map((e) => e.table)]);
    const unknown = tables.map((r) => r.table_name).filter((n) => !known.has(n));
    expect(unknown, 'tables neither in SECTIONS nor in EXCLUDED_TABLES (src/domain/backup-format.ts)').toEqual([]);
    for (const s of SECTIONS) {
      const cols = await t.deps.sql<{ column_name: string }[]>`
        select column_name from information_schema.columns where table_schema = 'public' and table_name = ${s.table} order by 1`;
      expect(cols.length, `table ${s.table} exists`).toBeGreaterThan(0);
      expect([...s.fields, ...Object.keys(s.omitted)].sort(), `columns of ${s.table}`).toEqual(cols.map((c) => c.column_name).sort());
    }
  });

  it('the sections of BackupDocument in openapi.yaml are exactly the listed ones', () => {
    const schemas = (openapiDocument() as unknown as { components: { schemas: Record<string, Record<string, unknown>> } }).components
      .schemas;
    const props = schemas.BackupDocument!.properties as Record<string, { properties: Record<string, unknown>; required: string[] }>;
    for (const part of ['state', 'history'] as const) {
      const listed = SECTIONS.filter((s) => s.part === part).map((s) => s.section);
      expect(Object.keys(props[part]!.properties).sort()).toEqual([...listed].sort());
      expect(props[part]!.required.sort()).toEqual(listed.filter((n) => n !== 'event_deliveries').sort());
    }
  });
});

describe('backups and restores', () => {
  let first: Awaited<ReturnType<typeof backup>>;

  it('createBackup 202, runner succeeded, getBackup 200, getBackupOutput 200 with headers and no secrets', async () => {
    await seed();
    const b = await backup();
    first = b;
    const { res, doc, text, id } = b;
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="svc-backup-${id}.json"`);
    expect(res.headers.get('digest')).toBe(`SHA-256=${sha(text, 'base64')}`);
    expect(res.headers.get('x-svc-backup-sha256')).toBe(sha(text));

    expect(doc.backup_version).toBe(7);
    expect(doc.source_version).toBe('0.0.18');
    for (const s of SECTIONS) {
      const rows = (s.part === 'state' ? doc.state : doc.history!)[s.section]!;
      expect(doc.manifest.item_counts[countKey(s)], s.section).toBe(rows.length);
      expect(rows.length, `section ${s.section} has rows`).toBeGreaterThan(0);
      for (const r of rows) expect(Object.keys(r), s.section).toEqual(s.fields);
    }
    // Only terminal deliveries; only finished tasks; no secrets of any kind.
    expect(doc.history!.event_deliveries!.map((d) => d.status).sort()).toEqual(['dead', 'succeeded']);
    expect(doc.history!.tasks!.every((x) => ['succeeded', 'failed', 'partially_succeeded', 'cancelled'].includes(x.status as string))).toBe(
      true,
    );
    expect(text).not.toMatch(/password_hash|token_hash|\$argon2/);
    expect(text).not.toContain(t.adminToken);
    expect(text).not.toContain(ADMIN_PASSWORD);
    expect(text).not.toContain(user.password);
    expect(text).not.toContain(user.token);
    expect(text).not.toMatch(/request-secret|idem-secret/);
    expect(doc.history!.tasks!.map((x) => x.kind)).toEqual(['import']);
    expect(doc.state.event_sinks![0]!.secret_ref).toBe('SINK_ALIAS');

    const task = await t.request('GET', `/api/v1/backups/${id}`);
    expect(task.status).toBe(200);
    expect(task.body).toMatchObject({ id, kind: 'backup', status: 'succeeded', summary: { backup_version: 7, sha256: sha(text) } });
  });

  it('createRestore 201, confirmRestore 200 replaces all data, getRestoreStatus 200', async () => {
    // Changes after the backup that the restore must undo.
    const later = await createHuman(t);
    const extra = (await ok('POST', '/api/v1/collections', { name: uniq('later') })).id as number;
    const someObject = first.doc.state.objects![0]!;
    expect((await t.request('DELETE', `/api/v1/classes/${someObject.class_id}/${someObject.id}`)).status).toBe(204);

    const staged = await stage(first.text);
    expect(staged.status, staged.text).toBe(201);
    const created = staged.body as { id: number; status: string; sha256: string; restore_capability: string; expires_at: string };
    expect(created.status).toBe('validated');
    expect(created.sha256).toBe(first.res.headers.get('x-svc-backup-sha256'));
    expect(staged.headers.get('location')).toBe(`/api/v1/restores/${created.id}/status`);
    expect(staged.headers.get('cache-control')).toBe('no-store');
    // Re-formatting the file does not change the hash.
    const pretty = await stage(JSON.stringify(first.doc, null, 2));
    expect((pretty.body as { sha256: string }).sha256).toBe(created.sha256);

    const body = { restore_capability: created.restore_capability, sha256: created.sha256, confirmation: 'REPLACE ALL DATA' };
    const oldAdminToken = t.adminToken;
    const res = await confirm(created.id, body);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toMatchObject({ id: created.id, status: 'succeeded', error: null, backup_version: 7 });

    // Every token is gone, the caller's included; the status stays readable with the capability.
    expect((await t.request('GET', '/api/v1/iam/me', { token: oldAdminToken })).status).toBe(401);
    const st = await t.request('GET', `/api/v1/restores/${created.id}/status`, {
      token: null,
      headers: { 'x-svc-restore-capability': created.restore_capability },
    });
    expect(st.status).toBe(200);
    expect(st.body).toMatchObject({ status: 'succeeded', sha256: created.sha256 });
    expect(st.headers.get('cache-control')).toBe('no-store');

    // The admin and the restored human keep their passwords; the later human is gone.
    await relogin();
    expect(await t.login(user.name, user.password)).toBeTruthy();
    expect((await t.request('GET', `/api/v1/iam/users/${later.id}`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/collections/${extra}`)).status).toBe(404);
    expect((await t.request('GET', `/api/v1/classes/${someObject.class_id}/${someObject.id}`)).status).toBe(200);
    const [{ n }] = (await t.deps.sql`select count(*)::int as n from tokens`) as unknown as [{ n: number }];
    expect(n).toBe(2); // the two logins above
    const queued = await t.deps.sql`select 1 from event_fanout_queue q join events e on e.id = q.event_id
      where e.id <= ${Math.max(...first.doc.history!.events!.map((e) => e.id as number))}`;
    expect(queued.length, 'restored events are not fanned out again').toBe(0);

    // restore.succeeded is recorded after the restored history.
    const [ev] = await t.deps.sql<{ action: string; metadata: Record<string, unknown> }[]>`
      select action, metadata from events where entity_type = 'restore' and entity_id = ${created.id}`;
    expect(ev).toMatchObject({ action: 'succeeded', metadata: { sha256: created.sha256, backup_version: 7 } });

    // Data equal: a new backup has the same state and the old history as its beginning.
    const second = await backup();
    expect(second.doc.state).toEqual(first.doc.state);
    for (const [name, rows] of Object.entries(first.doc.history!)) {
      expect(second.doc.history![name]!.slice(0, rows.length), name).toEqual(rows);
    }
    // New ids continue after the restored ones.
    const c = (await ok('POST', '/api/v1/collections', { name: uniq('after') })).id as number;
    expect(c).toBeGreaterThan(Math.max(...first.doc.state.collections!.map((x) => x.id as number)));

    // A stage is applied at most once.
    await relogin();
    const again = await confirm(created.id, body);
    expect(again.status).toBe(409);
  });

  it('createBackup with include_history false writes history null; its restore starts with empty history', async () => {
    const b = await backup({ include_history: false });
    expect(b.doc.history).toBeNull();
    expect(Object.keys(b.doc.manifest.item_counts).some((k) => k.startsWith('history.'))).toBe(false);
    const staged = (await stage(b.text)).body as { id: number; sha256: string; restore_capability: string };
    const res = await confirm(staged.id, {
      restore_capability: staged.restore_capability,
      sha256: staged.sha256,
      confirmation: 'REPLACE ALL DATA',
    });
    expect(res.status, res.text).toBe(200);
    expect((res.body as { status: string }).status).toBe('succeeded');
    const events = await t.deps.sql<{ entity_type: string; action: string }[]>`select entity_type, action from events order by id`;
    expect(events).toEqual([{ entity_type: 'restore', action: 'succeeded' }]);
    expect((await t.deps.sql`select 1 from tasks`).length).toBe(0);
    await relogin();
  });

  it('createRestore 201 for a format 6 document: legacy defaults', async () => {
    const doc = structuredClone(first.doc);
    doc.backup_version = 6;
    for (const s of doc.state.event_sinks!) delete s.min_interval_ms;
    delete doc.history!.event_deliveries;
    delete doc.manifest.item_counts['history.event_deliveries'];
    const staged = await stage(doc);
    expect(staged.status, staged.text).toBe(201);
    const c = staged.body as { id: number; sha256: string; restore_capability: string };
    const res = await confirm(c.id, { restore_capability: c.restore_capability, sha256: c.sha256, confirmation: 'REPLACE ALL DATA' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', backup_version: 6 });
    const sinks = await t.deps.sql<{ min_interval_ms: number | null }[]>`select min_interval_ms from event_sinks`;
    expect(sinks.length).toBe(first.doc.state.event_sinks!.length);
    expect(sinks.every((s) => s.min_interval_ms === null)).toBe(true);
    expect((await t.deps.sql`select 1 from event_deliveries`).length).toBe(0);
    expect((await t.deps.sql`select 1 from objects`).length).toBe(first.doc.state.objects!.length);
    await relogin();
  });

  it('confirmRestore 200 re-creates the bootstrap admin, its group and membership when the document lacks them', async () => {
    const doc = structuredClone(first.doc);
    const admin = doc.state.principals!.find((p) => p.name === 'admin')!;
    const adminGroup = doc.state.groups!.find((g) => g.name === t.deps.config.SVC_ADMIN_GROUPNAME)!;
    doc.state.principals = doc.state.principals!.filter((p) => p !== admin);
    doc.state.users = doc.state.users!.filter((u) => u.principal_id !== admin.id);
    doc.state.group_memberships = doc.state.group_memberships!.filter((m) => m.principal_id !== admin.id && m.group_id !== adminGroup.id);
    doc.state.groups = doc.state.groups!.filter((g) => g !== adminGroup);
    doc.state.collection_permissions = doc.state.collection_permissions!.filter((p) => p.group_id !== adminGroup.id);
    doc.state.service_accounts = doc.state.service_accounts!.filter((s) => s.owner_group_id !== adminGroup.id);
    doc.state.computed_fields = doc.state.computed_fields!.filter((f) => f.owner_user_id !== admin.id);
    for (const k of [
      'principals',
      'users',
      'group_memberships',
      'groups',
      'collection_permissions',
      'service_accounts',
      'computed_fields',
    ]) {
      doc.manifest.item_counts[k] = doc.state[k]!.length;
    }
    const staged = await stage(doc);
    expect(staged.status, staged.text).toBe(201);
    const c = staged.body as { id: number; sha256: string; restore_capability: string };
    const res = await confirm(c.id, { restore_capability: c.restore_capability, sha256: c.sha256, confirmation: 'REPLACE ALL DATA' });
    expect((res.body as { status: string }).status).toBe('succeeded');
    await relogin();
    const me = await t.request('GET', '/api/v1/iam/me');
    expect(me.status).toBe(200);
    const [ev] = await t.deps.sql<{ metadata: { admin_repairs: string[] } }[]>`
      select metadata from events where entity_type = 'restore' and entity_id = ${c.id}`;
    expect(ev!.metadata.admin_repairs).toEqual(['admin_group_created', 'admin_user_created', 'admin_membership_added']);
    // The re-created admin is an administrator again (backups need one).
    expect((await submitBackup()).status).toBe(202);
    await t.deps.sql`update tasks set status = 'cancelled', finished_at = now() where kind = 'backup' and status = 'queued'`;
    // Back to the first document for the tests that follow.
    const back = (await stage(first.text)).body as { id: number; sha256: string; restore_capability: string };
    const r2 = await confirm(back.id, {
      restore_capability: back.restore_capability,
      sha256: back.sha256,
      confirmation: 'REPLACE ALL DATA',
    });
    expect((r2.body as { status: string }).status).toBe('succeeded');
    await relogin();
  });

  it('confirmRestore 200 failed: nothing changes, restore.failed is recorded, the stage cannot be confirmed again', async () => {
    const staged = (await stage(first.text)).body as { id: number; sha256: string; restore_capability: string };
    // Corrupt the staged document behind the validation's back (two collections, one id).
    await t.deps.sql`
      update restore_stages set document = jsonb_set(document, '{state,collections}',
        (document #> '{state,collections}') || jsonb_build_array(document #> '{state,collections,0}'))
      where id = ${staged.id}`;
    const before = await t.deps.sql`select id from collections order by id`;
    const body = { restore_capability: staged.restore_capability, sha256: staged.sha256, confirmation: 'REPLACE ALL DATA' };
    const res = await confirm(staged.id, body);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed' });
    expect((res.body as { error: string }).error).toMatch(/duplicate key/);
    expect(await t.deps.sql`select id from collections order by id`).toEqual(before);
    expect((await t.request('GET', '/api/v1/iam/me')).status).toBe(200); // tokens untouched
    // Staging and the failed confirmation are both audited (the stage's event survives a failed apply).
    const evs = await t.deps.sql<{ action: string; metadata: Record<string, unknown>; after: Record<string, unknown> }[]>`
      select action, metadata, after from events where entity_type = 'restore' and entity_id = ${staged.id} order by id`;
    expect(evs.map((e) => e.action)).toEqual(['staged', 'failed']);
    expect(evs[0]).toMatchObject({ metadata: { sha256: staged.sha256 }, after: { status: 'validated' } });
    expect(JSON.stringify(evs[0])).not.toContain('restore_capability');
    expect((await confirm(staged.id, body)).status).toBe(409);
  });

  describe('errors', () => {
    let plain: string;
    let scopedAdmin: string;
    let saToken: string; // a service account in the admin group
    let saPlainToken: string;

    beforeAll(async () => {
      plain = user.token = await t.login(user.name, user.password);
      const adminId = (await t.request('GET', '/api/v1/iam/me')).body as { principal: { id: number } };
      scopedAdmin = await tokenFor(t, adminId.principal.id, { permissions: ['ReadCollection'] });
      const sa = await createServiceAccount(t, await adminGroupId(t));
      await addMember(t, await adminGroupId(t), sa.id);
      saToken = await tokenFor(t, sa.id);
      saPlainToken = await tokenFor(t, (await createServiceAccount(t, await adminGroupId(t))).id);
    });

    it('createBackup 401 without a token, 403 for a non-admin and a scoped admin token, 400 for unknown members', async () => {
      expect((await submitBackup(undefined, '')).status).toBe(401);
      expect((await submitBackup(undefined, plain)).status).toBe(403);
      expect((await submitBackup(undefined, scopedAdmin)).status).toBe(403);
      expect((await submitBackup(undefined, saPlainToken)).status).toBe(403);
      const bad = await submitBackup({ include_history: true, extra: 1 });
      expect(bad.status).toBe(400);
      expect((await submitBackup(undefined, undefined, { 'idempotency-key': '' })).status).toBe(400);
    });

    it('createBackup 202 for an admin service account; 409 Idempotency-Key reuse; 429 over the cap; 409 while a restore runs', async () => {
      const capped = await startTestApp({ SVC_DATABASE_URL: t.deps.config.SVC_DATABASE_URL, SVC_BACKUP_MAX_ACTIVE_TASKS: 2 });
      try {
        const key = uniq('idem');
        const a = await capped.request('POST', '/api/v1/backups', { token: saToken, body: {}, headers: { 'idempotency-key': key } });
        expect(a.status, a.text).toBe(202);
        const replay = await capped.request('POST', '/api/v1/backups', { token: saToken, body: {}, headers: { 'idempotency-key': key } });
        expect(replay.status).toBe(202);
        expect((replay.body as { id: number }).id).toBe((a.body as { id: number }).id);
        const reuse = await capped.request('POST', '/api/v1/backups', {
          token: saToken,
          body: { include_history: false },
          headers: { 'idempotency-key': key },
        });
        expect(reuse.status).toBe(409);
        expect((await capped.request('POST', '/api/v1/backups', { body: { include_history: false } })).status).toBe(202);
        const over = await capped.request('POST', '/api/v1/backups', {});
        expect(over.status).toBe(429);
        expect((over.body as { reason: string }).reason).toBe('too_many_active_tasks');
        // A replay of an accepted submission is not refused by the cap.
        const replay2 = await capped.request('POST', '/api/v1/backups', { token: saToken, body: {}, headers: { 'idempotency-key': key } });
        expect(replay2.status).toBe(202);
      } finally {
        await t.deps.sql`update tasks set status = 'cancelled', finished_at = now() where kind = 'backup' and status = 'queued'`;
        await capped.close();
      }
      const blocked = await holdingRestoreLock(() => submitBackup());
      expect(blocked.status).toBe(409);
      expect((blocked.body as { reason: string }).reason).toBe('restore_running');
    });

    it('getBackup 404 for missing and non-backup tasks, 403 for non-admins, 400 for a bad id', async () => {
      expect((await t.request('GET', '/api/v1/backups/2000000000')).status).toBe(404);
      const me = (await t.request('GET', '/api/v1/iam/me')).body as { principal: { id: number }; token: { id: number } };
      const { task } = await withTx(t.deps.sql, (tx) =>
        insertTask(tx, SYSTEM_ACTOR, {
          kind: 'remote_call',
          auth: { principal: me.principal, token: { id: me.token.id, scope: null } },
          request: {},
        }),
      );
      expect((await t.request('GET', `/api/v1/backups/${task.id}`)).status).toBe(404);
      expect((await t.request('GET', `/api/v1/backups/${task.id}/output`)).status).toBe(404);
      await t.deps.sql`update tasks set status = 'cancelled', finished_at = now() where id = ${task.id}`;
      expect((await t.request('GET', `/api/v1/backups/${first.id}`, { token: plain })).status).toBe(403);
      expect((await t.request('GET', `/api/v1/backups/${first.id}`, { token: scopedAdmin })).status).toBe(403);
      expect((await t.request('GET', `/api/v1/backups/${first.id}`, { token: saPlainToken })).status).toBe(403);
      expect((await t.request('GET', '/api/v1/backups/0')).status).toBe(400);
    });

    it('getBackupOutput 404 before the task succeeded, 410 after expiry, 403 for non-admins', async () => {
      const sub = await submitBackup();
      const id = (sub.body as { id: number }).id;
      expect((await t.request('GET', `/api/v1/backups/${id}/output`)).status).toBe(404);
      await runTaskOnce(t.deps, { taskIds: [id] });
      expect((await t.request('GET', `/api/v1/backups/${id}/output`, { token: plain })).status).toBe(403);
      expect((await t.request('GET', `/api/v1/backups/${id}/output`)).status).toBe(200);
      await t.deps.sql`update tasks set output_expires_at = now() - interval '1 second' where id = ${id}`;
      const gone = await t.request('GET', `/api/v1/backups/${id}/output`);
      expect(gone.status).toBe(410);
      // The next submission drops the expired bytes; the read stays 410.
      const next = await submitBackup();
      expect((await t.deps.sql`select 1 from tasks where id = ${id} and output is null`).length).toBe(1);
      expect((await t.request('GET', `/api/v1/backups/${id}/output`)).status).toBe(410);
      await t.deps.sql`update tasks set status = 'cancelled', finished_at = now() where id = ${(next.body as { id: number }).id}`;
    });

    it('createBackup 202 then the runner fails the task when the submitter is no longer an administrator', async () => {
      const admin = await createHuman(t);
      const gid = await adminGroupId(t);
      await addMember(t, gid, admin.id);
      const sub = await submitBackup(undefined, admin.token);
      expect(sub.status, sub.text).toBe(202);
      expect((await t.request('DELETE', `/api/v1/iam/groups/${gid}/members/${admin.id}`)).status).toBe(204);
      const done = await runTaskOnce(t.deps, { taskIds: [(sub.body as { id: number }).id] });
      expect(done?.status).toBe('failed');
      expect(done?.details).toMatchObject({ reason: 'permission_denied' });
      expect((await t.request('GET', `/api/v1/backups/${done!.id}/output`)).status).toBe(404);
    });

    const broken: [string, (d: Doc) => void, RegExp][] = [
      ['an unsupported backup_version', (d) => (d.backup_version = 5), /backup_version/],
      ['a missing section', (d) => delete (d.state as Record<string, unknown>).objects, /objects/],
      ['an unknown section', (d) => ((d.history as Record<string, unknown>).tokens = []), /tokens/],
      ['a manifest count that does not match', (d) => (d.manifest.item_counts.objects = 99), /item_counts\.objects/],
      ['a manifest key of no section', (d) => (d.manifest.item_counts.nope = 0), /item_counts\.nope/],
      ['an unknown field', (d) => (d.state.users![0]!.password_hash = 'x'), /password_hash/],
      ['a missing field', (d) => delete d.state.objects![0]!.json_data, /json_data/],
      ['a duplicate key', (d) => d.state.objects!.push({ ...d.state.objects![0]! }) && (d.manifest.item_counts.objects! += 1), /duplicate/],
      ['a link to no row', (d) => (d.state.objects![0]!.class_id = 1999999999), /class_id/],
      ['a collection cycle', (d) => (d.state.collections![0]!.parent_collection_id = d.state.collections![1]!.id), /ancestor/],
      ['a value of the wrong type (dry run)', (d) => (d.state.objects![0]!.revision = 'two'), /integer/],
      ['a value that breaks a check (dry run)', (d) => (d.state.collections![0]!.name = ''), /check constraint/],
      [
        'two classes with one name (dry run)',
        (d) => (d.state.classes![1]!.name = d.state.classes![0]!.name),
        /duplicate key value violates unique constraint/,
      ],
      ['format 6 with event_deliveries', (d) => (d.backup_version = 6), /event_deliveries/],
    ];
    it.each(broken)('createRestore 400 for %s', async (_name, breakIt, pattern) => {
      const doc = structuredClone(first.doc);
      breakIt(doc);
      const res = await stage(doc);
      expect(res.status, res.text).toBe(400);
      expect(JSON.stringify(res.body)).toMatch(pattern);
    });

    it('createRestore 400 for malformed JSON, 403 for non-admins, 401 without a token, 409 while a restore runs', async () => {
      expect((await stage('{"backup_version": 7,')).status).toBe(400);
      expect((await stage(first.text, plain)).status).toBe(403);
      expect((await stage(first.text, scopedAdmin)).status).toBe(403);
      expect((await stage(first.text, saPlainToken)).status).toBe(403);
      expect((await stage(first.text, '')).status).toBe(401);
      const res = await holdingRestoreLock(() => stage(first.text));
      expect(res.status).toBe(409);
    });

    it('confirmRestore 403/404/409/410/400 and getRestoreStatus 400/403/404', async () => {
      const staged = (await stage(first.text)).body as { id: number; sha256: string; restore_capability: string };
      const body = { restore_capability: staged.restore_capability, sha256: staged.sha256, confirmation: 'REPLACE ALL DATA' };
      const before = await t.deps.sql`select id from collections order by id`;

      const missing = await confirm(staged.id, body, { approve: false });
      expect(missing.status).toBe(403);
      expect((missing.body as { reason: string }).reason).toBe('reauthentication_required');
      // An approval for another body does not count.
      const other = await approve(t, { kind: 'confirm_restore', restore_id: staged.id, confirmation: { ...body, sha256: '0'.repeat(64) } });
      const wrongApproval = await t.request('POST', `/api/v1/restores/${staged.id}/confirm`, {
        body,
        headers: { 'x-svc-credential-approval': other },
      });
      expect((wrongApproval.body as { reason: string }).reason).toBe('reauthentication_required');
      expect((await confirm(staged.id, { ...body, restore_capability: 'nope' })).status).toBe(403);
      expect((await confirm(staged.id, { ...body, sha256: 'a'.repeat(64) })).status).toBe(409);
      expect((await confirm(staged.id, { ...body, confirmation: 'replace all data' }, { approve: false })).status).toBe(400);
      expect((await confirm(2000000000, body)).status).toBe(404);
      expect((await t.request('POST', `/api/v1/restores/${staged.id}/confirm`, { token: plain, body })).status).toBe(403);
      expect((await t.request('POST', `/api/v1/restores/${staged.id}/confirm`, { token: scopedAdmin, body })).status).toBe(403);
      expect((await t.request('POST', `/api/v1/restores/${staged.id}/confirm`, { token: saToken, body })).status).toBe(403);
      expect((await t.request('POST', `/api/v1/restores/${staged.id}/confirm`, { token: '', body })).status).toBe(401);
      const busy = await holdingRestoreLock(() => confirm(staged.id, body));
      expect(busy.status).toBe(409);
      expect(await t.deps.sql`select id from collections order by id`).toEqual(before);

      const status = (headers: Record<string, string>, id = staged.id) =>
        t.request('GET', `/api/v1/restores/${id}/status`, { token: null, headers });
      expect((await status({})).status).toBe(400);
      expect((await status({ 'x-svc-restore-capability': 'wrong' })).status).toBe(403);
      expect((await status({ 'x-svc-restore-capability': staged.restore_capability }, 2000000000)).status).toBe(404);
      const fresh = await status({ 'x-svc-restore-capability': staged.restore_capability });
      expect(fresh.body).toMatchObject({ status: 'validated', confirmed_at: null, finished_at: null });

      await t.deps.sql`update restore_stages set expires_at = now() - interval '1 second' where id = ${staged.id}`;
      expect((await confirm(staged.id, body)).status).toBe(410);
      expect((await status({ 'x-svc-restore-capability': staged.restore_capability })).body).toMatchObject({ status: 'expired' });
      // The next stage drops the expired document.
      await stage(first.text);
      const [row] = await t.deps.sql<
        { status: string; document: unknown }[]
      >`select status, document from restore_stages where id = ${staged.id}`;
      expect(row).toEqual({ status: 'expired', document: null });
    });
  });
});
