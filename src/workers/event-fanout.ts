// The event fan-out worker: turns new events into delivery rows. Wakes on LISTEN svc_events (sent
// after the commit of each transaction that appended events: db/wakeups.ts) and polls every
// SVC_EVENT_FANOUT_POLL_INTERVAL_MS as a fallback (events another program inserts, a lost wake).
// Each cycle claims up to SVC_EVENT_FANOUT_BATCH_SIZE queued events under a claim token that
// lasts SVC_EVENT_FANOUT_LOCK_TIMEOUT_MS (skip locked: any number of workers and processes), matches
// them against the enabled subscriptions of enabled sinks (src/domain/event-subscriptions.ts), and
// finishes them in one transaction fenced by the token. A worker that stalls past its lock loses
// the batch to another worker and writes nothing; the unique (event, subscription) index keeps
// deliveries exactly once either way.
import { randomUUID } from 'node:crypto';
import type { Deps } from '../deps.ts';
import type { Loop } from './loop.ts';
import { withTx } from '../db/tx.ts';
import { EVENTS_CHANNEL } from '../db/wakeups.ts';
import { candidateSubscriptions, claimFanoutBatch, finishFanout } from '../db/event-fanout.ts';
import { findEventsByIds } from '../db/event-deliveries.ts';
import { subscriptionMatches } from '../domain/event-subscriptions.ts';
import { runWokenWorkers } from './waker.ts';
import { fanoutWakeups, type WakeupStats } from '../worker-stats.ts';

export interface FanoutResult {
  /** Events claimed (and finished, unless the claim was lost). */
  claimed: number;
  /** Delivery rows created. */
  created: number;
}

/** One fan-out cycle: claim a batch, match, finish. */
export async function runEventFanoutOnce(deps: Deps): Promise<FanoutResult> {
  const cfg = deps.config;
  const token = randomUUID();
  const ids = await claimFanoutBatch(deps.sql, cfg.SVC_EVENT_FANOUT_BATCH_SIZE, cfg.SVC_EVENT_FANOUT_LOCK_TIMEOUT_MS, token);
  if (ids.length === 0) return { claimed: 0, created: 0 };
  const events = await findEventsByIds(deps.sql, ids);
  const matches: { eventId: number; subscriptionId: number }[] = [];
  if (events.length > 0) {
    const types = [...new Set(events.map((e) => e.entity_type))];
    const collections = [
      ...new Set(events.flatMap((e) => [...(e.collection_id === null ? [] : [e.collection_id]), ...e.related_collection_ids])),
    ];
    const subs = await candidateSubscriptions(deps.sql, types, collections);
    for (const e of events) {
      for (const s of subs) if (subscriptionMatches(s, e)) matches.push({ eventId: e.id, subscriptionId: s.id });
    }
  }
  const created = await withTx(deps.sql, (tx) => finishFanout(tx, ids, token, matches));
  return { claimed: ids.length, created };
}

/** Runs SVC_EVENT_FANOUT_WORKERS workers until `signal` aborts. */
export async function runEventFanoutWorkers(deps: Deps, signal: AbortSignal, stats: WakeupStats = fanoutWakeups): Promise<void> {
  const cfg = deps.config;
  await runWokenWorkers(deps, signal, { count: cfg.SVC_EVENT_FANOUT_WORKERS, channel: EVENTS_CHANNEL }, async (waker) => {
    while (!signal.aborted) {
      let full = false;
      try {
        const r = await runEventFanoutOnce(deps);
        full = r.claimed >= cfg.SVC_EVENT_FANOUT_BATCH_SIZE;
      } catch (err) {
        deps.log.error({ err, worker: 'event-fanout' }, 'event fan-out cycle failed');
      }
      if (!full) {
        const woken = await waker.wait(cfg.SVC_EVENT_FANOUT_POLL_INTERVAL_MS, signal);
        if (signal.aborted) break;
        if (woken) stats.notification++;
        else stats.poll++;
      }
    }
  });
}

/** The fan-out as a background loop (src/workers/index.ts); a tick lasts until shutdown. */
export const eventFanoutLoop: Loop = {
  name: 'event-fanout',
  intervalMs: 1000,
  tick: (deps, signal) => runEventFanoutWorkers(deps, signal),
};
