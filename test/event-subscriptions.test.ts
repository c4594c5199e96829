// Event subscriptions (collection and system): CRUD with every error status, permissions and token
// scopes, catalog and routing validation; and fan-out matching (scope, filters, enabled flags, no
// replay, exactly once under concurrent and stalled workers).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { createHuman, eventsOf, tokenFor, type Human } from './iam-fixtures.ts';
import { principalWith } from './class-fixtures.ts';
import { createCollection, createSink, createSubscription, deliveriesOf, fanOutAll } from './event-fixtures.ts';
import { appendEvent } from '../src/db/events.ts';
import { type NewEvent } from '../src/domain/new-event.ts';
import { SYSTEM_ACTOR, type Actor } from '../src/domain/actor.ts';
import { claimFanoutBatch, finishFanout } from '../src/db/event-fanout.ts';
import { runEventFanoutOnce } from '../src/workers/event-fanout.ts';
import { withTx } from '../src/db/tx.ts';

let t: TestApp;
let human: Human;
let sink: number;

beforeAll(async () => {
  t = await startTestApp();
  human = await createHuman(t);
  sink = (await createSink(t)).id;
});

afterAll(async () => {
  await t?.close();
});

function collPath(cid: number, sid?: number) {
  return `/api/v1/collections/${cid}/event-subscriptions${sid ? `/${sid}` : ''}`;
}

