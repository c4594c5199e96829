// Task reads and cancel, and the insertTask / toTaskWire helpers task producers reuse. Tasks are
// created with insertTask (the producers' write path); later statuses are set on the fixture rows
// the way a worker would.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { ApiError } from '../src/domain/errors.ts';
import { withTx } from '../src/db/tx.ts';
import type { Actor } from '../src/domain/actor.ts';
import { insertTask, insertTaskEvent, type NewTask } from '../src/db/tasks.ts';
import { toTaskWire, type TaskRow } from '../src/domain/views/tasks.ts';
import { insertToken, type TokenScopeValue } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import { cancelOutcome, parseIdempotencyKey, submissionHash, taskLinks } from '../src/domain/tasks.ts';
import { canonicalJson } from '../src/domain/canonical-json.ts';
import type { TaskKind, TaskStatus } from '../src/domain/tasks.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

interface Task {
  id: number;
  kind: string;
  status: string;
  submitted_by: number;
  cancel_requested: boolean;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  progress: Record<string, number>;
  summary: unknown;
  details: unknown;
  links: Record<string, string | null>;
}

// ---- fixtures -------------------------------------------------------------------------------

interface Principal {
  id: number;
  name: string;
  token: string;
  tokenId: number;
}

async function tokenFor(principalId: number, scope: TokenScopeValue | null = null): Promise<{ raw: string; id: number }> {
  const raw = newRawToken();
  const row = await insertToken(t.deps.sql, {
    principalId,
    hash: hashToken(t.deps.tokenKey, raw),
    expiresAt: new Date(Date.now() + 3600_000),
    scope,
  });
  return { raw, id: row.id };
}

