// Specification conformance, part b: rules of the interface specification (remote targets, events,
// sinks, subscriptions, deliveries, classes by name, aggregates, worker settings, versioning) that
// no other test file pinned down. Each test names the operation and the status it checks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { startTestApp, testConfig, uniq, type TestApp } from './helpers.ts';
import { ALL_CLASS_OBJECT, collection, createClass, createObject, principalWith } from './class-fixtures.ts';
import { createCollection, createSink, createSubscription, deliveriesOf, fanOutAll, startPeer, type Peer } from './event-fixtures.ts';
import { createHuman } from './iam-fixtures.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { runDeliveryOnce, runDeliveryWorkers } from '../src/workers/event-delivery.ts';
import { appendEvent } from '../src/db/events.ts';
import { SYSTEM_ACTOR, type Actor } from '../src/domain/actor.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { checkPayloadSize, DEFAULT_MAX_PAYLOAD_BYTES } from '../src/sinks/uri.ts';
import { evaluateResponse } from '../src/sinks/webhook.ts';

let t: TestApp;
let peer: Peer;

beforeAll(async () => {
  peer = await startPeer();
  t = await startTestApp({
    SVC_OUTBOUND_CA_FILE: peer.caFile,
    SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: true,
    SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: true,
  });
});

afterAll(async () => {
  await peer?.close();
  await t?.close();
});

function resetPeer() {
  peer.seen.length = 0;
  peer.respond = (_req, res) => {
    res.statusCode = 200;
    res.end('ok');
  };
}

// ---- classes by name ----------------------------------------------------------------------------

