// Remote calls end to end: invoke over HTTP, run the task runner once, and check what a real
// local HTTPS peer received and what the task, its events and the result row say. The peer's
// certificate is made with the openssl command line at test time and trusted through
// SVC_OUTBOUND_CA_FILE; loopback is admitted only through SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS.
// The peer's origin is approved for every secret alias used here (SVC_REMOTE_TARGET_ORIGINS_<ALIAS>
// or remote-target/<alias>.origins); test/secret-destinations.test.ts covers unapproved origins.
import { mkdirSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { addMember, createGroup, createHuman, createServiceAccount, tokenFor } from './iam-fixtures.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { startPeer, type Peer, type Seen } from './tls-fixtures.ts';

let dir: string;
let caFile: string;
let peer: Peer;
let port: number;
let seen: Seen[];
let respond: (req: IncomingMessage, res: ServerResponse) => void;

let t: TestApp; // private targets allowed, CA trusted, env secrets
let strict: TestApp; // defaults: private destinations refused
let fileApp: TestApp; // file secret source
let col: number;
let klass: number;
let obj: number;
const ALIAS = `RT_${Date.now()}_${process.pid}`;
const SECRET = `s3cr3t-${uniq()}`;
const FILE_ALIAS = 'file_alias_1';
const FILE_SECRET = `file-secret-${uniq()}`;
/** Aliases whose origins this file approves (the missing-secret and loopback cases use the last two). */
const APPROVED_ALIASES = [ALIAS, 'NOT_SET_ANYWHERE', 'NO_SUCH_ALIAS_X'];

beforeAll(async () => {
  peer = await startPeer({ prefix: 'svc-rt-' });
  ({ dir, caFile, port, seen } = peer);
  peer.respond = (req, res) => respond(req, res);

  process.env[`SVC_REMOTE_TARGET_SECRET_${ALIAS.toUpperCase()}`] = SECRET;
  for (const a of APPROVED_ALIASES) process.env[`SVC_REMOTE_TARGET_ORIGINS_${a.toUpperCase()}`] = `https://localhost:${port}`;
  mkdirSync(join(dir, 'secrets', 'remote-target'), { recursive: true });
  writeFileSync(join(dir, 'secrets', 'remote-target', FILE_ALIAS), `${FILE_SECRET}\n`);
  writeFileSync(join(dir, 'secrets', 'remote-target', `${FILE_ALIAS}.origins`), `https://localhost:${port}\n`);

  t = await startTestApp({ SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: true, SVC_OUTBOUND_CA_FILE: caFile });
  strict = await startTestApp({ SVC_OUTBOUND_CA_FILE: caFile });
  fileApp = await startTestApp({
    SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: true,
    SVC_OUTBOUND_CA_FILE: caFile,
    SVC_SECRET_SOURCE: 'file',
    SVC_SECRET_FILE_ROOT: join(dir, 'secrets'),
  });

  const c = await t.request('POST', '/api/v1/collections', { body: { name: uniq('col') } });
  col = (c.body as { id: number }).id;
  const k = await t.request('POST', '/api/v1/classes', { body: { name: uniq('class'), collection_id: col } });
  klass = (k.body as { id: number }).id;
  const o = await t.request('POST', `/api/v1/classes/${klass}/objects`, {
    body: { name: 'web 1/α', description: 'front', json_data: { ip: '10.0.0.5', tags: ['a', 'b'] } },
  });
  expect(o.status, o.text).toBe(201);
  obj = (o.body as { id: number }).id;
});

afterAll(async () => {
  delete process.env[`SVC_REMOTE_TARGET_SECRET_${ALIAS.toUpperCase()}`];
  for (const a of APPROVED_ALIASES) delete process.env[`SVC_REMOTE_TARGET_ORIGINS_${a.toUpperCase()}`];
  await Promise.all([peer.close(), t?.close(), strict?.close(), fileApp?.close()]);
});

beforeEach(() => {
  seen.length = 0;
  respond = (_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.setHeader('set-cookie', 'session=abc');
    res.setHeader('x-request', 'r-1');
    res.end('{"ok":true}');
  };
});

async function createTarget(overrides: Record<string, unknown> = {}, app = t): Promise<{ id: number }> {
  const res = await app.request('POST', '/api/v1/remote-targets', {
    body: {
      collection_id: col,
      name: uniq('rt'),
      description: '',
      method: 'get',
      url_template: `https://localhost:${port}/x`,
      allowed_subject_types: ['collection'],
      ...overrides,
    },
  });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: number };
}

