// Event sinks: admin CRUD, per-kind validation, ETag/If-Match, no-ops, conflicts, audit events,
// preview (render only) and test deliveries.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { createAdmin, createHuman, eventsOf, tokenFor, type Human } from './iam-fixtures.ts';
import { createCollection, createSink, createSubscription, latestEventId } from './event-fixtures.ts';
import { availableKinds, SINK_KINDS } from '../src/sinks/index.ts';

let t: TestApp;
let human: Human;
let scopedAdmin: string;

beforeAll(async () => {
  t = await startTestApp();
  human = await createHuman(t);
  const admin = await createAdmin(t);
  scopedAdmin = await tokenFor(t, admin.id, { permissions: ['ReadCollection'] });
});

afterAll(async () => {
  await t?.close();
});

describe('createEventSink', () => {
  it('201 with Location, ETag, the stored sink and an event_sink.created event', async () => {
    const name = uniq('sink');
    const res = await t.request('POST', '/api/v1/event-sinks', {
      body: {
        name,
        kind: 'webhook',
        config: { headers: { 'X-Team': 'ops' }, timeout_ms: 5000, response: { success_statuses: [200, 204], rate_limit: true } },
        secret_ref: 'HOOK_TOKEN',
        delivery_policy: { min_interval_ms: 250 },
      },
    });
    expect(res.status, res.text).toBe(201);
    const body = res.body as Record<string, unknown>;
    expect(res.headers.get('location')).toBe(`/api/v1/event-sinks/${body.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.event_sink\./);
    expect(body).toMatchObject({
      name,
      kind: 'webhook',
      secret_ref: 'HOOK_TOKEN',
      enabled: true,
      delivery_policy: { min_interval_ms: 250 },
      revision: 1,
      config: { headers: { 'X-Team': 'ops' }, timeout_ms: 5000 },
    });
    const events = await eventsOf(t, 'event_sink', body.id as number);
    expect(events.map((e) => e.action)).toEqual(['created']);
    expect(events[0]!.after).toMatchObject({ name, secret_ref: 'HOOK_TOKEN' });
  });

  it('201 with defaults: empty config, no secret, no spacing', async () => {
    const res = await t.request('POST', '/api/v1/event-sinks', { body: { name: uniq('sink'), kind: 'webhook' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ config: {}, secret_ref: null, enabled: true, delivery_policy: { min_interval_ms: null } });
  });

  it('400 for members of another kind, reserved headers, a template that does not compile, a bad pointer', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ uri: 'amqps://broker/' }, 'body.config.uri'],
      [{ headers: { Authorization: 'Bearer x' } }, 'body.config.headers.Authorization'],
      [{ headers: { 'X-Svc-Event-Id': '1' } }, 'body.config.headers.X-Svc-Event-Id'],
      [{ headers: { 'Content-Type': 'text/plain' } }, 'body.config.headers.Content-Type'],
      [{ body_template: '{% if x %}' }, 'body.config.body_template'],
      [{ response: { body: { kind: 'json_equals', pointer: 'no-slash', value: 1 } } }, 'body.config.response.body.pointer'],
    ];
    for (const [config, path] of cases) {
      const res = await t.request('POST', '/api/v1/event-sinks', { body: { name: uniq('sink'), kind: 'webhook', config } });
      expect(res.status, res.text).toBe(400);
      expect((res.body as { details: { path: string }[] }).details.map((d) => d.path)).toContain(path);
    }
  });

  it('400 for schema violations: unknown member, invalid alias, spacing out of range', async () => {
    for (const body of [
      { name: uniq('sink'), kind: 'webhook', extra: 1 },
      { name: uniq('sink'), kind: 'webhook', secret_ref: 'not-an-alias' },
      { name: uniq('sink'), kind: 'webhook', delivery_policy: { min_interval_ms: 0 } },
      { name: uniq('sink'), kind: 'webhook', delivery_policy: { min_interval_ms: 86_400_001 } },
      { name: uniq('sink'), kind: 'carrier_pigeon' },
    ]) {
      const res = await t.request('POST', '/api/v1/event-sinks', { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
  });

  it('400 for a kind whose transport is not available in this deployment', async () => {
    expect(availableKinds()).toContain('webhook');
    for (const kind of SINK_KINDS.filter((k) => !availableKinds().includes(k))) {
      const res = await t.request('POST', '/api/v1/event-sinks', { body: { name: uniq('sink'), kind } });
      expect(res.status, res.text).toBe(400);
      expect((res.body as { message: string }).message).toContain('not available in this deployment');
    }
  });

  it('409 for a duplicate name', async () => {
    const name = uniq('sink');
    await createSink(t, { name });
    const res = await t.request('POST', '/api/v1/event-sinks', { body: { name, kind: 'webhook' } });
    expect(res.status, res.text).toBe(409);
  });

  it('401 without a token; 403 for non-admins and scoped admin tokens', async () => {
    const body = { name: uniq('sink'), kind: 'webhook' };
    expect((await t.request('POST', '/api/v1/event-sinks', { token: null, body })).status).toBe(401);
    expect((await t.request('POST', '/api/v1/event-sinks', { token: human.token, body })).status).toBe(403);
    expect((await t.request('POST', '/api/v1/event-sinks', { token: scopedAdmin, body })).status).toBe(403);
  });
});

describe('listEventSinks', () => {
  it('200 with paging headers, filters and sorts', async () => {
    const prefix = uniq('lst');
    const a = await createSink(t, { name: `${prefix}-a` });
    const b = await createSink(t, { name: `${prefix}-b`, enabled: false });
    const res = await t.request('GET', '/api/v1/event-sinks', { query: { name__startswith: prefix, sort: '-name' } });
    expect(res.status, res.text).toBe(200);
    expect((res.body as { id: number }[]).map((s) => s.id)).toEqual([b.id, a.id]);
    expect(res.headers.get('x-total-count')).toBe('2');
    const disabled = await t.request('GET', '/api/v1/event-sinks', { query: { name__startswith: prefix, enabled: 'false' } });
    expect((disabled.body as { id: number }[]).map((s) => s.id)).toEqual([b.id]);
    const paged = await t.request('GET', '/api/v1/event-sinks', { query: { name__startswith: prefix, limit: 1 } });
    expect((paged.body as unknown[]).length).toBe(1);
    const next = await t.request('GET', '/api/v1/event-sinks', {
      query: { name__startswith: prefix, limit: 1, cursor: paged.headers.get('x-next-cursor')! },
    });
    expect((next.body as { id: number }[]).map((s) => s.id)).toEqual([b.id]);
  });

  it('400 for an unknown filter field; 401; 403', async () => {
    expect((await t.request('GET', '/api/v1/event-sinks', { query: { secret_ref: 'x' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/event-sinks', { token: null })).status).toBe(401);
    expect((await t.request('GET', '/api/v1/event-sinks', { token: human.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/event-sinks', { token: scopedAdmin })).status).toBe(403);
  });
});

describe('getEventSink', () => {
  it('200 with the ETag; 404; 400 for a non-positive id; 403', async () => {
    const s = await createSink(t);
    const res = await t.request('GET', `/api/v1/event-sinks/${s.id}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe(s.etag);
    expect((await t.request('GET', '/api/v1/event-sinks/999999')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/event-sinks/0')).status).toBe(400);
    expect((await t.request('GET', `/api/v1/event-sinks/${s.id}`, { token: human.token })).status).toBe(403);
  });
});

describe('updateEventSink', () => {
  it('200 with the change, a new revision and an event_sink.updated event; secret_ref null clears', async () => {
    const s = await createSink(t, { secret_ref: 'OLD_ALIAS' });
    const res = await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, {
      headers: { 'if-match': s.etag },
      body: { enabled: false, secret_ref: null, delivery_policy: { min_interval_ms: 1000 } },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ enabled: false, secret_ref: null, delivery_policy: { min_interval_ms: 1000 }, revision: 2 });
    expect(res.headers.get('etag')).not.toBe(s.etag);
    const events = await eventsOf(t, 'event_sink', s.id);
    expect(events.map((e) => e.action)).toEqual(['created', 'updated']);
    expect(events[1]!.before).toMatchObject({ secret_ref: 'OLD_ALIAS', enabled: true });
    expect(events[1]!).toMatchObject({ before_revision: 1, after_revision: 2 });
  });

  it('200 no-op: same revision, no event', async () => {
    const s = await createSink(t, { config: { timeout_ms: 10 } });
    const res = await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, { body: { config: { timeout_ms: 10 }, enabled: true } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ revision: 1 });
    expect((await eventsOf(t, 'event_sink', s.id)).length).toBe(1);
  });

  it('400 for an empty body or an invalid config; 404; 412 for a stale ETag', async () => {
    const s = await createSink(t);
    expect((await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, { body: {} })).status).toBe(400);
    expect((await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, { body: { config: { exchange: 'x' } } })).status).toBe(400);
    expect((await t.request('PATCH', '/api/v1/event-sinks/999999', { body: { enabled: false } })).status).toBe(404);
    await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, { body: { enabled: false } });
    const stale = await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, { headers: { 'if-match': s.etag }, body: { enabled: true } });
    expect(stale.status).toBe(412);
    expect(stale.headers.get('etag')).toMatch(/\.2"$/);
  });

  it('409 for a name of another sink, a kind change while subscribed, and a config that no longer fits routing', async () => {
    const other = uniq('sink');
    await createSink(t, { name: other });
    const s = await createSink(t);
    expect((await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, { body: { name: other } })).status).toBe(409);
    const col = await createCollection(t);
    await createSubscription(t, col, { sink_id: s.id });
    const kind = await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, { body: { kind: 'email' } });
    expect(kind.status, kind.text).toBe(409);
    const urlSecret = await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, { body: { config: { url_secret_ref: 'HOOK_URL' } } });
    expect(urlSecret.status, urlSecret.text).toBe(409);
    expect((urlSecret.body as { message: string }).message).toContain('routing of subscription');
  });

  it('403 for non-admins', async () => {
    const s = await createSink(t);
    expect((await t.request('PATCH', `/api/v1/event-sinks/${s.id}`, { token: human.token, body: { enabled: false } })).status).toBe(403);
  });
});