describe('classes by name', () => {
  it('updateClassByName 200 returns the expanded class with its ETag; 412 stale; 400 invalid input; 403; 401', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const got = await t.request('GET', `/api/v1/classes/by-name/${cls.name}`);
    expect(got.status).toBe(200);
    const etag = got.headers.get('etag')!;
    expect(etag).toMatch(/^"svc-v1\.class\./);

    const ok = await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}`, {
      headers: { 'if-match': etag },
      body: { description: 'by name' },
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toMatchObject({ id: cls.id, description: 'by name', revision: 2, collection: { id: cid } });
    expect(ok.body).not.toHaveProperty('collection_id');
    expect(ok.headers.get('etag')).not.toBe(etag);

    const stale = await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}`, {
      headers: { 'if-match': etag },
      body: { description: 'again' },
    });
    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ reason: 'stale_resource' });

    expect((await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}`, { body: { validate_schema: true } })).status).toBe(400);
    expect((await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}`, { body: { nope: 1 } })).status).toBe(400);
    const reader = await principalWith(t, [[cid, ['ReadClass']]]);
    expect(
      (await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}`, { token: reader.token, body: { description: 'x' } })).status,
    ).toBe(403);
    expect((await t.request('PATCH', `/api/v1/classes/by-name/${cls.name}`, { token: null, body: { description: 'x' } })).status).toBe(401);
    const [row] = await t.deps.sql<{ description: string }[]>`select description from classes where id = ${cls.id}`;
    expect(row!.description).toBe('by name');
  });

  it('deleteClassByName 204 carries the ETag of the deleted revision; 412 stale; 403 without DeleteClass; 401', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const etag = (await t.request('GET', `/api/v1/classes/by-name/${cls.name}`)).headers.get('etag')!;
    const reader = await principalWith(t, [[cid, ['ReadClass', 'UpdateClass']]]);
    expect((await t.request('DELETE', `/api/v1/classes/by-name/${cls.name}`, { token: reader.token })).status).toBe(403);
    expect((await t.request('DELETE', `/api/v1/classes/by-name/${cls.name}`, { token: null })).status).toBe(401);
    const stale = await t.request('DELETE', `/api/v1/classes/by-name/${cls.name}`, {
      headers: { 'if-match': `"svc-v1.class.${Buffer.from(String(cls.id)).toString('base64url')}.99"` },
    });
    expect(stale.status).toBe(412);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}`)).status).toBe(200);

    const user = await principalWith(t, [[cid, ALL_CLASS_OBJECT]]);
    const res = await t.request('DELETE', `/api/v1/classes/by-name/${cls.name}`, { token: user.token, headers: { 'if-match': etag } });
    expect(res.status).toBe(204);
    expect(res.headers.get('etag')).toBe(etag);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}`)).status).toBe(404);
  });

  it('listClasses 200 returns expanded classes; getClassByName, listClasses and createClass 401 without a token', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const list = await t.request('GET', '/api/v1/classes', { query: { id: cls.id } });
    expect(list.status).toBe(200);
    expect(list.body).toEqual([expect.objectContaining({ id: cls.id, collection: expect.objectContaining({ id: cid }) })]);
    expect((await t.request('GET', `/api/v1/classes/by-name/${cls.name}`, { token: null })).status).toBe(401);
    expect((await t.request('GET', '/api/v1/classes', { token: null })).status).toBe(401);
    expect((await t.request('POST', '/api/v1/classes', { token: null, body: { name: uniq('c'), collection_id: cid } })).status).toBe(401);
  });

  it('listObjectsByClassName 200 with paging headers; 401 without a token', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    for (let i = 0; i < 3; i++) await createObject(t, cls.id, { i });
    const page = await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects`, { query: { limit: 2, sort: '-id' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('x-total-count')).toBe('3');
    expect(page.headers.get('x-page-limit')).toBe('2');
    const cursor = page.headers.get('x-next-cursor');
    expect(cursor).toBeTruthy();
    const rest = await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects`, {
      query: { limit: 2, sort: '-id', cursor: cursor! },
    });
    expect((rest.body as unknown[]).length).toBe(1);
    expect(rest.headers.get('x-next-cursor')).toBeNull();
    expect((await t.request('GET', `/api/v1/classes/by-name/${cls.name}/objects`, { token: null })).status).toBe(401);
  });
});

// ---- aggregates -----------------------------------------------------------------------------------

describe('aggregateObjects limits', () => {
  it('aggregateObjects 200 with four measures, 400 with five; aggregateObjectsByClassName 400 and 401', async () => {
    const cls = await createClass(t, await collection(t));
    await createObject(t, cls.id, { a: 1, b: 2 });
    const four = ['sum:json_data.a', 'average:json_data.a', 'min:json_data.b', 'max:json_data.b'];
    const ok = await t.request('GET', `/api/v1/classes/${cls.id}/object-aggregates`, { query: { aggregate: four } });
    expect(ok.status, ok.text).toBe(200);
    expect((ok.body as { measures: unknown[] }[])[0]!.measures).toHaveLength(4);
    const five = await t.request('GET', `/api/v1/classes/${cls.id}/object-aggregates`, {
      query: { aggregate: [...four, 'sum:json_data.b'] },
    });
    expect(five.status).toBe(400);
    const byName = (query: Record<string, string | string[]>, token?: string | null) =>
      t.request('GET', `/api/v1/classes/by-name/${cls.name}/object-aggregates`, { query, token });
    expect((await byName({})).status).toBe(400);
    expect((await byName({ group_by: 'name', sort: 'object_count.sideways' })).status).toBe(400);
    expect((await byName({ group_by: 'name' }, null)).status).toBe(401);
  });

  it('aggregateObjects 200 sorts by object_count in both directions', async () => {
    const cls = await createClass(t, await collection(t));
    for (const site of ['a', 'b', 'b', 'c', 'c', 'c']) await createObject(t, cls.id, { site });
    const sites = async (sort: string) =>
      (
        (await t.request('GET', `/api/v1/classes/${cls.id}/object-aggregates`, { query: { group_by: 'json_data.site', sort } })).body as {
          dimensions: { value: unknown }[];
        }[]
      ).map((r) => r.dimensions[0]!.value);
    expect(await sites('object_count.desc')).toEqual(['c', 'b', 'a']);
    expect(await sites('object_count.asc')).toEqual(['a', 'b', 'c']);
    expect(await sites('dimensions.desc')).toEqual(['c', 'b', 'a']);
  });
});

// ---- remote calls -------------------------------------------------------------------------------

describe('remote_call execution', () => {
  let col: number;
  let colB: number;
  let classA: number;
  let classB: number;
  let objA: number;
  let objB: number;
  let classRel: number;
  let objectRel: number;

  beforeAll(async () => {
    const mk = async (path: string, body: Record<string, unknown>) => {
      const res = await t.request('POST', path, { body });
      expect(res.status, res.text).toBe(201);
      return (res.body as { id: number }).id;
    };
    col = await mk('/api/v1/collections', { name: uniq('rc') });
    colB = await mk('/api/v1/collections', { name: uniq('rc') });
    classA = await mk('/api/v1/classes', { name: uniq('rca'), collection_id: col });
    classB = await mk('/api/v1/classes', { name: uniq('rcb'), collection_id: colB });
    objA = await mk(`/api/v1/classes/${classA}/objects`, { name: 'from-obj', json_data: { port: 1 } });
    objB = await mk(`/api/v1/classes/${classB}/objects`, { name: 'to-obj', json_data: { port: 2 } });
    classRel = await mk('/api/v1/relations/classes', { from_class_id: classA, to_class_id: classB });
    objectRel = await mk('/api/v1/relations/objects', { class_relation_id: classRel, from_object_id: objA, to_object_id: objB });
  });

  async function target(app: TestApp, body: Record<string, unknown>): Promise<number> {
    const res = await app.request('POST', '/api/v1/remote-targets', {
      body: {
        collection_id: col,
        name: uniq('rt'),
        description: '',
        method: 'post',
        url_template: peer.url('/rc'),
        allowed_subject_types: ['collection'],
        ...body,
      },
    });
    expect(res.status, res.text).toBe(201);
    return (res.body as { id: number }).id;
  }

  async function invokeAndRun(app: TestApp, targetId: number, body: Record<string, unknown>) {
    const res = await app.request('POST', `/api/v1/remote-targets/${targetId}/invoke`, { body });
    expect(res.status, res.text).toBe(202);
    const id = (res.body as { id: number }).id;
    expect((await runTaskOnce(app.deps, { taskIds: [id] }))?.id).toBe(id);
    const task = await app.request('GET', `/api/v1/tasks/${id}`);
    return task.body as { status: string; details: { error?: { reason: string; message: string } } };
  }

  const json = { 'Content-Type': 'application/json' };

  it('invokeRemoteTarget 202 → succeeded: a class subject renders subject_type, subject, class and collection', async () => {
    resetPeer();
    const rt = await target(t, {
      allowed_subject_types: ['class'],
      headers_template: json,
      body_template:
        '{"type": {{ subject_type | json }}, "subject": {{ subject.id }}, "class": {{ class.name | json }}, "collection": {{ collection.id }}, "p": {{ parameters | json }}, "o": {{ body_override | json }}}',
    });
    const task = await invokeAndRun(t, rt, { subject: { type: 'class', id: classA } });
    expect(task.status).toBe('succeeded');
    const [{ name }] = (await t.deps.sql<{ name: string }[]>`select name from classes where id = ${classA}`) as unknown as [
      { name: string },
    ];
    expect(JSON.parse(peer.seen[0]!.body)).toEqual({ type: 'class', subject: classA, class: name, collection: col, p: {}, o: {} });
  });

  it('invokeRemoteTarget 202 → succeeded: a class_relation subject renders class_relation, from_class, to_class and collections', async () => {
    resetPeer();
    const rt = await target(t, {
      allowed_subject_types: ['class_relation'],
      headers_template: json,
      body_template:
        '{"type": {{ subject_type | json }}, "rel": {{ class_relation.id }}, "subject": {{ subject.id }}, "from": {{ from_class.id }}, "to": {{ to_class.id }}, "collections": [{% for c in collections %}{% unless forloop.first %},{% endunless %}{{ c.id }}{% endfor %}]}',
    });
    const task = await invokeAndRun(t, rt, { subject: { type: 'class_relation', id: classRel } });
    expect(task.status).toBe('succeeded');
    expect(JSON.parse(peer.seen[0]!.body)).toEqual({
      type: 'class_relation',
      rel: classRel,
      subject: classRel,
      from: classA,
      to: classB,
      collections: [col, colB].sort((a, b) => a - b),
    });
  });

  it('invokeRemoteTarget 202 → succeeded: an object_relation subject renders both objects, their classes, the class relation and collections', async () => {
    resetPeer();
    const rt = await target(t, {
      allowed_subject_types: ['object_relation'],
      headers_template: json,
      body_template:
        '{"type": {{ subject_type | json }}, "rel": {{ object_relation.id }}, "cr": {{ class_relation.id }}, "from": {{ from_object.name | json }}, "from_data": {{ from_object.data | json }}, "from_class": {{ from_object.svc_class_id }}, "to": {{ to_object.name | json }}, "fc": {{ from_class.id }}, "tc": {{ to_class.id }}, "n": {{ collections | size }}}',
    });
    const task = await invokeAndRun(t, rt, { subject: { type: 'object_relation', id: objectRel } });
    expect(task.status).toBe('succeeded');
    expect(JSON.parse(peer.seen[0]!.body)).toEqual({
      type: 'object_relation',
      rel: objectRel,
      cr: classRel,
      from: 'from-obj',
      from_data: { port: 1 },
      from_class: classA,
      to: 'to-obj',
      fc: classA,
      tc: classB,
      n: 2,
    });
  });

  it('invokeRemoteTarget 202 → succeeded: delete without body_template sends no body', async () => {
    resetPeer();
    const rt = await target(t, { method: 'delete' });
    const task = await invokeAndRun(t, rt, { subject: { type: 'collection', id: col } });
    expect(task.status).toBe('succeeded');
    expect(peer.seen[0]!.method).toBe('DELETE');
    expect(peer.seen[0]!.body).toBe('');
    expect(peer.seen[0]!.headers['content-length']).toBeUndefined();
    expect(peer.seen[0]!.headers['transfer-encoding']).toBeUndefined();
  });

  it('invokeRemoteTarget 202 → failed: a connection failure fails the task and stores a result row', async () => {
    const closed = await new Promise<number>((ok) => {
      const srv = createServer();
      srv.listen(0, '127.0.0.1', () => {
        const port = (srv.address() as { port: number }).port;
        srv.close(() => ok(port));
      });
    });
    const rt = await target(t, { method: 'get', url_template: `https://127.0.0.1:${closed}/x` });
    const res = await t.request('POST', `/api/v1/remote-targets/${rt}/invoke`, { body: { subject: { type: 'collection', id: col } } });
    const id = (res.body as { id: number }).id;
    await runTaskOnce(t.deps, { taskIds: [id] });
    const task = (await t.request('GET', `/api/v1/tasks/${id}`)).body as { status: string; details: { error: { reason: string } } };
    expect(task.status).toBe('failed');
    expect(task.details.error.reason).toBe('connection_failed');
    const rows = await t.deps.sql<{ success: boolean; response_status: number | null }[]>`
      select success, response_status from remote_call_results where task_id = ${id}`;
    expect(rows).toEqual([{ success: false, response_status: null }]);
  });

  it('invokeRemoteTarget 202 → failed with timeout: SVC_REMOTE_CALL_TIMEOUT_MS caps a larger timeout_ms', async () => {
    const capped = await startTestApp({
      SVC_OUTBOUND_CA_FILE: peer.caFile,
      SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: true,
      SVC_REMOTE_CALL_TIMEOUT_MS: 300,
    });
    try {
      resetPeer();
      peer.respond = () => {}; // never answers
      const rt = await target(capped, { method: 'get', timeout_ms: 60_000 });
      const started = Date.now();
      const task = await invokeAndRun(capped, rt, { subject: { type: 'collection', id: col } });
      expect(task.status).toBe('failed');
      expect(task.details.error!.reason).toBe('timeout');
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      resetPeer();
      await capped.close();
    }
  });
});

