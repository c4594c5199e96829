import { randomBytes } from 'node:crypto';
import type { Db } from './sql.ts';

/** The token hash key: SVC_TOKEN_HASH_KEY when set, else one generated once and kept here. */
export async function tokenHashKey(db: Db, configured: string | undefined): Promise<Buffer> {
  if (configured) return Buffer.from(configured, 'utf8');
  const fresh = randomBytes(32).toString('base64');
  await db`insert into meta_kv (key, value) values ('token_hash_key', ${fresh}) on conflict (key) do nothing`;
  const [row] = await db<{ value: string }[]>`select value from meta_kv where key = 'token_hash_key'`;
  return Buffer.from(row!.value, 'base64');
}

export interface DbDiagnostics {
  server_version: string;
  total_connections: number;
  active_connections: number;
  idle_connections: number;
  database_size_bytes: number;
  last_vacuum_at: Date | null;
  last_autovacuum_at: Date | null;
}

/** Connection and size figures of the current database (all sessions of all processes). */
export async function dbDiagnostics(db: Db): Promise<DbDiagnostics> {
  const [row] = await db<DbDiagnostics[]>`
    select current_setting('server_version') as server_version,
      (select count(*) from pg_stat_activity where datname = current_database())::int as total_connections,
      (select count(*) from pg_stat_activity where datname = current_database() and state = 'active')::int as active_connections,
      (select count(*) from pg_stat_activity where datname = current_database() and state like 'idle%')::int as idle_connections,
      pg_database_size(current_database())::bigint as database_size_bytes,
      (select max(last_vacuum) from pg_stat_user_tables) as last_vacuum_at,
      (select max(last_autovacuum) from pg_stat_user_tables) as last_autovacuum_at`;
  return row!;
}

export interface TaskQueueFigures {
  by_status: { status: string; n: number }[];
  by_kind: { kind: string; n: number; active: number }[];
  oldest_queued_age_seconds: number | null;
  oldest_active_age_seconds: number | null;
}

/** Task counts by status and kind, and the ages of the oldest queued and active tasks. */
export async function taskQueueFigures(db: Db): Promise<TaskQueueFigures> {
  const byStatus = await db<{ status: string; n: number }[]>`select status, count(*)::int as n from tasks group by status`;
  const byKind = await db<{ kind: string; n: number; active: number }[]>`
    select kind, count(*)::int as n, (count(*) filter (where status in ('queued', 'validating', 'running')))::int as active
    from tasks group by kind`;
  const [ages] = await db<{ oldest_queued_age_seconds: number | null; oldest_active_age_seconds: number | null }[]>`
    select
      (select floor(extract(epoch from now() - min(created_at)))::int from tasks where status = 'queued') as oldest_queued_age_seconds,
      (select floor(extract(epoch from now() - min(coalesce(started_at, created_at))))::int from tasks
        where status in ('validating', 'running')) as oldest_active_age_seconds`;
  return { by_status: byStatus, by_kind: byKind, ...ages! };
}
