// The delivery worker and the webhook transport end to end against a local HTTPS peer (self-signed
// certificate trusted through SVC_OUTBOUND_CA_FILE; loopback admitted only through
// SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS): exact request, secrets (env and file), response policy,
// retries with backoff, dead-lettering, 429 deferral, claim fencing, min_interval spacing, and the
// LISTEN-driven worker loops.
import type { ServerResponse } from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import {
  createCollection,
  createSink,
  createSubscription,
  deliveriesOf,
  fanOutAll,
  startPeer,
  type DeliveryRow,
  type Peer,
} from './event-fixtures.ts';
import { runDeliveryOnce, deliverClaimed, runDeliveryWorkers } from '../src/workers/event-delivery.ts';
import { runEventFanoutWorkers } from '../src/workers/event-fanout.ts';
import { claimDeliveries, liveClaims, type ClaimedDelivery } from '../src/db/event-deliveries.ts';
import { savepoint, withTx } from '../src/db/tx.ts';
import { EVENTS_CHANNEL, wake } from '../src/db/wakeups.ts';
import { appendEvent } from '../src/db/events.ts';
import { createSql } from '../src/db/sql.ts';
import { EXECUTE, proxyToTestDatabase } from './holding-proxy.ts';
import { SYSTEM_ACTOR } from '../src/domain/actor.ts';

let peer: Peer;
let dir: string;
let t: TestApp; // private destinations allowed, CA trusted, env secrets, 3 attempts
let strict: TestApp; // private destinations refused
let fileApp: TestApp; // file secret source
const ALIAS = `sink_${Date.now()}_${process.pid}`;
const SECRET = `tok-${uniq()}`;
const URL_ALIAS = 'hook_url_1';

beforeAll(async () => {
  peer = await startPeer();
  dir = mkdtempSync(join(tmpdir(), 'svc-sinksec-'));
  process.env[`SVC_EVENT_SINK_SECRET_${ALIAS.toUpperCase()}`] = SECRET;
  mkdirSync(join(dir, 'event-sink'), { recursive: true });
  writeFileSync(join(dir, 'event-sink', URL_ALIAS), `${peer.url('/from-secret')}\n`);
  const common = { SVC_OUTBOUND_CA_FILE: peer.caFile, SVC_EVENT_DELIVERY_MAX_ATTEMPTS: 3, SVC_EVENT_DELIVERY_RETRY_BACKOFF_BASE_MS: 1000 };
  t = await startTestApp({ ...common, SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: true, SVC_EVENT_DELIVERY_RETRY_BACKOFF_MAX_MS: 1500 });
  strict = await startTestApp(common);
  fileApp = await startTestApp({
    ...common,
    SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: true,
    SVC_SECRET_SOURCE: 'file',
    SVC_SECRET_FILE_ROOT: dir,
  });
});

