// Imports: submission (validation, admin sections, credential approvals, Idempotency-Key), the
// import executor run through the task runner (strict, best effort, dry run, collisions,
// per-item authorization, identities, remote targets, cancel), and the task and result reads.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { approve, createGroup, createHuman, tokenFor, userWith } from './iam-fixtures.ts';
import { runTaskOnce, TaskCancelledError, type TaskRunContext } from '../src/workers/tasks.ts';
import { executeImport } from '../src/workers/import.ts';
import { withTx } from '../src/db/tx.ts';
import { markClaimed, type ClaimedTask } from '../src/db/task-runner.ts';
import { insertTask } from '../src/db/tasks.ts';

let t: TestApp;

interface Task {
  id: number;
  kind: string;
  status: string;
  submitted_by: number;
  progress: { total_items: number; processed_items: number; success_items: number; failed_items: number };
  summary: Record<string, unknown> | null;
  details: Record<string, unknown> | null;
  links: Record<string, string | null>;
}

interface Result {
  item_ref: string;
  entity_kind: string;
  action: string;
  outcome: string;
  error: string | null;
}

type Graph = Record<string, unknown[]>;

function graph(parts: Graph = {}): Graph {
  return { collections: [], classes: [], objects: [], class_relations: [], object_relations: [], collection_permissions: [], ...parts };
}

function body(parts: Graph = {}, extra: Record<string, unknown> = {}) {
  return { version: 2, graph: graph(parts), ...extra };
}

async function submit(b: unknown, token = t.adminToken, headers: Record<string, string> = {}) {
  return t.request('POST', '/api/v1/imports', { token, body: b, headers });
}

/** Submits, expects 202, runs the task, returns the finished task and its results. */
async function runImport(b: unknown, token = t.adminToken, headers: Record<string, string> = {}) {
  const res = await submit(b, token, headers);
  expect(res.status, res.text).toBe(202);
  const id = (res.body as Task).id;
  const done = await runTaskOnce(t.deps, { taskIds: [id] });
  expect(done?.id).toBe(id);
  const task = await t.request('GET', `/api/v1/imports/${id}`, { token });
  expect(task.status, task.text).toBe(200);
  return { task: task.body as Task, results: await results(id, token) };
}

async function results(id: number, token = t.adminToken, query: Record<string, string | number> = {}): Promise<Result[]> {
  const res = await t.request('GET', `/api/v1/imports/${id}/results`, { token, query });
  expect(res.status, res.text).toBe(200);
  return res.body as Result[];
}

async function collectionByName(
  name: string,
): Promise<{ id: number; description: string; parent_collection_id: number | null } | undefined> {
  const [row] = await t.deps.sql<{ id: number; description: string; parent_collection_id: number | null }[]>`
    select id, description, parent_collection_id from collections where name = ${name}`;
  return row;
}