// ---- events: versions and provenance ----------------------------------------------------------

describe('event documents', () => {
  it('listEvents 200 reads a stored schema_version 1 event as version 1 with null revision fields', async () => {
    const cid = await createCollection(t);
    const [row] = await t.deps.sql<{ id: number }[]>`
      insert into events (entity_type, entity_id, entity_name, collection_id, action, actor_kind, provenance, before, after, schema_version)
      values ('collection', ${cid}, 'legacy', ${cid}, 'updated', 'system',
        ${t.deps.sql.json({ actor: { kind: 'system', principal: null }, initiator: null, task_id: null })},
        '{"name": "old"}'::jsonb, '{"name": "legacy"}'::jsonb, 1)
      returning id`;
    const res = await t.request('GET', '/api/v1/events', { query: { collection_id: cid, id: row!.id } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual([
      expect.objectContaining({
        id: row!.id,
        schema_version: 1,
        before_revision: null,
        after_revision: null,
        before: { name: 'old' },
        after: { name: 'legacy' },
      }),
    ]);
    // new events are written as version 2 with revisions
    await t.request('PATCH', `/api/v1/collections/${cid}`, { body: { description: 'v2' } });
    const fresh = await t.request('GET', `/api/v1/collections/${cid}/events`, { query: { action: 'updated', sort: '-id', limit: 1 } });
    expect(fresh.body).toEqual([expect.objectContaining({ schema_version: 2, before_revision: 1, after_revision: 2 })]);
  });

  it('listEvents 200: actor ids in provenance persist after the principal is deleted', async () => {
    const h = await createHuman(t);
    const put = await t.request('PUT', '/api/v1/iam/me/settings', { token: h.token, body: { theme: 'dark' } });
    expect(put.status, put.text).toBe(200);
    expect((await t.request('DELETE', `/api/v1/iam/users/${h.id}`)).status).toBe(204);
    const res = await t.request('GET', '/api/v1/events', { query: { entity_type: 'principal', entity_id: h.id, action: 'updated' } });
    expect(res.status).toBe(200);
    const [e] = res.body as {
      actor_kind: string;
      actor_user_id: number;
      initiator_user_id: number;
      provenance: { actor: unknown; initiator: unknown };
    }[];
    expect(e).toMatchObject({ actor_kind: 'user', actor_user_id: h.id, initiator_user_id: h.id });
    expect(e!.provenance.actor).toMatchObject({ kind: 'user', principal: { id: h.id } });
    expect(e!.provenance.initiator).toMatchObject({ principal_id: h.id });
  });

  it('listEvents 200: a system event has null actor principal and initiator in its provenance', async () => {
    const cid = await createCollection(t);
    const { id } = await appendEvent(t.deps.sql, SYSTEM_ACTOR, {
      entityType: 'collection',
      entityId: cid,
      collectionId: cid,
      action: 'updated',
    });
    const res = await t.request('GET', '/api/v1/events', { query: { collection_id: cid, id } });
    expect((res.body as { provenance: unknown; actor_user_id: unknown }[])[0]).toMatchObject({
      actor_user_id: null,
      provenance: { actor: { kind: 'system', principal: null }, initiator: null, task_id: null },
    });
  });
});

// ---- subscriptions: each filter member on its own -------------------------------------------

describe('subscription filters', () => {
  it('createCollectionEventSubscription 201: every filter member narrows on its own', async () => {
    const sink = (await createSink(t)).id;
    const col = await createCollection(t);
    const X = 900_000_001;
    const Y = 900_000_002;
    const rA = '3f1c1b7e-8a5e-4c64-9f0e-000000000001';
    const rB = '3f1c1b7e-8a5e-4c64-9f0e-000000000002';
    const mk = (filter: Record<string, unknown>) =>
      createSubscription(t, col, { sink_id: sink, entity_types: ['object'], actions: ['created'], filter });
    const subs = {
      actorUser: await mk({ actor_user_ids: [X] }),
      initiator: await mk({ initiator_user_ids: [Y] }),
      worker: await mk({ actor_kinds: ['worker'] }),
      request: await mk({ request_ids: [rB] }),
      correlation: await mk({ correlation_ids: ['corr-a'] }),
      entity: await mk({ entity_ids: [77] }),
      name: await mk({ entity_names: ['only-this'] }),
    };
    const a: Actor = { kind: 'user', principalId: X, principalName: 'x', requestId: rA, correlationId: 'corr-a' };
    const b: Actor = { kind: 'user', principalId: Y, principalName: 'y', requestId: rB, correlationId: 'corr-b' };
    const w: Actor = { kind: 'worker', principalId: null, principalName: null, initiatorId: X, initiatorName: 'x', taskId: 5 };
    const emit = async (who: Actor, entityId: number, entityName = 'thing') =>
      (await appendEvent(t.deps.sql, who, { entityType: 'object', entityId, entityName, action: 'created', collectionId: col })).event_id;
    const eA = await emit(a, 1);
    const eB = await emit(b, 77);
    const eW = await emit(w, 2, 'only-this');
    await fanOutAll(t);
    const got = async (s: { id: number }) => (await deliveriesOf(t, s.id)).map((d) => d.event_id).sort();
    expect(await got(subs.actorUser)).toEqual([eA]);
    expect(await got(subs.initiator)).toEqual([eB]);
    expect(await got(subs.worker)).toEqual([eW]);
    expect(await got(subs.request)).toEqual([eB]);
    expect(await got(subs.correlation)).toEqual([eA]);
    expect(await got(subs.entity)).toEqual([eB]);
    expect(await got(subs.name)).toEqual([eW]);
  });

  it('createCollectionEventSubscription 400 for an unknown task kind or actor kind', async () => {
    const sink = (await createSink(t)).id;
    const col = await createCollection(t);
    for (const filter of [{ task_kinds: ['teleport'] }, { actor_kinds: ['robot'] }]) {
      const res = await t.request('POST', `/api/v1/collections/${col}/event-subscriptions`, {
        body: {
          sink_id: sink,
          name: uniq('sub'),
          entity_types: ['task'],
          actions: ['failed'],
          filter,
          routing: { url: 'https://hooks.example.com/' },
        },
      });
      expect(res.status, JSON.stringify(filter)).toBe(400);
    }
  });
});

// ---- deliveries ----------------------------------------------------------------------------------

describe('delivery transitions and pacing', () => {
  async function oneDelivery(sinkBody: Record<string, unknown> = {}) {
    const sinkId = (await createSink(t, sinkBody)).id;
    const col = await createCollection(t);
    const sub = await createSubscription(t, col, {
      sink_id: sinkId,
      entity_types: ['collection'],
      actions: ['updated'],
      routing: { url: peer.url('/paced') },
    });
    const res = await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: uniq('d') } });
    expect(res.status).toBe(200);
    await fanOutAll(t);
    const [d] = await deliveriesOf(t, sub.id);
    return { sinkId, subId: sub.id, delivery: d! };
  }

  it('markEventDeliveryDead 200 from succeeded and from failed (any → dead)', async () => {
    for (const status of ['succeeded', 'failed']) {
      const { delivery } = await oneDelivery();
      await t.deps.sql`update event_deliveries set status = ${status}, attempts = 1 where id = ${delivery.id}`;
      const res = await t.request('POST', `/api/v1/event-deliveries/${delivery.id}/dead`);
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ id: delivery.id, status: 'dead', locked_until: null });
    }
  });

  it('testEventSink 202: a test delivery bypasses filters but respects the sink min_interval (configured_rate)', async () => {
    resetPeer();
    const { sinkId, subId, delivery } = await oneDelivery({ delivery_policy: { min_interval_ms: 60_000 } });
    expect(await runDeliveryOnce(t.deps, { sinkIds: [sinkId] })).toBe(1);
    expect(peer.seen.length).toBe(1);
    const test = await t.request('POST', `/api/v1/event-sinks/${sinkId}/test`, {
      body: { subscription_id: subId, event_id: delivery.event_id },
    });
    expect(test.status, test.text).toBe(202);
    const testId = (test.body as { id: number }).id;
    expect(await runDeliveryOnce(t.deps, { sinkIds: [sinkId] })).toBe(1);
    expect(peer.seen.length).toBe(1);
    const got = await t.request('GET', `/api/v1/event-deliveries/${testId}`);
    expect(got.body).toMatchObject({ purpose: 'test', status: 'pending', attempts: 0, deferred_reason: 'configured_rate' });
    const wait = new Date((got.body as { next_attempt_at: string }).next_attempt_at).getTime() - Date.now();
    expect(wait).toBeGreaterThan(50_000);
    expect(wait).toBeLessThanOrEqual(60_000);
  });

  it('previewEventSink 400 above the default max_request_bytes (1,000,000); 200 once the limit is raised', async () => {
    const col = await createCollection(t);
    const { event_id } = await appendEvent(t.deps.sql, SYSTEM_ACTOR, {
      entityType: 'collection',
      entityId: col,
      collectionId: col,
      action: 'updated',
      after: { blob: 'x'.repeat(1_000_000) },
    });
    const preview = async (config: Record<string, unknown>) => {
      const sinkId = (await createSink(t, { config })).id;
      const sub = await createSubscription(t, col, { sink_id: sinkId, entity_types: ['collection'], actions: ['updated'] });
      return t.request('POST', `/api/v1/event-sinks/${sinkId}/preview`, { body: { subscription_id: sub.id, event_id } });
    };
    const small = await preview({});
    expect(small.status, small.text.slice(0, 200)).toBe(400);
    expect((small.body as { message: string }).message).toMatch(/1000000/);
    expect((await preview({ max_request_bytes: 2_000_000 })).status).toBe(200);
  });

  it('broker, stream and e-mail payloads default to at most 1,000,000 bytes (permanent failure above)', () => {
    expect(DEFAULT_MAX_PAYLOAD_BYTES).toBe(1_000_000);
    expect(() => checkPayloadSize(1_000_000, {})).not.toThrow();
    expect(() => checkPayloadSize(1_000_001, {})).toThrow(/max_payload_bytes \(1000000\)/);
    expect(() => checkPayloadSize(1_000_001, { max_payload_bytes: 2_000_000 })).not.toThrow();
  });
});

