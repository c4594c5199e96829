import postgres from 'postgres';

export type Sql = postgres.Sql<Record<string, unknown>>;
export type TransactionSql = postgres.TransactionSql<Record<string, unknown>>;
/** Either the pool or a transaction: every db/ function takes this. */
export type Db = Sql | TransactionSql;

const acquireTimeouts = new WeakMap<object, number>();

/** The pool's connections by state and the queries waiting for one (postgres.js, as patched in patches/). */
export interface PoolStats {
  max: number;
  connecting: number;
  /** Connected and idle. */
  open: number;
  /** Running queries, able to take more (pipelining). */
  busy: number;
  /** Running as many queries as they may. */
  full: number;
  /** Held by a transaction or a reserved connection. */
  reserved: number;
  /** Queries and transactions waiting for a connection. */
  waiting: number;
}

export function poolStats(sql: Sql): PoolStats | null {
  const read = (sql as unknown as { poolStats?: () => PoolStats }).poolStats;
  return typeof read === 'function' ? read() : null;
}

/** What withTx reports about each transaction (the metrics register one; db/ knows nothing of them). */
export interface TxObserver {
  /** The transaction got a connection after waiting this long. */
  acquired(waitSeconds: number): void;
  /** No connection became free within SVC_DB_POOL_ACQUIRE_TIMEOUT_MS (answered 503 database_busy). */
  acquireTimedOut(): void;
  /** The transaction ended after holding its connection this long. */
  finished(seconds: number, outcome: 'commit' | 'rollback'): void;
}

let txObserver: TxObserver | undefined;

export function observeTransactions(observer: TxObserver | undefined): void {
  txObserver = observer;
}

export function transactionObserver(): TxObserver | undefined {
  return txObserver;
}

/** SVC_DB_POOL_ACQUIRE_TIMEOUT_MS of a pool made by createSql (withTx bounds its wait with it). */
export function acquireTimeoutOf(sql: Sql): number | undefined {
  return acquireTimeouts.get(sql);
}

/** The pool settings createSql reads (SVC_DB_* of the configuration). */
export interface PoolSettings {
  SVC_DB_POOL_MAX: number;
  SVC_DB_STATEMENT_TIMEOUT_MS: number;
  SVC_DB_POOL_ACQUIRE_TIMEOUT_MS: number;
}

export function createSql(url: string, cfg: PoolSettings): Sql {
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
