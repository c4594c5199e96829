// Prometheus metrics of this process (prom-client), every name prefixed `svc_`. Labels carry only
// bounded vocabularies (methods, OpenAPI path templates, status classes, task and sink kinds,
// outcomes), never ids, names or addresses.
//
// Counters and histograms are this process's own. Gauges read from the database (active tasks,
// event fan-out, delivery backlog) are the whole deployment's, read at scrape time with queries
// that only read partial indexes (src/db/queue-status.ts), bounded in time: a scrape while the
// database is unreachable still answers, with svc_database_up 0 and those gauges absent.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { listPoolOf, observeTransactions, poolStats, type Sql } from './db/sql.ts';
import { activeTaskCounts, fanoutHead, openDeliveryCounts, sinkKinds } from './db/queue-status.ts';

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
/** How long the scrape-time database reads may take before the scrape answers without them. */
const DATABASE_READ_BOUND_MS = 3_000;

const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'svc_' });
const registers = [registry];

/**
 * Metrics observed on every request or transaction (the HTTP requests, token validations, token-cache
 * lookups, pool waits and transactions) are counted in tables of this process and turned into
 * Prometheus samples at scrape time, in prom-client's own shape (names, types, labels, buckets);
 * prom-client's Counter and Histogram would build, validate and hash a label object on every
 * observation (measured: ~15 % of a /healthz request's CPU for the two HTTP metrics).
 */
/** One series of a table metric: a counter uses count; a histogram count, sum and buckets. */
interface Series {
  labels: Record<string, string>;
  count: number;
  sum: number;
  /** Observations per bucket (not cumulative); the last one is +Inf. */
  buckets: number[];
}

function newSeries(labels: Record<string, string>, bounds: readonly number[]): Series {
  return { labels, count: 0, sum: 0, buckets: new Array<number>(bounds.length + 1).fill(0) };
}

function observeInto(series: Series, bounds: readonly number[], value: number): void {
  series.count++;
  series.sum += value;
  let b = 0;
  while (b < bounds.length && value > bounds[b]!) b++;
  series.buckets[b]!++;
}

interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

function counterSamples(series: Iterable<Series>): Sample[] {
  return [...series].map((s) => ({ labels: s.labels, value: s.count }));
}

function histogramSamples(name: string, bounds: readonly number[], series: Iterable<Series>): Sample[] {
  const out: Sample[] = [];
  const bucket = `${name}_bucket`;
  for (const s of series) {
    let cumulative = 0;
    bounds.forEach((le, i) => {
      cumulative += s.buckets[i]!;
      out.push({ labels: Object.assign({}, s.labels, { le }), value: cumulative, metricName: bucket });
    });
    out.push({ labels: Object.assign({}, s.labels, { le: '+Inf' }), value: s.count, metricName: bucket });
    out.push({ labels: s.labels, value: s.sum, metricName: `${name}_sum` });
    out.push({ labels: s.labels, value: s.count, metricName: `${name}_count` });
  }
  return out;
}

/** A metric of the registry read from a table (the shape prom-client's own metrics return from get()). */
function tableMetric(
  name: string,
  help: string,
  type: 'counter' | 'histogram',
  samples: () => Sample[],
  reset: () => void,
): { get: () => Promise<{ values: Sample[] }> } {
  const metric = {
    name,
    help,
    type,
    aggregator: 'sum',
    // metric.name: the registry renames a counter for OpenMetrics, as it does its own metrics
    get: async () => ({ name: metric.name, help, type, values: samples(), aggregator: 'sum' }),
    reset,
  };
  registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
  return metric;
}

/**
 * A counter or histogram with one label whose values are known (an outcome), as a table: one series
 * per value, shown once observed (as prom-client shows a labelled series). `observe(value, n)`
 * counts one observation of `n` under that label value; a counter ignores `n`.
 */
