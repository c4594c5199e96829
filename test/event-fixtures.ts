// Fixtures for the event sink, subscription and delivery tests: sinks and subscriptions through the
// API, fan-out runs, and a local HTTPS peer whose self-signed certificate (made with the openssl
// command line) is trusted through SVC_OUTBOUND_CA_FILE.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { uniq, type TestApp } from './helpers.ts';
import { runEventFanoutOnce } from '../src/workers/event-fanout.ts';

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

export interface Seen {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface Peer {
  port: number;
  caFile: string;
  seen: Seen[];
  respond: (req: IncomingMessage, res: ServerResponse) => void;
  url(path?: string): string;
  close(): Promise<void>;
}

/** A local HTTPS server with a fresh self-signed certificate for localhost and 127.0.0.1. */
export async function startPeer(): Promise<Peer> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-sink-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  const caFile = join(dir, 'cert.pem');
  const peer: Peer = {
    port: 0,
    caFile,
    seen: [],
    respond: (_req, res) => {
      res.statusCode = 200;
      res.end('ok');
    },
    url: (path = '/hook') => `https://127.0.0.1:${peer.port}${path}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  const server: Server = createServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(caFile) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      peer.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      peer.respond(req, res);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  peer.port = (server.address() as AddressInfo).port;
  return peer;
}