async function createCollection(name = uniq('col')): Promise<number> {
  const res = await t.request('POST', '/api/v1/collections', { body: { name } });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

beforeAll(async () => {
  t = await startTestApp();
});

afterAll(async () => {
  await t?.close();
});

describe('createImport', () => {
  it('createImport 202: queues an import task with Location, links and the item count', async () => {
    const res = await submit(body({ collections: [{ ref: 'c', name: uniq('col') }] }));
    expect(res.status, res.text).toBe(202);
    const task = res.body as Task;
    expect(res.headers.get('location')).toBe(`/api/v1/tasks/${task.id}`);
    expect(task).toMatchObject({ kind: 'import', status: 'queued', progress: { total_items: 1, processed_items: 0 } });
    expect(task.links).toMatchObject({ import: `/api/v1/imports/${task.id}`, import_results: `/api/v1/imports/${task.id}/results` });
    const [row] = await t.deps.sql<{ token_scoped: boolean; submitted_token_id: number | null }[]>`
      select token_scoped, submitted_token_id from tasks where id = ${task.id}`;
    expect(row).toMatchObject({ token_scoped: false });
    expect(row!.submitted_token_id).not.toBeNull();
  });

  it('createImport 202: the same Idempotency-Key and body return the same task; another body is 409', async () => {
    const key = uniq('key');
    const b = body({ collections: [{ name: uniq('col') }] });
    const first = await submit(b, t.adminToken, { 'idempotency-key': key });
    const again = await submit(b, t.adminToken, { 'idempotency-key': key });
    expect(first.status).toBe(202);
    expect(again.status).toBe(202);
    expect((again.body as Task).id).toBe((first.body as Task).id);
    const other = await submit(body({ collections: [{ name: uniq('col') }] }), t.adminToken, { 'idempotency-key': key });
    expect(other.status, other.text).toBe(409);
    expect(other.body).toMatchObject({ reason: 'idempotency_key_reused' });
  });

  it('createImport 400: an Idempotency-Key over 255 bytes', async () => {
    const res = await submit(body(), t.adminToken, { 'idempotency-key': 'k'.repeat(256) });
    expect(res.status, res.text).toBe(400);
  });

  it('createImport 400: version other than 2 and unknown members', async () => {
    expect((await submit({ version: 1, graph: graph() })).status).toBe(400);
    expect((await submit({ ...body(), extra: true })).status).toBe(400);
    expect((await submit({ version: 2 })).status).toBe(400);
    expect((await submit({ version: 2, graph: { collections: [], widgets: [] } })).status).toBe(400);
  });

  it('createImport 400: duplicate refs, unknown refs, refs to another section or a later item', async () => {
    const res = await submit(
      body({
        collections: [
          { ref: 'a', name: uniq('c') },
          { ref: 'a', name: uniq('c') },
          { ref: 'child', name: 'x', parent_collection_ref: 'later' },
          { ref: 'later', name: uniq('c') },
        ],
        classes: [
          { ref: 'k', name: uniq('k'), collection_ref: 'nope' },
          { ref: 'k2', name: uniq('k'), collection_ref: 'k' },
        ],
      }),
    );
    expect(res.status, res.text).toBe(400);
    const details = (res.body as { details: { path: string; message: string }[] }).details;
    const paths = details.map((d) => d.path);
    expect(paths).toContain('body.graph.collections[1].ref');
    expect(paths).toContain('body.graph.collections[2].parent_collection_ref');
    expect(paths).toContain('body.graph.classes[0].collection_ref');
    expect(details.find((d) => d.path === 'body.graph.classes[1].collection_ref')?.message).toMatch(/names an item of classes/);
  });

  it('createImport 400: bad natural keys and two items naming the same row', async () => {
    const name = uniq('k');
    const res = await submit(
      body({
        classes: [
          { name, collection_key: { name: 'b', path: ['a', 'c'] } },
          { name, collection_key: { name: 'a', path: ['a'] } },
        ],
      }),
    );
    expect(res.status, res.text).toBe(400);
    const paths = (res.body as { details: { path: string }[] }).details.map((d) => d.path);
    expect(paths).toEqual(['body.graph.classes[0].collection_key', 'body.graph.classes[1]']);
  });

  it('createImport 400: an invalid class schema and object data failing an imported schema', async () => {
    const res = await submit(
      body({
        collections: [{ ref: 'c', name: uniq('col') }],
        classes: [
          { ref: 'bad', name: uniq('k'), collection_ref: 'c', json_schema: { type: 'nonsense' } },
          {
            ref: 'good',
            name: uniq('k'),
            collection_ref: 'c',
            validate_schema: true,
            json_schema: { type: 'object', properties: { ip: { type: 'string' } }, required: ['ip'] },
          },
        ],
        objects: [{ name: 'o', class_ref: 'good', json_data: { ip: 5 } }],
      }),
    );
    expect(res.status, res.text).toBe(400);
    const paths = (res.body as { details: { path: string }[] }).details.map((d) => d.path);
    expect(paths.some((p) => p.startsWith('body.graph.classes[0].json_schema'))).toBe(true);
    expect(paths).toContain('body.graph.objects[0].json_data/ip');
  });

  it('createImport 400: a remote target the remote-target API would refuse', async () => {
    const res = await submit(
      body({
        remote_targets: [
          {
            collection_key: { name: 'x', path: ['x'] },
            name: 'rt',
            description: '',
            method: 'get',
            url_template: 'http://plain.example.com/',
            allowed_subject_types: ['object'],
          },
        ],
      }),
    );
    expect(res.status, res.text).toBe(400);
    const paths = (res.body as { details: { path: string }[] }).details.map((d) => d.path);
    expect(paths).toContain('body.graph.remote_targets[0].url_template');
    expect(paths).toContain('body.graph.remote_targets[0].class_ref');
  });

  it('createImport 400: export templates, sinks and subscriptions their APIs would refuse', async () => {
    const key = { name: 'x', path: ['x'] };
    const res = await submit(
      body({
        export_templates: [{ collection_key: key, name: 't', template: '{% if x %}' }],
        event_sinks: [{ name: uniq('sink'), kind: 'webhook', config: { headers: { Authorization: 'Bearer x' } } }],
        event_subscriptions: [{ sink_key: { name: 's' }, name: 'sub', entity_types: ['nonsense'], actions: ['created'] }],
      }),
    );
    expect(res.status, res.text).toBe(400);
    const paths = (res.body as { details: { path: string }[] }).details.map((d) => d.path);
    expect(paths).toContain('body.graph.export_templates[0].template');
    expect(paths).toContain('body.graph.event_subscriptions[0].entity_types');
    const sink = await submit(
      body({ event_sinks: [{ name: uniq('sink'), kind: 'webhook', config: { headers: { Authorization: 'Bearer x' } } }] }),
    );
    expect(sink.status, sink.text).toBe(400);
    expect((sink.body as { details: { path: string }[] }).details[0]!.path).toBe('body.graph.event_sinks[0].config.headers.Authorization');
  });

  it('createImport 403: identity and integration sections need an unscoped administrator', async () => {
    const user = await createHuman(t);
    const res = await submit(body({ groups: [{ name: uniq('g') }] }), user.token);
    expect(res.status, res.text).toBe(403);
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
    const scoped = await tokenFor(t, admin!.id, { permissions: ['ReadCollection'] });
    expect((await submit(body({ groups: [{ name: uniq('g') }] }), scoped)).status).toBe(403);
  });

  it('createImport 403: credential-bearing imports need a matching fresh approval', async () => {
    const b = body({ principals: [{ kind: 'human', name: uniq('u'), password: 'pw-1234-abcd' }] });
    const missing = await submit(b);
    expect(missing.status, missing.text).toBe(403);
    expect(missing.body).toMatchObject({ reason: 'reauthentication_required' });
    const approval = await approve(t, {
      kind: 'import_credentials',
      import: body({ principals: [{ kind: 'human', name: 'other', password: 'x' }] }),
    });
    const wrong = await submit(b, t.adminToken, { 'x-svc-credential-approval': approval });
    expect(wrong.status).toBe(403);
    expect(wrong.body).toMatchObject({ reason: 'reauthentication_required' });
  });

  it('createImport 401: no token', async () => {
    expect((await submit(body(), null as unknown as string)).status).toBe(401);
  });
});

describe('import executor', () => {
  it('omitted sections are empty: a graph of collections only, of objects only, and an empty graph succeed', async () => {
    const name = uniq('only');
    const cols = await runImport({ version: 2, graph: { collections: [{ ref: 'c', name }] } });
    expect(cols.task.status).toBe('succeeded');
    expect(cols.results.map((r) => [r.item_ref, r.entity_kind, r.action, r.outcome])).toEqual([['c', 'collection', 'create', 'succeeded']]);
    expect(await collectionByName(name)).toBeDefined();

    const col = await createCollection();
    const klass = uniq('class');
    const cls = await t.request('POST', '/api/v1/classes', { body: { name: klass, collection_id: col } });
    expect(cls.status, cls.text).toBe(201);
    const objs = await runImport({
      version: 2,
      mode: { atomicity: 'strict' },
      graph: { objects: [{ ref: 'o', name: 'o-1', class_key: { name: klass }, json_data: { a: 1 } }] },
    });
    expect(objs.task.status).toBe('succeeded');
    expect(objs.results.map((r) => [r.item_ref, r.entity_kind, r.outcome])).toEqual([['o', 'object', 'succeeded']]);
    const [row] = await t.deps.sql<{ n: number }[]>`
      select count(*)::int as n from objects o join classes c on c.id = o.class_id where c.name = ${klass} and o.name = 'o-1'`;
    expect(row!.n).toBe(1);

    const empty = await runImport({ version: 2, graph: {} });
    expect(empty.task.status).toBe('succeeded');
    expect(empty.task.progress).toMatchObject({ total_items: 0, processed_items: 0 });
    expect(empty.results).toEqual([]);
  });

  it('strict import succeeds: tree, class with schema, objects, relations and a grant, with worker events', async () => {
    const top = uniq('top');
    const k1 = uniq('server');
    const k2 = uniq('rack');
    const group = await createGroup(t);
    const { task, results: rows } = await runImport(
      body({
        collections: [
          { ref: 'top', name: top, description: 'root' },
          { ref: 'child', name: 'child', parent_collection_ref: 'top' },
        ],
        classes: [
          {
            ref: 'server',
            name: k1,
            collection_ref: 'child',
            validate_schema: true,
            json_schema: { type: 'object', properties: { ip: { type: 'string' } } },
          },
          { ref: 'rack', name: k2, collection_key: { name: 'child', path: [top, 'child'] } },
        ],
        objects: [
          { ref: 'web', name: 'web-01', class_ref: 'server', json_data: { ip: '10.0.0.1' } },
          { ref: 'r1', name: 'rack-1', class_ref: 'rack', json_data: {} },
        ],
        class_relations: [{ ref: 'in', from_class_ref: 'server', to_class_ref: 'rack', forward_alias: 'rack', to_max_relations: 5 }],
        object_relations: [{ from_object_ref: 'web', to_object_key: { name: 'rack-1', class: { name: k2 } } }],
        collection_permissions: [
          { collection_ref: 'top', group_key: { name: group.name, identity_scope: 'local' }, permissions: ['ReadCollection', 'ReadClass'] },
        ],
      }),
    );
    expect(task.status).toBe('succeeded');
    expect(task.progress).toEqual({ total_items: 9, processed_items: 9, success_items: 9, failed_items: 0 });
    expect(task.summary).toMatchObject({ atomicity: 'strict', dry_run: false, outcomes: { succeeded: 9 } });
    expect(rows.map((r) => [r.item_ref, r.entity_kind, r.action, r.outcome])).toEqual([
      ['top', 'collection', 'create', 'succeeded'],
      ['child', 'collection', 'create', 'succeeded'],
      ['server', 'class', 'create', 'succeeded'],
      ['rack', 'class', 'create', 'succeeded'],
      ['web', 'object', 'create', 'succeeded'],
      ['r1', 'object', 'create', 'succeeded'],
      ['in', 'class_relation', 'create', 'succeeded'],
      ['object_relations[0]', 'object_relation', 'create', 'succeeded'],
      ['collection_permissions[0]', 'collection_permission', 'create', 'succeeded'],
    ]);
    const topRow = await collectionByName(top);
    const [child] = await t.deps.sql<{ id: number }[]>`select id from collections where parent_collection_id = ${topRow!.id}`;
    expect(child).toBeDefined();
    const perms = await t.request('GET', `/api/v1/collections/${topRow!.id}/permissions/group/${group.id}`);
    expect(perms.body).toEqual(['ReadCollection', 'ReadClass']);
    const [rel] = await t.deps.sql<{ n: number }[]>`
      select count(*)::int as n from object_relations r join objects o on o.id = r.from_object_id where o.name = 'web-01'
        and o.class_id = (select id from classes where name = ${k1})`;
    expect(rel!.n).toBe(1);
    const events = await t.deps.sql<
      { entity_type: string; actor_kind: string; actor_user_id: number | null; initiator_user_id: number; task_id: number }[]
    >`
      select entity_type, actor_kind, actor_user_id, initiator_user_id, task_id from events
      where task_id = ${task.id} and entity_type <> 'task' order by id`;
    expect(events.map((e) => e.entity_type)).toEqual([
      'collection',
      'collection',
      'class',
      'class_schema',
      'class_schema',
      'class',
      'object',
      'object',
      'class_relation',
      'object_relation',
      'permission',
      'permission',
    ]);
    for (const e of events) expect(e).toMatchObject({ actor_kind: 'worker', actor_user_id: null, initiator_user_id: task.submitted_by });
  });

  it('strict import fails as a whole: earlier items rolled back, the failing one failed, the rest skipped', async () => {
    const name = uniq('col');
    const { task, results: rows } = await runImport(
      body({
        collections: [{ ref: 'c', name }],
        classes: [
          { ref: 'k', name: uniq('k'), collection_ref: 'c', validate_schema: true, json_schema: { type: 'object', required: ['a'] } },
        ],
        objects: [
          { name: 'ok', class_ref: 'k', json_data: { a: 1 } },
          { name: 'missing-class', class_key: { name: uniq('nope') }, json_data: {} },
          { name: 'later', class_ref: 'k', json_data: { a: 2 } },
        ],
      }),
    );
    expect(task.status).toBe('failed');
    expect(rows.map((r) => r.outcome)).toEqual(['rolled_back', 'rolled_back', 'rolled_back', 'failed', 'skipped']);
    expect(rows[3]!.error).toMatch(/class .* not found/);
    expect(rows[4]!.error).toMatch(/stopped at objects\[1\]/);
    expect(task.details).toMatchObject({ reason: 'import_item_failed' });
    expect(await collectionByName(name)).toBeUndefined();
  });

  it('best_effort import: failures and their dependents are reported, the rest commits (partially_succeeded)', async () => {
    const name = uniq('col');
    const { task, results: rows } = await runImport(
      body(
        {
          collections: [{ ref: 'c', name }],
          classes: [
            { ref: 'bad', name: uniq('k'), collection_key: { name: 'none', path: [uniq('none'), 'none'] } },
            { ref: 'good', name: uniq('k'), collection_ref: 'c' },
          ],
          objects: [
            { ref: 'o1', name: 'o1', class_ref: 'bad', json_data: {} },
            { ref: 'o2', name: 'o2', class_ref: 'good', json_data: { n: 1 } },
          ],
        },
        { mode: { atomicity: 'best_effort' } },
      ),
    );
    expect(task.status).toBe('partially_succeeded');
    expect(rows.map((r) => [r.item_ref, r.outcome])).toEqual([
      ['c', 'succeeded'],
      ['bad', 'failed'],
      ['good', 'succeeded'],
      ['o1', 'skipped'],
      ['o2', 'succeeded'],
    ]);
    expect(rows[3]!.error).toMatch(/depends on bad/);
    expect(task.progress).toEqual({ total_items: 5, processed_items: 5, success_items: 3, failed_items: 1 });
    expect(await collectionByName(name)).toBeDefined();
    const failedOnly = await results(task.id, t.adminToken, { outcome: 'failed' });
    expect(failedOnly.map((r) => r.item_ref)).toEqual(['bad']);
    const objectsOnly = await results(task.id, t.adminToken, { entity_kind: 'object' });
    expect(objectsOnly.map((r) => r.item_ref)).toEqual(['o1', 'o2']);
  });

  it('best_effort import where everything fails ends failed', async () => {
    const { task } = await runImport(
      body(
        { classes: [{ name: uniq('k'), collection_key: { name: 'none', path: [uniq('none'), 'none'] } }] },
        { mode: { atomicity: 'best_effort' } },
      ),
    );
    expect(task.status).toBe('failed');
  });

  it('collision_policy abort fails an existing row; overwrite updates it, and an identical item is unchanged', async () => {
    const name = uniq('col');
    await runImport(body({ collections: [{ name, description: 'one' }] }));
    const abort = await runImport(body({ collections: [{ name, description: 'two' }] }));
    expect(abort.task.status).toBe('failed');
    expect(abort.results[0]).toMatchObject({ action: 'update', outcome: 'failed' });
    expect(abort.results[0]!.error).toMatch(/already exists/);
    const over = await runImport(body({ collections: [{ name, description: 'two' }] }, { mode: { collision_policy: 'overwrite' } }));
    expect(over.task.status).toBe('succeeded');
    expect(over.results[0]).toMatchObject({ action: 'update', outcome: 'succeeded', error: null });
    expect((await collectionByName(name))!.description).toBe('two');
    const same = await runImport(body({ collections: [{ name, description: 'two' }] }, { mode: { collision_policy: 'overwrite' } }));
    expect(same.results[0]).toMatchObject({ action: 'unchanged', outcome: 'succeeded' });
  });

  it('overwrite of objects validates data against the class schema and keeps omitted members', async () => {
    const col = uniq('col');
    const k = uniq('k');
    await runImport(
      body({
        collections: [{ ref: 'c', name: col }],
        classes: [{ ref: 'k', name: k, collection_ref: 'c', validate_schema: true, json_schema: { type: 'object', required: ['a'] } }],
        objects: [{ name: 'o', description: 'keep me', class_ref: 'k', json_data: { a: 1 } }],
      }),
    );
    const mode = { mode: { collision_policy: 'overwrite', atomicity: 'best_effort' } };
    const bad = await runImport(body({ objects: [{ name: 'o', class_key: { name: k }, json_data: { b: 1 } }] }, mode));
    expect(bad.results[0]).toMatchObject({ action: 'update', outcome: 'failed' });
    expect(bad.results[0]!.error).toMatch(/does not match the class JSON schema/);
    const good = await runImport(body({ objects: [{ name: 'o', class_key: { name: k }, json_data: { a: 2 } }] }, mode));
    expect(good.results[0]).toMatchObject({ action: 'update', outcome: 'succeeded' });
    const [row] = await t.deps.sql<{ description: string; json_data: unknown }[]>`
      select o.description, o.json_data from objects o join classes k on k.id = o.class_id where k.name = ${k} and o.name = 'o'`;
    expect(row).toEqual({ description: 'keep me', json_data: { a: 2 } });
  });

  it('dry_run validates and reports without writing anything', async () => {
    const name = uniq('col');
    for (const atomicity of ['strict', 'best_effort']) {
      const { task, results: rows } = await runImport(
        body(
          {
            collections: [{ ref: 'c', name }],
            classes: [{ ref: 'k', name: uniq('k'), collection_ref: 'c' }],
            objects: [{ name: 'o', class_ref: 'k', json_data: {} }],
          },
          { dry_run: true, mode: { atomicity } },
        ),
      );
      expect(task.status).toBe('succeeded');
      expect(task.summary).toMatchObject({ dry_run: true });
      expect(rows.map((r) => [r.action, r.outcome])).toEqual([
        ['create', 'succeeded'],
        ['create', 'succeeded'],
        ['create', 'succeeded'],
      ]);
      expect(await collectionByName(name)).toBeUndefined();
      const [ev] = await t.deps.sql<
        { n: number }[]
      >`select count(*)::int as n from events where task_id = ${task.id} and entity_type <> 'task'`;
      expect(ev!.n).toBe(0);
    }
  });

  it('items are authorized with the submitter’s grants: a missing permission fails the item', async () => {
    const mine = await createCollection();
    const theirs = await createCollection();
    const [mineName] = await t.deps.sql<{ name: string }[]>`select name from collections where id = ${mine}`;
    const [theirsName] = await t.deps.sql<{ name: string }[]>`select name from collections where id = ${theirs}`;
    const user = await userWith(t, [[mine, ['CreateClass', 'CreateObject']]]);
    const { task, results: rows } = await runImport(
      body(
        {
          classes: [
            { ref: 'a', name: uniq('k'), collection_key: { name: mineName!.name, path: [mineName!.name] } },
            { ref: 'b', name: uniq('k'), collection_key: { name: theirsName!.name, path: [theirsName!.name] } },
          ],
          objects: [{ name: 'o', class_ref: 'a', json_data: {} }],
        },
        { mode: { atomicity: 'best_effort' } },
      ),
      user.token,
    );
    expect(task.status).toBe('partially_succeeded');
    expect(rows.map((r) => r.outcome)).toEqual(['succeeded', 'failed', 'succeeded']);
    expect(rows[1]!.error).toMatch(/CreateClass/);
    // A user without DelegateCollection cannot create a top-level collection.
    const top = await runImport(body({ collections: [{ name: uniq('col') }] }), user.token);
    expect(top.results[0]).toMatchObject({ outcome: 'failed' });
  });

  it('items are authorized with the token scope snapshot: a scoped token fails closed', async () => {
    const mine = await createCollection();
    const [c] = await t.deps.sql<{ name: string }[]>`select name from collections where id = ${mine}`;
    const user = await userWith(t, [[mine, ['CreateClass']]]);
    const scoped = await tokenFor(t, user.id, { permissions: ['ReadCollection'] });
    const { task, results: rows } = await runImport(
      body({ classes: [{ name: uniq('k'), collection_key: { name: c!.name, path: [c!.name] } }] }),
      scoped,
    );
    expect(task.status).toBe('failed');
    expect(rows[0]!.error).toMatch(/scope/);
    const [row] = await t.deps.sql<
      { token_scoped: boolean; token_scope: unknown }[]
    >`select token_scoped, token_scope from tasks where id = ${task.id}`;
    expect(row).toEqual({ token_scoped: true, token_scope: { permissions: ['ReadCollection'] } });
  });

  it('identities: groups, a human with a password (approved), a service account and memberships', async () => {
    const gName = uniq('g');
    const uName = uniq('u');
    const saName = uniq('sa');
    const password = `pw-${uniq()}`;
    const b = body({
      groups: [{ ref: 'g', name: gName, description: 'ops' }],
      principals: [
        { ref: 'u', kind: 'human', name: uName, email: 'u@example.com', password },
        { ref: 'sa', kind: 'service_account', name: saName, owner_group_ref: 'g' },
      ],
      group_memberships: [
        { principal_ref: 'u', group_ref: 'g' },
        { principal_ref: 'sa', group_key: { name: gName, identity_scope: 'local' } },
      ],
    });
    const approval = await approve(t, { kind: 'import_credentials', import: b });
    const { task, results: rows } = await runImport(b, t.adminToken, { 'x-svc-credential-approval': approval });
    expect(task.status, JSON.stringify(rows)).toBe('succeeded');
    expect(rows.map((r) => [r.entity_kind, r.action])).toEqual([
      ['group', 'create'],
      ['principal', 'create'],
      ['principal', 'create'],
      ['group_membership', 'create'],
      ['group_membership', 'create'],
    ]);
    expect(await t.login(uName, password)).toBeTruthy();
    // The password never reaches storage in clear, and its hash leaves the task when it finishes.
    const [stored] = await t.deps.sql<{ request: string }[]>`select request::text as request from tasks where id = ${task.id}`;
    expect(stored!.request).not.toContain(password);
    expect(stored!.request).not.toContain('argon2');
    const [sa] = await t.deps.sql<{ owner: string; created_by: number }[]>`
      select g.name as owner, s.created_by from service_accounts s join principals p on p.id = s.principal_id
      join groups g on g.id = s.owner_group_id where p.name = ${saName}`;
    expect(sa).toEqual({ owner: gName, created_by: task.submitted_by });
    // Re-importing the same memberships is a no-op.
    const again = await runImport(
      body({
        group_memberships: [
          { principal_key: { name: uName, identity_scope: 'local' }, group_key: { name: gName, identity_scope: 'local' } },
        ],
      }),
    );
    expect(again.results[0]).toMatchObject({ action: 'unchanged', outcome: 'succeeded' });
  });

  it('identities: overwriting a service account can disable it; re-enabling fails', async () => {
    const g = await createGroup(t);
    const saName = uniq('sa');
    const key = { name: g.name, identity_scope: 'local' };
    await runImport(body({ principals: [{ kind: 'service_account', name: saName, owner_group_key: key }] }));
    const mode = { mode: { collision_policy: 'overwrite' } };
    const off = await runImport(
      body({ principals: [{ kind: 'service_account', name: saName, owner_group_key: key, disabled: true }] }, mode),
    );
    expect(off.results[0]).toMatchObject({ action: 'update', outcome: 'succeeded' });
    const [row] = await t.deps.sql<{ disabled: boolean }[]>`
      select s.disabled_at is not null as disabled from service_accounts s join principals p on p.id = s.principal_id where p.name = ${saName}`;
    expect(row!.disabled).toBe(true);
    const on = await runImport(
      body({ principals: [{ kind: 'service_account', name: saName, owner_group_key: key, disabled: false }] }, mode),
    );
    expect(on.results[0]).toMatchObject({ outcome: 'failed' });
    expect(on.results[0]!.error).toMatch(/cannot be enabled again/);
  });

  it('remote targets are imported with the remote-target rules; the class must be in the collection', async () => {
    const col = uniq('col');
    const target = {
      collection_ref: 'c',
      class_ref: 'k',
      name: 'hook',
      description: 'd',
      method: 'post',
      url_template: 'https://hooks.example.com/{{ subject.id }}',
      headers_template: { 'Content-Type': 'application/json' },
      body_template: '{}',
      allowed_subject_types: ['object'],
    };
    const { task, results: rows } = await runImport(
      body({
        collections: [{ ref: 'c', name: col }],
        classes: [{ ref: 'k', name: uniq('k'), collection_ref: 'c' }],
        remote_targets: [target],
      }),
    );
    expect(task.status, JSON.stringify(rows)).toBe('succeeded');
    const [rt] = await t.deps.sql<{ method: string; class_ok: boolean }[]>`
      select rt.method, rt.class_id = k.id as class_ok from remote_targets rt
      join collections c on c.id = rt.collection_id join classes k on k.collection_id = c.id where c.name = ${col}`;
    expect(rt).toEqual({ method: 'post', class_ok: true });
    const other = await createCollection();
    const [o] = await t.deps.sql<{ name: string }[]>`select name from collections where id = ${other}`;
    const wrong = await runImport(
      body({
        classes: [{ ref: 'k', name: uniq('k'), collection_key: { name: col, path: [col] } }],
        remote_targets: [{ ...target, collection_ref: undefined, collection_key: { name: o!.name, path: [o!.name] } }],
      }),
    );
    expect(wrong.results[1]).toMatchObject({ entity_kind: 'remote_target', outcome: 'failed' });
  });

  it('export templates, event sinks and subscriptions are imported through their modules', async () => {
    const col = uniq('col');
    const sinkName = uniq('sink');
    const fragment = uniq('frag');
    const { task, results: rows } = await runImport(
      body({
        collections: [{ ref: 'c', name: col }],
        export_templates: [
          { ref: 'f', collection_ref: 'c', name: fragment, kind: 'fragment', template: '{{ item.name }}' },
          { collection_ref: 'c', name: 'report', template: `{% for i in items %}{% include '${fragment}', item: i %}{% endfor %}` },
        ],
        event_sinks: [{ ref: 's', name: sinkName, kind: 'webhook', config: { timeout_ms: 5000 } }],
        event_subscriptions: [
          {
            collection_ref: 'c',
            sink_ref: 's',
            name: 'objects',
            entity_types: ['object'],
            actions: ['created'],
            routing: { url: 'https://hooks.example.com/x' },
          },
          {
            sink_key: { name: sinkName },
            name: uniq('sys'),
            entity_types: ['user'],
            actions: ['created'],
            routing: { url: 'https://hooks.example.com/y' },
          },
        ],
      }),
    );
    expect(task.status, JSON.stringify(rows)).toBe('succeeded');
    expect(rows.map((r) => r.entity_kind)).toEqual([
      'collection',
      'export_template',
      'export_template',
      'event_sink',
      'event_subscription',
      'event_subscription',
    ]);
    const [tpl] = await t.deps.sql<{ n: number }[]>`
      select count(*)::int as n from export_templates et join collections c on c.id = et.collection_id where c.name = ${col}`;
    expect(tpl!.n).toBe(2);
    const subs = await t.deps.sql<{ collection_id: number | null }[]>`
      select s.collection_id from event_subscriptions s join event_sinks k on k.id = s.sink_id where k.name = ${sinkName} order by s.id`;
    expect(subs.map((r) => r.collection_id === null)).toEqual([false, true]);
    // A template including a fragment that is not there fails its item; overwrite of an identical sink is unchanged.
    const again = await runImport(
      body(
        {
          export_templates: [{ collection_key: { name: col, path: [col] }, name: uniq('r'), template: "{% include 'missing' %}" }],
          event_sinks: [{ name: sinkName, kind: 'webhook', config: { timeout_ms: 5000 } }],
        },
        { mode: { atomicity: 'best_effort', collision_policy: 'overwrite' } },
      ),
    );
    expect(again.results.map((r) => [r.outcome, r.action])).toEqual([
      ['failed', 'create'],
      ['succeeded', 'unchanged'],
    ]);
    expect(again.results[0]!.error).toMatch(/no fragment of this collection/);
  });

  it("an unscoped administrator's imported subscriptions carry the routing approval, as the API's do", async () => {
    // a sink whose config.allowed_routing does not list the routing the subscriptions name
    const sink = await t.request('POST', '/api/v1/event-sinks', {
      body: { name: uniq('sink'), kind: 'webhook', config: { allowed_routing: { urls: ['https://allowed.example/'] } } },
    });
    expect(sink.status, sink.text).toBe(201);
    const sinkKey = { name: (sink.body as { name: string }).name };
    const col = await createCollection();
    const manager = await userWith(t, [[col, ['ReadCollection', 'ManageEventSubscription']]]);
    // a manager's subscription inside the allowed list: stored without the administrator's approval
    const listed = await t.request('POST', `/api/v1/collections/${col}/event-subscriptions`, {
      token: manager.token,
      body: {
        sink_id: (sink.body as { id: number }).id,
        name: uniq('listed'),
        entity_types: ['object'],
        actions: ['created'],
        routing: { url: 'https://allowed.example/in' },
      },
    });
    expect(listed.status, listed.text).toBe(201);
    expect(listed.body).toMatchObject({ routing_admin_approved: false });
    const [c] = await t.deps.sql<{ name: string }[]>`select name from collections where id = ${col}`;
    const colKey = { name: c!.name, path: [c!.name] };
    const outside = uniq('outside');
    const { task, results: rows } = await runImport(
      body(
        {
          event_subscriptions: [
            // new, routed outside the list
            {
              collection_key: colKey,
              sink_key: sinkKey,
              name: outside,
              entity_types: ['object'],
              actions: ['created'],
              routing: { url: 'https://elsewhere.example/x' },
            },
            // the manager's, overwritten with the same members: the administrator naming the sink approves it
            {
              collection_key: colKey,
              sink_key: sinkKey,
              name: (listed.body as { name: string }).name,
              entity_types: ['object'],
              actions: ['created'],
              routing: { url: 'https://allowed.example/in' },
            },
          ],
        },
        { mode: { atomicity: 'strict', collision_policy: 'overwrite' } },
      ),
    );
    expect(task.status, JSON.stringify(rows)).toBe('succeeded');
    expect(rows.map((r) => r.action)).toEqual(['create', 'update']);
    const subs = await t.deps.sql<{ name: string; routing_admin_approved: boolean }[]>`
      select name, routing_admin_approved from event_subscriptions where collection_id = ${col} order by id`;
    expect(subs).toEqual([
      { name: (listed.body as { name: string }).name, routing_admin_approved: true },
      { name: outside, routing_admin_approved: true },
    ]);
  });

  it('a cancel request stops a running import at its next checkpoint; what was not attempted is skipped', async () => {
    const col = uniq('col');
    const objects = Array.from({ length: 30 }, (_, i) => ({ name: `o${i}`, class_ref: 'k', json_data: { i } }));
    const res = await submit(
      body(
        { collections: [{ ref: 'c', name: col }], classes: [{ ref: 'k', name: uniq('k'), collection_ref: 'c' }], objects },
        { mode: { atomicity: 'best_effort' } },
      ),
    );
    const id = (res.body as Task).id;
    const claimed = await withTx(t.deps.sql, (tx) => markClaimed(tx, id, 60_000));
    let checks = 0;
    const ctx: TaskRunContext = {
      deps: t.deps,
      task: claimed as ClaimedTask,
      authority: { principal: { id: claimed.submitted_by }, isAdmin: true, token: { scope: null } },
      actor: { kind: 'worker', principalId: null, principalName: null, initiatorId: claimed.submitted_by, taskId: id },
      signal: new AbortController().signal,
      checkpoint: async () => {
        if (++checks === 2) throw new TaskCancelledError();
      },
      event: async () => {},
    };
    await expect(executeImport(ctx)).rejects.toBeInstanceOf(TaskCancelledError);
    const rows = await results(id);
    expect(rows).toHaveLength(32);
    expect(rows.slice(0, 25).every((r) => r.outcome === 'succeeded')).toBe(true);
    expect(rows.slice(25).every((r) => r.outcome === 'skipped' && /cancelled/.test(r.error ?? ''))).toBe(true);
  });
});

describe('getImport and listImportResults', () => {
  it('getImport 200 for the submitter; 404 for another user, another kind or a missing task; 400 for a bad id', async () => {
    const user = await createHuman(t);
    const res = await submit(body(), user.token);
    expect(res.status, res.text).toBe(202);
    const id = (res.body as Task).id;
    expect((await t.request('GET', `/api/v1/imports/${id}`, { token: user.token })).status).toBe(200);
    expect((await t.request('GET', `/api/v1/imports/${id}`)).status).toBe(200);
    const other = await createHuman(t);
    expect((await t.request('GET', `/api/v1/imports/${id}`, { token: other.token })).status).toBe(404);
    expect((await t.request('GET', `/api/v1/imports/${id}/results`, { token: other.token })).status).toBe(404);
    const exportTask = await withTx(t.deps.sql, (tx) =>
      insertTask(
        tx,
        { kind: 'user', principalId: user.id, principalName: user.name },
        { kind: 'export', auth: { principal: { id: user.id }, token: { id: null, scope: null } }, request: {} },
      ),
    );
    expect((await t.request('GET', `/api/v1/imports/${exportTask.task.id}`, { token: user.token })).status).toBe(404);
    expect((await t.request('GET', '/api/v1/imports/2000000000')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/imports/0')).status).toBe(400);
    expect((await t.request('GET', `/api/v1/imports/${id}`, { token: null })).status).toBe(401);
  });

  it('listImportResults 200: pages with limit and cursor; 400 for an unknown filter value', async () => {
    const names = Array.from({ length: 5 }, () => ({ name: uniq('col') }));
    const { task } = await runImport(body({ collections: names }));
    const first = await t.request('GET', `/api/v1/imports/${task.id}/results`, { query: { limit: 2 } });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-total-count')).toBe('5');
    const cursor = first.headers.get('x-next-cursor')!;
    const second = await t.request('GET', `/api/v1/imports/${task.id}/results`, { query: { limit: 2, cursor } });
    const third = await t.request('GET', `/api/v1/imports/${task.id}/results`, {
      query: { limit: 2, cursor: second.headers.get('x-next-cursor')! },
    });
    expect(third.headers.get('x-next-cursor')).toBeNull();
    const refs = [...(first.body as Result[]), ...(second.body as Result[]), ...(third.body as Result[])].map((r) => r.item_ref);
    expect(refs).toEqual(['collections[0]', 'collections[1]', 'collections[2]', 'collections[3]', 'collections[4]']);
    expect((await t.request('GET', `/api/v1/imports/${task.id}/results`, { query: { outcome: 'bogus' } })).status).toBe(400);
  });
});