describe('deleteEventSink', () => {
  it('204 and an event_sink.deleted event; then 404', async () => {
    const s = await createSink(t);
    const res = await t.request('DELETE', `/api/v1/event-sinks/${s.id}`, { headers: { 'if-match': s.etag } });
    expect(res.status, res.text).toBe(204);
    expect((await eventsOf(t, 'event_sink', s.id)).map((e) => e.action)).toEqual(['created', 'deleted']);
    expect((await t.request('DELETE', `/api/v1/event-sinks/${s.id}`)).status).toBe(404);
  });

  it('409 while a subscription uses the sink; 412 for a stale ETag; 403', async () => {
    const s = await createSink(t);
    const col = await createCollection(t);
    await createSubscription(t, col, { sink_id: s.id });
    const res = await t.request('DELETE', `/api/v1/event-sinks/${s.id}`);
    expect(res.status).toBe(409);
    expect((res.body as { reason: string }).reason).toBe('sink_in_use');
    const s2 = await createSink(t);
    await t.request('PATCH', `/api/v1/event-sinks/${s2.id}`, { body: { enabled: false } });
    expect((await t.request('DELETE', `/api/v1/event-sinks/${s2.id}`, { headers: { 'if-match': s2.etag } })).status).toBe(412);
    expect((await t.request('DELETE', `/api/v1/event-sinks/${s2.id}`, { token: human.token })).status).toBe(403);
  });
});

