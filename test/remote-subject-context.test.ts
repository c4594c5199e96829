// The template context of a remote call's subject (src/db/remote-targets.ts loadSubjectContext):
// every statement of it goes out at once, and what they read is the subject's own rows; the
// remote-call worker's reads before its call go out together too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import postgres from 'postgres';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { EXECUTE, proxyToTestDatabase } from './holding-proxy.ts';
import { userWith } from './iam-fixtures.ts';
import type { Authority } from '../src/domain/authz.ts';
import { loadSubjectContext, requireSubjectRead } from '../src/db/remote-targets.ts';
import type { Db } from '../src/db/sql.ts';
import type { Subject } from '../src/domain/remote-targets.ts';
import { createSql } from '../src/db/sql.ts';
import { executeRemoteCall } from '../src/workers/remote-call.ts';
import type { TaskOutcome, TaskRunContext } from '../src/workers/task-context.ts';

let t: TestApp;
const ids: Record<string, number> = {};

async function made(path: string, body: unknown): Promise<number> {
  const res = await t.request('POST', path, { token: t.adminToken, body });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

beforeAll(async () => {
  t = await startTestApp();
  ids.colA = await made('/api/v1/collections', { name: uniq('col') });
  ids.colB = await made('/api/v1/collections', { name: uniq('col') });
  ids.classA = await made('/api/v1/classes', { name: uniq('class'), collection_id: ids.colA });
  ids.classB = await made('/api/v1/classes', { name: uniq('class'), collection_id: ids.colB });
  ids.objA = await made(`/api/v1/classes/${ids.classA}/objects`, { name: 'from-obj', json_data: { port: 1 } });
  ids.objB = await made(`/api/v1/classes/${ids.classB}/objects`, { name: 'to-obj', json_data: {} });
  ids.classRel = await made('/api/v1/relations/classes', { from_class_id: ids.classA, to_class_id: ids.classB });
  ids.objectRel = await made('/api/v1/relations/objects', {
    class_relation_id: ids.classRel,
    from_object_id: ids.objA,
    to_object_id: ids.objB,
  });
});

afterAll(async () => {
  await t.close();
});

/**
 * Runs `fn` twice in a transaction of a one-connection client whose connection passes a proxy that
 * holds PostgreSQL's answers: once with the answers flowing (the connection then has its statements
 * prepared: a statement new to it waits for PostgreSQL to describe its parameters before it is run),
 * then with them held until `statements` statements have been run (their Execute on the wire, which
 * a statement waiting for another's answer could not be).
 */
async function inOneRoundTrip(statements: number, fn: (db: Db) => Promise<unknown>): Promise<void> {
  const { proxy, url } = await proxyToTestDatabase();
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  try {
    await sql.begin(async (tx) => {
      await fn(tx as unknown as Db);
      proxy.hold();
      const running = fn(tx as unknown as Db);
      await proxy.until(Array<string>(statements).fill(EXECUTE)).finally(() => proxy.release());
      await running;
    });
  } finally {
    proxy.release();
    await sql.end({ timeout: 5 });
    await proxy.close();
  }
}

describe('loadSubjectContext', () => {
  it('sends all of a subject context at once: no statement waits for the answer to another', async () => {
    // each subject and the statements its context reads
    const cases: [Subject, number][] = [
      [{ type: 'collection', id: ids.colA! }, 1],
      [{ type: 'class', id: ids.classA! }, 2],
      [{ type: 'object', class_id: ids.classA!, object_id: ids.objA! }, 3],
      [{ type: 'class_relation', id: ids.classRel! }, 4],
      [{ type: 'object_relation', id: ids.objectRel! }, 7],
    ];
    for (const [subject, statements] of cases) {
      await inOneRoundTrip(statements, async (db) => expect(await loadSubjectContext(db, subject), subject.type).toBeDefined());
    }
  });

  it("reads the subject's own rows: both ends of a relation, their classes and collections", async () => {
    const sql = t.deps.sql;
    const rel = await loadSubjectContext(sql, { type: 'object_relation', id: ids.objectRel! });
    expect(rel).toMatchObject({
      subject_type: 'object_relation',
      subject: { id: ids.objectRel, class_relation_id: ids.classRel, from_object_id: ids.objA, to_object_id: ids.objB },
      from_object: { id: ids.objA, name: 'from-obj', data: { port: 1 }, svc_class_id: ids.classA, collection_id: ids.colA },
      to_object: { id: ids.objB, name: 'to-obj', svc_class_id: ids.classB, collection_id: ids.colB },
      class_relation: { id: ids.classRel, from_class_id: ids.classA, to_class_id: ids.classB },
      from_class: { id: ids.classA, collection_id: ids.colA },
      to_class: { id: ids.classB, collection_id: ids.colB },
      collectionIds: [ids.colA, ids.colB],
    });
    expect(rel!.collections!.map((c) => c.id)).toEqual([ids.colA, ids.colB].sort((a, b) => a! - b!));
    expect(rel!.object_relation).toBe(rel!.subject);

    const classRel = await loadSubjectContext(sql, { type: 'class_relation', id: ids.classRel! });
    expect(classRel).toMatchObject({
      subject: { id: ids.classRel },
      from_class: { id: ids.classA },
      to_class: { id: ids.classB },
      collectionIds: [ids.colA, ids.colB],
    });
    expect(classRel!.collections!.map((c) => c.id)).toEqual([ids.colA, ids.colB].sort((a, b) => a! - b!));

    const obj = await loadSubjectContext(sql, { type: 'object', class_id: ids.classA!, object_id: ids.objA! });
    expect(obj).toMatchObject({ object: { id: ids.objA }, class: { id: ids.classA }, collection: { id: ids.colA } });
    const klass = await loadSubjectContext(sql, { type: 'class', id: ids.classB! });
    expect(klass).toMatchObject({ class: { id: ids.classB }, collection: { id: ids.colB }, collectionIds: [ids.colB] });
  });

  it('is undefined for a subject that is not there, or an object of another class', async () => {
    const sql = t.deps.sql;
    const gone = 2_000_000_000;
    for (const subject of [
      { type: 'collection', id: gone },
      { type: 'class', id: gone },
      { type: 'object', class_id: ids.classA!, object_id: gone },
      { type: 'object', class_id: ids.classB!, object_id: ids.objA! },
      { type: 'object', class_id: gone, object_id: ids.objA! },
      { type: 'class_relation', id: gone },
      { type: 'object_relation', id: gone },
    ] as Subject[]) {
      expect(await loadSubjectContext(sql, subject), JSON.stringify(subject)).toBeUndefined();
    }
  });
});

describe('requireSubjectRead', () => {
  it("checks a relation subject in one round trip: the relation and both ends' permissions together", async () => {
    const reads = ['ReadClassRelation', 'ReadObjectRelation'];
    const reader = await userWith(t, [
      [ids.colA!, reads],
      [ids.colB!, reads],
    ]);
    // a reader whose grants the statements read (no token cache here)
    const auth: Authority = { principal: { id: reader.id }, isAdmin: false, token: { scope: null } };
    for (const subject of [
      { type: 'class_relation', id: ids.classRel! },
      { type: 'object_relation', id: ids.objectRel! },
    ] as Subject[]) {
      await inOneRoundTrip(3, (db) => requireSubjectRead(db, auth, subject));
    }
  });
});

describe('the remote-call worker', () => {
  it("reads the target, the subject's context and the submitter's checks in one round trip", async () => {
    const targetId = await made('/api/v1/remote-targets', {
      collection_id: ids.colA,
      name: uniq('rt'),
      description: '',
      method: 'get',
      // loopback: the test app refuses private destinations, so the call stops there, after every check passed
      url_template: 'https://127.0.0.1:9/{{ from_object.name }}/{{ to_class.name }}',
      allowed_subject_types: ['object_relation'],
    });
    const submitter = await userWith(t, [
      [ids.colA!, ['ExecuteRemoteTarget', 'ReadObjectRelation']],
      [ids.colB!, ['ReadObjectRelation']],
    ]);
    const authority: Authority = { principal: { id: submitter.id }, isAdmin: false, token: { scope: null } };
    const { proxy, url } = await proxyToTestDatabase();
    const sql = createSql(url, Object.assign({}, t.deps.config, { SVC_DB_POOL_MAX: 1, SVC_DB_LIST_POOL_MAX: 0 }));
    const ctx = {
      deps: Object.assign({}, t.deps, { sql }),
      task: { id: 0, request: { target_id: targetId, subject: { type: 'object_relation', id: ids.objectRel } } },
      authority,
      signal: new AbortController().signal,
      checkpoint: () => Promise.resolve(),
      event: () => Promise.resolve(),
    } as unknown as TaskRunContext;
    const outcome = (o: TaskOutcome) => {
      const details = o.details as { error: { reason: string }; url: string };
      return [o.status, details.error.reason, details.url];
    };
    try {
      // the first run prepares the connection's statements (a new one waits to be described)
      const first = outcome(await executeRemoteCall(ctx));
      expect(first.slice(0, 2)).toEqual(['failed', 'blocked_destination']);
      expect(first[2]).toMatch(/^https:\/\/127\.0\.0\.1:9\/from-obj\/class-/);
      proxy.hold();
      const running = executeRemoteCall(ctx);
      // the target 1, the context 7, ExecuteRemoteTarget 1, the relation and its ends 3
      await proxy.until(Array<string>(12).fill(EXECUTE)).finally(() => proxy.release());
      expect(outcome(await running)).toEqual(first);
    } finally {
      proxy.release();
      await sql.end({ timeout: 5 });
      await proxy.close();
    }
  });
});
