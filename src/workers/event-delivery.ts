// The event delivery worker. SVC_EVENT_DELIVERY_WORKERS workers per process (0 = delivery off),
// woken by LISTEN svc_event_deliveries (sent after the commit that made or released rows:
// db/wakeups.ts) with polling as the fallback.
// A worker holds at most min(SVC_EVENT_DELIVERY_BATCH_SIZE, 8) claimed rows at once, each under its
// own claim token locked for SVC_EVENT_DELIVERY_LOCK_TIMEOUT_MS, and sends them concurrently; it
// claims again for the free part of that window once half of it is free (deliveryWorker). A row:
//   1. load sink, subscription and event (for the whole batch, with the claim); refuse (dead,
//      nothing sent, no secret resolved) a routing that is neither listed in the sink's
//      config.allowed_routing nor set by an unscoped administrator for this sink; build the
//      envelope (before/after are redacted when the subscription's collection is only a related
//      collection of the event, as audit reads do);
//   2. resolve secret_ref and config.url_secret_ref (missing secret: a failed attempt, nothing sent);
//   3. right before transport, re-check the claim (token unchanged, lock unexpired: one read for
//      the batch's rows without pacing) and take the sink's send slot when
//      delivery_policy.min_interval_ms is set (else defer the row: pending, configured_rate,
//      next_attempt_at = when the slot frees);
//   4. one transport attempt, bounded by SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS (below the lock
//      timeout, so the result can still be recorded under the claim);
//   5. record the outcome fenced by the claim token: succeeded (in one statement with the other
//      succeeded results of the process ready at the same time: db/event-deliveries.ts); failed
//      with exponential backoff (BASE·2^(n−1) capped at MAX) or dead once
//      SVC_EVENT_DELIVERY_MAX_ATTEMPTS attempts failed; dead at once for permanent failures;
//      pending with provider_rate and the Retry-After cooldown for rate limits (no attempt
//      consumed); released (pending, due now, no attempt consumed) when shutdown aborted the send.
//      A replaced or revoked claim records nothing.
import type { Deps } from '../deps.ts';
import type { Loop } from './loop.ts';
import { withTx } from '../db/tx.ts';
import { DELIVERIES_CHANNEL } from '../db/wakeups.ts';
import type { Db } from '../db/sql.ts';
import { findEventSinks } from '../db/event-sinks.ts';
import { sinkDefinition, type EventSinkRow } from '../domain/views/event-sinks.ts';
import { findEventSubscriptions } from '../db/event-subscriptions.ts';
import type { EventSubscriptionRow } from '../domain/views/event-subscriptions.ts';
import {
  claimDeliveries,
  liveClaims,
  findEventsByUuids,
  lockLiveClaim,
  nextDueAt,
  recordDeliveryResult,
  recordSucceeded,
  takeSendSlot,
  type ClaimedDelivery,
  type DeliveryClaimFilter,
  type DeliveryResult,
  type StoredEvent,
} from '../db/event-deliveries.ts';
import { backoffMs, deliveryEnvelope } from '../domain/event-subscriptions.ts';
import { transportFor } from '../sinks/index.ts';
import { unlistedRouting } from '../sinks/allowed-routing.ts';
import { resolveEventSinkSecret } from '../sinks/secrets.ts';
import type { EventEnvelope, SendResult, SinkTransport } from '../sinks/types.ts';
import { runWokenWorkers, type Waker } from './waker.ts';
import { deliveryWakeups, type WakeupStats } from '../worker-stats.ts';
import { deliveries } from '../metrics.ts';

/** At most this many rows are claimed and sent at once by one worker (interface spec). */
export const MAX_CLAIM = 8;

function afterFailure(deps: Deps, c: ClaimedDelivery, error: string): DeliveryResult {
  const cfg = deps.config;
  const attempt = c.attempts + 1;
  if (attempt >= cfg.SVC_EVENT_DELIVERY_MAX_ATTEMPTS) {
    return { status: 'dead', error: `${error} (attempt ${attempt} of ${cfg.SVC_EVENT_DELIVERY_MAX_ATTEMPTS})`, consumeAttempt: true };
  }
  return {
    status: 'failed',
    error,
    retryInMs: backoffMs(attempt, cfg.SVC_EVENT_DELIVERY_RETRY_BACKOFF_BASE_MS, cfg.SVC_EVENT_DELIVERY_RETRY_BACKOFF_MAX_MS),
  };
}