afterAll(async () => {
  delete process.env[`SVC_EVENT_SINK_SECRET_${ALIAS.toUpperCase()}`];
  await peer?.close();
  await Promise.all([t?.close(), strict?.close(), fileApp?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  peer.seen.length = 0;
  peer.respond = (_req, res) => {
    res.statusCode = 200;
    res.end('ok');
  };
});

interface Setup {
  sinkId: number;
  subId: number;
  col: number;
  delivery: DeliveryRow;
  eventId: string;
}

/** A sink and a collection subscription, one collection.updated event fanned out into one delivery. */
async function setup(
  app: TestApp,
  sink: Record<string, unknown> = {},
  routing: Record<string, unknown> | null = { url: peer.url() },
): Promise<Setup> {
  const sinkId = (await createSink(app, sink)).id;
  const col = await createCollection(app);
  const subId = (
    await createSubscription(app, col, { sink_id: sinkId, entity_types: ['collection'], actions: ['updated'], routing: routing ?? {} })
  ).id;
  const res = await app.request('PATCH', `/api/v1/collections/${col}`, { body: { description: uniq('d') } });
  expect(res.status).toBe(200);
  await fanOutAll(app);
  const [delivery] = await deliveriesOf(app, subId);
  expect(delivery).toBeDefined();
  return { sinkId, subId, col, delivery: delivery!, eventId: delivery!.event_id };
}

async function row(app: TestApp, id: number): Promise<DeliveryRow & { locked_until: Date | null }> {
  const [r] = await app.deps.sql<(DeliveryRow & { locked_until: Date | null })[]>`
    select id, event_id::text as event_id, subscription_id, sink_id, purpose, status, attempts, last_error, deferred_reason,
      next_attempt_at, locked_until
    from event_deliveries where id = ${id}`;
  return r!;
}

async function makeDue(app: TestApp, id: number) {
  await app.deps.sql`update event_deliveries set next_attempt_at = now() where id = ${id}`;
}

describe('webhook delivery', () => {
  it('POSTs the envelope with Idempotency-Key, X-Svc-Event-Id, static headers and the bearer secret; succeeded', async () => {
    const s = await setup(t, { secret_ref: ALIAS, config: { headers: { 'X-Team': 'ops' } } });
    expect(await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] })).toBe(1);
    expect(peer.seen.length).toBe(1);
    const req = peer.seen[0]!;
    expect(req.method).toBe('POST');
    expect(req.url).toBe('/hook');
    expect(req.headers['idempotency-key']).toBe(s.eventId);
    expect(req.headers['x-svc-event-id']).toBe(s.eventId);
    expect(req.headers['x-svc-delivery-purpose']).toBeUndefined();
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['x-team']).toBe('ops');
    expect(req.headers.authorization).toBe(`Bearer ${SECRET}`);
    const body = JSON.parse(req.body) as Record<string, unknown>;
    expect(body).toMatchObject({ event_id: s.eventId, entity_type: 'collection', action: 'updated', collection_id: s.col });
    expect(body.after).toMatchObject({ id: s.col });
    expect(await row(t, s.delivery.id)).toMatchObject({ status: 'succeeded', attempts: 0, last_error: null, locked_until: null });
    // a finished row is not claimed again
    expect(await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] })).toBe(0);
  });

  it('a match through a related collection delivers the envelope with before and after redacted', async () => {
    const sinkId = (await createSink(t)).id;
    const col = await createCollection(t);
    const elsewhere = await createCollection(t);
    const subId = (
      await createSubscription(t, col, { sink_id: sinkId, entity_types: ['object'], actions: ['updated'], routing: { url: peer.url() } })
    ).id;
    const ev = await appendEvent(t.deps.sql, SYSTEM_ACTOR, {
      entityType: 'object',
      entityId: 7,
      action: 'updated',
      collectionId: elsewhere,
      relatedCollectionIds: [col],
      before: { secret_ish: 1 },
      after: { secret_ish: 2 },
    });
    await fanOutAll(t);
    expect((await deliveriesOf(t, subId)).map((d) => d.event_id)).toEqual([ev.event_id]);
    await runDeliveryOnce(t.deps, { sinkIds: [sinkId] });
    const body = JSON.parse(peer.seen[0]!.body) as Record<string, unknown>;
    expect(body).toMatchObject({ event_id: ev.event_id, collection_id: elsewhere, before: null, after: null });
    expect(body.metadata).toEqual({ related_collection_ids: [col] });
  });

  it('test deliveries carry X-Svc-Delivery-Purpose: test and the key <event_uuid>-test-<delivery_id>', async () => {
    const s = await setup(t);
    const res = await t.request('POST', `/api/v1/event-sinks/${s.sinkId}/test`, {
      body: { subscription_id: s.subId, event_id: s.eventId },
    });
    expect(res.status).toBe(202);
    const testId = (res.body as { id: number }).id;
    await t.deps.sql`update event_deliveries set status = 'dead' where id = ${s.delivery.id}`;
    expect(await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] })).toBe(1);
    const req = peer.seen[0]!;
    expect(req.headers['x-svc-delivery-purpose']).toBe('test');
    expect(req.headers['idempotency-key']).toBe(`${s.eventId}-test-${testId}`);
    expect(req.headers['x-svc-event-id']).toBe(s.eventId);
    expect((await row(t, testId)).status).toBe('succeeded');
  });

  it('body_template renders the request body (test_marker empty for normal deliveries)', async () => {
    const s = await setup(t, {
      config: {
        body_template: '{"text": {{ test_marker | append: entity_type | json }}, "id": {{ event_id | json }}, "test": {{ test }}}',
      },
    });
    await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
    expect(JSON.parse(peer.seen[0]!.body)).toEqual({ text: 'collection', id: s.eventId, test: false });
  });

  it('config.url_secret_ref takes the destination from the file secret source', async () => {
    const s = await setup(fileApp, { config: { url_secret_ref: URL_ALIAS } }, null);
    expect(await runDeliveryOnce(fileApp.deps, { sinkIds: [s.sinkId] })).toBe(1);
    expect(peer.seen.map((r) => r.url)).toEqual(['/from-secret']);
    expect((await row(fileApp, s.delivery.id)).status).toBe('succeeded');
  });

  it('a missing secret is a failed attempt and nothing is sent', async () => {
    const s = await setup(t, { secret_ref: 'NO_SUCH_ALIAS_X' });
    await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
    expect(peer.seen.length).toBe(0);
    const r = await row(t, s.delivery.id);
    expect(r).toMatchObject({ status: 'failed', attempts: 1 });
    expect(r.last_error).toContain('NO_SUCH_ALIAS_X');
  });

  it('HTTP failures retry with exponential backoff, then go dead after the attempt limit; errors hold no URL or content', async () => {
    peer.respond = (_req, res) => {
      res.statusCode = 500;
      res.end('SECRET-RESPONSE-CONTENT');
    };
    const s = await setup(t);
    const t0 = Date.now();
    await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
    let r = await row(t, s.delivery.id);
    expect(r).toMatchObject({ status: 'failed', attempts: 1, last_error: 'the destination answered HTTP 500' });
    expect(r.next_attempt_at.getTime() - t0).toBeGreaterThanOrEqual(900);
    expect(r.next_attempt_at.getTime() - Date.now()).toBeLessThanOrEqual(1100);
    // not due yet: nothing is claimed
    expect(await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] })).toBe(0);
    await makeDue(t, s.delivery.id);
    const t1 = Date.now();
    await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
    r = await row(t, s.delivery.id);
    expect(r).toMatchObject({ status: 'failed', attempts: 2 });
    // 1000 · 2 = 2000, capped at SVC_EVENT_DELIVERY_RETRY_BACKOFF_MAX_MS 1500
    expect(r.next_attempt_at.getTime() - t1).toBeGreaterThanOrEqual(1400);
    expect(r.next_attempt_at.getTime() - Date.now()).toBeLessThanOrEqual(1600);
    await makeDue(t, s.delivery.id);
    await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
    r = await row(t, s.delivery.id);
    expect(r).toMatchObject({ status: 'dead', attempts: 3 });
    expect(peer.seen.length).toBe(3);
    for (const text of [r.last_error!]) {
      expect(text).not.toContain('SECRET-RESPONSE-CONTENT');
      expect(text).not.toContain('127.0.0.1');
      expect(text).not.toContain('/hook');
    }
  });

  it('response policy: retry_statuses decides retry or dead; success_statuses narrows success', async () => {
    let status = 503;
    peer.respond = (_req, res) => {
      res.statusCode = status;
      res.end();
    };
    const none = await setup(t, { config: { response: { retry_statuses: [] } } });
    await runDeliveryOnce(t.deps, { sinkIds: [none.sinkId] });
    expect(await row(t, none.delivery.id)).toMatchObject({ status: 'dead', attempts: 1 });

    const some = await setup(t, { config: { response: { retry_statuses: [503] } } });
    await runDeliveryOnce(t.deps, { sinkIds: [some.sinkId] });
    expect(await row(t, some.delivery.id)).toMatchObject({ status: 'failed' });
    status = 500;
    await makeDue(t, some.delivery.id);
    await runDeliveryOnce(t.deps, { sinkIds: [some.sinkId] });
    expect(await row(t, some.delivery.id)).toMatchObject({ status: 'dead', attempts: 2 });

    status = 200;
    const only204 = await setup(t, { config: { response: { success_statuses: [204] } } });
    await runDeliveryOnce(t.deps, { sinkIds: [only204.sinkId] });
    expect(await row(t, only204.delivery.id)).toMatchObject({ status: 'failed', last_error: 'the destination answered HTTP 200' });
  });

  it('429 with rate_limit defers without consuming attempts (Retry-After seconds or date, 60 s default); without rate_limit it retries', async () => {
    let retryAfter: string | null = '120';
    peer.respond = (_req, res) => {
      res.statusCode = 429;
      if (retryAfter !== null) res.setHeader('retry-after', retryAfter);
      res.end();
    };
    const s = await setup(t, { config: { response: { rate_limit: true, retry_statuses: [] } } });
    await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
    let r = await row(t, s.delivery.id);
    expect(r).toMatchObject({ status: 'pending', attempts: 0, deferred_reason: 'provider_rate' });
    expect(Math.abs(r.next_attempt_at.getTime() - Date.now() - 120_000)).toBeLessThan(3000);

    retryAfter = new Date(Date.now() + 300_000).toUTCString();
    await makeDue(t, s.delivery.id);
    await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
    r = await row(t, s.delivery.id);
    expect(Math.abs(r.next_attempt_at.getTime() - Date.now() - 300_000)).toBeLessThan(3000);

    retryAfter = null;
    await makeDue(t, s.delivery.id);
    await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
    r = await row(t, s.delivery.id);
    expect(r).toMatchObject({ status: 'pending', attempts: 0 });
    expect(Math.abs(r.next_attempt_at.getTime() - Date.now() - 60_000)).toBeLessThan(3000);

    retryAfter = '5';
    const plain = await setup(t);
    await runDeliveryOnce(t.deps, { sinkIds: [plain.sinkId] });
    expect(await row(t, plain.delivery.id)).toMatchObject({ status: 'failed', attempts: 1, deferred_reason: null });
  });

  it('acknowledgement body checks: json_equals and text_equals; mismatch or invalid JSON is dead; a capped body retries', async () => {
    let reply = '{"result": {"ok": true}}';
    peer.respond = (_req, res) => {
      res.statusCode = 200;
      res.end(reply);
    };
    const json = await setup(t, { config: { response: { body: { kind: 'json_equals', pointer: '/result/ok', value: true } } } });
    await runDeliveryOnce(t.deps, { sinkIds: [json.sinkId] });
    expect((await row(t, json.delivery.id)).status).toBe('succeeded');

    for (const [text, expected] of [
      ['{"result": {"ok": false}}', 'did not match'],
      ['{"other": 1}', 'missing'],
      ['not json', 'not valid JSON'],
    ] as const) {
      reply = text;
      const s = await setup(t, { config: { response: { body: { kind: 'json_equals', pointer: '/result/ok', value: true } } } });
      await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
      const r = await row(t, s.delivery.id);
      expect(r.status).toBe('dead');
      expect(r.last_error).toContain(expected);
      expect(r.last_error).not.toContain(text);
    }

    reply = '  ACK\n';
    const txt = await setup(t, { config: { response: { body: { kind: 'text_equals', value: 'ACK' } } } });
    await runDeliveryOnce(t.deps, { sinkIds: [txt.sinkId] });
    expect((await row(t, txt.delivery.id)).status).toBe('succeeded');

    reply = 'ACK'.repeat(100);
    const capped = await setup(t, { config: { max_response_bytes: 8, response: { body: { kind: 'text_equals', value: 'ACK' } } } });
    await runDeliveryOnce(t.deps, { sinkIds: [capped.sinkId] });
    expect(await row(t, capped.delivery.id)).toMatchObject({ status: 'failed', attempts: 1 });
  });

  it('a payload over max_request_bytes fails permanently without sending', async () => {
    const s = await setup(t, { config: { max_request_bytes: 50 } });
    await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] });
    expect(peer.seen.length).toBe(0);
    const r = await row(t, s.delivery.id);
    expect(r.status).toBe('dead');
    expect(r.last_error).toContain('max_request_bytes');
  });

  it('a send aborted by shutdown is released: pending, due at once, no attempt consumed', async () => {
    peer.respond = (_req, res) => {
      setTimeout(() => {
        res.statusCode = 200;
        res.end('late');
      }, 3000);
    };
    const s = await setup(t);
    const ctl = new AbortController();
    const run = runDeliveryOnce(t.deps, { sinkIds: [s.sinkId], signal: ctl.signal });
    await new Promise((r) => setTimeout(r, 300));
    ctl.abort();
    expect(await run).toBe(1);
    const r = await row(t, s.delivery.id);
    expect(r).toMatchObject({ status: 'pending', attempts: 0, deferred_reason: null, locked_until: null });
    expect(r.next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it('private destinations are refused unless SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: dead at once (a refused address stays refused)', async () => {
    const s = await setup(strict);
    await runDeliveryOnce(strict.deps, { sinkIds: [s.sinkId] });
    expect(peer.seen.length).toBe(0);
    const r = await row(strict, s.delivery.id);
    expect(r).toMatchObject({ status: 'dead', attempts: 1 });
    expect(r.last_error).toContain('refused address');
    await makeDue(strict, s.delivery.id);
    expect(await runDeliveryOnce(strict.deps, { sinkIds: [s.sinkId] })).toBe(0);
    expect(peer.seen.length).toBe(0);
  });

  it('rows of a disabled sink wait; test rows of a disabled sink are still sent', async () => {
    const s = await setup(t);
    await t.request('PATCH', `/api/v1/event-sinks/${s.sinkId}`, { body: { enabled: false } });
    expect(await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] })).toBe(0);
    const test = await t.request('POST', `/api/v1/event-sinks/${s.sinkId}/test`, {
      body: { subscription_id: s.subId, event_id: s.eventId },
    });
    expect(await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] })).toBe(1);
    expect((await row(t, (test.body as { id: number }).id)).status).toBe('succeeded');
    expect((await row(t, s.delivery.id)).status).toBe('pending');
    await t.request('PATCH', `/api/v1/event-sinks/${s.sinkId}`, { body: { enabled: true } });
    expect(await runDeliveryOnce(t.deps, { sinkIds: [s.sinkId] })).toBe(1);
    expect((await row(t, s.delivery.id)).status).toBe('succeeded');
  });
});

