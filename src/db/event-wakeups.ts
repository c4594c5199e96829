// Wakes the event fan-out workers (LISTEN svc_events, workers/event-fanout.ts) once audit events
// have committed. Until migration 0290 an insert trigger on events sent the NOTIFY inside each
// transaction that appended events; but PostgreSQL serialises the commits of notifying
// transactions on one database-wide lock, taken before commit and held until its WAL is flushed,
// so every event-writing transaction of every process committed one after another, each waiting
// for its own flush (no group commit): about a sixth of the object creates a second went to that
// (bench/FINDINGS.md, 2026-12-05). Now the process that commits such a transaction sends the NOTIFY
// itself, after the commit, in a statement of its own that does not wait for its flush; while one
// is under way, the next waits for it and stands for all the commits in between. The workers still
// poll (SVC_EVENT_FANOUT_POLL_INTERVAL_MS) for events another program inserts and for a lost
// notification.
import type { Db, Sql } from './sql.ts';
import { transactionOf } from './tx-roots.ts';

/** The channel the fan-out workers listen on. */
export const EVENTS_CHANNEL = 'svc_events';

const wrote = new WeakSet<object>();
/** The wake under way on a pool: `again` when another was asked for meanwhile; `settled` when none is left. */
const sending = new WeakMap<Sql, { again: boolean; settled: Promise<void> }>();

/**
 * Notes that `db` appended audit events: a transaction of withTx (or a savepoint in one) wakes the
 * workers after its COMMIT (afterCommitWake). A statement on the bare pool (nothing in src writes
 * events so; tests do) wakes them right after this task, which may be before that statement has
 * committed: the workers' poll then finds its events.
 */
export function markEventsWritten(db: Db): void {
  const tx = transactionOf(db);
  if (tx) wrote.add(tx);
  else if (typeof (db as Sql).end === 'function') setImmediate(() => wakeEventFanout(db as Sql));
}

/** After COMMIT of `tx` on `sql`: wakes the fan-out workers when the transaction appended events. */
export function afterCommitWake(sql: Sql, tx: object): void {
  if (wrote.has(tx)) wakeEventFanout(sql);
}

/**
 * Sends the fan-out workers' NOTIFY on `sql`, at most one at a time: a wake asked for while one is
 * under way is sent once that one is answered (for every commit before it). Without waiting for
 * its WAL flush: a wake lost to a crash costs a poll interval at most. Failures are left to the poll.
 */
export function wakeEventFanout(sql: Sql): void {
  const under = sending.get(sql);
  if (under) {
    under.again = true;
    return;
  }
  let finished!: () => void;
  const state = { again: false, settled: new Promise<void>((ok) => (finished = ok)) };
  sending.set(sql, state);
  const send = (): void => {
    sql`select set_config('synchronous_commit', 'off', true), pg_notify(${EVENTS_CHANNEL}, '')`.then(done, done);
  };
  const done = (): void => {
    if (state.again) {
      state.again = false;
      send();
      return;
    }
    sending.delete(sql);
    finished();
  };
  send();
}

/** Resolves once no wake is under way on `sql` (those asked for before included). */
export function eventWakesSettled(sql: Sql): Promise<void> {
  return sending.get(sql)?.settled ?? Promise.resolve();
}