describe('previewEventSink and testEventSink', () => {
  let col: number;
  let eventId: string;

  beforeAll(async () => {
    col = await createCollection(t);
    const up = await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: 'changed' } });
    expect(up.status, up.text).toBe(200);
    eventId = await latestEventId(t, 'collection', col);
  });

  it('previewEventSink 200: the envelope as the JSON body by default', async () => {
    const s = await createSink(t);
    const sub = await createSubscription(t, col, { sink_id: s.id });
    const res = await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, { body: { subscription_id: sub.id, event_id: eventId } });
    expect(res.status, res.text).toBe(200);
    const body = res.body as { sink_kind: string; payload: Record<string, unknown> };
    expect(body.sink_kind).toBe('webhook');
    expect(body.payload).toMatchObject({ event_id: eventId, entity_type: 'collection', action: 'updated', collection_id: col });
    expect(body.payload.after).toMatchObject({ description: 'changed' });
  });

  it('previewEventSink 200: body_template with the test context and the json filter', async () => {
    const s = await createSink(t, {
      config: {
        body_template: '{"text": {{ test_marker | append: summary | json }}, "id": {{ event.event_id | json }}, "test": {{ test }}}',
      },
    });
    const sub = await createSubscription(t, col, { sink_id: s.id });
    const res = await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, { body: { subscription_id: sub.id, event_id: eventId } });
    expect(res.status, res.text).toBe(200);
    const payload = (res.body as { payload: { text: string; id: string; test: boolean } }).payload;
    expect(payload.text.startsWith('[TEST] ')).toBe(true);
    expect(payload).toMatchObject({ id: eventId, test: true });
  });

  it('previewEventSink 400: invalid JSON from the template, payload over max_request_bytes', async () => {
    for (const config of [{ body_template: '{"broken": {{ summary }}}' }, { max_request_bytes: 10 }]) {
      const s = await createSink(t, { config });
      const sub = await createSubscription(t, col, { sink_id: s.id });
      const res = await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, { body: { subscription_id: sub.id, event_id: eventId } });
      expect(res.status, res.text).toBe(400);
    }
  });

  it('previewEventSink 400: subscription of another sink, event outside the scope, system subscription and a collection event', async () => {
    const s = await createSink(t);
    const other = await createSink(t);
    const sub = await createSubscription(t, col, { sink_id: other.id });
    const wrongSink = await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, {
      body: { subscription_id: sub.id, event_id: eventId },
    });
    expect(wrongSink.status).toBe(400);
    const elsewhere = await createCollection(t);
    const subElsewhere = await createSubscription(t, elsewhere, { sink_id: s.id });
    const outside = await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, {
      body: { subscription_id: subElsewhere.id, event_id: eventId },
    });
    expect(outside.status).toBe(400);
    const sys = await createSubscription(t, null, { sink_id: s.id, entity_types: ['group'] });
    const sysRes = await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, { body: { subscription_id: sys.id, event_id: eventId } });
    expect(sysRes.status).toBe(400);
  });

  it('previewEventSink 404 for a missing sink, subscription or event; 403; 401', async () => {
    const s = await createSink(t);
    const sub = await createSubscription(t, col, { sink_id: s.id });
    const missingEvent = '00000000-0000-4000-8000-000000000000';
    expect(
      (await t.request('POST', `/api/v1/event-sinks/999999/preview`, { body: { subscription_id: sub.id, event_id: eventId } })).status,
    ).toBe(404);
    expect(
      (await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, { body: { subscription_id: 999999, event_id: eventId } })).status,
    ).toBe(404);
    expect(
      (await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, { body: { subscription_id: sub.id, event_id: missingEvent } }))
        .status,
    ).toBe(404);
    expect(
      (await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, { body: { subscription_id: sub.id, event_id: 'nope' } })).status,
    ).toBe(400);
    const asHuman = await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, {
      token: human.token,
      body: { subscription_id: sub.id, event_id: eventId },
    });
    expect(asHuman.status).toBe(403);
    expect(
      (
        await t.request('POST', `/api/v1/event-sinks/${s.id}/preview`, {
          token: null,
          body: { subscription_id: sub.id, event_id: eventId },
        })
      ).status,
    ).toBe(401);
  });

  it('testEventSink 202: a pending test delivery, Location, and an event_sink.invoked event; disabled flags do not matter', async () => {
    const s = await createSink(t, { enabled: false });
    const sub = await createSubscription(t, col, { sink_id: s.id, enabled: false, entity_types: ['class'], actions: ['deleted'] });
    const res = await t.request('POST', `/api/v1/event-sinks/${s.id}/test`, { body: { subscription_id: sub.id, event_id: eventId } });
    expect(res.status, res.text).toBe(202);
    const d = res.body as { id: number };
    expect(res.headers.get('location')).toBe(`/api/v1/event-deliveries/${d.id}`);
    expect(res.body).toMatchObject({
      purpose: 'test',
      status: 'pending',
      attempts: 0,
      sink_id: s.id,
      subscription_id: sub.id,
      event_id: eventId,
    });
    const again = await t.request('POST', `/api/v1/event-sinks/${s.id}/test`, { body: { subscription_id: sub.id, event_id: eventId } });
    expect((again.body as { id: number }).id).not.toBe(d.id);
    const events = await eventsOf(t, 'event_sink', s.id);
    expect(events.filter((e) => e.action === 'invoked').map((e) => e.metadata.delivery_id)).toEqual([
      d.id,
      (again.body as { id: number }).id,
    ]);
  });

  it('testEventSink 400 and 404 like the preview; 403', async () => {
    const s = await createSink(t, { config: { body_template: 'not json' } });
    const sub = await createSubscription(t, col, { sink_id: s.id });
    expect(
      (await t.request('POST', `/api/v1/event-sinks/${s.id}/test`, { body: { subscription_id: sub.id, event_id: eventId } })).status,
    ).toBe(400);
    expect(
      (await t.request('POST', `/api/v1/event-sinks/${s.id}/test`, { body: { subscription_id: 999999, event_id: eventId } })).status,
    ).toBe(404);
    expect(
      (
        await t.request('POST', `/api/v1/event-sinks/${s.id}/test`, {
          token: scopedAdmin,
          body: { subscription_id: sub.id, event_id: eventId },
        })
      ).status,
    ).toBe(403);
    const rows = await t.deps.sql`select id from event_deliveries where sink_id = ${s.id}`;
    expect(rows.length).toBe(0);
  });

  it('deleteEventSink removes its test deliveries with it', async () => {
    const s = await createSink(t);
    const sub = await createSubscription(t, col, { sink_id: s.id });
    const res = await t.request('POST', `/api/v1/event-sinks/${s.id}/test`, { body: { subscription_id: sub.id, event_id: eventId } });
    expect(res.status).toBe(202);
    const other = await createSink(t);
    const moved = await t.request('PATCH', `/api/v1/collections/${col}/event-subscriptions/${sub.id}`, { body: { sink_id: other.id } });
    expect(moved.status, moved.text).toBe(200);
    expect((await t.request('DELETE', `/api/v1/event-sinks/${s.id}`)).status).toBe(204);
    expect((await t.request('GET', `/api/v1/event-deliveries/${(res.body as { id: number }).id}`)).status).toBe(404);
  });
});