describe('createCollectionEventSubscription', () => {
  it('201 with Location, ETag, defaults and an event_subscription.created event on the collection', async () => {
    const col = await createCollection(t);
    const name = uniq('sub');
    const res = await t.request('POST', collPath(col), {
      body: {
        sink_id: sink,
        name,
        entity_types: ['object', 'class'],
        actions: ['created', 'deleted'],
        routing: { url: 'https://hooks.example.com/x' },
      },
    });
    expect(res.status, res.text).toBe(201);
    const body = res.body as Record<string, unknown>;
    expect(res.headers.get('location')).toBe(`${collPath(col)}/${body.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.event_subscription\./);
    expect(body).toMatchObject({ collection_id: col, sink_id: sink, name, description: '', filter: {}, enabled: true, revision: 1 });
    const [ev] = await t.deps.sql<{ action: string; collection_id: number }[]>`
      select action, collection_id from events where entity_type = 'event_subscription' and entity_id = ${body.id as number}`;
    expect(ev).toEqual({ action: 'created', collection_id: col });
  });

  it('400 for unknown entity types or actions, impossible pairs, and routing that does not fit the sink', async () => {
    const col = await createCollection(t);
    const urlSink = (await createSink(t, { config: { url_secret_ref: 'HOOK_URL' } })).id;
    const cases: [Record<string, unknown>, string][] = [
      [{ entity_types: ['spaceship'] }, 'body.entity_types'],
      [{ actions: ['exploded'] }, 'body.actions'],
      [{ entity_types: ['task', 'collection'], actions: ['created'] }, 'body.actions'],
      [{ routing: {} }, 'body.routing.url'],
      [{ routing: { url: 'https://user:pw@hooks.example.com/' } }, 'body.routing.url'],
      [{ routing: { url: 'https://hooks.example.com/', stream: 's' } }, 'body.routing.stream'],
      [{ sink_id: urlSink }, 'body.routing.url'],
    ];
    for (const [over, path] of cases) {
      const res = await t.request('POST', collPath(col), {
        body: {
          sink_id: sink,
          name: uniq('sub'),
          entity_types: ['collection'],
          actions: ['updated'],
          routing: { url: 'https://hooks.example.com/' },
          ...over,
        },
      });
      expect(res.status, `${JSON.stringify(over)} ${res.text}`).toBe(400);
      expect((res.body as { details: { path: string }[] }).details.map((d) => d.path)).toContain(path);
    }
    const schema = await t.request('POST', collPath(col), {
      body: { sink_id: sink, name: uniq('sub'), entity_types: [], actions: ['updated'] },
    });
    expect(schema.status).toBe(400);
    const http = await t.request('POST', collPath(col), {
      body: { sink_id: sink, name: uniq('sub'), entity_types: ['collection'], actions: ['updated'], routing: { url: 'http://x.example/' } },
    });
    expect(http.status).toBe(400);
    const ok = await t.request('POST', collPath(col), {
      body: { sink_id: urlSink, name: uniq('sub'), entity_types: ['collection'], actions: ['updated'] },
    });
    expect(ok.status, ok.text).toBe(201);
  });

  it('404 for a missing sink or collection; 409 for a duplicate name in the collection only', async () => {
    const col = await createCollection(t);
    const other = await createCollection(t);
    const missingSink = await t.request('POST', collPath(col), {
      body: { sink_id: 999999, name: uniq('s'), entity_types: ['collection'], actions: ['updated'] },
    });
    expect(missingSink.status).toBe(404);
    expect(
      (
        await t.request('POST', collPath(999999), {
          body: { sink_id: sink, name: 'x', entity_types: ['collection'], actions: ['updated'] },
        })
      ).status,
    ).toBe(404);
    const name = uniq('dup');
    await createSubscription(t, col, { sink_id: sink, name });
    const dup = await t.request('POST', collPath(col), {
      body: { sink_id: sink, name, entity_types: ['collection'], actions: ['updated'], routing: { url: 'https://h.example/' } },
    });
    expect(dup.status).toBe(409);
    await createSubscription(t, other, { sink_id: sink, name });
  });

  it('ManageEventSubscription is needed on the collection; permission-scoped tokens are denied; resource scopes need the collection', async () => {
    const col = await createCollection(t);
    const child = await createCollection(t, col);
    // a sink that allows this destination to everyone who may subscribe (test/secret-destinations.test.ts covers the rest)
    const open = (await createSink(t, { config: { allowed_routing: { urls: ['https://h.example/'] } } })).id;
    const body = { sink_id: open, entity_types: ['collection'], actions: ['updated'], routing: { url: 'https://h.example/' } };
    const manager = await principalWith(t, [[col, ['ManageEventSubscription']]]);
    const reader = await principalWith(t, [[col, ['ReadCollection', 'ReadAudit']]]);
    expect((await t.request('POST', collPath(col), { token: reader.token, body: { ...body, name: uniq('s') } })).status).toBe(403);
    expect((await t.request('POST', collPath(col), { token: manager.token, body: { ...body, name: uniq('s') } })).status).toBe(201);
    // grants inherit down the tree
    expect((await t.request('POST', collPath(child), { token: manager.token, body: { ...body, name: uniq('s') } })).status).toBe(201);
    const permScoped = await tokenFor(t, manager.id, { permissions: ['ReadCollection'] });
    expect((await t.request('GET', collPath(col), { token: permScoped })).status).toBe(403);
    const inScope = await tokenFor(t, manager.id, { resources: [{ kind: 'collection', id: col }] });
    expect((await t.request('GET', collPath(col), { token: inScope })).status).toBe(200);
    expect((await t.request('GET', collPath(child), { token: inScope })).status).toBe(403);
    expect((await t.request('GET', collPath(col), { token: null })).status).toBe(401);
  });
});

describe('subscriptions of other sink kinds', () => {
  it('routing is validated for the sink kind; the email alias to is stored as recipients', async () => {
    const col = await createCollection(t);
    const email = (
      await createSink(t, {
        kind: 'email',
        config: {
          uri: 'smtps://mail.example.com:465',
          from: 'Inventory <inv@example.com>',
          subject_template: '{{ summary }}',
          body_template: '{{ summary }}',
        },
      })
    ).id;
    const amqp = (await createSink(t, { kind: 'amqp', config: { uri: 'amqps://broker.example.com/', exchange: 'events' } })).id;
    const body = { name: uniq('s'), entity_types: ['collection'], actions: ['updated'] };
    const res = await t.request('POST', collPath(col), {
      body: { ...body, sink_id: email, routing: { to: ['ops@example.com'], cc: ['x@example.com'] } },
    });
    expect(res.status, res.text).toBe(201);
    expect((res.body as { routing: unknown }).routing).toEqual({ recipients: ['ops@example.com'], cc: ['x@example.com'] });
    const both = await t.request('POST', collPath(col), {
      body: { ...body, name: uniq('s'), sink_id: email, routing: { to: ['a@example.com'], recipients: ['b@example.com'] } },
    });
    expect(both.status).toBe(400);
    const webhookRouting = await t.request('POST', collPath(col), {
      body: { ...body, name: uniq('s'), sink_id: amqp, routing: { url: 'https://h.example/' } },
    });
    expect(webhookRouting.status).toBe(400);
    const ok = await t.request('POST', collPath(col), { body: { ...body, name: uniq('s'), sink_id: amqp } });
    expect(ok.status, ok.text).toBe(201);
    // moving a subscription to a sink of another kind needs routing for that kind
    const moved = await t.request('PATCH', collPath(col, (ok.body as { id: number }).id), { body: { sink_id: email } });
    expect(moved.status).toBe(400);
    const movedWithRouting = await t.request('PATCH', collPath(col, (ok.body as { id: number }).id), {
      body: { sink_id: email, routing: { to: ['ops@example.com'] } },
    });
    expect(movedWithRouting.status, movedWithRouting.text).toBe(200);
    expect((movedWithRouting.body as { routing: unknown }).routing).toEqual({ recipients: ['ops@example.com'] });
  });
});

describe('list/get/update/deleteCollectionEventSubscription', () => {
  it('listCollectionEventSubscriptions 200: only this collection, filters; 400 unknown field; 404 missing collection', async () => {
    const col = await createCollection(t);
    const other = await createCollection(t);
    const a = await createSubscription(t, col, { sink_id: sink });
    const b = await createSubscription(t, col, { sink_id: sink, enabled: false });
    await createSubscription(t, other, { sink_id: sink });
    const res = await t.request('GET', collPath(col));
    expect(res.status).toBe(200);
    expect((res.body as { id: number }[]).map((s) => s.id)).toEqual([a.id, b.id]);
    expect(res.headers.get('x-total-count')).toBe('2');
    const enabled = await t.request('GET', collPath(col), { query: { enabled: 'true', sink_id: sink } });
    expect((enabled.body as { id: number }[]).map((s) => s.id)).toEqual([a.id]);
    expect((await t.request('GET', collPath(col), { query: { routing: 'x' } })).status).toBe(400);
    expect((await t.request('GET', collPath(999999))).status).toBe(404);
    expect((await t.request('GET', collPath(col), { token: human.token })).status).toBe(403);
  });

  it('getCollectionEventSubscription 200 with ETag; 404 for another collection or a system subscription', async () => {
    const col = await createCollection(t);
    const other = await createCollection(t);
    const s = await createSubscription(t, col, { sink_id: sink });
    const sys = await createSubscription(t, null, { sink_id: sink, entity_types: ['group'] });
    const res = await t.request('GET', collPath(col, s.id));
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe(s.etag);
    expect((await t.request('GET', collPath(other, s.id))).status).toBe(404);
    expect((await t.request('GET', collPath(col, sys.id))).status).toBe(404);
    expect((await t.request('GET', collPath(col, s.id), { token: human.token })).status).toBe(403);
  });

  it('updateCollectionEventSubscription 200, no-op, 400, 404, 409, 412', async () => {
    const col = await createCollection(t);
    const taken = uniq('taken');
    await createSubscription(t, col, { sink_id: sink, name: taken });
    const s = await createSubscription(t, col, { sink_id: sink });
    const res = await t.request('PATCH', collPath(col, s.id), {
      headers: { 'if-match': s.etag },
      body: { description: 'new', filter: { entity_names: ['x'] }, enabled: false },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ description: 'new', filter: { entity_names: ['x'] }, enabled: false, revision: 2 });
    const same = await t.request('PATCH', collPath(col, s.id), { body: { description: 'new', enabled: false } });
    expect(same.status).toBe(200);
    expect(same.body).toMatchObject({ revision: 2 });
    expect((await eventsOf(t, 'event_subscription', s.id)).map((e) => e.action)).toEqual(['created', 'updated']);
    expect((await t.request('PATCH', collPath(col, s.id), { body: {} })).status).toBe(400);
    expect((await t.request('PATCH', collPath(col, s.id), { body: { actions: ['invoked'] } })).status).toBe(400);
    expect((await t.request('PATCH', collPath(col, s.id), { body: { sink_id: 999999 } })).status).toBe(404);
    expect((await t.request('PATCH', collPath(col, 999999), { body: { enabled: true } })).status).toBe(404);
    expect((await t.request('PATCH', collPath(col, s.id), { body: { name: taken } })).status).toBe(409);
    const stale = await t.request('PATCH', collPath(col, s.id), { headers: { 'if-match': s.etag }, body: { enabled: true } });
    expect(stale.status).toBe(412);
    expect((await t.request('PATCH', collPath(col, s.id), { token: human.token, body: { enabled: true } })).status).toBe(403);
  });

  it('updateCollectionEventSubscription moving to another sink re-points unfinished deliveries', async () => {
    const col = await createCollection(t);
    const s = await createSubscription(t, col, { sink_id: sink });
    await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: uniq() } });
    await fanOutAll(t);
    const [d] = await deliveriesOf(t, s.id);
    expect(d).toMatchObject({ sink_id: sink, status: 'pending' });
    const other = (await createSink(t)).id;
    expect((await t.request('PATCH', collPath(col, s.id), { body: { sink_id: other } })).status).toBe(200);
    expect((await deliveriesOf(t, s.id))[0]).toMatchObject({ id: d!.id, sink_id: other });
  });

  it('a collection with subscriptions cannot be deleted (409)', async () => {
    const col = await createCollection(t);
    await createSubscription(t, col, { sink_id: sink });
    const res = await t.request('DELETE', `/api/v1/collections/${col}`);
    expect(res.status, res.text).toBe(409);
  });

  it('deleteCollectionEventSubscription 204 with an event and its deliveries; 404; 412', async () => {
    const col = await createCollection(t);
    const s = await createSubscription(t, col, { sink_id: sink });
    await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: uniq() } });
    await fanOutAll(t);
    expect((await deliveriesOf(t, s.id)).length).toBe(1);
    await t.request('PATCH', collPath(col, s.id), { body: { description: 'x' } });
    expect((await t.request('DELETE', collPath(col, s.id), { headers: { 'if-match': s.etag } })).status).toBe(412);
    expect((await t.request('DELETE', collPath(col, s.id), { token: human.token })).status).toBe(403);
    expect((await t.request('DELETE', collPath(col, s.id))).status).toBe(204);
    expect((await deliveriesOf(t, s.id)).length).toBe(0);
    expect((await eventsOf(t, 'event_subscription', s.id)).map((e) => e.action)).toEqual(['created', 'updated', 'deleted']);
    expect((await t.request('DELETE', collPath(col, s.id))).status).toBe(404);
  });
});

describe('subscription and sink audit snapshots', () => {
  it('each event holds the subscription as the write answered it, routing_admin_approved as the statement decided it', async () => {
    const col = await createCollection(t);
    const open = (await createSink(t, { config: { allowed_routing: { urls: ['https://h.example/'] } } })).id;
    const manager = await principalWith(t, [[col, ['ManageEventSubscription']]]);
    const body = {
      sink_id: open,
      name: uniq('sub'),
      entity_types: ['collection'],
      actions: ['updated'],
      routing: { url: 'https://h.example/a' },
    };
    const created = await t.request('POST', collPath(col), { token: manager.token, body });
    expect(created.status, created.text).toBe(201);
    const id = (created.body as { id: number }).id;
    const patch = async (token: string, change: Record<string, unknown>, approved: boolean) => {
      const res = await t.request('PATCH', collPath(col, id), { token, body: change });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ routing_admin_approved: approved });
      return res.body;
    };
    const answers = [
      created.body,
      await patch(t.adminToken, { routing: { url: 'https://h.example/a' } }, true), // the administrator approves it as it is
      await patch(manager.token, { description: 'kept' }, true),
      await patch(manager.token, { routing: { url: 'https://h.example/b' } }, false),
    ];
    expect((await t.request('DELETE', collPath(col, id), { token: manager.token })).status).toBe(204);
    const evs = await eventsOf(t, 'event_subscription', id);
    expect(evs.map((e) => [e.action, e.before ?? null, e.after ?? null])).toEqual([
      ['created', null, answers[0]],
      ['updated', answers[0], answers[1]],
      ['updated', answers[1], answers[2]],
      ['updated', answers[2], answers[3]],
      ['deleted', answers[3], null],
    ]);
  });

  it('each event holds the sink as the write answered it (created, updated, deleted)', async () => {
    const created = await t.request('POST', '/api/v1/event-sinks', { body: { name: uniq('sink'), kind: 'webhook' } });
    expect(created.status, created.text).toBe(201);
    const id = (created.body as { id: number }).id;
    const updated = await t.request('PATCH', `/api/v1/event-sinks/${id}`, {
      body: { config: { timeout_ms: 1500, allowed_routing: { urls: ['https://h.example/'] } }, delivery_policy: { min_interval_ms: 20 } },
    });
    expect(updated.status, updated.text).toBe(200);
    expect((await t.request('GET', `/api/v1/event-sinks/${id}`)).body).toEqual(updated.body);
    expect((await t.request('DELETE', `/api/v1/event-sinks/${id}`)).status).toBe(204);
    const evs = await eventsOf(t, 'event_sink', id);
    expect(evs.map((e) => [e.action, e.before ?? null, e.after ?? null])).toEqual([
      ['created', null, created.body],
      ['updated', created.body, updated.body],
      ['deleted', updated.body, null],
    ]);
  });
});

describe('system event subscriptions', () => {
  const path = (id?: number) => `/api/v1/system-event-subscriptions${id ? `/${id}` : ''}`;

  it('createSystemEventSubscription 201; 400 for collection filters; 409 duplicate name; 404 sink; 403', async () => {
    const name = uniq('sys');
    const res = await t.request('POST', path(), {
      body: { sink_id: sink, name, entity_types: ['group', 'user'], actions: ['created'], routing: { url: 'https://h.example/' } },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ collection_id: null, name });
    expect(res.headers.get('location')).toBe(path((res.body as { id: number }).id));
    for (const filter of [{ collection_ids: [1] }, { related_collection_ids: [2] }]) {
      const bad = await t.request('POST', path(), {
        body: {
          sink_id: sink,
          name: uniq('sys'),
          entity_types: ['group'],
          actions: ['created'],
          filter,
          routing: { url: 'https://h.example/' },
        },
      });
      expect(bad.status).toBe(400);
    }
    const empty = await t.request('POST', path(), {
      body: {
        sink_id: sink,
        name: uniq('sys'),
        entity_types: ['group'],
        actions: ['created'],
        filter: { collection_ids: [] },
        routing: { url: 'https://h.example/' },
      },
    });
    expect(empty.status).toBe(201);
    const dup = await t.request('POST', path(), {
      body: { sink_id: sink, name, entity_types: ['group'], actions: ['created'], routing: { url: 'https://h.example/' } },
    });
    expect(dup.status).toBe(409);
    expect(
      (await t.request('POST', path(), { body: { sink_id: 999999, name: uniq(), entity_types: ['group'], actions: ['created'] } })).status,
    ).toBe(404);
    expect(
      (
        await t.request('POST', path(), {
          token: human.token,
          body: { sink_id: sink, name: uniq(), entity_types: ['group'], actions: ['created'] },
        })
      ).status,
    ).toBe(403);
  });

  it('list/get/update/deleteSystemEventSubscription and their errors', async () => {
    const col = await createCollection(t);
    const s = await createSubscription(t, null, { sink_id: sink, entity_types: ['group'], actions: ['created'] });
    const c = await createSubscription(t, col, { sink_id: sink });
    const list = await t.request('GET', path(), { query: { id: `${s.id},${c.id}` } });
    expect((list.body as { id: number }[]).map((x) => x.id)).toEqual([s.id]);
    expect((await t.request('GET', path(), { token: human.token })).status).toBe(403);
    expect((await t.request('GET', path(s.id))).status).toBe(200);
    expect((await t.request('GET', path(c.id))).status).toBe(404);
    expect((await t.request('GET', path(s.id), { token: human.token })).status).toBe(403);
    const up = await t.request('PATCH', path(s.id), { headers: { 'if-match': s.etag }, body: { actions: ['created', 'deleted'] } });
    expect(up.status, up.text).toBe(200);
    expect((await t.request('PATCH', path(s.id), { body: { filter: { collection_ids: [col] } } })).status).toBe(400);
    expect((await t.request('PATCH', path(s.id), { headers: { 'if-match': s.etag }, body: { enabled: false } })).status).toBe(412);
    expect((await t.request('PATCH', path(c.id), { body: { enabled: false } })).status).toBe(404);
    expect((await t.request('PATCH', path(s.id), { token: human.token, body: { enabled: false } })).status).toBe(403);
    expect((await t.request('DELETE', path(c.id))).status).toBe(404);
    expect((await t.request('DELETE', path(s.id), { token: human.token })).status).toBe(403);
    expect((await t.request('DELETE', path(s.id), { headers: { 'if-match': s.etag } })).status).toBe(412);
    expect((await t.request('DELETE', path(s.id))).status).toBe(204);
    expect((await t.request('GET', path(s.id))).status).toBe(404);
  });
});

describe('fan-out matching', () => {
  const actor: Actor = { kind: 'user', principalId: 1, principalName: 'admin', requestId: randomUUID(), correlationId: 'corr-1' };

  async function emit(e: Partial<NewEvent> & { entityType: string; action: string }, who: Actor = actor): Promise<string> {
    // An id no real row has: the test database is shared, and a seeded `task` event for id 1 would
    // show up among the audit events of the first real task.
    const r = await appendEvent(t.deps.sql, who, { entityId: 2_000_000_000, entityName: 'thing', ...e });
    return r.event_id;
  }

  async function deliveredEvents(subscriptionId: number): Promise<string[]> {
    return (await deliveriesOf(t, subscriptionId)).map((d) => d.event_id);
  }

  it('a collection subscription matches events attached to or referencing its collection, not its children', async () => {
    const col = await createCollection(t);
    const child = await createCollection(t, col);
    const elsewhere = await createCollection(t);
    const s = await createSubscription(t, col, { sink_id: sink, entity_types: ['object'], actions: ['created', 'updated'] });
    const direct = await emit({ entityType: 'object', action: 'created', collectionId: col });
    const related = await emit({ entityType: 'object', action: 'updated', collectionId: elsewhere, relatedCollectionIds: [col] });
    await emit({ entityType: 'object', action: 'created', collectionId: child });
    await emit({ entityType: 'object', action: 'deleted', collectionId: col });
    await emit({ entityType: 'class', action: 'created', collectionId: col });
    await emit({ entityType: 'object', action: 'created', collectionId: null });
    await fanOutAll(t);
    expect((await deliveredEvents(s.id)).sort()).toEqual([direct, related].sort());
    const [d] = await deliveriesOf(t, s.id);
    expect(d).toMatchObject({ purpose: 'event', status: 'pending', attempts: 0, sink_id: sink });
  });

  it('a system subscription matches only collection-less events', async () => {
    const col = await createCollection(t);
    const s = await createSubscription(t, null, { sink_id: sink, entity_types: ['group'], actions: ['created'] });
    const name = uniq('grp');
    const g = await t.request('POST', '/api/v1/iam/groups', { body: { name } });
    expect(g.status).toBe(201);
    await emit({ entityType: 'group', action: 'created', collectionId: col });
    await emit({ entityType: 'group', action: 'created', collectionId: null, relatedCollectionIds: [col] });
    await fanOutAll(t);
    const ids = await deliveredEvents(s.id);
    const [ev] = await t.deps.sql<{ event_id: string }[]>`
      select event_id::text as event_id from events where entity_type = 'group' and entity_name = ${name}`;
    expect(ids).toContain(ev!.event_id);
    const rows = await t.deps.sql<{ collection_id: number | null; n: number }[]>`
      select count(*)::int as n from event_deliveries d join events e on e.event_id = d.event_id
      where d.subscription_id = ${s.id} and (e.collection_id is not null or cardinality(e.related_collection_ids) > 0)`;
    expect(rows[0]!.n).toBe(0);
  });

  it('filter members combine with AND, values with OR; empty members match all', async () => {
    const col = await createCollection(t);
    const rel = await createCollection(t);
    const other = await createCollection(t);
    const mk = (filter: Record<string, unknown>, entity_types = ['object'], actions = ['created']) =>
      createSubscription(t, col, { sink_id: sink, entity_types, actions, filter });
    const byName = await mk({ entity_names: ['alpha', 'beta'], entity_ids: [] });
    const byNameAndActor = await mk({ entity_names: ['alpha', 'beta'], actor_kinds: ['system'] });
    const byIds = await mk({ entity_ids: [42], actor_user_ids: [1], initiator_user_ids: [1] });
    const byRequest = await mk({ request_ids: [actor.requestId!.toUpperCase()], correlation_ids: ['corr-1'] });
    const byRelated = await mk({ related_collection_ids: [col, other] });
    const byCollection = await mk({ collection_ids: [col] });
    const byTaskKind = await mk({ task_kinds: ['export'] }, ['task'], ['succeeded']);
    const allTasks = await mk({ task_kinds: [] }, ['task'], ['succeeded']);
    const alpha = await emit({ entityType: 'object', action: 'created', collectionId: col, entityName: 'alpha' });
    const betaSystem = await emit({ entityType: 'object', action: 'created', collectionId: col, entityName: 'beta' }, SYSTEM_ACTOR);
    const gamma42 = await emit({ entityType: 'object', action: 'created', collectionId: col, entityName: 'gamma', entityId: 42 });
    const viaRel = await emit({ entityType: 'object', action: 'created', collectionId: rel, relatedCollectionIds: [col] });
    const exportTask = await emit({ entityType: 'task', action: 'succeeded', collectionId: col, metadata: { task_kind: 'export' } });
    const importTask = await emit({ entityType: 'task', action: 'succeeded', collectionId: col, metadata: { task_kind: 'import' } });
    const noKind = await emit({ entityType: 'task', action: 'succeeded', collectionId: col });
    await fanOutAll(t);
    const sort = (a: string[]) => [...a].sort();
    expect(sort(await deliveredEvents(byName.id))).toEqual(sort([alpha, betaSystem]));
    expect(await deliveredEvents(byNameAndActor.id)).toEqual([betaSystem]);
    expect(await deliveredEvents(byIds.id)).toEqual([gamma42]);
    expect(sort(await deliveredEvents(byRequest.id))).toEqual(sort([alpha, gamma42, viaRel]));
    expect(await deliveredEvents(byRelated.id)).toEqual([viaRel]);
    expect(sort(await deliveredEvents(byCollection.id))).toEqual(sort([alpha, betaSystem, gamma42]));
    expect(await deliveredEvents(byTaskKind.id)).toEqual([exportTask]);
    expect(sort(await deliveredEvents(allTasks.id))).toEqual(sort([exportTask, importTask, noKind]));
  });

  it('disabled subscriptions and disabled sinks get no new deliveries; re-enabling does not replay', async () => {
    const col = await createCollection(t);
    const offSink = await createSink(t, { enabled: false });
    const onSub = await createSubscription(t, col, { sink_id: sink, entity_types: ['object'], actions: ['created'] });
    const offSub = await createSubscription(t, col, { sink_id: sink, entity_types: ['object'], actions: ['created'], enabled: false });
    const sinkOff = await createSubscription(t, col, { sink_id: offSink.id, entity_types: ['object'], actions: ['created'] });
    const first = await emit({ entityType: 'object', action: 'created', collectionId: col });
    await fanOutAll(t);
    expect(await deliveredEvents(onSub.id)).toEqual([first]);
    expect(await deliveredEvents(offSub.id)).toEqual([]);
    expect(await deliveredEvents(sinkOff.id)).toEqual([]);
    await t.request('PATCH', collPath(col, offSub.id), { body: { enabled: true } });
    await t.request('PATCH', `/api/v1/event-sinks/${offSink.id}`, { body: { enabled: true } });
    const second = await emit({ entityType: 'object', action: 'created', collectionId: col });
    await fanOutAll(t);
    expect(await deliveredEvents(offSub.id)).toEqual([second]);
    expect(await deliveredEvents(sinkOff.id)).toEqual([second]);
  });

  it('new subscriptions do not replay history', async () => {
    const col = await createCollection(t);
    const before = await emit({ entityType: 'object', action: 'created', collectionId: col });
    const s = await createSubscription(t, col, { sink_id: sink, entity_types: ['object'], actions: ['created'] });
    const after = await emit({ entityType: 'object', action: 'created', collectionId: col });
    await fanOutAll(t);
    const ids = await deliveredEvents(s.id);
    expect(ids).toEqual([after]);
    expect(ids).not.toContain(before);
  });

  it('exactly one delivery per event and subscription with concurrent fan-out workers', async () => {
    const col = await createCollection(t);
    const s1 = await createSubscription(t, col, { sink_id: sink, entity_types: ['object'], actions: ['created'] });
    const s2 = await createSubscription(t, col, { sink_id: sink, entity_types: ['object'], actions: ['created'] });
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push(await emit({ entityType: 'object', action: 'created', collectionId: col }));
    const cfg = { ...t.deps.config, SVC_EVENT_FANOUT_BATCH_SIZE: 7 };
    const deps = { ...t.deps, config: cfg };
    const worker = async () => {
      for (let i = 0; i < 200; i++) if ((await runEventFanoutOnce(deps)).claimed === 0) return;
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    for (const s of [s1, s2]) {
      const got = await deliveredEvents(s.id);
      expect(got.length).toBe(30);
      expect(new Set(got)).toEqual(new Set(ids));
    }
  });

  it('a stalled worker whose claim expired writes nothing; the worker that took over delivers once', async () => {
    const col = await createCollection(t);
    const s = await createSubscription(t, col, { sink_id: sink, entity_types: ['object'], actions: ['created'] });
    const ev = await emit({ entityType: 'object', action: 'created', collectionId: col });
    await fanOutAll(t);
    const ev2 = await emit({ entityType: 'object', action: 'created', collectionId: col });
    const [row2] = await t.deps.sql<{ id: number }[]>`select id from events where event_id = ${ev2}::uuid`;
    // a stalled worker: its claim lock expires at once
    const stalled = randomUUID();
    const claimed = await claimFanoutBatch(t.deps.sql, 1000, 1, stalled);
    expect(claimed).toContain(row2!.id);
    await new Promise((r) => setTimeout(r, 20));
    await fanOutAll(t);
    const lateWrite = await withTx(t.deps.sql, (tx) => finishFanout(tx, claimed, stalled, [{ eventId: row2!.id, subscriptionId: s.id }]));
    expect(lateWrite).toBe(0);
    expect((await deliveredEvents(s.id)).sort()).toEqual([ev, ev2].sort());
  });
});