describe('claim fencing', () => {
  it('a claim revoked by the dead action does not send', async () => {
    const s = await setup(t);
    const [claim] = await withTx(t.deps.sql, (tx) => claimDeliveries(tx, 8, 30_000, { sinkIds: [s.sinkId] }));
    expect(claim).toBeDefined();
    expect((await row(t, s.delivery.id)).status).toBe('in_flight');
    const dead = await t.request('POST', `/api/v1/event-deliveries/${s.delivery.id}/dead`);
    expect(dead.status).toBe(200);
    expect(await deliverClaimed(t.deps, claim!, new AbortController().signal)).toBe('claim_lost');
    expect(peer.seen.length).toBe(0);
    expect((await row(t, s.delivery.id)).status).toBe('dead');
  });

  it('an expired claim taken over by another worker: the old worker neither sends nor records', async () => {
    const s = await setup(t);
    const [old] = await withTx(t.deps.sql, (tx) => claimDeliveries(tx, 8, 1, { sinkIds: [s.sinkId] }));
    await new Promise((r) => setTimeout(r, 20));
    const [fresh] = await withTx(t.deps.sql, (tx) => claimDeliveries(tx, 8, 30_000, { sinkIds: [s.sinkId] }));
    expect(fresh?.id).toBe(old?.id);
    expect(fresh?.claim_token).not.toBe(old?.claim_token);
    expect(await deliverClaimed(t.deps, old!, new AbortController().signal)).toBe('claim_lost');
    expect(peer.seen.length).toBe(0);
    expect(await deliverClaimed(t.deps, fresh!, new AbortController().signal)).toBe('recorded');
    expect(peer.seen.length).toBe(1);
    expect((await row(t, s.delivery.id)).status).toBe('succeeded');
  });

  it("the batch's one claim check keeps each row's own fence: token, status and expiry", async () => {
    const sinkId = (await createSink(t)).id;
    const col = await createCollection(t);
    await createSubscription(t, col, { sink_id: sinkId, entity_types: ['collection'], actions: ['updated'], routing: { url: peer.url() } });
    for (let i = 0; i < 4; i++) await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: `d${i}` } });
    await fanOutAll(t);
    const claims = await withTx(t.deps.sql, (tx) => claimDeliveries(tx, 8, 30_000, { sinkIds: [sinkId] }));
    expect(claims.length).toBe(4);
    const [kept, revoked, expired, other] = claims as [ClaimedDelivery, ClaimedDelivery, ClaimedDelivery, ClaimedDelivery];
    expect((await t.request('POST', `/api/v1/event-deliveries/${revoked.id}/dead`)).status).toBe(200);
    await t.deps.sql`update event_deliveries set locked_until = now() - interval '1 second' where id = ${expired.id}`;
    const asked = [kept, revoked, expired].map((c) => ({ id: c.id, token: c.claim_token }));
    // another row's token does not pass for this row
    asked.push({ id: other.id, token: kept.claim_token });
    expect([...(await liveClaims(t.deps.sql, asked))]).toEqual([kept.id]);
  });

  it('a worker claims at most min(batch size, 8) rows', async () => {
    const sinkId = (await createSink(t)).id;
    const col = await createCollection(t);
    await createSubscription(t, col, { sink_id: sinkId, entity_types: ['collection'], actions: ['updated'], routing: { url: peer.url() } });
    for (let i = 0; i < 10; i++) await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: `d${i}` } });
    await fanOutAll(t);
    expect(await runDeliveryOnce(t.deps, { sinkIds: [sinkId] })).toBe(8);
    expect(
      await runDeliveryOnce({ ...t.deps, config: { ...t.deps.config, SVC_EVENT_DELIVERY_BATCH_SIZE: 1 } }, { sinkIds: [sinkId] }),
    ).toBe(1);
    expect(await runDeliveryOnce(t.deps, { sinkIds: [sinkId] })).toBe(1);
    expect(peer.seen.length).toBe(10);
  });

  it("reads a batch's sinks, subscriptions and events with the claim: three statements for the batch, not three a row", async () => {
    const sinkId = (await createSink(t)).id;
    const col = await createCollection(t);
    for (let i = 0; i < 2; i++) {
      await createSubscription(t, col, {
        sink_id: sinkId,
        entity_types: ['collection'],
        actions: ['updated'],
        routing: { url: peer.url() },
      });
    }
    for (let i = 0; i < 3; i++) await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: `d${i}` } });
    await fanOutAll(t);
    // the worker's statements (each an Execute, COMMIT too), counted on their way to PostgreSQL over
    // one connection already open
    const { proxy, url } = await proxyToTestDatabase();
    const sql = createSql(url, Object.assign({}, t.deps.config, { SVC_DB_POOL_MAX: 1, SVC_DB_LIST_POOL_MAX: 0 }));
    try {
      await sql`select 1`;
      proxy.sent = '';
      expect(await runDeliveryOnce(Object.assign({}, t.deps, { sql }), { sinkIds: [sinkId] })).toBe(6);
      // the claim with its COMMIT, the batch's sinks, subscriptions and events, then the claim check
      // of the whole batch (one plain read: no pacing), and the results: succeeded ones are written
      // together when they are ready together (recordSucceeded), so 1 to 6 statements
      const results = proxy.sent.split(EXECUTE).length - 1 - (2 + 3 + 1);
      expect(results).toBeGreaterThanOrEqual(1);
      expect(results).toBeLessThanOrEqual(6);
    } finally {
      await sql.end({ timeout: 5 });
      await proxy.close();
    }
    expect(peer.seen.length).toBe(6);
    expect(new Set(peer.seen.map((r) => JSON.parse(r.body).event_id as string)).size).toBe(3);
    const statuses = await t.deps.sql<{ status: string }[]>`select status from event_deliveries where sink_id = ${sinkId}`;
    expect(statuses.map((r) => r.status)).toEqual(Array(6).fill('succeeded'));
  });
});