function fromSend(deps: Deps, c: ClaimedDelivery, r: SendResult): DeliveryResult {
  switch (r.outcome) {
    case 'succeeded':
      return { status: 'succeeded' };
    case 'retry':
      return afterFailure(deps, c, r.error);
    case 'dead':
      return { status: 'dead', error: r.error, consumeAttempt: true };
    case 'deferred':
      return { status: 'pending', reason: r.reason, at: null, inMs: Math.max(0, r.retryAfterMs) };
  }
}

/** What happened to one claimed row (tests look at it). */
export type DeliveryStep = 'recorded' | 'claim_lost' | 'deferred' | 'gone';

/** The outcome label of svc_event_deliveries_total. */
function outcomeOf(r: DeliveryResult): string {
  return r.status === 'pending' ? 'deferred' : r.status;
}

async function record(deps: Deps, c: ClaimedDelivery, transport: string, r: DeliveryResult): Promise<DeliveryStep> {
  const ok =
    r.status === 'succeeded'
      ? await recordSucceeded(deps.sql, c.id, c.claim_token)
      : await recordDeliveryResult(deps.sql, c.id, c.claim_token, r);
  deliveries.inc({ transport, outcome: ok ? outcomeOf(r) : 'claim_lost' });
  if (!ok) deps.log.warn({ delivery_id: c.id }, 'event delivery claim was replaced or revoked; the result is discarded');
  else if (r.status === 'failed' || r.status === 'dead') {
    deps.log.info(
      { delivery_id: c.id, sink_kind: transport, status: r.status, attempt: c.attempts + 1, error: r.error },
      'event delivery not delivered',
    );
  } else deps.log.debug({ delivery_id: c.id, sink_kind: transport, status: r.status }, 'event delivery recorded');
  return ok ? 'recorded' : 'claim_lost';
}

/** What a claimed row is sent with: its sink, subscription and event (each undefined when gone). */
export interface DeliveryContext {
  sink: EventSinkRow | undefined;
  sub: EventSubscriptionRow | undefined;
  event: StoredEvent | undefined;
}

/**
 * The sinks, subscriptions and events of `claimed`, by delivery id: three statements for the whole
 * batch, sent together (one round trip on a transaction's connection).
 */
export async function deliveryContexts(db: Db, claimed: ClaimedDelivery[]): Promise<Map<number, DeliveryContext>> {
  const unique = <T>(values: T[]) => [...new Set(values)];
  const [sinks, subs, events] = await Promise.all([
    findEventSinks(db, unique(claimed.map((c) => c.sink_id))),
    findEventSubscriptions(db, unique(claimed.map((c) => c.subscription_id))),
    findEventsByUuids(db, unique(claimed.map((c) => c.event_id))),
  ]);
  const sinkById = new Map(sinks.map((k) => [k.id, k]));
  const subById = new Map(subs.map((s) => [s.id, s]));
  const eventById = new Map(events.map((e) => [e.event_id, e]));
  return new Map(
    claimed.map((c) => [c.id, { sink: sinkById.get(c.sink_id), sub: subById.get(c.subscription_id), event: eventById.get(c.event_id) }]),
  );
}

/** A claimed row ready to be sent: what steps 1 and 2 found. */
interface Ready {
  c: ClaimedDelivery;
  sink: EventSinkRow;
  sub: EventSubscriptionRow;
  transport: SinkTransport;
  envelope: EventEnvelope;
  secret: string | null;
  urlSecret: string | null;
}

/** Steps 1 and 2 of the header for one row: what is recorded instead of a send, or the row ready. */
async function prepare(deps: Deps, c: ClaimedDelivery, context: DeliveryContext): Promise<DeliveryStep | Ready> {
  const cfg = deps.config;
  const { sink, sub, event } = context;
  // deleting a sink, subscription or event deletes its delivery rows: nothing left to record
  if (!sink || !sub || !event) return 'gone';
  if (sub.sink_id !== sink.id) {
    return record(deps, c, sink.kind, { status: 'dead', error: 'the subscription no longer uses this sink', consumeAttempt: false });
  }
  const transport = transportFor(sink.kind);
  if (!transport)
    return record(deps, c, sink.kind, afterFailure(deps, c, `the ${sink.kind} transport is not available in this deployment`));
  // the destination rule, before any secret is resolved: routing outside the sink's
  // allowed_routing needs an unscoped administrator's approval for this sink (a refusal is permanent)
  const unlisted = sub.collection_id === null || sub.routing_admin_approved ? [] : unlistedRouting(sink.kind, sub.routing, sink.config);
  if (unlisted.length > 0) {
    return record(deps, c, sink.kind, {
      status: 'dead',
      error:
        `the subscription's ${unlisted[0]!.path} is not an approved destination of this sink: it is not in the sink's ` +
        'config.allowed_routing and no unscoped administrator set it; nothing was sent',
      consumeAttempt: true,
    });
  }

  const envelope = deliveryEnvelope(event, sub);
  let secret: string | null = null;
  if (sink.secret_ref !== null) {
    const s = await resolveEventSinkSecret(cfg, sink.secret_ref);
    if (!s.ok) return record(deps, c, sink.kind, afterFailure(deps, c, `the secret alias ${sink.secret_ref} is not available`));
    secret = s.value;
  }
  let urlSecret: string | null = null;
  const urlRef = sink.config.url_secret_ref;
  if (typeof urlRef === 'string' && urlRef !== '') {
    const s = await resolveEventSinkSecret(cfg, urlRef);
    if (!s.ok) return record(deps, c, sink.kind, afterFailure(deps, c, `the URL secret alias ${urlRef} is not available`));
    urlSecret = s.value;
  }
  return { c, sink, sub, transport, envelope, secret, urlSecret };
}

