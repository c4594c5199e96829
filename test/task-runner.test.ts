// The task runner: claims, fencing, recovery, cancel checkpoints, failures, LISTEN wake-ups,
// concurrency and bounded shutdown. A test executor is registered for the `restore` kind in this
// process only; every claim here is narrowed to this file's own tasks or submitter, because other
// test files share the database.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.ts';
import { createHuman, type Human } from './iam-fixtures.ts';
import { withTx } from '../src/db/tx.ts';
import { insertTask } from '../src/db/tasks.ts';
import {
  registerTaskExecutor,
  runTaskOnce,
  runTaskWorkers,
  type RunnerStats,
  type TaskOutcome,
  type TaskRunContext,
} from '../src/workers/tasks.ts';

type Behaviour = (ctx: TaskRunContext) => Promise<TaskOutcome>;
const behaviours = new Map<number, Behaviour>();
const calls = new Map<number, number>();

registerTaskExecutor('restore', async (ctx) => {
  calls.set(ctx.task.id, (calls.get(ctx.task.id) ?? 0) + 1);
  const b = behaviours.get(ctx.task.id);
  if (!b) return { status: 'succeeded', summary: { ok: true } };
  return b(ctx);
});

let t: TestApp;
let submitter: Human;

beforeAll(async () => {
  t = await startTestApp({ SVC_TASK_WORKERS: 2, SVC_TASK_POLL_INTERVAL_MS: 60_000 });
  submitter = await createHuman(t);
});

afterAll(async () => {
  await t.close();
});

async function queue(behaviour?: Behaviour, who: Human = submitter): Promise<number> {
  const { task } = await withTx(t.deps.sql, (tx) =>
    insertTask(
      tx,
      { kind: 'user', principalId: who.id, principalName: who.name },
      { kind: 'restore', auth: { principal: { id: who.id }, token: { id: null, scope: null } }, request: { n: Math.random() } },
    ),
  );
  if (behaviour) behaviours.set(task.id, behaviour);
  return task.id;
}

async function taskRow(id: number) {
  const [row] = await t.deps.sql<
    {
      status: string;
      details: Record<string, unknown> | null;
      summary: unknown;
      claim_token: string | null;
      locked_until: Date | null;
      attempts: number;
      started_at: Date | null;
      finished_at: Date | null;
    }[]
  >`select status, details, summary, claim_token, locked_until, attempts, started_at, finished_at from tasks where id = ${id}`;
  return row!;
}

async function taskEvents(id: number) {
  return (await t.deps.sql<{ event_type: string }[]>`select event_type from task_events where task_id = ${id} order by id`).map(
    (r) => r.event_type,
  );
}

async function auditEvents(id: number) {
  return t.deps.sql<
    { action: string; actor_kind: string; initiator_user_id: number | null; task_id: number | null; metadata: Record<string, unknown> }[]
  >`
    select action, actor_kind, initiator_user_id, task_id, metadata from events where entity_type = 'task' and entity_id = ${id} order by id`;
}

