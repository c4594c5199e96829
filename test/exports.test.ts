// Exports: submission (createExport, runExportTemplate), the export executor driven with
// runTaskOnce, output reads (getExportOutput) and the export task (getExport).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { tokenFor, grant, userWith } from './iam-fixtures.ts';
import { runTaskOnce, TaskCancelledError, type TaskRunContext } from '../src/workers/tasks.ts';
import { executeExport } from '../src/workers/export.ts';
import { withTx } from '../src/db/tx.ts';
import { insertTask } from '../src/db/tasks.ts';
import type { ClaimedTask } from '../src/db/task-runner.ts';

let t: TestApp;
let col: number;
let hidden: number;
let klass: number;
let otherClass: number;
let hiddenClass: number;
const objs: number[] = [];
let rel: number;

interface TaskWire {
  id: number;
  kind: string;
  status: string;
  summary: Record<string, unknown> | null;
  details: { reason?: string; message?: string } | null;
  progress: Record<string, number>;
  links: Record<string, string | null>;
  submitted_by: number;
  cancel_requested: boolean;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

async function post(path: string, body: unknown, token = t.adminToken, headers: Record<string, string> = {}) {
  return t.request('POST', path, { token, body, headers });
}

async function created(res: { status: number; text: string; body: unknown }): Promise<number> {
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

/** Submits an export and returns the queued task. */
async function submit(body: unknown, token = t.adminToken, headers: Record<string, string> = {}): Promise<TaskWire> {
  const res = await post('/api/v1/exports', body, token, headers);
  expect(res.status, res.text).toBe(202);
  const task = res.body as TaskWire;
  expect(res.headers.get('location')).toBe(`/api/v1/tasks/${task.id}`);
  return task;
}

async function run(taskId: number, token = t.adminToken): Promise<TaskWire> {
  const done = await runTaskOnce(t.deps, { taskIds: [taskId] });
  expect(done?.id).toBe(taskId);
  const res = await t.request('GET', `/api/v1/exports/${taskId}`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body as TaskWire;
}

async function output(taskId: number, token = t.adminToken) {
  return t.request('GET', `/api/v1/exports/${taskId}/output`, { token });
}

interface Envelope {
  items: Record<string, unknown>[];
  meta: { count: number; truncated: boolean };
  warnings: string[];
}

/** Submits, runs and reads the JSON output of an export. */
async function exportJson(body: unknown, token = t.adminToken): Promise<Envelope> {
  const task = await submit(body, token);
  const done = await run(task.id, token);
  expect(done.status, JSON.stringify(done.details)).toBe('succeeded');
  const res = await output(task.id, token);
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json');
  return res.body as Envelope;
}

async function createTemplate(overrides: Record<string, unknown>): Promise<{ id: number; name: string }> {
  const res = await post('/api/v1/export-templates', { collection_id: col, name: uniq('tpl'), ...overrides });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: number; name: string };
}

beforeAll(async () => {
  t = await startTestApp();
  col = await created(await post('/api/v1/collections', { name: uniq('col') }));
  hidden = await created(await post('/api/v1/collections', { name: uniq('hidden') }));
  klass = await created(await post('/api/v1/classes', { name: uniq('host'), collection_id: col }));
  otherClass = await created(await post('/api/v1/classes', { name: uniq('rack'), collection_id: col }));
  hiddenClass = await created(await post('/api/v1/classes', { name: uniq('secret'), collection_id: hidden }));
  for (const [name, cpu] of [
    ['web-1', 4],
    ['web-2', 8],
    ['db-1', 16],
    ['web-3', 2],
    ['cache-1', 1],
  ] as const) {
    objs.push(await created(await post(`/api/v1/classes/${klass}/objects`, { name, json_data: { cpu, role: name.split('-')[0] } })));
  }
  await created(await post(`/api/v1/classes/${hiddenClass}/objects`, { name: 'h-1', json_data: {} }));
  rel = await created(await post('/api/v1/relations/classes', { from_class_id: klass, to_class_id: klass, forward_alias: 'uplink' }));
  await created(await post('/api/v1/relations/objects', { class_relation_id: rel, from_object_id: objs[0], to_object_id: objs[2] }));
  await created(await post('/api/v1/relations/objects', { class_relation_id: rel, from_object_id: objs[2], to_object_id: objs[4] }));
});

afterAll(async () => {
  await t.close();
});

describe('createExport', () => {
  it('202 with a queued export task, its links and a task.queued event on the class collection', async () => {
    const task = await submit({ scope: { kind: 'objects_in_class', class_id: klass } });
    expect(task).toMatchObject({ kind: 'export', status: 'queued' });
    expect(task.links).toMatchObject({ export: `/api/v1/exports/${task.id}`, export_output: `/api/v1/exports/${task.id}/output` });
    const [ev] = await t.deps.sql<{ collection_id: number; metadata: Record<string, unknown>; after: Record<string, unknown> }[]>`
      select collection_id, metadata, after from events where entity_type = 'task' and entity_id = ${task.id} and action = 'queued'`;
    expect(ev).toMatchObject({ collection_id: col, metadata: { scope_kind: 'objects_in_class', task_kind: 'export' } });
    // the snapshot is the task as answered and stored (its id and created_at reserved before the insert)
    const read = await t.request('GET', `/api/v1/tasks/${task.id}`);
    expect(read.body).toEqual(task);
    const { id, kind, status, submitted_by, cancel_requested, created_at, started_at, finished_at, progress } = task;
    expect(ev!.after).toEqual({ id, kind, status, submitted_by, cancel_requested, created_at, started_at, finished_at, progress });
    const history = await t.deps.sql`select event_type, message from task_events where task_id = ${task.id} order by id`;
    expect([...history]).toEqual([{ event_type: 'queued', message: 'export task queued' }]);
  });

  it('Idempotency-Key: the same submission returns the same task, another submission is 409, a bad key 400', async () => {
    const key = uniq('key');
    const body = { scope: { kind: 'collections' }, query: 'name__startswith=col-' };
    const a = await submit(body, t.adminToken, { 'idempotency-key': key });
    const b = await submit(body, t.adminToken, { 'idempotency-key': key });
    expect(b.id).toBe(a.id);
    const other = await post('/api/v1/exports', { ...body, query: 'name=x' }, t.adminToken, { 'idempotency-key': key });
    expect(other.status, other.text).toBe(409);
    const long = await post('/api/v1/exports', body, t.adminToken, { 'idempotency-key': 'k'.repeat(256) });
    expect(long.status).toBe(400);
  });

  it.each([
    ['limit in the query', { scope: { kind: 'collections' }, query: 'limit=5' }],
    ['include_total in the query', { scope: { kind: 'classes' }, query: 'include_total=false' }],
    ['an unknown filter for the scope', { scope: { kind: 'collections' }, query: 'json_data__equals=a=b' }],
    ['an unknown operator', { scope: { kind: 'classes' }, query: 'name__near=x' }],
    ['an unknown sort field', { scope: { kind: 'object_relations' }, query: 'sort=name' }],
    ['a bad depth for related objects', { scope: { kind: 'related_objects', class_id: 1, object_id: 1 }, query: 'depth=11' }],
    ['max_output_bytes above the server maximum', { scope: { kind: 'classes' }, limits: { max_output_bytes: 67108865 } }],
    ['max_items 0', { scope: { kind: 'classes' }, limits: { max_items: 0 } }],
    ['objects_in_class without class_id', { scope: { kind: 'objects_in_class' } }],
    ['an unknown scope kind', { scope: { kind: 'users' } }],
    ['class_id on a collections scope', { scope: { kind: 'collections', class_id: 1 } }],
    ['an unknown member', { scope: { kind: 'classes' }, format: 'xml' }],
  ])('400 for %s', async (_what, body) => {
    const res = await post('/api/v1/exports', body);
    expect(res.status, res.text).toBe(400);
  });

  it('202 for a filter repeated in the query (one more AND condition, as on the list endpoints)', async () => {
    const res = await post('/api/v1/exports', { scope: { kind: 'classes' }, query: 'name__not_equals=a&name__not_equals=b' });
    expect(res.status, res.text).toBe(202);
  });

  it('400 for an unknown object filter (checked against the class at submission)', async () => {
    const res = await post('/api/v1/exports', { scope: { kind: 'objects_in_class', class_id: klass }, query: 'computed.shared.nope=1' });
    expect(res.status, res.text).toBe(400);
  });

  it('404 for a missing class, object or template; 404 when the object is not of the class', async () => {
    expect((await post('/api/v1/exports', { scope: { kind: 'objects_in_class', class_id: 2_000_000_000 } })).status).toBe(404);
    expect((await post('/api/v1/exports', { scope: { kind: 'related_objects', class_id: klass, object_id: 2_000_000_000 } })).status).toBe(
      404,
    );
    expect((await post('/api/v1/exports', { scope: { kind: 'related_objects', class_id: otherClass, object_id: objs[0] } })).status).toBe(
      404,
    );
    expect((await post('/api/v1/exports', { scope: { kind: 'classes' }, template_id: 2_000_000_000 })).status).toBe(404);
  });

  it('403 without ReadClass on the class, ReadObject on the start object or ReadTemplate on the template; 401 without a token', async () => {
    const tpl = await createTemplate({ template: 'x' });
    const u = await userWith(t, [[col, ['ReadCollection']]]);
    expect((await post('/api/v1/exports', { scope: { kind: 'objects_in_class', class_id: klass } }, u.token)).status).toBe(403);
    expect(
      (await post('/api/v1/exports', { scope: { kind: 'related_objects', class_id: klass, object_id: objs[0] } }, u.token)).status,
    ).toBe(403);
    expect((await post('/api/v1/exports', { scope: { kind: 'classes' }, template_id: tpl.id }, u.token)).status).toBe(403);
    const scoped = await tokenFor(t, u.id, { resources: [{ kind: 'class', id: klass }] });
    await grant(t, col, u.groupId, ['ReadTemplate']);
    expect((await post('/api/v1/exports', { scope: { kind: 'classes' }, template_id: tpl.id }, scoped)).status).toBe(403);
    expect((await post('/api/v1/exports', { scope: { kind: 'classes' }, template_id: tpl.id }, u.token)).status).toBe(202);
    expect((await t.request('POST', '/api/v1/exports', { token: null, body: { scope: { kind: 'classes' } } })).status).toBe(401);
  });

  it('400 for running a fragment', async () => {
    const frag = await createTemplate({ kind: 'fragment', template: 'x' });
    const res = await post('/api/v1/exports', { scope: { kind: 'classes' }, template_id: frag.id });
    expect(res.status, res.text).toBe(400);
    expect((await post(`/api/v1/export-templates/${frag.id}/exports`, { scope: { kind: 'classes' } })).status).toBe(400);
  });
});

describe('export executor', () => {
  it('objects_in_class: the rows, order and representation of the object list for the same query', async () => {
    const query = 'json_data__gte=cpu=4&sort=-name';
    const env = await exportJson({ scope: { kind: 'objects_in_class', class_id: klass }, query });
    const list = await t.request('GET', `/api/v1/classes/${klass}/objects`, { query: { json_data__gte: 'cpu=4', sort: '-name' } });
    expect(list.status, list.text).toBe(200);
    expect(env.items).toEqual(list.body);
    expect(env.items.map((i) => i.name)).toEqual(['web-2', 'web-1', 'db-1']);
    expect(env.meta).toEqual({ count: 3, truncated: false });
    expect(env.warnings).toEqual([]);
  });

  it('succeeded task: summary, progress, task events; output headers', async () => {
    const task = await submit({ scope: { kind: 'objects_in_class', class_id: klass } });
    const done = await run(task.id);
    expect(done.status).toBe('succeeded');
    expect(done.progress).toEqual({ total_items: 5, processed_items: 5, success_items: 5, failed_items: 0 });
    expect(done.summary).toMatchObject({
      scope_kind: 'objects_in_class',
      template_id: null,
      count: 5,
      total_matches: 5,
      truncated: false,
      warnings: [],
      content_type: 'application/json',
    });
    const res = await output(task.id);
    expect(res.headers.get('x-svc-export-truncated')).toBe('false');
    expect(res.headers.get('x-svc-export-warnings')).toBe('0');
    expect(Number(done.summary!.output_bytes)).toBe(Buffer.byteLength(res.text));
    const events = await t.request('GET', `/api/v1/tasks/${task.id}/events`);
    expect((events.body as { event_type: string }[]).map((e) => e.event_type)).toEqual(['queued', 'running', 'progress', 'succeeded']);
  });

  it('collections, classes, class and object relations: each as its list shows it to the caller', async () => {
    const colEnv = await exportJson({ scope: { kind: 'collections' }, query: `id=${col},${hidden}` });
    expect(colEnv.items.map((i) => i.id)).toEqual([col, hidden]);
    const classEnv = await exportJson({ scope: { kind: 'classes' }, query: `collection_id=${col}&sort=id` });
    const classList = await t.request('GET', '/api/v1/classes', { query: { collection_id: col, sort: 'id' } });
    expect(classEnv.items).toEqual(classList.body);
    const crEnv = await exportJson({ scope: { kind: 'class_relations' }, query: `id=${rel}` });
    expect(crEnv.items).toEqual([expect.objectContaining({ id: rel, forward_alias: 'uplink' })]);
    const orEnv = await exportJson({ scope: { kind: 'object_relations' }, query: `class_relation_id=${rel}` });
    expect(orEnv.items.map((i) => [i.from_object_id, i.to_object_id])).toEqual([
      [objs[0], objs[2]],
      [objs[2], objs[4]],
    ]);
  });

  it('related_objects: depth, path and class filter as the related-objects list', async () => {
    // objs are all of one class: keep the start object's own class (ignore_self_class is true by default)
    const env = await exportJson({
      scope: { kind: 'related_objects', class_id: klass, object_id: objs[0] },
      query: 'depth=2&ignore_self_class=false',
    });
    expect(env.items.map((i) => [i.id, i.depth, i.path])).toEqual([
      [objs[2], 1, [objs[0], objs[2]]],
      [objs[4], 2, [objs[0], objs[2], objs[4]]],
    ]);
    const list = await t.request('GET', `/api/v1/classes/${klass}/${objs[0]}/related/objects`, {
      query: { depth: 2, ignore_self_class: false },
    });
    expect(env.items).toEqual(list.body);
    const own = await exportJson({ scope: { kind: 'related_objects', class_id: klass, object_id: objs[0] }, query: 'depth=2' });
    expect(own.items).toEqual([]);
    const none = await exportJson({
      scope: { kind: 'related_objects', class_id: klass, object_id: objs[0] },
      query: `class_id=${otherClass}`,
    });
    expect(none.items).toEqual([]);
  });

  it('exports only what the submitter may read, within its token scope (the snapshot taken at submission)', async () => {
    const u = await userWith(t, [[col, ['ReadCollection', 'ReadClass', 'ReadObject']]]);
    const classes = await exportJson({ scope: { kind: 'classes' } }, u.token);
    expect(classes.items.map((i) => i.id).sort()).toEqual([klass, otherClass].sort());
    const scoped = await tokenFor(t, u.id, { resources: [{ kind: 'class', id: klass }] });
    const narrowed = await exportJson({ scope: { kind: 'classes' } }, scoped);
    expect(narrowed.items.map((i) => i.id)).toEqual([klass]);
    const list = await t.request('GET', '/api/v1/classes', { token: scoped });
    expect(narrowed.items).toEqual(list.body);
    const objScoped = await tokenFor(t, u.id, { resources: [{ kind: 'class', id: klass }], permissions: ['ReadClass'] });
    const noObjects = await exportJson({ scope: { kind: 'objects_in_class', class_id: klass } }, objScoped);
    expect(noObjects.items).toEqual([]);
    const hiddenCols = await exportJson({ scope: { kind: 'collections' }, query: `id=${hidden}` }, u.token);
    expect(hiddenCols.items).toEqual([]);
  });

  it('re-checks authority when it runs: a grant revoked after submission fails the task closed', async () => {
    const u = await userWith(t, [[col, ['ReadClass', 'ReadObject']]]);
    const task = await submit({ scope: { kind: 'objects_in_class', class_id: klass } }, u.token);
    const revoke = await t.request('DELETE', `/api/v1/collections/${col}/permissions/group/${u.groupId}/ReadClass`);
    expect(revoke.status, revoke.text).toBeLessThan(300);
    const done = await run(task.id, u.token);
    expect(done.status).toBe('failed');
    expect(done.details).toMatchObject({ reason: 'permission_denied' });
    expect((await output(task.id, u.token)).status).toBe(404);
  });

  it('max_items cuts the result: meta.truncated, the header and a warning; a clamped max_items warns', async () => {
    const task = await submit({ scope: { kind: 'objects_in_class', class_id: klass }, limits: { max_items: 2 } });
    const done = await run(task.id);
    expect(done.progress).toMatchObject({ total_items: 2, processed_items: 2 });
    const res = await output(task.id);
    const env = res.body as Envelope;
    expect(env.items.map((i) => i.id)).toEqual(objs.slice(0, 2));
    expect(env.meta).toEqual({ count: 2, truncated: true });
    expect(env.warnings).toEqual(['the result was cut at limits.max_items: 2 of 5 rows exported']);
    expect(res.headers.get('x-svc-export-truncated')).toBe('true');
    expect(res.headers.get('x-svc-export-warnings')).toBe('1');
    const clamped = await exportJson({ scope: { kind: 'objects_in_class', class_id: klass }, limits: { max_items: 1_000_000 } });
    expect(clamped.meta).toEqual({ count: 5, truncated: false });
    expect(clamped.warnings).toEqual(['limits.max_items 1000000 was clamped to the server maximum 100000']);
  });

  it('pages through more rows than one list page holds', async () => {
    const big = await created(await post('/api/v1/classes', { name: uniq('many'), collection_id: col }));
    await t.deps.sql`
      insert into objects (name, description, collection_id, class_id, json_data)
      select 'o-' || lpad(g::text, 4, '0'), '', ${col}::int, ${big}::int, jsonb_build_object('n', g)
      from generate_series(1, 600) g`;
    const env = await exportJson({ scope: { kind: 'objects_in_class', class_id: big }, query: 'sort=-name', limits: { max_items: 555 } });
    expect(env.meta).toEqual({ count: 555, truncated: true });
    expect(env.items[0]!.name).toBe('o-0600');
    expect(env.items.at(-1)!.name).toBe('o-0046');
    expect(new Set(env.items.map((i) => i.id)).size).toBe(555);
  });

  it('an output over limits.max_output_bytes fails the task (output_too_large) and leaves no output', async () => {
    const task = await submit({ scope: { kind: 'objects_in_class', class_id: klass }, limits: { max_output_bytes: 100 } });
    const done = await run(task.id);
    expect(done.status).toBe('failed');
    expect(done.details).toMatchObject({ reason: 'output_too_large' });
    const res = await output(task.id);
    expect(res.status).toBe(404);
  });

  it('calls checkpoint(): a cancel request stops it', async () => {
    const task = await submit({ scope: { kind: 'classes' } });
    const [row] = await t.deps.sql<ClaimedTask[]>`
      select id, kind, status, submitted_by, cancel_requested, progress, summary, details, created_at, started_at, finished_at,
        submitted_token_id, token_scoped, token_scope, request, claim_token, locked_until, attempts
      from tasks where id = ${task.id}`;
    const ctx: TaskRunContext = {
      deps: t.deps,
      task: row!,
      authority: { principal: { id: row!.submitted_by }, isAdmin: true, token: { scope: null } },
      actor: { kind: 'worker', principalId: null, principalName: null },
      signal: new AbortController().signal,
      checkpoint: () => Promise.reject(new TaskCancelledError()),
      event: async () => {},
    };
    await expect(executeExport(ctx)).rejects.toBeInstanceOf(TaskCancelledError);
    const cancel = await t.request('POST', `/api/v1/tasks/${task.id}/cancel`);
    expect(cancel.status, cancel.text).toBeLessThan(300);
    expect(await runTaskOnce(t.deps, { taskIds: [task.id] })).toBeNull();
    expect(((await t.request('GET', `/api/v1/exports/${task.id}`)).body as TaskWire).status).toBe('cancelled');
  });
});

describe('runExportTemplate', () => {
  it('202; renders CSV through an included fragment with the default query; served with its content type', async () => {
    const row = await createTemplate({ kind: 'fragment', template: '{{ item.name }},{{ item.data.cpu }}' });
    const tpl = await createTemplate({
      content_type: 'text/csv',
      default_query: 'json_data=role=web&sort=name',
      template: `name,cpu\n{% for i in items %}{% include '${row.name}', item: i %}\n{% endfor %}{{ meta.count }} rows{% if meta.truncated %}+{% endif %}`,
    });
    const res = await post(`/api/v1/export-templates/${tpl.id}/exports`, { scope: { kind: 'objects_in_class', class_id: klass } });
    expect(res.status, res.text).toBe(202);
    const task = res.body as TaskWire;
    const done = await run(task.id);
    expect(done.status, JSON.stringify(done.details)).toBe('succeeded');
    expect(done.summary).toMatchObject({ template_id: tpl.id, content_type: 'text/csv', count: 3 });
    const out = await output(task.id);
    expect(out.status).toBe(200);
    expect(out.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(out.text).toBe('name,cpu\nweb-1,4\nweb-2,8\nweb-3,2\n3 rows');
  });

  it('a given query replaces the default query; the template sees meta, warnings and scope', async () => {
    const tpl = await createTemplate({
      content_type: 'application/json',
      default_query: 'json_data=role=web',
      template:
        '{"scope": {{ scope | json }}, "names": {{ items | map: "name" | json }}, "meta": {{ meta | json }}, "w": {{ warnings.size }}}',
    });
    const res = await post(`/api/v1/export-templates/${tpl.id}/exports`, {
      scope: { kind: 'objects_in_class', class_id: klass },
      query: 'json_data=role=db',
    });
    expect(res.status, res.text).toBe(202);
    await run((res.body as TaskWire).id);
    const out = await output((res.body as TaskWire).id);
    expect(out.headers.get('content-type')).toBe('application/json');
    expect(out.body).toEqual({
      scope: { kind: 'objects_in_class', class_id: klass },
      names: ['db-1'],
      meta: { count: 1, truncated: false },
      w: 0,
    });
  });

  it('render failures fail the task: fuel, invalid JSON for application/json, a fragment deleted after saving', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [[{ template: '{% for i in (1..1000000) %}{{ i }}{% endfor %}' }, /fuel/]];
    cases.push([{ content_type: 'application/json', template: '{ not json' }, /not valid JSON/]);
    const frag = await createTemplate({ kind: 'fragment', template: 'x' });
    const uses = await createTemplate({ template: `{% include '${frag.name}' %}` });
    expect((await t.request('DELETE', `/api/v1/export-templates/${frag.id}`)).status).toBe(204);
    for (const [overrides, message] of cases) {
      const tpl = await createTemplate(overrides);
      const task = await submit({ scope: { kind: 'classes' }, template_id: tpl.id });
      const done = await run(task.id);
      expect(done.status).toBe('failed');
      expect(done.details).toMatchObject({ reason: 'render_failed', message: expect.stringMatching(message) });
    }
    const task = await submit({ scope: { kind: 'classes' }, template_id: uses.id });
    const done = await run(task.id);
    expect(done.details).toMatchObject({ reason: 'render_failed', message: expect.stringContaining('no fragment named') });
  });

  it('fragments including each other stop at the recursion limit', async () => {
    const a = await createTemplate({ kind: 'fragment', name: uniq('a'), template: '' });
    const b = await createTemplate({ kind: 'fragment', template: `b{% include '${a.name}' %}` });
    expect(
      (await t.request('PATCH', `/api/v1/export-templates/${a.id}`, { body: { template: `a{% include '${b.name}' %}` } })).status,
    ).toBe(200);
    const tpl = await createTemplate({ template: `{% include '${a.name}' %}` });
    const task = await submit({ scope: { kind: 'classes' }, template_id: tpl.id });
    const done = await run(task.id);
    expect(done.details).toMatchObject({ reason: 'render_failed', message: expect.stringContaining('nest deeper than') });
  });

  it('a template deleted after submission fails the task (not_found); 404 for a missing template', async () => {
    const tpl = await createTemplate({ template: 'x' });
    const res = await post(`/api/v1/export-templates/${tpl.id}/exports`, { scope: { kind: 'classes' } });
    expect(res.status).toBe(202);
    expect((await t.request('DELETE', `/api/v1/export-templates/${tpl.id}`)).status).toBe(204);
    const done = await run((res.body as TaskWire).id);
    expect(done.details).toMatchObject({ reason: 'not_found' });
    expect((await post(`/api/v1/export-templates/${tpl.id}/exports`, { scope: { kind: 'classes' } })).status).toBe(404);
  });

  it('400 for a bad query or limits; 403 without ReadTemplate; 409 for a reused Idempotency-Key', async () => {
    const tpl = await createTemplate({ template: 'x' });
    expect((await post(`/api/v1/export-templates/${tpl.id}/exports`, { scope: { kind: 'classes' }, query: 'cursor=x' })).status).toBe(400);
    expect((await post(`/api/v1/export-templates/${tpl.id}/exports`, { scope: { kind: 'classes' }, template_id: tpl.id })).status).toBe(
      400,
    );
    const u = await userWith(t, [[col, ['ReadClass']]]);
    expect((await post(`/api/v1/export-templates/${tpl.id}/exports`, { scope: { kind: 'classes' } }, u.token)).status).toBe(403);
    const key = uniq('key');
    const first = await post(`/api/v1/export-templates/${tpl.id}/exports`, { scope: { kind: 'classes' } }, t.adminToken, {
      'idempotency-key': key,
    });
    expect(first.status).toBe(202);
    const again = await post(`/api/v1/export-templates/${tpl.id}/exports`, { scope: { kind: 'collections' } }, t.adminToken, {
      'idempotency-key': key,
    });
    expect(again.status).toBe(409);
  });
});

describe('getExport', () => {
  it('200 for the submitter and an unscoped admin; 404 for others, for other task kinds and missing tasks', async () => {
    const u = await userWith(t, [[col, ['ReadClass']]]);
    const task = await submit({ scope: { kind: 'classes' } }, u.token);
    const own = await t.request('GET', `/api/v1/exports/${task.id}`, { token: u.token });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ id: task.id, kind: 'export', status: 'queued' });
    expect((await t.request('GET', `/api/v1/exports/${task.id}`)).status).toBe(200);
    const other = await userWith(t, [[col, ['ReadClass']]]);
    expect((await t.request('GET', `/api/v1/exports/${task.id}`, { token: other.token })).status).toBe(404);
    const scopedAdmin = await tokenFor(t, 1, { permissions: ['ReadClass'] });
    expect((await t.request('GET', `/api/v1/exports/${task.id}`, { token: scopedAdmin })).status).toBe(404);
    const { task: imp } = await withTx(t.deps.sql, (tx) =>
      insertTask(
        tx,
        { kind: 'system', principalId: null, principalName: null },
        {
          kind: 'import',
          auth: { principal: { id: u.id }, token: { id: null, scope: null } },
          request: {},
          status: 'cancelled',
        },
      ),
    );
    expect((await t.request('GET', `/api/v1/exports/${imp.id}`, { token: u.token })).status).toBe(404);
    expect((await t.request('GET', `/api/v1/exports/${imp.id}/output`, { token: u.token })).status).toBe(404);
    expect((await t.request('GET', '/api/v1/exports/2000000000')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/exports/0')).status).toBe(400);
    expect((await t.request('GET', `/api/v1/exports/${task.id}`, { token: null })).status).toBe(401);
  });
});

describe('getExportOutput', () => {
  it('404 before the task finished; 200 after; 410 once expired (and the bytes are cleared later)', async () => {
    const task = await submit({ scope: { kind: 'classes' }, query: `id=${klass}` });
    const early = await output(task.id);
    expect(early.status).toBe(404);
    await run(task.id);
    expect((await output(task.id)).status).toBe(200);
    const u = await userWith(t, [[col, ['ReadClass']]]);
    expect((await output(task.id, u.token)).status).toBe(404);
    const [exp] = await t.deps.sql<{ expires: Date }[]>`select output_expires_at as expires from tasks where id = ${task.id}`;
    const hours = (exp!.expires.getTime() - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(t.deps.config.SVC_EXPORT_OUTPUT_RETENTION_HOURS - 0.1);
    await t.deps.sql`update tasks set output_expires_at = now() - interval '1 second' where id = ${task.id}`;
    const gone = await output(task.id);
    expect(gone.status, gone.text).toBe(410);
    // The next finished export clears expired bytes; reads still answer 410.
    await run((await submit({ scope: { kind: 'classes' }, query: `id=${klass}` })).id);
    const [cleared] = await t.deps.sql<{ output: Buffer | null }[]>`select output from tasks where id = ${task.id}`;
    expect(cleared!.output).toBeNull();
    expect((await output(task.id)).status).toBe(410);
  });
});