// ---- settings and their defaults -------------------------------------------------------------

describe('worker and limit settings', () => {
  it('defaults of the event worker, retention, remote-call and template settings', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      SVC_EVENT_FANOUT_WORKERS: 1,
      SVC_EVENT_FANOUT_BATCH_SIZE: 100,
      SVC_EVENT_FANOUT_POLL_INTERVAL_MS: 5000,
      SVC_EVENT_FANOUT_LOCK_TIMEOUT_MS: 30000,
      SVC_EVENT_DELIVERY_WORKERS: 0,
      SVC_EVENT_DELIVERY_BATCH_SIZE: 100,
      SVC_EVENT_DELIVERY_POLL_INTERVAL_MS: 5000,
      SVC_EVENT_DELIVERY_LOCK_TIMEOUT_MS: 30000,
      SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS: 25000,
      SVC_EVENT_DELIVERY_RETRY_BACKOFF_BASE_MS: 1000,
      SVC_EVENT_DELIVERY_RETRY_BACKOFF_MAX_MS: 300000,
      SVC_EVENT_DELIVERY_MAX_ATTEMPTS: 10,
      SVC_EVENT_RETENTION_PURGE_ENABLED: false,
      SVC_EVENT_RETENTION_FILE_ARCHIVE_ENABLED: false,
      SVC_REMOTE_CALL_TIMEOUT_MS: 10000,
      SVC_REMOTE_CALL_MAX_RESPONSE_BYTES: 262144,
      SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: false,
      SVC_REMOTE_CALL_MAX_ACTIVE_TASKS_PER_USER: 100,
      SVC_EXPORT_TEMPLATE_RECURSION_LIMIT: 64,
      SVC_EXPORT_TEMPLATE_FUEL: 50000,
    });
    expect(testConfig().SVC_EVENT_DELIVERY_WORKERS).toBe(0);
  });

  it('the delivery transport timeout must be less than the delivery lock timeout', () => {
    expect(() => loadConfig({ SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS: '30000' })).toThrow(ConfigError);
    expect(() => loadConfig({ SVC_EVENT_DELIVERY_LOCK_TIMEOUT_MS: '20000' })).toThrow(/TRANSPORT_TIMEOUT_MS/);
    expect(loadConfig({ SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS: '29999' }).SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS).toBe(29999);
  });
});