function outcomeTable<V extends string>(
  name: string,
  help: string,
  type: 'counter' | 'histogram',
  label: string,
  values: readonly V[],
  bounds: readonly number[] = [],
): { observe: (value: V, observed?: number) => void; get: () => Promise<{ values: Sample[] }> } {
  const series = values.map((v) => newSeries({ [label]: v }, bounds));
  const seen = () => series.filter((s) => s.count > 0);
  const metric = tableMetric(
    name,
    help,
    type,
    () => (type === 'counter' ? counterSamples(seen()) : histogramSamples(name, bounds, seen())),
    () => series.forEach((s, i) => (series[i] = newSeries(s.labels, bounds))),
  );
  return {
    get: metric.get,
    observe: (value, observed = 0) => {
      const s = series[values.indexOf(value)];
      if (s) observeInto(s, bounds, observed);
    },
  };
}

/** The methods the HTTP metrics and the request log name; any other is 'other'. */
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'other'] as const;
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const STATUS_CLASSES = 6; // 0xx (never) … 5xx

/** Per route, the series of each (method, status class), made on first use. */
const httpTable = new Map<string, (Series | undefined)[]>();

/** One answered request: `method` as HTTP_METHODS names it (else 'other'), the route template, status, seconds. */
export function recordRequest(method: string, route: string, status: number, seconds: number): void {
  let row = httpTable.get(route);
  if (!row) httpTable.set(route, (row = []));
  const m = HTTP_METHODS.indexOf(method as (typeof HTTP_METHODS)[number]);
  const cls = Math.min(STATUS_CLASSES - 1, Math.max(0, Math.floor(status / 100)));
  const at = (m < 0 ? HTTP_METHODS.length - 1 : m) * STATUS_CLASSES + cls;
  let series = row[at];
  if (!series) {
    series = newSeries({ method: HTTP_METHODS[(at / STATUS_CLASSES) | 0]!, route, status_class: `${cls}xx` }, HTTP_BUCKETS);
    row[at] = series;
  }
  observeInto(series, HTTP_BUCKETS, seconds);
}

function* httpSeries(): Generator<Series> {
  for (const row of httpTable.values()) for (const series of row) if (series) yield series;
}

tableMetric(
  'svc_http_requests_total',
  'HTTP requests answered, by method, OpenAPI path template (or "unmatched") and status class.',
  'counter',
  () => counterSamples(httpSeries()),
  () => httpTable.clear(),
);
tableMetric(
  'svc_http_request_duration_seconds',
  'Time from a request reaching the app to its response (headers; a streamed body may go on), by method, route and status class.',
  'histogram',
  () => histogramSamples('svc_http_request_duration_seconds', HTTP_BUCKETS, httpSeries()),
  () => httpTable.clear(),
);

export const httpInFlight = new Gauge({ name: 'svc_http_requests_in_flight', help: 'HTTP requests being handled now.', registers });