/**
 * Step 3 for the rows of sinks without pacing: their claims checked in one read (nothing happens
 * under the rows' locks, so no transaction: a lock taken and released at once would only make each
 * delivery write and flush one more commit). The ids whose claims are still live.
 */
async function liveUnpaced(deps: Deps, ready: Ready[]): Promise<Set<number>> {
  const unpaced = ready.filter((r) => r.sink.min_interval_ms === null);
  if (unpaced.length === 0) return new Set();
  return liveClaims(
    deps.sql,
    unpaced.map((r) => ({ id: r.c.id, token: r.c.claim_token })),
  );
}

/** Steps 3 (for paced sinks; `live` tells the rest) to 5 for one ready row. */
async function send(deps: Deps, r: Ready, signal: AbortSignal, live: Set<number>): Promise<DeliveryStep> {
  const cfg = deps.config;
  const { c, sink, sub } = r;
  if (sink.min_interval_ms === null) {
    if (!live.has(c.id)) return 'claim_lost';
  } else {
    const interval = sink.min_interval_ms;
    const gate = await withTx(deps.sql, async (tx): Promise<DeliveryStep | 'send'> => {
      if (!(await lockLiveClaim(tx, c.id, c.claim_token))) return 'claim_lost';
      const freeAt = await takeSendSlot(tx, sink.id, interval);
      if (freeAt !== null) {
        await recordDeliveryResult(tx, c.id, c.claim_token, { status: 'pending', reason: 'configured_rate', at: freeAt });
        deliveries.inc({ transport: sink.kind, outcome: 'deferred' });
        return 'deferred';
      }
      return 'send';
    });
    if (gate !== 'send') return gate;
  }

  let result: SendResult;
  try {
    result = await r.transport.send({
      sink: sinkDefinition(sink),
      routing: sub.routing,
      envelope: r.envelope,
      purpose: c.purpose,
      deliveryId: c.id,
      secret: r.secret,
      urlSecret: r.urlSecret,
      timeoutMs: cfg.SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS,
      signal,
      config: cfg,
    });
  } catch (err) {
    deps.log.error({ err, delivery_id: c.id, sink_id: sink.id }, 'event sink transport threw');
    result = { outcome: 'retry', error: 'the transport failed unexpectedly' };
  }
  // a send cut short by shutdown is not the destination's fault: release it without an attempt
  if (signal.aborted && result.outcome === 'retry') return record(deps, c, sink.kind, { status: 'released' });
  return record(deps, c, sink.kind, fromSend(deps, c, result));
}

export interface DeliveryRunOptions extends DeliveryClaimFilter {
  signal?: AbortSignal;
}

/** A claimed batch with the sinks, subscriptions and events of its rows. */
interface Batch {
  claimed: ClaimedDelivery[];
  contexts: Map<number, DeliveryContext>;
}

/** Claims up to `limit` due rows and reads their sinks, subscriptions and events on the claim's connection. */
async function claimBatch(deps: Deps, limit: number, opts: DeliveryClaimFilter): Promise<Batch> {
  return withTx(deps.sql, async (tx) => {
    const claimed = await claimDeliveries(tx, limit, deps.config.SVC_EVENT_DELIVERY_LOCK_TIMEOUT_MS, opts);
    return { claimed, contexts: claimed.length === 0 ? new Map<number, DeliveryContext>() : await deliveryContexts(tx, claimed) };
  });
}

/**
 * Steps 1-5 for a claimed batch: every row prepared, one claim check for the rows without pacing,
 * then the sends. One promise a row, settled when that row is done (never rejected), so a slow send
 * holds only its own row.
 */