async function until<T>(f: () => Promise<T>, ok: (v: T) => boolean, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('runTaskOnce', () => {
  it('claims, runs and finalizes with task events and worker audit events on behalf of the submitter', async () => {
    const id = await queue(async (ctx) => {
      const row = await taskRow(ctx.task.id);
      expect(row.status).toBe('running');
      expect(row.claim_token).toBeTruthy();
      expect(row.locked_until!.getTime()).toBeGreaterThan(Date.now());
      expect(ctx.actor).toMatchObject({ kind: 'worker', initiatorId: submitter.id, taskId: ctx.task.id });
      expect(ctx.authority).toEqual({ principal: { id: submitter.id }, isAdmin: false, token: { scope: null } });
      await ctx.event('step', 'half way', { n: 1 });
      return { status: 'succeeded', summary: { done: 1 }, progress: { total_items: 2, processed_items: 2, success_items: 2 } };
    });
    const done = await runTaskOnce(t.deps, { taskIds: [id] });
    expect(done).toMatchObject({ id, status: 'succeeded' });
    const row = await taskRow(id);
    expect(row).toMatchObject({ status: 'succeeded', summary: { done: 1 }, claim_token: null, locked_until: null, attempts: 1 });
    expect(row.started_at).not.toBeNull();
    expect(row.finished_at).not.toBeNull();
    expect(await taskEvents(id)).toEqual(['queued', 'running', 'step', 'succeeded']);
    const audit = await auditEvents(id);
    expect(audit.map((e) => [e.action, e.actor_kind])).toEqual([
      ['queued', 'user'],
      ['running', 'worker'],
      ['succeeded', 'worker'],
    ]);
    for (const e of audit.slice(1)) {
      expect(e.initiator_user_id).toBe(submitter.id);
      expect(e.task_id).toBe(id);
      expect(e.metadata.task_kind).toBe('restore');
    }
    const res = await t.request('GET', `/api/v1/tasks/${id}`);
    expect(res.body).toMatchObject({
      status: 'succeeded',
      progress: { total_items: 2, processed_items: 2, success_items: 2, failed_items: 0 },
    });
  });

  it('returns null when nothing matching is queued', async () => {
    expect(await runTaskOnce(t.deps, { taskIds: [2_000_000_000] })).toBeNull();
  });

  it('two workers racing for one task: exactly one runs it (skip locked)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const id = await queue(async () => {
      await gate;
      return { status: 'succeeded' };
    });
    const a = runTaskOnce(t.deps, { taskIds: [id] });
    const b = runTaskOnce(t.deps, { taskIds: [id] });
    await until(
      () => Promise.resolve(calls.get(id) ?? 0),
      (n) => n > 0,
    );
    release();
    const results = await Promise.all([a, b]);
    expect(results.filter((r) => r !== null)).toHaveLength(1);
    expect(calls.get(id)).toBe(1);
  });

  it('a worker whose claim was taken over writes nothing (fenced by the claim token)', async () => {
    const id = await queue(async (ctx) => {
      await t.deps.sql`update tasks set claim_token = gen_random_uuid() where id = ${ctx.task.id}`;
      return { status: 'succeeded' };
    });
    expect(await runTaskOnce(t.deps, { taskIds: [id] })).toBeNull();
    const row = await taskRow(id);
    expect(row.status).toBe('running');
    expect(await taskEvents(id)).toEqual(['queued', 'running']);
    await t.deps.sql`update tasks set status = 'failed', claim_token = null, locked_until = null, finished_at = now() where id = ${id}`;
  });

  it('a checkpoint after a lost claim stops the executor', async () => {
    const id = await queue(async (ctx) => {
      await t.deps.sql`update tasks set claim_token = gen_random_uuid() where id = ${ctx.task.id}`;
      await ctx.checkpoint();
      throw new Error('not reached');
    });
    expect(await runTaskOnce(t.deps, { taskIds: [id] })).toBeNull();
    await t.deps.sql`update tasks set status = 'failed', claim_token = null, locked_until = null, finished_at = now() where id = ${id}`;
  });

  it('a running task whose lease expired is recovered as failed (worker_lost), not run twice', async () => {
    const id = await queue();
    await t.deps.sql`
      update tasks set status = 'running', claim_token = gen_random_uuid(), locked_until = now() - interval '1 second', started_at = now()
      where id = ${id}`;
    await runTaskOnce(t.deps, { taskIds: [2_000_000_000] });
    const row = await until(
      () => taskRow(id),
      (r) => r.status !== 'running',
    );
    expect(row.status).toBe('failed');
    expect(row.details).toMatchObject({ reason: 'worker_lost' });
    expect(calls.get(id)).toBeUndefined();
    expect((await auditEvents(id)).map((e) => [e.action, e.actor_kind]).at(-1)).toEqual(['failed', 'worker']);
  });

  it('cancel: the API raises the request while running; the next checkpoint stops the task as cancelled', async () => {
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    let proceed!: () => void;
    const gate = new Promise<void>((r) => (proceed = r));
    const id = await queue(async (ctx) => {
      started();
      await gate;
      await ctx.checkpoint();
      return { status: 'succeeded' };
    });
    const run = runTaskOnce(t.deps, { taskIds: [id] });
    await running;
    const cancel = await t.request('POST', `/api/v1/tasks/${id}/cancel`, { token: submitter.token });
    expect(cancel.status, cancel.text).toBeLessThan(300);
    proceed();
    expect(await run).toMatchObject({ id, status: 'cancelled' });
    expect(await taskEvents(id)).toContain('cancelled');
    expect((await auditEvents(id)).at(-1)).toMatchObject({ action: 'cancelled', actor_kind: 'worker' });
  });

  it('an executor that throws fails the task with a generic reason', async () => {
    const id = await queue(async () => {
      throw new Error('secret internals /etc/passwd');
    });
    expect(await runTaskOnce(t.deps, { taskIds: [id] })).toMatchObject({ status: 'failed' });
    const row = await taskRow(id);
    expect(row.details).toEqual({ reason: 'internal_error', message: 'the task failed with an internal error' });
  });

  it('finalize runs in the finalizing transaction only while the claim holds', async () => {
    const id = await queue(async () => ({
      status: 'failed',
      details: { reason: 'custom' },
      finalize: async (tx) => {
        await tx`insert into task_events (task_id, event_type, message) values (${id}, 'custom.finalize', 'in the same transaction')`;
      },
    }));
    expect(await runTaskOnce(t.deps, { taskIds: [id] })).toMatchObject({ status: 'failed' });
    expect(await taskEvents(id)).toEqual(['queued', 'running', 'custom.finalize', 'failed']);
  });

  it('a task submitted by a principal that no longer exists is not executed', async () => {
    const gone = await createHuman(t);
    const id = await queue(undefined, gone);
    expect((await t.request('DELETE', `/api/v1/iam/users/${gone.id}`)).status).toBe(204);
    expect(await runTaskOnce(t.deps, { taskIds: [id] })).toMatchObject({ status: 'failed' });
    expect((await taskRow(id)).details).toMatchObject({ reason: 'submitter_missing' });
    expect(calls.get(id)).toBeUndefined();
  });
});