describe('min_interval spacing', () => {
  it('spaces sends of one sink across workers (configured_rate) and does not affect other sinks', async () => {
    const sinkId = (await createSink(t, { delivery_policy: { min_interval_ms: 60_000 } })).id;
    const otherSink = (await createSink(t)).id;
    const col = await createCollection(t);
    await createSubscription(t, col, {
      sink_id: sinkId,
      entity_types: ['collection'],
      actions: ['updated'],
      routing: { url: peer.url('/paced') },
    });
    await createSubscription(t, col, {
      sink_id: otherSink,
      entity_types: ['collection'],
      actions: ['updated'],
      routing: { url: peer.url('/free') },
    });
    for (let i = 0; i < 3; i++) await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: `p${i}` } });
    await fanOutAll(t);
    const started = Date.now();
    // two workers race for the same sink
    await Promise.all([runDeliveryOnce(t.deps, { sinkIds: [sinkId] }), runDeliveryOnce(t.deps, { sinkIds: [sinkId] })]);
    await runDeliveryOnce(t.deps, { sinkIds: [otherSink] });
    expect(peer.seen.filter((r) => r.url === '/paced').length).toBe(1);
    expect(peer.seen.filter((r) => r.url === '/free').length).toBe(3);
    const rows = await t.deps.sql<{ status: string; deferred_reason: string | null; next_attempt_at: Date; attempts: number }[]>`
      select status, deferred_reason, next_attempt_at, attempts from event_deliveries where sink_id = ${sinkId} order by id`;
    expect(rows.filter((r) => r.status === 'succeeded').length).toBe(1);
    const deferred = rows.filter((r) => r.status === 'pending');
    expect(deferred.length).toBe(2);
    for (const r of deferred) {
      expect(r).toMatchObject({ deferred_reason: 'configured_rate', attempts: 0 });
      expect(r.next_attempt_at.getTime() - started).toBeGreaterThan(55_000);
      expect(r.next_attempt_at.getTime() - started).toBeLessThan(65_000);
    }
    // still inside the interval: made due, the rows are deferred again and nothing is sent
    await t.deps.sql`update event_deliveries set next_attempt_at = now() where sink_id = ${sinkId} and status = 'pending'`;
    await runDeliveryOnce(t.deps, { sinkIds: [sinkId] });
    expect(peer.seen.filter((r) => r.url === '/paced').length).toBe(1);
    // once the interval has passed, the next send goes out
    await t.deps.sql`update event_sink_pacing set last_send_at = now() - interval '61 seconds' where sink_id = ${sinkId}`;
    await t.deps.sql`update event_deliveries set next_attempt_at = now() where sink_id = ${sinkId} and status = 'pending'`;
    await runDeliveryOnce(t.deps, { sinkIds: [sinkId] });
    expect(peer.seen.filter((r) => r.url === '/paced').length).toBe(2);
  });
});

