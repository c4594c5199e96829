import type { Db, Sql, TransactionSql } from './sql.ts';
import { translatePgError } from './pg-errors.ts';

/**
 * Runs fn in one transaction (the only place that calls sql.begin). Nested calls reuse the
 * outer transaction. PostgreSQL errors leave here translated to ApiErrors where they mean one.
 */
export async function withTx<T>(db: Db, fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
  if (isTx(db)) return fn(db);
  try {
    return (await (db as Sql).begin((tx) => fn(tx))) as T;
  } catch (err) {
    throw translatePgError(err);
  }
}

function isTx(db: Db): db is TransactionSql {
  return typeof (db as TransactionSql).savepoint === 'function';
}