function deliverBatch(deps: Deps, { claimed, contexts }: Batch, signal: AbortSignal): Promise<DeliveryStep>[] {
  const failed = (c: ClaimedDelivery) => (err: unknown) => {
    deps.log.error({ err, delivery_id: c.id }, 'event delivery failed');
    return 'gone' as const;
  };
  const prepared = claimed.map((c) => prepare(deps, c, contexts.get(c.id)!).catch(failed(c)));
  const live = Promise.all(prepared).then(async (all) => {
    try {
      return await liveUnpaced(
        deps,
        all.filter((p): p is Ready => typeof p !== 'string'),
      );
    } catch (err) {
      // the claims stay in flight and expire; the rows are claimed again then
      deps.log.error({ err }, 'event delivery claim check failed');
      return new Set<number>();
    }
  });
  return prepared.map((p) => p.then(async (r) => (typeof r === 'string' ? r : send(deps, r, signal, await live).catch(failed(r.c)))));
}

/** Delivers one row claimed elsewhere (steps 1-5 of the header), its sink, subscription and event read now. */
export async function deliverClaimed(deps: Deps, c: ClaimedDelivery, signal: AbortSignal): Promise<DeliveryStep> {
  return deliverBatch(deps, { claimed: [c], contexts: await deliveryContexts(deps.sql, [c]) }, signal)[0]!;
}

/** One delivery cycle: claim up to min(batch, 8) due rows and deliver them concurrently. Returns the rows claimed. */
export async function runDeliveryOnce(deps: Deps, opts: DeliveryRunOptions = {}): Promise<number> {
  const batch = await claimBatch(deps, Math.min(deps.config.SVC_EVENT_DELIVERY_BATCH_SIZE, MAX_CLAIM), opts);
  if (batch.claimed.length === 0) return 0;
  await Promise.all(deliverBatch(deps, batch, opts.signal ?? new AbortController().signal));
  return batch.claimed.length;
}

/**
 * One delivery worker until `signal` aborts: at most min(batch, 8) rows claimed at once, as a
 * window rather than in rounds. Once half the window is free (or all of it) the worker claims
 * again for the free part, without waiting for the rows still being sent: a slow destination holds
 * its own rows, not the others' behind it. With nothing due it sleeps until woken, the poll
 * interval or the next due row; on abort it waits for its rows (a cut-short send is released).
 */
async function deliveryWorker(deps: Deps, signal: AbortSignal, waker: Waker, stats: WakeupStats, only: DeliveryClaimFilter): Promise<void> {
  const cfg = deps.config;
  const limit = Math.min(cfg.SVC_EVENT_DELIVERY_BATCH_SIZE, MAX_CLAIM);
  const refill = Math.ceil(limit / 2);
  const inFlight = new Set<Promise<DeliveryStep>>();
  try {
    while (!signal.aborted) {
      if (limit - inFlight.size < refill) {
        await Promise.race(inFlight);
        continue;
      }
      let claimed = 0;
      try {
        const batch = await claimBatch(deps, limit - inFlight.size, only);
        claimed = batch.claimed.length;
        for (const row of deliverBatch(deps, batch, signal)) {
          const held: Promise<DeliveryStep> = row.finally(() => inFlight.delete(held));
          inFlight.add(held);
        }
      } catch (err) {
        deps.log.error({ err, worker: 'event-delivery' }, 'event delivery cycle failed');
      }
      if (claimed > 0) continue;
      let waitMs = cfg.SVC_EVENT_DELIVERY_POLL_INTERVAL_MS;
      try {
        const due = await nextDueAt(deps.sql);
        if (due) waitMs = Math.max(10, Math.min(waitMs, due.getTime() - Date.now()));
      } catch {
        // keep the poll interval
      }
      const woken = await waker.wait(waitMs, signal);
      if (signal.aborted) break;
      if (woken) stats.notification++;
      else stats.poll++;
    }
  } finally {
    await Promise.all(inFlight);
  }
}

/** Runs SVC_EVENT_DELIVERY_WORKERS workers until `signal` aborts. */
export async function runDeliveryWorkers(
  deps: Deps,
  signal: AbortSignal,
  stats: WakeupStats = deliveryWakeups,
  only: DeliveryClaimFilter = {},
): Promise<void> {
  await runWokenWorkers(deps, signal, { count: deps.config.SVC_EVENT_DELIVERY_WORKERS, channel: DELIVERIES_CHANNEL }, (waker) =>
    deliveryWorker(deps, signal, waker, stats, only),
  );
}

/** The delivery workers as a background loop (src/workers/index.ts); a tick lasts until shutdown. */
export const eventDeliveryLoop: Loop = {
  name: 'event-delivery',
  intervalMs: 1000,
  tick: (deps, signal) => runDeliveryWorkers(deps, signal),
};
