import { acquireTimeoutOf, transactionObserver, type Db, type Sql, type TransactionSql } from './sql.ts';
import { translatePgError } from './pg-errors.ts';
import { ApiError } from '../domain/errors.ts';
import { afterCommit } from './auth-changes.ts';
import { afterCommitWakes } from './wakeups.ts';
import { trackSavepoint, trackTransaction } from './tx-roots.ts';

class AbandonedTransaction extends Error {}

/**
 * Runs fn in one transaction (the only place that calls sql.begin). Nested calls reuse the
 * outer transaction. PostgreSQL errors leave here translated to ApiErrors where they mean one.
 *
 * Waiting for a pooled connection is bounded by SVC_DB_POOL_ACQUIRE_TIMEOUT_MS: past it the caller
 * gets 503, and the abandoned transaction, should it get a connection later, rolls back before fn
 * runs, so a request that was answered 503 never writes.
 */
export async function withTx<T>(db: Db, fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
  if (isTx(db)) return fn(db);
  const timeoutMs = acquireTimeoutOf(db as Sql);
  let started = false;
  let abandoned = false;
  let timer: NodeJS.Timeout | undefined;
  const observer = transactionObserver();
  const asked = performance.now();
  let got = 0;
  let committed: object | undefined;
  const run = (db as Sql).begin((tx) => {
    started = true;
    clearTimeout(timer);
    if (abandoned) throw new AbandonedTransaction();
    got = performance.now();
    observer?.acquired((got - asked) / 1000);
    trackTransaction(tx);
    return fn(tx).then((result) => {
      committed = tx;
      return result;
    });
  }) as Promise<T>;
  // After COMMIT: this process's token cache drops what a committed auth change made stale, and the
  // workers are woken for the events and tasks it wrote (db/wakeups.ts).
  void run.then(
    () => {
      if (!committed) return;
      afterCommit(db as Sql, committed);
      afterCommitWakes(db as Sql, committed);
    },
    () => {},
  );
  if (observer) {
    void run.then(
      () => observer.finished((performance.now() - got) / 1000, 'commit'),
      () => got > 0 && observer.finished((performance.now() - got) / 1000, 'rollback'),
    );
  }
  try {
    if (timeoutMs === undefined) return await run;
    const waited = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        if (started) return;
        abandoned = true;
        run.catch(() => {});
        observer?.acquireTimedOut();
        reject(
          new ApiError('unavailable', 'the database is busy: no connection became free in time; retry shortly', {
            reason: 'database_busy',
            retryAfterSeconds: 1,
          }),
        );
      }, timeoutMs);
    });
    return await Promise.race([run, waited]);
  } catch (err) {
    throw translatePgError(err);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Wraps a transaction's final statement. `commitWith(tx)` sends COMMIT right behind it (postgres.js
 * as patched in patches/: both go out in one write, so the statement and COMMIT cost one round trip);
 * the identity when the caller does not own the transaction (it commits later). A statement issued
 * after the final one is refused, so only the owner of a transaction may hand out commitWith. A
 * postgres.js query is sent when it is first awaited (or given .then / .catch): start every earlier
 * statement before passing the final one, or it counts as issued after it.
 */
export type Final = <Q extends PromiseLike<unknown>>(query: Q) => Q;

// Pipelines. A mutation sends several statements before awaiting the first answer (one round trip
// for all), and PostgreSQL runs them in the order they were sent: a lock before what must read the
// locked state. postgres.js sends a query one microtask after its first .then/.catch/.execute, and
// `await query` calls .then a microtask later than a .catch on the bare query would. So every
// statement of a pipeline is sent the same way, from an async function that awaits it first
// (`const rows = await tx\`…\``): they then go out in the order the functions are called. A bare
// query given .catch beside them would overtake them (test/pipeline-order.test.ts holds the order).

export const notFinal: Final = (query) => query;

/**
 * The final-statement wrapper for `tx`, opened by withTx(db, …): commitWith when that call began it
 * (db was not a transaction yet), else the identity (the outer owner commits).
 */
export function finalFor(db: Db, tx: TransactionSql): Final {
  return isTx(db) ? notFinal : (query) => tx.commitWith(query);
}

/**
 * Runs fn in a savepoint of `tx` (released when it returns, rolled back when it throws). What the
 * savepoint records for after COMMIT (a token-cache drop, an event wake) waits for the commit of
 * the transaction it is in.
 */
export function savepoint<T>(tx: TransactionSql, fn: (sp: TransactionSql) => Promise<T>): Promise<T> {
  return tx.savepoint((sp) => {
    trackSavepoint(sp, tx);
    return fn(sp);
  }) as Promise<T>;
}

export function isTx(db: Db): db is TransactionSql {
  return typeof (db as TransactionSql).savepoint === 'function';
}