describe('runTaskWorkers', () => {
  it('wakes on NOTIFY (poll interval 60 s), runs SVC_TASK_WORKERS tasks at once, and stops when asked', async () => {
    const who = await createHuman(t);
    const ctl = new AbortController();
    const stats: RunnerStats = { notifications: 0, polls: 0, executed: 0 };
    const runner = runTaskWorkers(t.deps, ctl.signal, stats, { submittedBy: [who.id] });
    await new Promise((r) => setTimeout(r, 500)); // LISTEN established, first polls done

    let inFlight = 0;
    let peak = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const blocking: Behaviour = async () => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await gate;
      inFlight--;
      return { status: 'succeeded' };
    };
    const started = Date.now();
    const a = await queue(blocking, who);
    const b = await queue(blocking, who);
    await until(
      () => Promise.resolve(peak),
      (p) => p >= 2,
    );
    expect(peak).toBe(2);
    release();
    const rows = await until(
      () => Promise.all([taskRow(a), taskRow(b)]),
      (r) => r.every((x) => x.status === 'succeeded'),
    );
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(stats.notifications).toBeGreaterThan(0);

    const stopAt = Date.now();
    ctl.abort();
    await runner;
    expect(Date.now() - stopAt).toBeLessThan(2000);
  });

  it('shutdown is bounded: a running executor is aborted after the grace period and the task fails', async () => {
    const who = await createHuman(t);
    const ctl = new AbortController();
    const runner = runTaskWorkers(t.deps, ctl.signal, undefined, { submittedBy: [who.id], graceMs: 200 });
    let sawAbort = false;
    const id = await queue(
      (ctx) =>
        new Promise((_, fail) => {
          ctx.signal.addEventListener('abort', () => {
            sawAbort = true;
            fail(new Error('aborted'));
          });
        }),
      who,
    );
    await until(
      () => taskRow(id),
      (r) => r.status === 'running',
    );
    const stopAt = Date.now();
    ctl.abort();
    await runner;
    expect(Date.now() - stopAt).toBeLessThan(3000);
    expect(sawAbort).toBe(true);
    const row = await taskRow(id);
    expect(row.status).toBe('failed');
    expect(row.details).toMatchObject({ reason: 'worker_stopped' });
  });

  it('SVC_TASK_WORKERS=0 runs nothing and returns on stop', async () => {
    const none = await startTestApp({ SVC_TASK_WORKERS: 0 });
    try {
      const who = await createHuman(t);
      const id = await queue(undefined, who);
      const ctl = new AbortController();
      const runner = runTaskWorkers(none.deps, ctl.signal, undefined, { submittedBy: [who.id] });
      await new Promise((r) => setTimeout(r, 300));
      expect((await taskRow(id)).status).toBe('queued');
      ctl.abort();
      await runner;
      await t.deps.sql`update tasks set status = 'cancelled', finished_at = now() where id = ${id}`;
    } finally {
      await none.close();
    }
  });
});
