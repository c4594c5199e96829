// Event deliveries API: list with filters and paging, point reads, retry (failed|dead → pending),
// dead (any → dead, claim revoked), the health snapshot, and admin-only access.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, startTestApp, uniq, type TestApp } from './helpers.ts';
import { createAdmin, createHuman, tokenFor, type Human } from './iam-fixtures.ts';
import { createCollection, createSink, createSubscription, deliveriesOf, fanOutAll } from './event-fixtures.ts';
import { claimDeliveries, recordDeliveryResult, recordSucceeded } from '../src/db/event-deliveries.ts';
import { withTx } from '../src/db/tx.ts';
import { createSql } from '../src/db/sql.ts';
import { EXECUTE, proxyToTestDatabase } from './holding-proxy.ts';

let t: TestApp;
let human: Human;
let scopedAdmin: string;
let sinkId: number;
let subId: number;
let col: number;
let ids: number[];

beforeAll(async () => {
  t = await startTestApp();
  human = await createHuman(t);
  const admin = await createAdmin(t);
  scopedAdmin = await tokenFor(t, admin.id, { resources: [{ kind: 'collection', id: 1 }] });
  sinkId = (await createSink(t)).id;
  col = await createCollection(t);
  subId = (await createSubscription(t, col, { sink_id: sinkId, entity_types: ['collection'], actions: ['updated'] })).id;
  for (let i = 0; i < 4; i++) await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: `v${i}` } });
  await fanOutAll(t);
  ids = (await deliveriesOf(t, subId)).map((d) => d.id);
  expect(ids.length).toBe(4);
});

afterAll(async () => {
  await t?.close();
});

async function setStatus(id: number, status: string, attempts = 2) {
  await t.deps
    .sql`update event_deliveries set status = ${status}, attempts = ${attempts}, last_error = 'boom', next_attempt_at = now() + interval '1 hour'
    where id = ${id}`;
}