const poolMax = new Gauge({ name: 'svc_db_pool_max', help: 'Most connections the pool may open (SVC_DB_POOL_MAX).', registers });
const poolSize = new Gauge({ name: 'svc_db_pool_size', help: 'Connections open or opening.', registers });
const poolInUse = new Gauge({ name: 'svc_db_pool_in_use', help: 'Connections running queries or held by a transaction.', registers });
const poolWaiting = new Gauge({ name: 'svc_db_pool_waiting', help: 'Queries and transactions waiting for a connection.', registers });
const listPoolMax = new Gauge({
  name: 'svc_db_list_pool_max',
  help: 'Most connections the list pool may open (SVC_DB_LIST_POOL_MAX).',
  registers,
});
const listPoolSize = new Gauge({ name: 'svc_db_list_pool_size', help: 'List pool connections open or opening.', registers });
const listPoolInUse = new Gauge({ name: 'svc_db_list_pool_in_use', help: 'List pool connections running queries.', registers });
const listPoolWaiting = new Gauge({ name: 'svc_db_list_pool_waiting', help: 'Queries waiting for a list pool connection.', registers });
const acquireTimeouts = new Counter({
  name: 'svc_db_pool_acquire_timeouts_total',
  help: 'Transactions that got no connection within SVC_DB_POOL_ACQUIRE_TIMEOUT_MS (answered 503 database_busy).',
  registers,
});
const ACQUIRE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const acquireWait = newSeries({}, ACQUIRE_BUCKETS);
tableMetric(
  'svc_db_pool_acquire_wait_seconds',
  'Time a transaction waited for its connection (and its BEGIN).',
  'histogram',
  () => histogramSamples('svc_db_pool_acquire_wait_seconds', ACQUIRE_BUCKETS, [acquireWait]),
  () => Object.assign(acquireWait, newSeries({}, ACQUIRE_BUCKETS)),
);
const txDuration = outcomeTable(
  'svc_db_transaction_duration_seconds',
  'Time a transaction held its connection, by outcome (commit or rollback).',
  'histogram',
  'outcome',
  ['commit', 'rollback'],
  [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
);
observeTransactions({
  acquired: (s) => observeInto(acquireWait, ACQUIRE_BUCKETS, s),
  acquireTimedOut: () => acquireTimeouts.inc(),
  finished: (s, outcome) => txDuration.observe(outcome, s),
});

export const taskDuration = new Histogram({
  name: 'svc_task_duration_seconds',
  help: 'Run time of the tasks this process executed, by kind and final status.',
  labelNames: ['kind', 'status'] as const,
  buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
  registers,
});
export const deliveries = new Counter({
  name: 'svc_event_deliveries_total',
  help: 'Delivery attempts this process made or settled, by transport (sink kind) and outcome.',
  labelNames: ['transport', 'outcome'] as const,
  registers,
});
export const logLinesDropped = new Counter({
  name: 'svc_log_lines_dropped_total',
  help: 'Log lines dropped because stdout did not keep up (16 MiB of lines were waiting).',
  registers,
});
export const loginLimiterBlocks = new Counter({
  name: 'svc_login_limiter_blocks_total',
  help: 'Login attempts refused by the login rate limiter (429 before any password check).',
  registers,
});
export const ginPendingPagesMerged = new Counter({
  name: 'svc_gin_pending_pages_merged_total',
  help: 'GIN pending-list pages this worker merged into their indexes (SVC_GIN_PENDING_FLUSH_INTERVAL_MS).',
  registers,
});
/** svc_token_validations_total: observe('valid' | 'invalid' | 'malformed') per bearer token validation. */
export const tokenValidations = outcomeTable(
  'svc_token_validations_total',
  'Bearer token validations, by outcome (valid; invalid: unknown, revoked or expired; malformed).',
  'counter',
  'outcome',
  ['valid', 'invalid', 'malformed'],
);
/** svc_token_cache_lookups_total: observe('hit' | 'miss' | 'bypass') per token-cache lookup. */
export const tokenCacheLookups = outcomeTable(
  'svc_token_cache_lookups_total',
  'Bearer token lookups by outcome: hit (validated from the in-process cache), miss (read from the database), bypass (cache off, or suspended while its LISTEN connection is not confirmed).',
  'counter',
  'outcome',
  ['hit', 'miss', 'bypass'],
);
/**
 * svc_token_cache_drops_total: observe(kind) per change notification (channel svc_token_cache) this
 * process's token cache heard, by what it dropped (db/auth-changes.ts CacheDrop).
 */
export const tokenCacheDrops = outcomeTable(
  'svc_token_cache_drops_total',
  "Change notifications this process's token cache heard, by what each dropped: token (one token), principal (one principal's tokens and grants), grants (a group's grants changed: its members' grants), collections (the collection tree changed: every principal's grants), classes (a class deleted or moved: the kept classes), everything.",
  'counter',
  'kind',
  ['token', 'principal', 'grants', 'collections', 'classes', 'everything'],
);

const databaseUp = new Gauge({
  name: 'svc_database_up',
  help: '1 when the database figures of this scrape could be read, else 0 (and those gauges are absent).',
  registers,
});
const tasksActive = new Gauge({
  name: 'svc_tasks_active',
  help: 'Queued, validating and running tasks of the whole deployment, by kind and status.',
  labelNames: ['kind', 'status'] as const,
  registers,
});
const eventsNewest = new Gauge({ name: 'svc_events_newest_id', help: 'Id of the newest audit event.', registers });
const fanoutLag = new Gauge({
  name: 'svc_event_fanout_lag_events',
  help: 'Newest event id minus the id up to which every event is fanned out into deliveries (0 when none waits).',
  registers,
});
const fanoutAge = new Gauge({
  name: 'svc_event_fanout_oldest_pending_age_seconds',
  help: 'Age of the oldest event not yet fanned out (0 when none waits).',
  registers,
});
const deliveryBacklog = new Gauge({
  name: 'svc_event_delivery_backlog',
  help: 'Deliveries not yet delivered nor given up (pending, in flight, failed awaiting a retry), by sink kind and status.',
  labelNames: ['sink_kind', 'status'] as const,
  registers,
});
const deliveriesDead = new Gauge({
  name: 'svc_event_deliveries_dead',
  help: 'Dead deliveries still kept (SVC_EVENT_DELIVERY_RETENTION_DAYS), by sink kind.',
  labelNames: ['sink_kind'] as const,
  registers,
});

async function readDatabase(sql: Sql): Promise<void> {
  const [tasks, head, open, kinds] = await Promise.all([activeTaskCounts(sql), fanoutHead(sql), openDeliveryCounts(sql), sinkKinds(sql)]);
  tasksActive.reset();
  for (const r of tasks) tasksActive.set({ kind: r.kind, status: r.status }, r.count);
  eventsNewest.set(head.newest_event_id);
  const oldest = head.oldest_pending_event_id;
  fanoutLag.set(oldest === null ? 0 : Math.max(0, head.newest_event_id - oldest + 1));
  fanoutAge.set(head.oldest_pending_age_seconds ?? 0);
  deliveryBacklog.reset();
  deliveriesDead.reset();
  for (const kind of kinds) {
    for (const status of ['pending', 'in_flight', 'failed']) deliveryBacklog.set({ sink_kind: kind, status }, 0);
    deliveriesDead.set({ sink_kind: kind }, 0);
  }
  for (const r of open) {
    if (r.status === 'dead') deliveriesDead.set({ sink_kind: r.sink_kind }, r.count);
    else deliveryBacklog.set({ sink_kind: r.sink_kind, status: r.status }, r.count);
  }
}

function clearDatabaseGauges(): void {
  for (const g of [tasksActive, eventsNewest, fanoutLag, fanoutAge, deliveryBacklog, deliveriesDead]) g.reset();
}

let scraping: Promise<unknown> = Promise.resolve();

/** The Prometheus text of this process, with the database figures read now through `sql`. */
export function renderMetrics(sql: Sql): Promise<string> {
  // one scrape at a time: the database gauges are reset and set as a whole
  const next = scraping.then(async () => {
    const pools = [
      [sql, poolMax, poolSize, poolInUse, poolWaiting],
      [listPoolOf(sql), listPoolMax, listPoolSize, listPoolInUse, listPoolWaiting],
    ] as const;
    for (const [pool, max, size, inUse, waiting] of pools) {
      const stats = pool && poolStats(pool);
      if (!stats) continue;
      max.set(stats.max);
      size.set(stats.connecting + stats.open + stats.busy + stats.full + stats.reserved);
      inUse.set(stats.busy + stats.full + stats.reserved);
      waiting.set(stats.waiting);
    }
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('the database figures took too long')), DATABASE_READ_BOUND_MS);
    });
    try {
      const read = readDatabase(sql);
      read.catch(() => {});
      await Promise.race([read, bound]);
      databaseUp.set(1);
    } catch {
      clearDatabaseGauges();
      databaseUp.set(0);
    } finally {
      clearTimeout(timer);
    }
    return registry.metrics();
  });
  scraping = next.catch(() => {});
  return next;
}