// ---- worker wake-ups ----------------------------------------------------------------------------

describe('delivery worker polling fallback', () => {
  it('a row that becomes due without a notification is delivered by the poll', async () => {
    resetPeer();
    const sinkId = (await createSink(t)).id;
    const col = await createCollection(t);
    const sub = await createSubscription(t, col, {
      sink_id: sinkId,
      entity_types: ['collection'],
      actions: ['updated'],
      routing: { url: peer.url('/polled') },
    });
    await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: uniq('p') } });
    await fanOutAll(t);
    const [d] = await deliveriesOf(t, sub.id);
    await t.deps.sql`update event_deliveries set next_attempt_at = now() + interval '1 hour' where id = ${d!.id}`;
    const deps = { ...t.deps, config: { ...t.deps.config, SVC_EVENT_DELIVERY_WORKERS: 1, SVC_EVENT_DELIVERY_POLL_INTERVAL_MS: 150 } };
    const ctl = new AbortController();
    const stats = { notification: 0, poll: 0 };
    const loop = runDeliveryWorkers(deps, ctl.signal, stats, { sinkIds: [sinkId] });
    try {
      await new Promise((r) => setTimeout(r, 400));
      expect(peer.seen.length).toBe(0);
      // an update sends no notification: only the poll can find the row
      await t.deps.sql`update event_deliveries set next_attempt_at = now() where id = ${d!.id}`;
      // until the worker has recorded the outcome: the peer has the request before the worker has
      // the answer, and a worker stopped in between releases its claim (pending again, by design)
      const settled = async () =>
        ['succeeded', 'failed', 'dead'].includes(
          (await t.deps.sql<{ status: string }[]>`select status from event_deliveries where id = ${d!.id}`)[0]!.status,
        );
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline && !(await settled())) await new Promise((r) => setTimeout(r, 50));
    } finally {
      ctl.abort();
      await loop;
    }
    expect(peer.seen.map((r) => r.url)).toEqual(['/polled']);
    expect(stats.poll).toBeGreaterThanOrEqual(1);
    const row = await t.request('GET', `/api/v1/event-deliveries/${d!.id}`);
    expect(row.body).toMatchObject({ status: 'succeeded' });
  });
});