async function principal(kind: 'human' | 'service_account' = 'human'): Promise<Principal> {
  const name = uniq('task-p');
  const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values (${kind}, ${name}) returning id`;
  if (kind === 'human') await t.deps.sql`insert into users (principal_id) values (${p!.id})`;
  const tok = await tokenFor(p!.id);
  return { id: p!.id, name, token: tok.raw, tokenId: tok.id };
}

async function admin(): Promise<Principal> {
  const a = await principal();
  const [g] = await t.deps.sql<{ id: number }[]>`select id from groups where name = 'admins' and identity_scope = 'local'`;
  await t.deps.sql`insert into group_members (group_id, principal_id) values (${g!.id}, ${a.id})`;
  return a;
}

function actor(p: Principal): Actor {
  return { kind: 'user', principalId: p.id, principalName: p.name };
}

async function submit(p: Principal, kind: TaskKind = 'export', extra: Partial<NewTask> = {}): Promise<TaskRow> {
  const { task } = await withTx(t.deps.sql, (tx) =>
    insertTask(tx, actor(p), {
      kind,
      auth: { principal: { id: p.id }, token: { id: p.tokenId, scope: null } },
      request: { n: uniq() },
      ...extra,
    }),
  );
  return task;
}

/** Moves a task the way a worker does (fixture). */
async function setStatus(id: number, status: TaskStatus): Promise<void> {
  const finished = ['succeeded', 'failed', 'partially_succeeded', 'cancelled'].includes(status);
  await t.deps.sql`
    update tasks set status = ${status}, started_at = coalesce(started_at, now()),
      finished_at = case when ${finished}::boolean then now() end
    where id = ${id}`;
}

async function auditEvents(taskId: number) {
  return t.deps.sql<{ action: string; actor_user_id: number | null; metadata: Record<string, unknown>; before: unknown; after: unknown }[]>`
    select action, actor_user_id, metadata, before, after from events where entity_type = 'task' and entity_id = ${taskId} order by id`;
}

// ---- pure rules -----------------------------------------------------------------------------

describe('task rules (src/domain/tasks.ts)', () => {
  it('parseIdempotencyKey accepts 1..255 bytes and rejects empty or longer keys with 400', () => {
    expect(parseIdempotencyKey(undefined)).toBeNull();
    expect(parseIdempotencyKey('k')).toBe('k');
    expect(parseIdempotencyKey('a'.repeat(255))).toBe('a'.repeat(255));
    expect(parseIdempotencyKey('é'.repeat(127) + 'a')).toHaveLength(128); // 255 bytes
    for (const bad of ['', 'a'.repeat(256), 'é'.repeat(128)]) {
      let err: unknown;
      try {
        parseIdempotencyKey(bad);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(400);
    }
  });

  it('submissionHash ignores key order but not values or kind', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"x":1,"y":2}]},"b":1}');
    expect(submissionHash('export', { a: 1, b: 2 })).toBe(submissionHash('export', { b: 2, a: 1 }));
    expect(submissionHash('export', { a: 1 })).not.toBe(submissionHash('export', { a: 2 }));
    expect(submissionHash('export', { a: 1 })).not.toBe(submissionHash('import', { a: 1 }));
  });

  it('cancelOutcome covers every status', () => {
    expect(cancelOutcome('queued', false)).toBe('cancel_now');
    expect(cancelOutcome('validating', false)).toBe('request_cancel');
    expect(cancelOutcome('running', false)).toBe('request_cancel');
    expect(cancelOutcome('running', true)).toBe('noop');
    expect(cancelOutcome('cancelled', true)).toBe('noop');
    expect(cancelOutcome('succeeded', false)).toBe('finished');
    expect(cancelOutcome('failed', false)).toBe('finished');
    expect(cancelOutcome('partially_succeeded', false)).toBe('finished');
  });

  it('taskLinks give paths for the task kind and null otherwise', () => {
    expect(taskLinks(7, 'import')).toEqual({
      task: '/api/v1/tasks/7',
      events: '/api/v1/tasks/7/events',
      import: '/api/v1/imports/7',
      import_results: '/api/v1/imports/7/results',
      export: null,
      export_output: null,
    });
    expect(taskLinks(8, 'export')).toMatchObject({ import: null, export: '/api/v1/exports/8', export_output: '/api/v1/exports/8/output' });
    expect(taskLinks(9, 'backup')).toMatchObject({ import: null, import_results: null, export: null, export_output: null });
  });
});

// ---- insertTask -----------------------------------------------------------------------------

describe('insertTask', () => {
  it('insertTask creates a queued task with its scope snapshot, a task event and a task.queued audit event', async () => {
    const p = await principal();
    const scope = { resources: [{ kind: 'collection', id: 1 }] };
    const { task, created } = await withTx(t.deps.sql, (tx) =>
      insertTask(tx, actor(p), {
        kind: 'remote_call',
        auth: { principal: { id: p.id }, token: { id: p.tokenId, scope } },
        request: { target_id: 3 },
      }),
    );
    expect(created).toBe(true);
    expect(toTaskWire(task)).toMatchObject({
      kind: 'remote_call',
      status: 'queued',
      submitted_by: p.id,
      cancel_requested: false,
      progress: { total_items: 0, processed_items: 0, success_items: 0, failed_items: 0 },
      summary: null,
      details: null,
      started_at: null,
      finished_at: null,
    });
    const [row] = await t.deps.sql<{ submitted_token_id: number; token_scope: unknown; token_scoped: boolean; request: unknown }[]>`
      select submitted_token_id, token_scope, token_scoped, request from tasks where id = ${task.id}`;
    expect(row).toEqual({ submitted_token_id: p.tokenId, token_scope: scope, token_scoped: true, request: { target_id: 3 } });
    const te = await t.deps.sql`select event_type from task_events where task_id = ${task.id}`;
    expect(te.map((r) => r.event_type)).toEqual(['queued']);
    const ev = await auditEvents(task.id);
    expect(ev).toHaveLength(1);
    expect(ev[0]).toMatchObject({ action: 'queued', actor_user_id: p.id, metadata: { task_kind: 'remote_call' } });
  });

  it('insertTask with the same Idempotency-Key and submission returns the same task without a new row or event', async () => {
    const p = await principal();
    const key = uniq('key');
    const req = { scope: { kind: 'collections' }, limits: { max_items: 5 } };
    const first = await submit(p, 'export', { idempotencyKey: key, request: req });
    const again = await withTx(t.deps.sql, (tx) =>
      insertTask(tx, actor(p), {
        kind: 'export',
        auth: { principal: { id: p.id }, token: { id: p.tokenId, scope: null } },
        request: { limits: { max_items: 5 }, scope: { kind: 'collections' } },
        idempotencyKey: key,
      }),
    );
    expect(again.created).toBe(false);
    expect(again.task.id).toBe(first.id);
    expect(toTaskWire(again.task)).toEqual(toTaskWire(first));
    expect(await auditEvents(first.id)).toHaveLength(1);
    // the key is per submitter: another principal's same key makes its own task
    const other = await principal();
    const theirs = await submit(other, 'export', { idempotencyKey: key, request: req });
    expect(theirs.id).not.toBe(first.id);
  });

  it('insertTask 409 for the same Idempotency-Key with a different submission or kind; 400 for a bad key', async () => {
    const p = await principal();
    const key = uniq('key');
    await submit(p, 'export', { idempotencyKey: key, request: { a: 1 } });
    const attempt = (kind: TaskKind, request: Record<string, unknown>, idempotencyKey: string) =>
      withTx(t.deps.sql, (tx) =>
        insertTask(tx, actor(p), {
          kind,
          auth: { principal: { id: p.id }, token: { id: p.tokenId, scope: null } },
          request,
          idempotencyKey,
        }),
      );
    await expect(attempt('export', { a: 2 }, key)).rejects.toMatchObject({ status: 409 });
    await expect(attempt('import', { a: 1 }, key)).rejects.toMatchObject({ status: 409 });
    await expect(attempt('export', { a: 1 }, '')).rejects.toMatchObject({ status: 400 });
    await expect(attempt('export', { a: 1 }, 'x'.repeat(256))).rejects.toMatchObject({ status: 400 });
    const [n] = await t.deps.sql<{ n: number }[]>`select count(*)::int as n from tasks where submitted_by = ${p.id}`;
    expect(n!.n).toBe(1);
  });

  it('insertTask yields one task for concurrent submissions with the same key', async () => {
    const p = await principal();
    const key = uniq('key');
    const results = await Promise.all(
      Array.from({ length: 5 }, () => submit(p, 'backup', { idempotencyKey: key, request: { include_history: true } })),
    );
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
    const [n] = await t.deps.sql<{ n: number }[]>`select count(*)::int as n from tasks where submitted_by = ${p.id}`;
    expect(n!.n).toBe(1);
  });

  it('insertTask without a key creates a new task each time', async () => {
    const p = await principal();
    const a = await submit(p, 'export', { request: { same: true } });
    const b = await submit(p, 'export', { request: { same: true } });
    expect(a.id).not.toBe(b.id);
  });
});

// ---- listTasks ------------------------------------------------------------------------------

describe('listTasks', () => {
  it('listTasks 200 lists only the caller own tasks (any token), with paging headers', async () => {
    const p = await principal();
    const other = await principal();
    const mine = [await submit(p, 'export'), await submit(p, 'import')];
    await submit(other, 'export');
    const res = await t.request('GET', '/api/v1/tasks', { token: p.token });
    expect(res.status).toBe(200);
    expect((res.body as Task[]).map((x) => x.id)).toEqual(mine.map((m) => m.id));
    expect(res.headers.get('x-total-count')).toBe('2');
    expect(res.headers.get('x-page-limit')).toBe('100');
    expect((res.body as Task[])[1]!.links).toMatchObject({ import: `/api/v1/imports/${mine[1]!.id}`, export: null });
    const scoped = await tokenFor(p.id, { permissions: ['ReadCollection'] });
    const viaScoped = await t.request('GET', '/api/v1/tasks', { token: scoped.raw });
    expect((viaScoped.body as Task[]).map((x) => x.id)).toEqual(mine.map((m) => m.id));
    // another principal's id as a filter gives an empty page to a non-admin
    const peek = await t.request('GET', '/api/v1/tasks', { token: p.token, query: { submitted_by: other.id } });
    expect(peek.body).toEqual([]);
    expect(peek.headers.get('x-total-count')).toBe('0');
  });

  it('listTasks 200 shows every task to an unscoped admin, and only its own to a scoped admin token', async () => {
    const p = await principal();
    const a = await admin();
    const task = await submit(p, 'remote_call');
    const res = await t.request('GET', '/api/v1/tasks', { token: a.token, query: { submitted_by: p.id } });
    expect((res.body as Task[]).map((x) => x.id)).toEqual([task.id]);
    const scoped = await tokenFor(a.id, { permissions: ['ReadCollection'] });
    const res2 = await t.request('GET', '/api/v1/tasks', { token: scoped.raw, query: { submitted_by: p.id } });
    expect(res2.body).toEqual([]);
  });

  it('listTasks 200 filters by kind, status and timestamps, sorts by started_at and finished_at, and pages', async () => {
    const p = await principal();
    const t1 = await submit(p, 'export');
    const t2 = await submit(p, 'import');
    const t3 = await submit(p, 'export');
    await setStatus(t3.id, 'running');
    await setStatus(t1.id, 'running');
    await setStatus(t1.id, 'succeeded');
    const ids = async (query: Record<string, string | number>) =>
      ((await t.request('GET', '/api/v1/tasks', { token: p.token, query })).body as Task[]).map((x) => x.id);
    expect(await ids({ kind: 'export' })).toEqual([t1.id, t3.id]);
    expect(await ids({ status: 'queued' })).toEqual([t2.id]);
    expect(await ids({ status__in: 'running,succeeded' })).toEqual([t1.id, t3.id]);
    expect(await ids({ started_at__is_null: 'true' })).toEqual([t2.id]);
    expect(await ids({ finished_at__is_null: 'false' })).toEqual([t1.id]);
    expect(await ids({ sort: '-id' })).toEqual([t3.id, t2.id, t1.id]);
    expect(await ids({ sort: 'started_at' })).toEqual([t3.id, t1.id, t2.id]); // nulls last ascending
    expect(await ids({ sort: '-finished_at' })).toEqual([t3.id, t2.id, t1.id]); // nulls first descending
    expect(await ids({ created_at__gte: '2000-01-01', id__gt: t1.id })).toEqual([t2.id, t3.id]);
    const page1 = await t.request('GET', '/api/v1/tasks', { token: p.token, query: { limit: 2 } });
    expect((page1.body as Task[]).map((x) => x.id)).toEqual([t1.id, t2.id]);
    const cursor = page1.headers.get('x-next-cursor')!;
    const page2 = await t.request('GET', '/api/v1/tasks', { token: p.token, query: { limit: 2, cursor } });
    expect((page2.body as Task[]).map((x) => x.id)).toEqual([t3.id]);
    expect(page2.headers.get('x-next-cursor')).toBeNull();
    const done = (page1.body as Task[])[0]!;
    expect(done.status).toBe('succeeded');
    expect(done.started_at).not.toBeNull();
    expect(done.finished_at).not.toBeNull();
  });

  it('listTasks 400 for unknown fields, values, sorts and limits', async () => {
    const p = await principal();
    const bad: Record<string, string | number>[] = [
      { status: 'sleeping' },
      { kind: 'nap' },
      { nonsense: '1' },
      { sort: 'kind' },
      { limit: 0 },
      { cursor: '!!' },
      { submitted_by: 'me' },
    ];
    for (const query of bad) {
      const res = await t.request('GET', '/api/v1/tasks', { token: p.token, query });
      expect(res.status, JSON.stringify(query)).toBe(400);
    }
  });

  it('listTasks 401 without a token', async () => {
    expect((await t.request('GET', '/api/v1/tasks', { token: null })).status).toBe(401);
  });
});

// ---- getTask --------------------------------------------------------------------------------

describe('getTask', () => {
  it('getTask 200 for the submitter and for an unscoped admin', async () => {
    const p = await principal();
    const task = await submit(p, 'export');
    const res = await t.request('GET', `/api/v1/tasks/${task.id}`, { token: p.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: task.id,
      kind: 'export',
      status: 'queued',
      submitted_by: p.id,
      cancel_requested: false,
      links: {
        task: `/api/v1/tasks/${task.id}`,
        events: `/api/v1/tasks/${task.id}/events`,
        import: null,
        import_results: null,
        export: `/api/v1/exports/${task.id}`,
        export_output: `/api/v1/exports/${task.id}/output`,
      },
    });
    expect(res.headers.get('etag')).toBeNull();
    const a = await admin();
    expect((await t.request('GET', `/api/v1/tasks/${task.id}`, { token: a.token })).status).toBe(200);
    const sa = await principal('service_account');
    const saTask = await submit(sa, 'remote_call');
    expect((await t.request('GET', `/api/v1/tasks/${saTask.id}`, { token: sa.token })).status).toBe(200);
  });

  it('getTask 404 for another principal, a scoped admin token or a missing task; 400 for a bad id; 401', async () => {
    const p = await principal();
    const task = await submit(p);
    const other = await principal();
    const res = await t.request('GET', `/api/v1/tasks/${task.id}`, { token: other.token });
    expect(res.status).toBe(404);
    const a = await admin();
    const scoped = await tokenFor(a.id, { resources: [{ kind: 'collection', id: 1 }] });
    expect((await t.request('GET', `/api/v1/tasks/${task.id}`, { token: scoped.raw })).status).toBe(404);
    expect((await t.request('GET', '/api/v1/tasks/999999999', { token: p.token })).status).toBe(404);
    expect((await t.request('GET', '/api/v1/tasks/zero', { token: p.token })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/tasks/${task.id}`, { token: null })).status).toBe(401);
  });
});

