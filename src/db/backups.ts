// Backups: SQL only. The consistent snapshot that a backup task reads (one REPEATABLE READ, read-only
// transaction over every section of src/domain/backup-format.ts), the stored output in tasks.output,
// and the counters behind 409 and 429 of createBackup.
import type { Db, Sql, TransactionSql } from './sql.ts';
import type { Fragment } from './list.ts';
import { withTx } from './tx.ts';
import { ENTITY_HISTORY, SECTIONS, type Row, type RowFilter, type SectionSpec } from '../domain/backup-format.ts';

/** Advisory lock key of a running restore: held exclusively by confirmRestore while it applies. */
export const RESTORE_LOCK = [727140, 1] as const;

/** Serializes the active-backup count of concurrent submissions (the cap is service-wide). */
export async function lockAndCountActiveBackups(tx: TransactionSql): Promise<number> {
  await tx`select pg_advisory_xact_lock(727140, 2)`;
  const [row] = await tx<{ n: number }[]>`
    select count(*)::int as n from tasks where kind = 'backup' and status in ('queued', 'validating', 'running')`;
  return row?.n ?? 0;
}

/** Whether a backup task with this Idempotency-Key exists for the principal (a replay is not capped). */
export async function hasIdempotentBackup(db: Db, principalId: number, key: string): Promise<boolean> {
  const [row] = await db<{ n: number }[]>`
    select count(*)::int as n from tasks
    where submitted_by = ${principalId}::int and kind = 'backup' and idempotency_key = ${key}::text`;
  return (row?.n ?? 0) > 0;
}

/** False while a restore is being applied (it holds RESTORE_LOCK exclusively until it commits). */
export async function noRestoreRunning(tx: TransactionSql): Promise<boolean> {
  const [row] = await tx<{ ok: boolean }[]>`select pg_try_advisory_xact_lock_shared(${RESTORE_LOCK[0]}, ${RESTORE_LOCK[1]}) as ok`;
  return row?.ok ?? false;
}

function rowFilter(db: Db, f: RowFilter | undefined): Fragment {
  if (!f) return db`true` as Fragment;
  if ('in' in f) return db`${db(f.column)} = any(${[...f.in]}::text[])` as Fragment;
  const parent = SECTIONS.find((s) => s.section === f.parent)!;
  return db`${db(f.column)} in (select ${db(parent.key[0]!)} from ${db(parent.table)} where ${rowFilter(db, parent.rows)})` as Fragment;
}

async function readSection(tx: TransactionSql, s: Pick<SectionSpec, 'table' | 'key' | 'fields' | 'rows'>): Promise<Row[]> {
  // Identifier lists after ORDER BY would be taken as values: join them one by one.
  const orderBy = s.key.slice(1).reduce<Fragment>((acc, k) => tx`${acc}, ${tx(k)}` as Fragment, tx`${tx(s.key[0]!)}` as Fragment);
  const rows = await tx<{ r: Row }[]>`
    select to_json(x) as r from (
      select ${tx(s.fields as string[])} from ${tx(s.table)}
      where ${rowFilter(tx, s.rows)}
      order by ${orderBy}
    ) x`;
  return rows.map((x) => x.r);
}

/**
 * Reads every section from one snapshot: a REPEATABLE READ, read-only transaction, so the document
 * is consistent however long it takes and whatever commits meanwhile (a restore included: it
 * deletes and inserts rows, which a snapshot never sees half-done). Timestamps come out as RFC 3339
 * text in UTC with full precision. `between` runs before each section (cancel checkpoints).
 * The entity versions (ENTITY_HISTORY) are read last in the same snapshot when asked for, so
 * their current versions are the state's rows.
 */
export async function readSnapshot(
  sql: Sql,
  includeHistory: boolean,
  between: () => Promise<void>,
  includeEntityHistory = false,
): Promise<{ state: Record<string, Row[]>; history: Record<string, Row[]> | null; entityHistory: Row[] | null }> {
  return withTx(sql, async (tx) => {
    await tx`set transaction isolation level repeatable read, read only`;
    await tx`set local timezone = 'UTC'`;
    const state: Record<string, Row[]> = {};
    const history: Record<string, Row[]> | null = includeHistory ? {} : null;
    for (const s of SECTIONS) {
      const into = s.part === 'state' ? state : history;
      if (!into) continue;
      await between();
      into[s.section] = await readSection(tx, s);
    }
    let entityHistory: Row[] | null = null;
    if (includeEntityHistory) {
      await between();
      const { source, key, fields } = ENTITY_HISTORY;
      entityHistory = await readSection(tx, { table: source, key, fields });
    }
    return { state, history, entityHistory };
  });
}

/** Stores the finished document on its task (inside the runner's finalizing transaction). */
export async function storeBackupOutput(tx: TransactionSql, taskId: number, bytes: Uint8Array, retentionHours: number): Promise<Date> {
  const [row] = await tx<{ output_expires_at: Date }[]>`
    update tasks set output = ${Buffer.from(bytes)}, output_content_type = 'application/json',
      output_expires_at = now() + make_interval(hours => ${retentionHours}::int)
    where id = ${taskId}::int
    returning output_expires_at`;
  return row!.output_expires_at;
}

export interface BackupOutputRow {
  id: number;
  kind: string;
  status: string;
  output: Buffer | null;
  output_expires_at: Date | null;
  expired: boolean;
}

export async function findBackupOutput(db: Db, taskId: number): Promise<BackupOutputRow | undefined> {
  const [row] = await db<BackupOutputRow[]>`
    select id, kind, status, output, output_expires_at,
      (output_expires_at is not null and output_expires_at <= now()) as expired
    from tasks where id = ${taskId}::int`;
  return row;
}

/** Drops the bytes of expired backup outputs (the expiry stays, so reads answer 410). */
export async function dropExpiredBackupOutputs(db: Db): Promise<void> {
  await db`
    update tasks set output = null
    where kind = 'backup' and output is not null and output_expires_at <= now()`;
}