// ---- backups: authentication -------------------------------------------------------------------

describe('backup reads', () => {
  it('getBackup and getBackupOutput 401 without a token; getBackupOutput 400 for a bad id and 404 for a missing task', async () => {
    expect((await t.request('GET', '/api/v1/backups/1', { token: null })).status).toBe(401);
    expect((await t.request('GET', '/api/v1/backups/1/output', { token: null })).status).toBe(401);
    expect((await t.request('POST', '/api/v1/backups', { token: null, body: {} })).status).toBe(401);
    expect((await t.request('GET', '/api/v1/backups/0/output')).status).toBe(400);
    expect((await t.request('GET', '/api/v1/backups/2000000000/output')).status).toBe(404);
  });
});

// ---- remote targets: transport-controlled header names -------------------------------------

describe('remote target header rules', () => {
  const NAMES = [
    'Host',
    'Content-Length',
    'Transfer-Encoding',
    'Connection',
    'Keep-Alive',
    'Proxy-Connection',
    'Proxy-Authorization',
    'TE',
    'Trailer',
    'Upgrade',
    'HTTP2-Settings',
  ];
  let col: number;
  beforeAll(async () => {
    col = await createCollection(t);
  });
  const body = (extra: Record<string, unknown>) => ({
    collection_id: col,
    name: uniq('rt'),
    description: '',
    method: 'get',
    url_template: 'https://example.com/',
    allowed_subject_types: ['collection'],
    ...extra,
  });

  it.each(NAMES)('createRemoteTarget 400 for %s in headers_template or as the API-key header', async (name) => {
    const inTemplate = await t.request('POST', '/api/v1/remote-targets', {
      body: body({ headers_template: { [name.toLowerCase()]: 'x' } }),
    });
    expect(inTemplate.status, inTemplate.text).toBe(400);
    const asKey = await t.request('POST', '/api/v1/remote-targets', {
      body: body({ auth_config: { type: 'api_key_header', header: name, secret: 'KEY_A' } }),
    });
    expect(asKey.status, asKey.text).toBe(400);
  });

  it('updateRemoteTarget 400 for a transport header; the target is unchanged', async () => {
    const created = await t.request('POST', '/api/v1/remote-targets', { body: body({ headers_template: { 'X-A': '1' } }) });
    expect(created.status).toBe(201);
    const id = (created.body as { id: number }).id;
    const res = await t.request('PATCH', `/api/v1/remote-targets/${id}`, { body: { headers_template: { Upgrade: 'h2c' } } });
    expect(res.status).toBe(400);
    const got = await t.request('GET', `/api/v1/remote-targets/${id}`);
    expect(got.body).toMatchObject({ headers_template: { 'X-A': '1' }, revision: 1 });
  });
});

