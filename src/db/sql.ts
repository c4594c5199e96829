import postgres from 'postgres';
import type { Config } from '../config.ts';

export type Sql = postgres.Sql<Record<string, unknown>>;
export type TransactionSql = postgres.TransactionSql<Record<string, unknown>>;
/** Either the pool or a transaction: every db/ function takes this. */
export type Db = Sql | TransactionSql;

const acquireTimeouts = new WeakMap<object, number>();

/** SVC_DB_POOL_ACQUIRE_TIMEOUT_MS of a pool made by createSql (withTx bounds its wait with it). */
export function acquireTimeoutOf(sql: Sql): number | undefined {
  return acquireTimeouts.get(sql);
}

export function createSql(
  url: string,
  cfg: Pick<Config, 'SVC_DB_POOL_MAX' | 'SVC_DB_STATEMENT_TIMEOUT_MS' | 'SVC_DB_POOL_ACQUIRE_TIMEOUT_MS'>,
): Sql {
  const sql = postgres(url, {
    max: cfg.SVC_DB_POOL_MAX,
    idle_timeout: 30,
    connect_timeout: Math.ceil(cfg.SVC_DB_POOL_ACQUIRE_TIMEOUT_MS / 1000),
    onnotice: () => {},
    connection: {
      statement_timeout: cfg.SVC_DB_STATEMENT_TIMEOUT_MS,
      application_name: 'inventory-data-service',
    },
    types: {
      // int8 (counts, event ids) as JS numbers: they stay far below 2^53 here.
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
  }) as unknown as Sql;
  acquireTimeouts.set(sql, cfg.SVC_DB_POOL_ACQUIRE_TIMEOUT_MS);
  return sql;
}