describe('listEventDeliveries', () => {
  it('200 with filters, sorts and paging', async () => {
    const res = await t.request('GET', '/api/v1/event-deliveries', { query: { subscription_id: subId } });
    expect(res.status, res.text).toBe(200);
    expect((res.body as { id: number }[]).map((d) => d.id)).toEqual(ids);
    expect(res.headers.get('x-total-count')).toBe('4');
    const first = (res.body as { event_id: string }[])[0]!;
    const byEvent = await t.request('GET', '/api/v1/event-deliveries', { query: { event_id: first.event_id } });
    expect((byEvent.body as { id: number }[]).map((d) => d.id)).toEqual([ids[0]]);
    const page = await t.request('GET', '/api/v1/event-deliveries', { query: { sink_id: sinkId, limit: 3, sort: '-id' } });
    expect((page.body as { id: number }[]).map((d) => d.id)).toEqual([ids[3], ids[2], ids[1]]);
    const rest = await t.request('GET', '/api/v1/event-deliveries', {
      query: { sink_id: sinkId, limit: 3, sort: '-id', cursor: page.headers.get('x-next-cursor')! },
    });
    expect((rest.body as { id: number }[]).map((d) => d.id)).toEqual([ids[0]]);
    const pending = await t.request('GET', '/api/v1/event-deliveries', {
      query: { sink_id: sinkId, status__in: 'pending,failed', purpose: 'event' },
    });
    expect((pending.body as unknown[]).length).toBeGreaterThan(0);
  });

  it('400 for an unknown field or status value; 401; 403 for non-admins and scoped admins', async () => {
    expect((await t.request('GET', '/api/v1/event-deliveries', { query: { claim_token: 'x' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/event-deliveries', { query: { status: 'lost' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/event-deliveries', { token: null })).status).toBe(401);
    expect((await t.request('GET', '/api/v1/event-deliveries', { token: human.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/event-deliveries', { token: scopedAdmin })).status).toBe(403);
  });
});

describe('getEventDelivery', () => {
  it('200 with every member; 404; 400; 403', async () => {
    const res = await t.request('GET', `/api/v1/event-deliveries/${ids[0]}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: ids[0], subscription_id: subId, sink_id: sinkId, purpose: 'event', locked_until: null });
    expect(res.headers.get('etag')).toBeNull();
    expect((await t.request('GET', '/api/v1/event-deliveries/999999')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/event-deliveries/0')).status).toBe(400);
    expect((await t.request('GET', `/api/v1/event-deliveries/${ids[0]}`, { token: human.token })).status).toBe(403);
  });
});

describe('retryEventDelivery', () => {
  it('200: failed and dead rows become pending, due now, attempts reset, last_error kept', async () => {
    for (const [id, status] of [
      [ids[0]!, 'failed'],
      [ids[1]!, 'dead'],
    ] as const) {
      await setStatus(id, status);
      const res = await t.request('POST', `/api/v1/event-deliveries/${id}/retry`);
      expect(res.status, res.text).toBe(200);
      const body = res.body as { status: string; attempts: number; last_error: string; deferred_reason: null; next_attempt_at: string };
      expect(body).toMatchObject({ status: 'pending', attempts: 0, last_error: 'boom', deferred_reason: null, locked_until: null });
      expect(Math.abs(new Date(body.next_attempt_at).getTime() - Date.now())).toBeLessThan(5000);
    }
  });

  it('409 for pending, in-flight and succeeded rows; 404; 403', async () => {
    await setStatus(ids[2]!, 'pending', 0);
    expect((await t.request('POST', `/api/v1/event-deliveries/${ids[2]}/retry`)).status).toBe(409);
    await setStatus(ids[2]!, 'succeeded', 0);
    expect((await t.request('POST', `/api/v1/event-deliveries/${ids[2]}/retry`)).status).toBe(409);
    await setStatus(ids[2]!, 'in_flight', 0);
    const res = await t.request('POST', `/api/v1/event-deliveries/${ids[2]}/retry`);
    expect(res.status).toBe(409);
    expect((res.body as { reason: string }).reason).toBe('invalid_delivery_status');
    expect((await t.request('POST', '/api/v1/event-deliveries/999999/retry')).status).toBe(404);
    expect((await t.request('POST', `/api/v1/event-deliveries/${ids[0]}/retry`, { token: human.token })).status).toBe(403);
  });
});

describe('markEventDeliveryDead', () => {
  it('200 from pending; an in-flight claim is revoked and its late result is ignored; dead stays unchanged', async () => {
    await setStatus(ids[3]!, 'pending', 1);
    await t.deps.sql`update event_deliveries set next_attempt_at = now() where id = ${ids[3]!}`;
    const claims = await withTx(t.deps.sql, (tx) => claimDeliveries(tx, 8, 30_000, { sinkIds: [sinkId] }));
    const claim = claims.find((c) => c.id === ids[3]);
    expect(claim).toBeDefined();
    const res = await t.request('POST', `/api/v1/event-deliveries/${ids[3]}/dead`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: 'dead', locked_until: null, attempts: 1 });
    expect(await recordDeliveryResult(t.deps.sql, claim!.id, claim!.claim_token, { status: 'succeeded' })).toBe(false);
    const again = await t.request('POST', `/api/v1/event-deliveries/${ids[3]}/dead`);
    expect(again.status).toBe(200);
    expect((again.body as { updated_at: string }).updated_at).toBe((res.body as { updated_at: string }).updated_at);
  });

  it('404; 400; 401; 403', async () => {
    expect((await t.request('POST', '/api/v1/event-deliveries/999999/dead')).status).toBe(404);
    expect((await t.request('POST', '/api/v1/event-deliveries/-1/dead')).status).toBe(400);
    expect((await t.request('POST', `/api/v1/event-deliveries/${ids[0]}/dead`, { token: null })).status).toBe(401);
    expect((await t.request('POST', `/api/v1/event-deliveries/${ids[0]}/dead`, { token: scopedAdmin })).status).toBe(403);
  });
});

describe('getEventDeliveryHealth', () => {
  it('200 no-store: fan-out and delivery backlogs, settings, per-sink and per-subscription figures', async () => {
    const hSink = (await createSink(t, { name: uniq('health') })).id;
    const hCol = await createCollection(t);
    const hSub = (await createSubscription(t, hCol, { sink_id: hSink, entity_types: ['collection'], actions: ['updated'] })).id;
    await t.request('PATCH', `/api/v1/collections/${hCol}`, { body: { description: 'a' } });
    await t.request('PATCH', `/api/v1/collections/${hCol}`, { body: { description: 'b' } });
    await t.request('PATCH', `/api/v1/collections/${hCol}`, { body: { description: 'c' } });
    await fanOutAll(t);
    const [a, b, c] = (await deliveriesOf(t, hSub)).map((d) => d.id);
    await t.deps.sql`update event_deliveries set status = 'failed', next_attempt_at = now() - interval '30 seconds' where id = ${a!}`;
    await t.deps.sql`update event_deliveries set status = 'in_flight', locked_until = now() - interval '1 second' where id = ${b!}`;
    await t.deps.sql`update event_deliveries set status = 'dead' where id = ${c!}`;
    // one event waiting for fan-out
    await t.request('PATCH', `/api/v1/collections/${hCol}`, { body: { description: 'd' } });

    const res = await t.request('GET', '/api/v1/event-deliveries/health');
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const h = res.body as {
      fanout: Record<string, unknown>;
      delivery: { counts: Record<string, number>; settings: Record<string, number>; stale_claims: number; retryable_failed: number };
      sinks: Record<string, unknown>[];
      subscriptions: Record<string, unknown>[];
    };
    expect(h.fanout).toMatchObject({ workers: t.deps.config.SVC_EVENT_FANOUT_WORKERS, batch_size: 100 });
    expect(h.fanout.pending_events as number).toBeGreaterThanOrEqual(1);
    expect(h.delivery.settings).toMatchObject({ workers: 0, max_attempts: 10, transport_timeout_ms: 25000 });
    expect(h.delivery.stale_claims).toBeGreaterThanOrEqual(1);
    expect(h.delivery.retryable_failed).toBeGreaterThanOrEqual(1);
    const sink = h.sinks.find((s) => s.sink_id === hSink);
    expect(sink).toMatchObject({
      enabled: true,
      kind: 'webhook',
      subscriptions: 1,
      counts: { pending: 0, in_flight: 1, succeeded: 0, failed: 1, dead: 1 },
      retryable_failed: 1,
      stale_claims: 1,
    });
    expect(sink!.oldest_due_age_seconds as number).toBeGreaterThanOrEqual(29);
    const sub = h.subscriptions.find((s) => s.subscription_id === hSub);
    expect(sub).toMatchObject({
      collection_id: hCol,
      sink_id: hSink,
      enabled: true,
      sink_enabled: true,
      stale_claims: 1,
      retryable_failed: 1,
    });
    await t.request('PATCH', `/api/v1/event-sinks/${hSink}`, { body: { enabled: false } });
    const after = (await t.request('GET', '/api/v1/event-deliveries/health')).body as typeof h;
    expect(after.sinks.find((s) => s.sink_id === hSink)).toMatchObject({ enabled: false, retryable_failed: 0 });
    expect(after.subscriptions.find((s) => s.subscription_id === hSub)).toMatchObject({ sink_enabled: false });
  });

  it('401; 403 for non-admins and scoped admins', async () => {
    expect((await t.request('GET', '/api/v1/event-deliveries/health', { token: null })).status).toBe(401);
    expect((await t.request('GET', '/api/v1/event-deliveries/health', { token: human.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/event-deliveries/health', { token: scopedAdmin })).status).toBe(403);
  });
});

describe('administrator delivery actions are audited', () => {
  it('retryEventDelivery and markEventDeliveryDead 200 record event_delivery retried / dead with snapshots; a no-op dead records nothing', async () => {
    const id = ids[1]!;
    await setStatus(id, 'dead');
    const adminId = (await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`)[0]!
      .id;
    const before = (await eventsOf(t, 'event_delivery', id)).length;
    expect((await t.request('POST', `/api/v1/event-deliveries/${id}/retry`)).status).toBe(200);
    expect((await t.request('POST', `/api/v1/event-deliveries/${id}/dead`)).status).toBe(200);
    expect((await t.request('POST', `/api/v1/event-deliveries/${id}/dead`)).status).toBe(200);
    const events = (await eventsOf(t, 'event_delivery', id)).slice(before);
    expect(events.map((e) => e.action)).toEqual(['retried', 'dead']);
    expect(events[0]).toMatchObject({
      collection_id: null,
      actor_user_id: adminId,
      before: { id, status: 'dead' },
      after: { id, status: 'pending' },
      metadata: { subscription_id: subId, sink_id: sinkId, purpose: 'event' },
    });
    expect(events[1]).toMatchObject({ before: { status: 'pending' }, after: { status: 'dead' } });
  });
});

describe('succeeded results written together (recordSucceeded)', () => {
  it('results ready while a write is under way go in one statement after it; each keeps its own fence', async () => {
    const sub = (await createSubscription(t, col, { sink_id: sinkId, entity_types: ['collection'], actions: ['updated'] })).id;
    for (let i = 0; i < 6; i++) await t.request('PATCH', `/api/v1/collections/${col}`, { body: { description: uniq('w') } });
    await fanOutAll(t);
    const mine = (await deliveriesOf(t, sub)).map((d) => d.id);
    expect(mine).toHaveLength(6);
    await t.deps.sql`update event_deliveries set status = 'dead' where sink_id = ${sinkId} and not (id = any(${mine}::int[]))
      and status in ('pending', 'failed')`;
    const claims = await withTx(t.deps.sql, (tx) => claimDeliveries(tx, 8, 30_000, { sinkIds: [sinkId] }));
    expect(claims.map((c) => c.id).sort()).toEqual([...mine].sort());
    const [first, ...rest] = claims;
    // one row's claim revoked (the dead action), one given with a token not its own
    await t.request('POST', `/api/v1/event-deliveries/${rest[0]!.id}/dead`);
    const wrongToken = { ...rest[1]!, claim_token: claims[0]!.claim_token };
    const { proxy, url } = await proxyToTestDatabase();
    const sql = createSql(url, Object.assign({}, t.deps.config, { SVC_DB_POOL_MAX: 1, SVC_DB_LIST_POOL_MAX: 0 }));
    try {
      // the statement prepared (its first use waits for the types PostgreSQL describes)
      expect(await recordSucceeded(sql, 0, first!.claim_token)).toBe(false);
      proxy.hold();
      const firstWrite = recordSucceeded(sql, first!.id, first!.claim_token);
      await proxy.until([EXECUTE]);
      // the first statement's answer is held: these wait for it, then go as one
      const others = [rest[0]!, wrongToken, ...rest.slice(2)].map((c) => recordSucceeded(sql, c.id, c.claim_token));
      proxy.release();
      expect(await firstWrite).toBe(true);
      expect(await Promise.all(others)).toEqual([false, false, true, true, true]);
      expect(proxy.sent.split(EXECUTE).length - 1).toBe(2);
    } finally {
      await sql.end({ timeout: 5 });
      await proxy.close();
    }
    const statuses = await t.deps.sql<{ id: number; status: string }[]>`
      select id, status from event_deliveries where id = any(${mine}::int[]) order by id`;
    const want = new Map(claims.map((c) => [c.id, 'succeeded']));
    want.set(rest[0]!.id, 'dead');
    want.set(rest[1]!.id, 'in_flight');
    expect(statuses.map((r) => [r.id, r.status])).toEqual([...want].sort((x, y) => x[0] - y[0]));
  });
});