// ---- webhook response policy --------------------------------------------------------------------

describe('webhook response policy', () => {
  const res = (status: number, headers: Record<string, string> = {}) => ({ status, headers, body: Buffer.from(''), truncated: false });

  it('a 429 under rate_limit defers even when retry_statuses does not list it; an invalid Retry-After means 60 s', () => {
    const now = Date.now();
    const policy = { rate_limit: true, retry_statuses: [503] };
    for (const value of ['soon', '-5', '1.5', '']) {
      expect(evaluateResponse(policy, res(429, { 'retry-after': value }), now), value).toEqual({
        outcome: 'deferred',
        reason: 'provider_rate',
        retryAfterMs: 60_000,
      });
    }
    expect(evaluateResponse(policy, res(429, { 'retry-after': '7' }), now)).toMatchObject({ retryAfterMs: 7000 });
    expect(evaluateResponse({ retry_statuses: [503] }, res(429), now)).toMatchObject({ outcome: 'dead' });
    expect(evaluateResponse(undefined, res(429), now)).toMatchObject({ outcome: 'retry' });
    expect(evaluateResponse(undefined, res(302), now)).toMatchObject({ outcome: 'retry' });
  });

  it('createEventSink 400 for a non-2xx success status or a 2xx retry status', async () => {
    for (const response of [{ success_statuses: [404] }, { retry_statuses: [200] }, { success_statuses: [199] }]) {
      const r = await t.request('POST', '/api/v1/event-sinks', { body: { name: uniq('sink'), kind: 'webhook', config: { response } } });
      expect(r.status, JSON.stringify(response)).toBe(400);
    }
  });
});
