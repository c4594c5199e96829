// Wakes the workers that LISTEN for new rows once those rows have committed: the event fan-out
// workers (channel svc_events, workers/event-fanout.ts) for audit events, the task workers
// (svc_tasks, workers/tasks.ts) for submitted tasks, the event delivery workers
// (svc_event_deliveries, workers/event-delivery.ts) for deliveries made, released for retry, or let
// go by a sink or subscription enabled again (mutations/event-sinks.ts, event-subscriptions.ts). Until
// migrations 0290, 0300 and 0310 insert triggers on events, tasks and event_deliveries sent these
// NOTIFYs inside the transactions that wrote the rows; but
// PostgreSQL serialises the commits of notifying transactions on one database-wide lock, taken
// before commit and held until its WAL is flushed, so every such transaction of every process
// committed one after another, each waiting for its own flush (no group commit): about a sixth of
// the object creates a second went to that (bench/FINDINGS.md, 2026-12-05). Now the process that
// commits such a transaction sends the NOTIFY itself, after the commit, in a statement of its own
// that does not wait for its flush; while one is under way on a channel, the next waits for it and
// stands for all the commits in between. The workers still poll (SVC_EVENT_FANOUT_POLL_INTERVAL_MS,
// SVC_TASK_POLL_INTERVAL_MS, SVC_EVENT_DELIVERY_POLL_INTERVAL_MS) for rows another program inserts
// and for a lost notification.
import type { Db, Sql } from './sql.ts';
import { noteForCommit } from './tx-roots.ts';

/** The channel the event fan-out workers listen on. */
export const EVENTS_CHANNEL = 'svc_events';
/** The channel the task workers listen on. */
export const TASKS_CHANNEL = 'svc_tasks';
/** The channel the event delivery workers listen on. */
export const DELIVERIES_CHANNEL = 'svc_event_deliveries';
type Channel = typeof EVENTS_CHANNEL | typeof TASKS_CHANNEL | typeof DELIVERIES_CHANNEL;

/** The channels each transaction of withTx is to wake after its COMMIT. */
const marked = new WeakMap<object, Set<Channel>>();
/** The wake under way on a pool's channel: `again` when another was asked for meanwhile; `settled` when none is left. */
const sending = new WeakMap<Sql, Map<Channel, { again: boolean; settled: Promise<void> }>>();

/**
 * Notes that `db` wrote rows the workers of `channel` wait for: a transaction of withTx (or a
 * savepoint in one) wakes them after its COMMIT (afterCommitWakes). A statement on the bare pool
 * (nothing in src writes such rows so; tests do) wakes them right after this task, which may be
 * before that statement has committed: the workers' poll then finds its rows.
 */
export function markWake(db: Db, channel: Channel): void {
  if (noteForCommit(marked, db, [channel])) return;
  if (typeof (db as Sql).end === 'function') setImmediate(() => wake(db as Sql, channel));
}

/** After COMMIT of `tx` on `sql`: wakes the workers of the channels the transaction marked. */
export function afterCommitWakes(sql: Sql, tx: object): void {
  for (const channel of marked.get(tx) ?? []) wake(sql, channel);
}

/**
 * Sends `channel`'s NOTIFY on `sql`, at most one at a time: a wake asked for while one is under way
 * is sent once that one is answered (for every commit before it). Without waiting for its WAL
 * flush: a wake lost to a crash costs a poll interval at most. Failures are left to the poll.
 */
export function wake(sql: Sql, channel: Channel): void {
  let channels = sending.get(sql);
  if (!channels) sending.set(sql, (channels = new Map()));
  const under = channels.get(channel);
  if (under) {
    under.again = true;
    return;
  }
  let finished!: () => void;
  const state = { again: false, settled: new Promise<void>((ok) => (finished = ok)) };
  channels.set(channel, state);
  const send = (): void => {
    notifyUnflushed(sql, channel, '').then(done, done);
  };
  const done = (): void => {
    if (state.again) {
      state.again = false;
      send();
      return;
    }
    channels.delete(channel);
    finished();
  };
  send();
}

/**
 * NOTIFY `channel` with `payload` in a statement of its own whose commit does not wait for its WAL
 * flush, so it holds PostgreSQL's lock on notifying commits as briefly as it can: for a
 * notification that need not survive a crash (a wake, the token cache's heartbeat).
 */
export function notifyUnflushed(sql: Sql, channel: string, payload: string): Promise<unknown> {
  return sql`select set_config('synchronous_commit', 'off', true), pg_notify(${channel}, ${payload})`;
}

/** Resolves once no wake is under way on `sql` (those asked for before included). */
export async function wakesSettled(sql: Sql): Promise<void> {
  await Promise.all([...(sending.get(sql)?.values() ?? [])].map((s) => s.settled));
}