describe('worker loops', () => {
  /** A new collection whose updates a new sink's subscription sends to the peer's `path`, with every event so far fanned out. */
  const subscribedCollection = async (path: string): Promise<{ sinkId: number; col: number; subId: number }> => {
    const sinkId = (await createSink(t)).id;
    const col = await createCollection(t);
    const subId = (
      await createSubscription(t, col, {
        sink_id: sinkId,
        entity_types: ['collection'],
        actions: ['updated'],
        routing: { url: peer.url(path) },
      })
    ).id;
    await fanOutAll(t);
    return { sinkId, col, subId };
  };

  it('fan-out and delivery workers wake on notifications and deliver without polling', async () => {
    const slow = {
      ...t.deps.config,
      SVC_EVENT_FANOUT_POLL_INTERVAL_MS: 60_000,
      SVC_EVENT_DELIVERY_POLL_INTERVAL_MS: 60_000,
      SVC_EVENT_DELIVERY_WORKERS: 1,
    };
    const deps = { ...t.deps, config: slow };
    const { sinkId, col } = await subscribedCollection('/loop');
    const ctl = new AbortController();
    const fanStats = { notification: 0, poll: 0 };
    const delStats = { notification: 0, poll: 0 };
    const loops = Promise.all([
      runEventFanoutWorkers(deps, ctl.signal, fanStats),
      runDeliveryWorkers(deps, ctl.signal, delStats, { sinkIds: [sinkId] }),
    ]);
    try {
      await new Promise((r) => setTimeout(r, 300));
      await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: uniq() } });
      const sent = async (n: number) => {
        const deadline = Date.now() + 10_000;
        while (Date.now() < deadline && peer.seen.filter((r) => r.url === '/loop').length < n) await new Promise((r) => setTimeout(r, 50));
        return peer.seen.filter((r) => r.url === '/loop');
      };
      expect((await sent(1)).length).toBe(1);
      // a delivery released for retry, and a test delivery, wake the delivery workers too
      const [made] = await t.deps.sql<{ id: number; subscription_id: number; event_id: string }[]>`
        select id, subscription_id, event_id::text from event_deliveries where sink_id = ${sinkId} and purpose = 'event'`;
      await t.deps.sql`update event_deliveries set status = 'dead' where id = ${made!.id}`;
      expect((await t.request('POST', `/api/v1/event-deliveries/${made!.id}/retry`)).status).toBe(200);
      expect((await sent(2)).length).toBe(2);
      const test = await t.request('POST', `/api/v1/event-sinks/${sinkId}/test`, {
        body: { subscription_id: made!.subscription_id, event_id: made!.event_id },
      });
      expect(test.status).toBe(202);
      const seen = await sent(3);
      expect(seen.map((r) => r.headers['x-svc-delivery-purpose'] ?? 'event')).toEqual(['event', 'event', 'test']);
      expect(delStats.poll).toBe(0);
    } finally {
      ctl.abort();
      await loops;
    }
    expect(fanStats.notification).toBeGreaterThanOrEqual(1);
    expect(delStats.notification).toBeGreaterThanOrEqual(1);
  });

  it('a sink or subscription enabled again, or a subscription moved to an enabled sink, wakes the delivery workers for the deliveries held', async () => {
    const deps = { ...t.deps, config: { ...t.deps.config, SVC_EVENT_DELIVERY_POLL_INTERVAL_MS: 60_000, SVC_EVENT_DELIVERY_WORKERS: 1 } };
    // a delivery each, made while everything was enabled; then one held by its sink, one by its subscription
    const bySink = await subscribedCollection('/held-by-sink');
    const bySub = await subscribedCollection('/held-by-subscription');
    const moved = await subscribedCollection('/moved');
    for (const { col } of [bySink, bySub, moved]) await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: uniq() } });
    await fanOutAll(t);
    const sinkPath = `/api/v1/event-sinks/${bySink.sinkId}`;
    const subPath = `/api/v1/collections/${bySub.col}/event-subscriptions/${bySub.subId}`;
    const movedSinkPath = `/api/v1/event-sinks/${moved.sinkId}`;
    for (const path of [sinkPath, subPath, movedSinkPath])
      expect((await t.request('PATCH', path, { body: { enabled: false } })).status).toBe(200);
    const elsewhere = (await createSink(t)).id;
    const ctl = new AbortController();
    const delStats = { notification: 0, poll: 0 };
    const loop = runDeliveryWorkers(deps, ctl.signal, delStats, { sinkIds: [bySink.sinkId, bySub.sinkId, moved.sinkId, elsewhere] });
    const sent = (url: string) => peer.seen.filter((r) => r.url === url).length;
    const arrives = async (url: string) => {
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && sent(url) === 0) await new Promise((r) => setTimeout(r, 50));
      return sent(url);
    };
    try {
      await new Promise((r) => setTimeout(r, 300));
      expect([sent('/held-by-sink'), sent('/held-by-subscription'), sent('/moved')]).toEqual([0, 0, 0]);
      expect((await t.request('PATCH', sinkPath, { body: { enabled: true } })).status).toBe(200);
      expect(await arrives('/held-by-sink')).toBe(1);
      expect(sent('/held-by-subscription')).toBe(0);
      expect((await t.request('PATCH', subPath, { body: { enabled: true } })).status).toBe(200);
      expect(await arrives('/held-by-subscription')).toBe(1);
      const move = await t.request('PATCH', `/api/v1/collections/${moved.col}/event-subscriptions/${moved.subId}`, {
        body: { sink_id: elsewhere },
      });
      expect(move.status).toBe(200);
      expect(await arrives('/moved')).toBe(1);
      expect(delStats.poll).toBe(0);
    } finally {
      ctl.abort();
      await loop;
    }
  });

  it('events appended in a savepoint wake the fan-out after their commit; no trigger on events, tasks or deliveries notifies inside the transaction', async () => {
    // a NOTIFY in a transaction makes its commit wait for every other notifying commit (db/wakeups.ts)
    const notifying = await t.deps.sql<{ tgname: string }[]>`
      select tg.tgname from pg_trigger tg join pg_proc p on p.oid = tg.tgfoid
      where tg.tgrelid in ('events'::regclass, 'tasks'::regclass, 'event_deliveries'::regclass) and p.prosrc ilike '%notify%'`;
    expect(notifying).toEqual([]);
    const { sinkId, col } = await subscribedCollection('/sp');
    const deps = { ...t.deps, config: { ...t.deps.config, SVC_EVENT_FANOUT_POLL_INTERVAL_MS: 60_000 } };
    const ctl = new AbortController();
    const fanStats = { notification: 0, poll: 0 };
    const loop = runEventFanoutWorkers(deps, ctl.signal, fanStats);
    try {
      await new Promise((r) => setTimeout(r, 300));
      const polls = fanStats.poll;
      await withTx(t.deps.sql, (tx) =>
        savepoint(tx, (sp) =>
          appendEvent(sp, SYSTEM_ACTOR, {
            entityType: 'collection',
            entityId: col,
            collectionId: col,
            action: 'updated',
            summary: 'in a savepoint',
          }),
        ),
      );
      const deadline = Date.now() + 10_000;
      let fanned = 0;
      while (Date.now() < deadline && fanned === 0) {
        await new Promise((r) => setTimeout(r, 50));
        const rows = await t.deps.sql<{ fanned: number }[]>`
          select count(*)::int as fanned from event_deliveries d join events e on e.event_id = d.event_id
          where d.sink_id = ${sinkId} and e.summary = 'in a savepoint'`;
        fanned = rows[0]!.fanned;
      }
      expect(fanned).toBe(1);
      expect(fanStats.notification).toBeGreaterThanOrEqual(1);
      expect(fanStats.poll).toBe(polls);
    } finally {
      ctl.abort();
      await loop;
    }
  });

  it('wakes asked for while one is under way are sent as one, once it is answered', async () => {
    const heard: string[] = [];
    let got!: () => void;
    let marker = '';
    let arrived = new Promise<void>((ok) => (got = ok));
    const sub = await t.deps.sql.listen(EVENTS_CHANNEL, (payload) => {
      heard.push(payload);
      if (payload === marker) got();
    });
    /** Waits until every notification sent before now has been heard (a marker sent after them arrives after them). */
    const drain = async () => {
      marker = `marker-${uniq()}`;
      arrived = new Promise<void>((ok) => (got = ok));
      await t.deps.sql`select pg_notify(${EVENTS_CHANNEL}, ${marker})`;
      await arrived;
    };
    try {
      await drain();
      heard.length = 0;
      for (let i = 0; i < 100; i++) wake(t.deps.sql, EVENTS_CHANNEL);
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && heard.length < 2) await new Promise((r) => setTimeout(r, 20));
      await drain();
      expect(heard.filter((p) => p === '')).toHaveLength(2);
    } finally {
      await sub.unlisten();
    }
  });

  it('a slow destination holds only its own rows: a worker claims again for the free part of its window', async () => {
    const deps = { ...t.deps, config: { ...t.deps.config, SVC_EVENT_DELIVERY_POLL_INTERVAL_MS: 60_000, SVC_EVENT_DELIVERY_WORKERS: 1 } };
    const slow = await subscribedCollection('/slow');
    const fast = await subscribedCollection('/fast');
    for (let i = 0; i < 2; i++) await t.request('PATCH', `/api/v1/collections/${slow.col}`, { body: { description: uniq() } });
    for (let i = 0; i < 12; i++) await t.request('PATCH', `/api/v1/collections/${fast.col}`, { body: { description: uniq() } });
    await fanOutAll(t);
    // the slow rows first in the claim order, so the first claim of 8 holds both of them
    await t.deps.sql`update event_deliveries set next_attempt_at = now() - interval '1 minute' where sink_id = ${slow.sinkId}`;
    const held: ServerResponse[] = [];
    peer.respond = (req, res) => {
      res.statusCode = 200;
      if (req.url === '/slow') held.push(res);
      else res.end('ok');
    };
    const sent = (url: string) => peer.seen.filter((r) => r.url === url).length;
    const ctl = new AbortController();
    const loop = runDeliveryWorkers(deps, ctl.signal, { notification: 0, poll: 0 }, { sinkIds: [slow.sinkId, fast.sinkId] });
    try {
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && sent('/fast') < 12) await new Promise((r) => setTimeout(r, 50));
      // in rounds, the first claim's 6 fast rows would be all until the slow ones answered
      expect([sent('/slow'), sent('/fast')]).toEqual([2, 12]);
      expect(held).toHaveLength(2);
      for (const res of held) res.end('ok');
      const statuses = async () =>
        (
          await t.deps.sql<{ status: string }[]>`
          select status from event_deliveries where sink_id in (${slow.sinkId}, ${fast.sinkId})`
        ).map((r) => r.status);
      const until = Date.now() + 10_000;
      while (Date.now() < until && (await statuses()).some((s) => s !== 'succeeded')) await new Promise((r) => setTimeout(r, 50));
      expect(await statuses()).toEqual(Array(14).fill('succeeded'));
    } finally {
      for (const res of held) if (!res.writableEnded) res.end('ok');
      ctl.abort();
      await loop;
    }
  });

  it('SVC_EVENT_DELIVERY_WORKERS=0 turns delivery off', async () => {
    const s = await setup(t);
    const ctl = new AbortController();
    const loop = runDeliveryWorkers(t.deps, ctl.signal, { notification: 0, poll: 0 }, { sinkIds: [s.sinkId] });
    await new Promise((r) => setTimeout(r, 300));
    ctl.abort();
    await loop;
    expect(t.deps.config.SVC_EVENT_DELIVERY_WORKERS).toBe(0);
    expect(peer.seen.length).toBe(0);
    expect((await row(t, s.delivery.id)).status).toBe('pending');
  });
});