async function invoke(targetId: number, body: unknown, app = t, token = app.adminToken): Promise<number> {
  const res = await app.request('POST', `/api/v1/remote-targets/${targetId}/invoke`, { token, body });
  expect(res.status, res.text).toBe(202);
  return (res.body as { id: number }).id;
}

interface TaskWire {
  id: number;
  status: string;
  summary: Record<string, unknown> | null;
  details: Record<string, unknown> & { error?: { reason: string; message: string }; response?: Record<string, unknown> };
  progress: Record<string, number>;
}

async function run(taskId: number, app = t): Promise<TaskWire> {
  const done = await runTaskOnce(app.deps, { taskIds: [taskId] });
  expect(done?.id).toBe(taskId);
  const res = await app.request('GET', `/api/v1/tasks/${taskId}`);
  expect(res.status, res.text).toBe(200);
  return res.body as TaskWire;
}

async function resultRows(taskId: number) {
  return t.deps.sql<
    {
      target_id: number;
      subject_type: string;
      subject_id: number;
      method: string;
      url: string | null;
      response_status: number | null;
      response_headers: Record<string, string>;
      body_preview: string | null;
      duration_ms: number | null;
      success: boolean;
      error: string | null;
    }[]
  >`select target_id, subject_type, subject_id, method, url, response_status, response_headers, body_preview, duration_ms,
      success, error from remote_call_results where task_id = ${taskId} order by id`;
}

