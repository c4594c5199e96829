// Fixtures for the event sink, subscription and delivery tests: sinks and subscriptions through the
// API, fan-out runs, and the local HTTPS peer of tls-fixtures.ts (trusted through
// SVC_OUTBOUND_CA_FILE).
import { expect } from 'vitest';
import { uniq, type TestApp } from './helpers.ts';
import { runEventFanoutOnce } from '../src/workers/event-fanout.ts';

export { startPeer, type Peer, type Seen } from './tls-fixtures.ts';

export async function createSink(t: TestApp, body: Record<string, unknown> = {}): Promise<{ id: number; etag: string }> {
  const res = await t.request('POST', '/api/v1/event-sinks', { body: { name: uniq('sink'), kind: 'webhook', ...body } });
  expect(res.status, res.text).toBe(201);
  return { id: (res.body as { id: number }).id, etag: res.headers.get('etag')! };
}

export async function createCollection(t: TestApp, parent?: number): Promise<number> {
  const res = await t.request('POST', '/api/v1/collections', {
    body: { name: uniq('col'), ...(parent ? { parent_collection_id: parent } : {}) },
  });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

export interface SubscriptionBody {
  sink_id: number;
  name?: string;
  entity_types?: string[];
  actions?: string[];
  filter?: Record<string, unknown>;
  routing?: Record<string, unknown>;
  enabled?: boolean;
  description?: string;
}

/** A collection subscription (collectionId given) or a system subscription (null). */
export async function createSubscription(
  t: TestApp,
  collectionId: number | null,
  body: SubscriptionBody,
): Promise<{ id: number; etag: string }> {
  const path = collectionId === null ? '/api/v1/system-event-subscriptions' : `/api/v1/collections/${collectionId}/event-subscriptions`;
  const res = await t.request('POST', path, {
    body: {
      name: uniq('sub'),
      entity_types: ['collection'],
      actions: ['created', 'updated', 'deleted'],
      routing: { url: 'https://hooks.example.com/in' },
      ...body,
    },
  });
  expect(res.status, res.text).toBe(201);
  return { id: (res.body as { id: number }).id, etag: res.headers.get('etag')! };
}

/** Runs fan-out cycles until the queue is empty (other test files may add events meanwhile). */
export async function fanOutAll(t: TestApp): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const r = await runEventFanoutOnce(t.deps);
    if (r.claimed === 0) return;
  }
}

export interface DeliveryRow {
  id: number;
  event_id: string;
  subscription_id: number;
  sink_id: number;
  purpose: string;
  status: string;
  attempts: number;
  last_error: string | null;
  deferred_reason: string | null;
  next_attempt_at: Date;
}

export async function deliveriesOf(t: TestApp, subscriptionId: number): Promise<DeliveryRow[]> {
  return t.deps.sql<DeliveryRow[]>`
    select id, event_id::text as event_id, subscription_id, sink_id, purpose, status, attempts, last_error, deferred_reason, next_attempt_at
    from event_deliveries where subscription_id = ${subscriptionId} order by id`;
}

/** The UUID of the latest event of an entity. */
export async function latestEventId(t: TestApp, entityType: string, entityId: number): Promise<string> {
  const [row] = await t.deps.sql<{ event_id: string }[]>`
    select event_id::text as event_id from events where entity_type = ${entityType} and entity_id = ${entityId} order by id desc limit 1`;
  return row!.event_id;
}
