import postgres from 'postgres';

export type Sql = postgres.Sql<Record<string, unknown>>;
export type TransactionSql = postgres.TransactionSql<Record<string, unknown>>;
/** Either the pool or a transaction: every db/ function takes this. */
export type Db = Sql | TransactionSql;

const acquireTimeouts = new WeakMap<object, number>();

/** A tag for fragments that are only ever embedded in a statement (partOf). */
export type PartTag = (strings: TemplateStringsArray, ...values: unknown[]) => postgres.PendingQuery<postgres.Row[]>;

let queryPrototype: object | undefined;

function part(strings: TemplateStringsArray, ...values: unknown[]): postgres.PendingQuery<postgres.Row[]> {
  const q = Object.create(queryPrototype!) as { tagged: boolean; executed: boolean; strings: TemplateStringsArray; args: unknown[] };
  q.tagged = true;
  q.executed = true; // never handed to a connection: awaiting a part fails at once (it is no promise)
  q.strings = strings;
  q.args = values;
  return q as unknown as postgres.PendingQuery<postgres.Row[]>;
}

/** Parts of a constant text, made once each (a part is never changed by embedding it). */
const textParts = new Map<string, postgres.PendingQuery<postgres.Row[]>>();

/** A part (partOf) whose text is `text`, a constant of the code (a column list): made once. */
export function textPart(db: Db, text: string): postgres.PendingQuery<postgres.Row[]> {
  let p = textParts.get(text);
  if (!p) {
    // frozen, as a template literal's: postgres.js (patched) then keeps the text of the statements
    // it is part of by their shape (patches/README.md)
    const strings = Object.freeze(Object.assign([text], { raw: Object.freeze([text]) })) as unknown as TemplateStringsArray;
    textParts.set(text, (p = partOf(db)(strings)));
  }
  return p;
}

/**
 * The tag of fragments that are only ever embedded in a statement (`${fragment}` in a template that
 * runs), never run or awaited themselves. postgres.js makes every tagged template a Query, a
 * promise with its two resolving functions (~0.4 µs and a few hundred bytes apiece; a list page
 * built some 25 of them), of which embedding reads only the template's strings and values. A part
 * is a Query without the promise: its strings and values take the same place in the statement's
 * text. Awaiting one is an error (it is no promise).
 */
export function partOf(db: Db): PartTag {
  queryPrototype ??= Object.getPrototypeOf(db`select 1`) as object;
  return part;
}

/** Names made once each (nameOf); at most NAMES_MAX, past which a name is made at every call. */
const names = new Map<string, postgres.Helper<string>>();
const NAMES_MAX = 1000;

/**
 * A quoted name of the code (a column such as `e.entity_id`, an alias), as `db(name)` makes it,
 * made once: postgres.js quotes a name when it makes its identifier, with two regular expression
 * replacements when it holds a dot, and a list page made some ten. An identifier is never changed
 * by embedding it, and its text depends only on the name, as no pool of ours transforms column
 * names (createSql sets no `transform`). Only for names the code holds, never for input.
 */
export function nameOf(db: Db, name: string): postgres.Helper<string> {
  let id = names.get(name);
  if (id === undefined) {
    id = db(name);
    if (names.size < NAMES_MAX) names.set(name, id);
  }
  return id;
}

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

/** Whether `db` is a pool made by createSql (not a transaction or a reserved connection). */
export function isPool(db: object): boolean {
  return acquireTimeouts.has(db);
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
  /** Connections of the list pool (listPoolOf); absent or 0: no list pool. */
  SVC_DB_LIST_POOL_MAX?: number;
}

const listPools = new WeakMap<object, Sql>();

function open(url: string, cfg: PoolSettings, max: number, settings: Record<string, string> = {}): Sql {
  return postgres(url, {
    max,
    idle_timeout: 30,
    connect_timeout: Math.ceil(cfg.SVC_DB_POOL_ACQUIRE_TIMEOUT_MS / 1000),
    onnotice: () => {},
    connection: {
      statement_timeout: cfg.SVC_DB_STATEMENT_TIMEOUT_MS,
      application_name: 'inventory-data-service',
      ...settings,
    },
    types: {
      // int8 (counts, event ids) as JS numbers: they stay far below 2^53 here.
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
  }) as unknown as Sql;
}

/**
 * The pool of SVC_DB_POOL_MAX connections and, with SVC_DB_LIST_POOL_MAX, beside it the list pool
 * (listPoolOf). Both open their connections when first needed; `end()` of the pool ends both.
 */
export function createSql(url: string, cfg: PoolSettings): Sql {
  const sql = open(url, cfg, cfg.SVC_DB_POOL_MAX);
  acquireTimeouts.set(sql, cfg.SVC_DB_POOL_ACQUIRE_TIMEOUT_MS);
  if (cfg.SVC_DB_LIST_POOL_MAX) {
    const list = open(url, cfg, cfg.SVC_DB_LIST_POOL_MAX, { plan_cache_mode: 'force_custom_plan' });
    listPools.set(sql, list);
    const end = sql.end.bind(sql);
    sql.end = async (options) => {
      await Promise.all([end(options), list.end(options)]);
    };
  }
  return sql;
}

/**
 * The list pool of a pool made by createSql: connections whose sessions plan every statement for
 * the values it is given (plan_cache_mode = force_custom_plan), for the reads whose best plan depends
 * on them (a list page with filters: a prefix, a JSON value, a set of collections). A prepared
 * statement's generic plan does not know the values; planned for them, such a read is one statement
 * here instead of a transaction that sets the mode on the pool. Undefined for a transaction (whose
 * reads must stay in it) and for a pool without one.
 */
export function listPoolOf(db: Db): Sql | undefined {
  return listPools.get(db);
}