describe('remote_call end to end', () => {
  it('renders the exact request, sends it with the bearer secret, stores a sanitized result and succeeds', async () => {
    const rt = await createTarget({
      method: 'post',
      allowed_subject_types: ['object'],
      class_id: klass,
      url_template: `https://localhost:${port}/hooks/{{ object.name | url_encode }}?id={{ object.id }}&prio={{ parameters.priority }}&missing={{ parameters.nope }}`,
      headers_template: {
        'Content-Type': 'application/json',
        'X-Class': '{{ class.name }}',
        'X-Collection': '{{ collection.id }}',
        'X-Subject-Type': '{{ subject_type }}',
      },
      body_template:
        '{"name": {{ object.name | json }}, "class_id": {{ object.svc_class_id }}, "ip": {{ object.data.ip | json }}, "tags": {{ object.data.tags | json }}, "comment": {{ body_override.comment | json }}}',
      auth_config: { type: 'bearer_secret', secret: ALIAS },
    });
    const taskId = await invoke(rt.id, {
      subject: { type: 'object', class_id: klass, object_id: obj },
      parameters: { priority: 'high' },
      body_override: { comment: 'by "operator"' },
    });
    const task = await run(taskId);
    expect(task.status).toBe('succeeded');

    expect(seen).toHaveLength(1);
    const got = seen[0]!;
    expect(got.method).toBe('POST');
    expect(got.url).toBe(`/hooks/web+1%2F%CE%B1?id=${obj}&prio=high&missing=`);
    expect(got.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['x-class']).toMatch(/^class-/);
    expect(got.headers['x-collection']).toBe(String(col));
    expect(got.headers['x-subject-type']).toBe('object');
    expect(got.headers.host).toBe(`localhost:${port}`);
    expect(got.body).toBe(`{"name": "web 1/α", "class_id": ${klass}, "ip": "10.0.0.5", "tags": ["a","b"], "comment": "by \\"operator\\""}`);
    expect(JSON.parse(got.body)).toEqual({ name: 'web 1/α', class_id: klass, ip: '10.0.0.5', tags: ['a', 'b'], comment: 'by "operator"' });

    expect(task.summary).toMatchObject({ success: true, response_status: 200 });
    expect(task.progress).toEqual({ total_items: 1, processed_items: 1, success_items: 1, failed_items: 0 });
    expect(task.details).toMatchObject({
      remote_target_id: rt.id,
      subject_type: 'object',
      subject_id: obj,
      method: 'post',
      success: true,
      response: { status: 200, body_preview: '{"ok":true}', body_truncated: false },
    });
    expect((task.details.response!.headers as Record<string, string>)['set-cookie']).toBe('[redacted]');

    const [row] = await resultRows(taskId);
    expect(row).toMatchObject({
      target_id: rt.id,
      subject_type: 'object',
      subject_id: obj,
      method: 'post',
      response_status: 200,
      body_preview: '{"ok":true}',
      success: true,
      error: null,
    });
    expect(row!.url).toBe(`https://localhost:${port}${got.url}`);
    expect(row!.response_headers['set-cookie']).toBe('[redacted]');
    expect(row!.response_headers['x-request']).toBe('r-1');
    expect(row!.duration_ms).toBeGreaterThanOrEqual(0);

    // the secret value is nowhere in the database
    const [leak] = await t.deps.sql<{ n: number }[]>`
      select (select count(*) from remote_call_results where to_jsonb(remote_call_results)::text like ${'%' + SECRET + '%'})
        + (select count(*) from tasks where to_jsonb(tasks)::text like ${'%' + SECRET + '%'})
        + (select count(*) from task_events where to_jsonb(task_events)::text like ${'%' + SECRET + '%'})
        + (select count(*) from events where to_jsonb(events)::text like ${'%' + SECRET + '%'}) as n`;
    expect(Number(leak!.n)).toBe(0);

    // history: task events and audit lifecycle events by the worker on behalf of the submitter
    const te = await t.request('GET', `/api/v1/tasks/${taskId}/events`);
    expect(te.status).toBe(200);
    expect((te.body as { event_type: string }[]).map((e) => e.event_type)).toEqual([
      'queued',
      'running',
      'remote_call.request',
      'remote_call.response',
      'succeeded',
    ]);
    const audit = await t.deps.sql<
      {
        action: string;
        actor_kind: string;
        actor_user_id: number | null;
        initiator_user_id: number;
        task_id: number;
        collection_id: number | null;
        metadata: Record<string, unknown>;
      }[]
    >`
      select action, actor_kind, actor_user_id, initiator_user_id, task_id, collection_id, metadata
      from events where entity_type = 'task' and entity_id = ${taskId} order by id`;
    const adminId = (await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`)[0]!
      .id;
    expect(audit.map((e) => [e.action, e.actor_kind])).toEqual([
      ['queued', 'user'],
      ['running', 'worker'],
      ['succeeded', 'worker'],
    ]);
    for (const e of audit) {
      expect(e.initiator_user_id).toBe(adminId);
      // (the queued event is written by insertTask in src/db/tasks.ts)
      if (e.actor_kind === 'worker') expect(e.task_id).toBe(taskId);
      expect(e.collection_id).toBe(col);
      expect(e.metadata.task_kind).toBe('remote_call');
    }
    expect(audit[1]!.actor_user_id).toBeNull();
  });

  it('get without body_template sends no body; api_key_header sends the secret in its header', async () => {
    const rt = await createTarget({ auth_config: { type: 'api_key_header', header: 'X-Api-Key', secret: ALIAS } });
    const task = await run(await invoke(rt.id, { subject: { type: 'collection', id: col } }));
    expect(task.status).toBe('succeeded');
    expect(seen[0]!.method).toBe('GET');
    expect(seen[0]!.body).toBe('');
    expect(seen[0]!.headers['content-length']).toBeUndefined();
    expect(seen[0]!.headers['transfer-encoding']).toBeUndefined();
    expect(seen[0]!.headers['x-api-key']).toBe(SECRET);
  });

  it('file secret source: <SVC_SECRET_FILE_ROOT>/remote-target/<alias>', async () => {
    const rt = await createTarget({ auth_config: { type: 'bearer_secret', secret: FILE_ALIAS } }, fileApp);
    const task = await run(await invoke(rt.id, { subject: { type: 'collection', id: col } }, fileApp), fileApp);
    expect(task.status).toBe('succeeded');
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${FILE_SECRET}`);
  });

  it('a non-2xx answer fails the task and still stores the result row', async () => {
    respond = (_req, res) => {
      res.statusCode = 503;
      res.setHeader('www-authenticate', 'Bearer');
      res.end('busy');
    };
    const rt = await createTarget();
    const taskId = await invoke(rt.id, { subject: { type: 'collection', id: col } });
    const task = await run(taskId);
    expect(task.status).toBe('failed');
    expect(task.details.error).toEqual({ reason: 'http_status', message: 'the destination answered HTTP 503' });
    expect(task.details.response).toMatchObject({ status: 503, body_preview: 'busy' });
    const [row] = await resultRows(taskId);
    expect(row).toMatchObject({ response_status: 503, success: false, body_preview: 'busy' });
    expect(row!.response_headers['www-authenticate']).toBe('[redacted]');
  });

  it('a 3xx is final: redirects are not followed', async () => {
    respond = (_req, res) => {
      res.statusCode = 302;
      res.setHeader('location', `https://localhost:${port}/elsewhere`);
      res.end();
    };
    const rt = await createTarget();
    const task = await run(await invoke(rt.id, { subject: { type: 'collection', id: col } }));
    expect(task.status).toBe('failed');
    expect(task.details.response).toMatchObject({ status: 302 });
    expect(seen).toHaveLength(1);
  });

  it('the response body is capped (SVC_REMOTE_CALL_MAX_RESPONSE_BYTES) and the preview marks truncation', async () => {
    const capped = await startTestApp({
      SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: true,
      SVC_OUTBOUND_CA_FILE: caFile,
      SVC_REMOTE_CALL_MAX_RESPONSE_BYTES: 100,
    });
    try {
      respond = (_req, res) => res.end('z'.repeat(10_000));
      const rt = await createTarget({}, capped);
      const task = await run(await invoke(rt.id, { subject: { type: 'collection', id: col } }, capped), capped);
      expect(task.status).toBe('succeeded');
      expect(task.details.response).toMatchObject({ body_preview: 'z'.repeat(100), body_truncated: true });
    } finally {
      await capped.close();
    }
  });

  it('loopback is refused without SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: blocked destination, nothing sent, no secret read', async () => {
    const rt = await createTarget({ auth_config: { type: 'bearer_secret', secret: 'NOT_SET_ANYWHERE' } }, strict);
    const taskId = await invoke(rt.id, { subject: { type: 'collection', id: col } }, strict);
    const task = await run(taskId, strict);
    expect(task.status).toBe('failed');
    expect(task.details.error!.reason).toBe('blocked_destination');
    expect(task.details.error!.message).not.toContain(String(port));
    expect(seen).toHaveLength(0);
    const [row] = await resultRows(taskId);
    expect(row).toMatchObject({ success: false, response_status: null });
  });

  it.each([
    ['169.254.169.254', 'https://169.254.169.254/latest/meta-data/'],
    ['10.0.0.1', 'https://10.0.0.1/'],
    ['[::1]', 'https://[::1]/'],
    ['[::ffff:127.0.0.1]', 'https://[::ffff:127.0.0.1]/'],
    ['100.64.0.1', 'https://100.64.0.1/'],
    ['[fe80::1]', 'https://[fe80::1]/'],
  ])('%s is refused by default', async (_what, url) => {
    const rt = await createTarget({ url_template: url }, strict);
    const task = await run(await invoke(rt.id, { subject: { type: 'collection', id: col } }, strict), strict);
    expect(task.status).toBe('failed');
    expect(task.details.error!.reason).toBe('blocked_destination');
  });

  it('a rendered URL that is not https fails the task', async () => {
    const rt = await createTarget({ url_template: '{{ parameters.scheme }}://localhost:' + port + '/' });
    const task = await run(await invoke(rt.id, { subject: { type: 'collection', id: col }, parameters: { scheme: 'http' } }));
    expect(task.status).toBe('failed');
    expect(task.details.error!.reason).toBe('invalid_url');
    expect(seen).toHaveLength(0);
  });

  it('a missing secret fails the task before any request', async () => {
    const rt = await createTarget({ auth_config: { type: 'bearer_secret', secret: 'NO_SUCH_ALIAS_X' } });
    const task = await run(await invoke(rt.id, { subject: { type: 'collection', id: col } }));
    expect(task.status).toBe('failed');
    expect(task.details.error).toEqual({ reason: 'missing_secret', message: 'the secret alias NO_SUCH_ALIAS_X is not available' });
    expect(seen).toHaveLength(0);
  });

  it('rendering that runs out of fuel fails the task', async () => {
    const rt = await createTarget({
      method: 'post',
      headers_template: { 'Content-Type': 'text/plain' },
      body_template: '{% for i in (1..1000000) %}{{ i }}{% endfor %}',
    });
    const task = await run(await invoke(rt.id, { subject: { type: 'collection', id: col } }));
    expect(task.status).toBe('failed');
    expect(task.details.error!.reason).toBe('render_failed');
    expect(task.details.error!.message).toMatch(/fuel/);
    expect(seen).toHaveLength(0);
  });

  it('a peer that does not answer within timeout_ms fails the task with timeout', async () => {
    respond = () => {};
    const rt = await createTarget({ timeout_ms: 300 });
    const started = Date.now();
    const task = await run(await invoke(rt.id, { subject: { type: 'collection', id: col } }));
    expect(task.status).toBe('failed');
    expect(task.details.error!.reason).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('a target disabled or deleted after the invoke fails the task', async () => {
    const rt = await createTarget();
    const a = await invoke(rt.id, { subject: { type: 'collection', id: col } });
    await t.request('PATCH', `/api/v1/remote-targets/${rt.id}`, { body: { enabled: false } });
    expect((await run(a)).details.error!.reason).toBe('target_disabled');
    const rt2 = await createTarget();
    const b = await invoke(rt2.id, { subject: { type: 'collection', id: col } });
    expect((await t.request('DELETE', `/api/v1/remote-targets/${rt2.id}`)).status).toBe(204);
    const task = await run(b);
    expect(task.status).toBe('failed');
    expect(task.details.error!.reason).toBe('target_not_found');
    expect(seen).toHaveLength(0);
  });

  it('a revoked grant after the invoke fails the task (permission re-check)', async () => {
    const h = await createHuman(t);
    const g = await createGroup(t);
    await addMember(t, g.id, h.id);
    await t.request('POST', `/api/v1/collections/${col}/permissions/group/${g.id}`, { body: ['ExecuteRemoteTarget', 'ReadCollection'] });
    const rt = await createTarget();
    const taskId = await invoke(rt.id, { subject: { type: 'collection', id: col } }, t, h.token);
    const revoke = await t.request('DELETE', `/api/v1/collections/${col}/permissions/group/${g.id}/ExecuteRemoteTarget`);
    expect([200, 204], revoke.text).toContain(revoke.status);
    const task = await run(taskId);
    expect(task.status).toBe('failed');
    expect(task.details.error!.reason).toBe('permission_denied');
    expect(seen).toHaveLength(0);
  });

  it('the token scope snapshot is intersected with live grants (and fails closed)', async () => {
    const h = await createHuman(t);
    const g = await createGroup(t);
    await addMember(t, g.id, h.id);
    await t.request('POST', `/api/v1/collections/${col}/permissions/group/${g.id}`, { body: ['ExecuteRemoteTarget', 'ReadCollection'] });
    const rt = await createTarget();
    const token = await tokenFor(t, h.id, { resources: [{ kind: 'collection', id: col }] });
    const ok = await invoke(rt.id, { subject: { type: 'collection', id: col } }, t, token);
    expect((await run(ok)).status).toBe('succeeded');

    // a snapshot that does not cover ExecuteRemoteTarget denies, even though the grants do
    const narrowed = await invoke(rt.id, { subject: { type: 'collection', id: col } }, t, token);
    await t.deps.sql`update tasks set token_scope = ${t.deps.sql.json({ permissions: ['ReadCollection'] })} where id = ${narrowed}`;
    expect((await run(narrowed)).details.error!.reason).toBe('permission_denied');

    // a scoped flag without a snapshot denies everything
    const broken = await invoke(rt.id, { subject: { type: 'collection', id: col } }, t, token);
    await t.deps.sql`update tasks set token_scope = null where id = ${broken}`;
    expect((await run(broken)).details.error!.reason).toBe('permission_denied');
    expect(seen).toHaveLength(1);
  });

  it('a task of a service account disabled before dispatch is not executed (failed, details say why)', async () => {
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    await addMember(t, g.id, sa.id);
    await t.request('POST', `/api/v1/collections/${col}/permissions/group/${g.id}`, { body: ['ExecuteRemoteTarget', 'ReadCollection'] });
    const token = await tokenFor(t, sa.id);
    const rt = await createTarget();
    const taskId = await invoke(rt.id, { subject: { type: 'collection', id: col } }, t, token);
    // disabled between the enqueue and the claim, after the disable endpoint's own sweep of queued tasks
    await t.deps.sql`update service_accounts set disabled_at = now() where principal_id = ${sa.id}`;
    const task = await run(taskId);
    expect(task.status).toBe('failed');
    expect(task.details).toMatchObject({ reason: 'submitter_disabled' });
    expect(seen).toHaveLength(0);
    const te = await t.request('GET', `/api/v1/tasks/${taskId}/events`);
    expect((te.body as { event_type: string }[]).map((e) => e.event_type)).toEqual(['queued', 'failed']);
  });

  it('a cancel requested before the claim cancels the task; a cancelled queued task is never claimed', async () => {
    const rt = await createTarget();
    const a = await invoke(rt.id, { subject: { type: 'collection', id: col } });
    await t.deps.sql`update tasks set cancel_requested = true where id = ${a}`;
    expect((await run(a)).status).toBe('cancelled');
    const b = await invoke(rt.id, { subject: { type: 'collection', id: col } });
    const cancel = await t.request('POST', `/api/v1/tasks/${b}/cancel`);
    expect(cancel.status, cancel.text).toBeLessThan(300);
    expect(await runTaskOnce(t.deps, { taskIds: [b] })).toBeNull();
    expect(seen).toHaveLength(0);
  });
});
