// Queue depths for operators (the `svc status` command): SQL only. Counts across every process
// sharing the database.
import type { Db } from './sql.ts';

export interface TaskDepth {
  kind: string;
  status: string;
  count: number;
}

export async function taskDepths(db: Db): Promise<TaskDepth[]> {
  return db<TaskDepth[]>`select kind, status, count(*)::int as count from tasks group by kind, status order by kind, status`;
}

export interface FanoutLag {
  newest_event_id: number;
  /** Events appended but not yet fanned out into deliveries. */
  pending_events: number;
  /** newest_event_id minus the id up to which every event is fanned out (0 when none waits). */
  lag_events: number;
  oldest_pending_age_seconds: number | null;
}

export async function fanoutLag(db: Db): Promise<FanoutLag> {
  const [row] = await db<{ newest: number; pending: number; oldest_id: number | null; oldest_age: number | null }[]>`
    select coalesce((select max(id) from events), 0)::bigint as newest,
      (select count(*) from event_fanout_queue)::int as pending,
      (select min(event_id) from event_fanout_queue)::bigint as oldest_id,
      (select floor(extract(epoch from now() - min(e.occurred_at)))::int
         from event_fanout_queue q join events e on e.id = q.event_id) as oldest_age`;
  const newest = row?.newest ?? 0;
  const oldest = row?.oldest_id ?? null;
  return {
    newest_event_id: newest,
    pending_events: row?.pending ?? 0,
    lag_events: oldest === null ? 0 : Math.max(0, newest - oldest + 1),
    oldest_pending_age_seconds: row?.oldest_age === null || row?.oldest_age === undefined ? null : Math.max(0, row.oldest_age),
  };
}

export interface SinkKindDeliveries {
  sink_kind: string;
  sinks: number;
  pending: number;
  in_flight: number;
  failed: number;
  /** Not yet delivered and not given up: pending + in_flight + failed (awaiting a retry). */
  backlog: number;
  dead: number;
}

/** Delivery backlog and dead deliveries by sink kind (every sink kind that has a sink). */
export async function deliveriesBySinkKind(db: Db): Promise<SinkKindDeliveries[]> {
  const rows = await db<Omit<SinkKindDeliveries, 'backlog'>[]>`
    select k.kind as sink_kind, count(distinct k.id)::int as sinks,
      count(d.id) filter (where d.status = 'pending')::int as pending,
      count(d.id) filter (where d.status = 'in_flight')::int as in_flight,
      count(d.id) filter (where d.status = 'failed')::int as failed,
      count(d.id) filter (where d.status = 'dead')::int as dead
    from event_sinks k left join event_deliveries d on d.sink_id = k.id
    group by k.kind order by k.kind`;
  return rows.map((r) => Object.assign({}, r, { backlog: r.pending + r.in_flight + r.failed }));
}

// The figures /metrics reads at every scrape: each query reads only what a partial index holds
// (active tasks, due, in-flight and dead deliveries, the fan-out queue's head), never a whole table.

export interface ActiveTaskCount {
  kind: string;
  status: 'queued' | 'validating' | 'running';
  count: number;
}

/** Queued, validating and running tasks by kind (tasks_queue_idx). */
export async function activeTaskCounts(db: Db): Promise<ActiveTaskCount[]> {
  return db<ActiveTaskCount[]>`
    select kind, status, count(*)::int as count from tasks
    where status in ('queued', 'validating', 'running')
    group by kind, status order by kind, status`;
}

export interface FanoutHead {
  newest_event_id: number;
  /** The oldest event not yet fanned out; null when none waits. */
  oldest_pending_event_id: number | null;
  oldest_pending_age_seconds: number | null;
}

/** The newest event and the head of the fan-out queue (primary keys only). */
export async function fanoutHead(db: Db): Promise<FanoutHead> {
  const [row] = await db<FanoutHead[]>`
    with head as (select min(event_id) as id from event_fanout_queue)
    select coalesce((select max(id) from events), 0)::bigint as newest_event_id,
      (select id from head)::bigint as oldest_pending_event_id,
      (select greatest(0, extract(epoch from now() - e.occurred_at))::float8
         from events e where e.id = (select id from head)) as oldest_pending_age_seconds`;
  return row ?? { newest_event_id: 0, oldest_pending_event_id: null, oldest_pending_age_seconds: null };
}

export interface SinkKindDeliveryCount {
  sink_kind: string;
  status: 'pending' | 'in_flight' | 'failed' | 'dead';
  count: number;
}

/** Deliveries not yet delivered (pending, in flight, failed awaiting a retry) and dead, by sink kind. */
export async function openDeliveryCounts(db: Db): Promise<SinkKindDeliveryCount[]> {
  return db<SinkKindDeliveryCount[]>`
    select k.kind as sink_kind, d.status, count(*)::int as count
    from event_deliveries d join event_sinks k on k.id = d.sink_id
    where d.status in ('pending', 'failed', 'in_flight', 'dead')
    group by k.kind, d.status order by k.kind, d.status`;
}

/** The sink kinds in use (so that a kind with nothing waiting still reports 0). */
export async function sinkKinds(db: Db): Promise<string[]> {
  const rows = await db<{ kind: string }[]>`select distinct kind from event_sinks order by kind`;
  return rows.map((r) => r.kind);
}