// ---- listTaskEvents -------------------------------------------------------------------------

describe('listTaskEvents', () => {
  it('listTaskEvents 200 returns the task history oldest first, paged and sortable', async () => {
    const p = await principal();
    const task = await submit(p, 'import');
    await insertTaskEvent(t.deps.sql, task.id, 'running', 'started');
    await insertTaskEvent(t.deps.sql, task.id, 'progress', 'half way', { processed_items: 5 });
    const res = await t.request('GET', `/api/v1/tasks/${task.id}/events`, { token: p.token });
    expect(res.status).toBe(200);
    const body = res.body as { task_id: number; event_type: string; message: string; data: unknown }[];
    expect(body.map((e) => e.event_type)).toEqual(['queued', 'running', 'progress']);
    expect(body[2]).toMatchObject({ task_id: task.id, message: 'half way', data: { processed_items: 5 } });
    expect(body[0]!.data).toBeNull();
    expect(res.headers.get('x-total-count')).toBe('3');
    const desc = await t.request('GET', `/api/v1/tasks/${task.id}/events`, { token: p.token, query: { sort: '-created_at', limit: 1 } });
    expect((desc.body as { event_type: string }[]).map((e) => e.event_type)).toEqual(['progress']);
    const next = await t.request('GET', `/api/v1/tasks/${task.id}/events`, {
      token: p.token,
      query: { sort: '-created_at', limit: 1, cursor: desc.headers.get('x-next-cursor')! },
    });
    expect((next.body as { event_type: string }[]).map((e) => e.event_type)).toEqual(['running']);
    const a = await admin();
    expect((await t.request('GET', `/api/v1/tasks/${task.id}/events`, { token: a.token })).status).toBe(200);
  });

  it('listTaskEvents 404 for another principal or a missing task, 400 for a bad sort, 401', async () => {
    const p = await principal();
    const task = await submit(p);
    const other = await principal();
    expect((await t.request('GET', `/api/v1/tasks/${task.id}/events`, { token: other.token })).status).toBe(404);
    expect((await t.request('GET', '/api/v1/tasks/999999999/events', { token: p.token })).status).toBe(404);
    expect((await t.request('GET', `/api/v1/tasks/${task.id}/events`, { token: p.token, query: { sort: 'message' } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/tasks/${task.id}/events`, { token: p.token, query: { event_type: 'x' } })).status).toBe(400);
    expect((await t.request('GET', `/api/v1/tasks/${task.id}/events`, { token: null })).status).toBe(401);
  });
});

// ---- cancelTask -----------------------------------------------------------------------------

describe('cancelTask', () => {
  it('cancelTask 200 cancels a queued task at once, with a task event and a task.cancelled audit event', async () => {
    const p = await principal();
    const task = await submit(p, 'export');
    const res = await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: p.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: task.id, status: 'cancelled', cancel_requested: true });
    expect((res.body as Task).finished_at).not.toBeNull();
    const ev = await auditEvents(task.id);
    expect(ev.map((e) => e.action)).toEqual(['queued', 'cancelled']);
    expect(ev[1]).toMatchObject({
      actor_user_id: p.id,
      metadata: { task_kind: 'export' },
      before: { status: 'queued' },
      after: { status: 'cancelled' },
    });
    const te = await t.deps.sql`select event_type from task_events where task_id = ${task.id} order by id`;
    expect(te.map((r) => r.event_type)).toEqual(['queued', 'cancelled']);
  });

  it('cancelTask 200 on a running or validating task requests cancellation and keeps the status', async () => {
    const p = await principal();
    for (const status of ['running', 'validating'] as const) {
      const task = await submit(p, 'import');
      await setStatus(task.id, status);
      const res = await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: p.token });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status, cancel_requested: true, finished_at: null });
      expect((await auditEvents(task.id)).map((e) => e.action)).toEqual(['queued', 'cancel_requested']);
      // repeating the request is a no-op
      const again = await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: p.token });
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ status, cancel_requested: true });
      expect(await auditEvents(task.id)).toHaveLength(2);
    }
  });

  it('cancelTask 200 no-op for an already cancelled task', async () => {
    const p = await principal();
    const task = await submit(p);
    expect((await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: p.token })).status).toBe(200);
    const again = await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: p.token });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: 'cancelled' });
    expect((await auditEvents(task.id)).map((e) => e.action)).toEqual(['queued', 'cancelled']);
  });

  it('cancelTask 409 for a finished task', async () => {
    const p = await principal();
    for (const status of ['succeeded', 'failed', 'partially_succeeded'] as const) {
      const task = await submit(p);
      await setStatus(task.id, status);
      const res = await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: p.token });
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ error: 'Conflict', reason: 'task_finished' });
      expect(await auditEvents(task.id)).toHaveLength(1);
    }
  });

  it('cancelTask 200 for an unscoped admin on another principal task; 404 for others and scoped admin tokens', async () => {
    const p = await principal();
    const task = await submit(p);
    const other = await principal();
    expect((await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: other.token })).status).toBe(404);
    const a = await admin();
    const scoped = await tokenFor(a.id, { permissions: ['ReadCollection'] });
    expect((await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: scoped.raw })).status).toBe(404);
    const [row] = await t.deps.sql<{ status: string }[]>`select status from tasks where id = ${task.id}`;
    expect(row!.status).toBe('queued');
    const res = await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: a.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'cancelled', submitted_by: p.id });
    expect((await auditEvents(task.id))[1]).toMatchObject({ actor_user_id: a.id });
  });

  it('cancelTask 200 for the submitter using a scoped token; 404 for a missing task, 400 for a bad id, 401', async () => {
    const p = await principal();
    const task = await submit(p);
    const scoped = await tokenFor(p.id, { permissions: ['ReadCollection'] });
    expect((await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: scoped.raw })).status).toBe(200);
    expect((await t.request('POST', '/api/v1/tasks/999999999/cancel', { token: p.token })).status).toBe(404);
    expect((await t.request('POST', '/api/v1/tasks/abc/cancel', { token: p.token })).status).toBe(400);
    expect((await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: null })).status).toBe(401);
  });

  it('cancelTask: the task audit events are collection-less, so only unscoped admins read them in listEvents', async () => {
    const p = await principal();
    const task = await submit(p);
    await t.request('POST', `/api/v1/tasks/${task.id}/cancel`, { token: p.token });
    const mine = await t.request('GET', '/api/v1/events', { token: p.token, query: { entity_type: 'task', entity_id: task.id } });
    expect(mine.body).toEqual([]);
    const all = await t.request('GET', '/api/v1/events', { query: { entity_type: 'task', entity_id: task.id, sort: 'id' } });
    expect((all.body as { action: string }[]).map((e) => e.action)).toEqual(['queued', 'cancelled']);
  });
});
