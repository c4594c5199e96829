// Upkeep of the GIN indexes (objects' JSON data and trigram indexes, events' related collections):
// their pending lists merged into the indexes off the request path. SQL only.
import type { Db } from './sql.ts';

/** The advisory lock one flush holds for its statement: a second process skips instead of waiting. */
const FLUSH_LOCK = 727330;
/**
 * How long the flush waits for an index another transaction has locked (a restore's truncate, a
 * migration's DDL) before it gives up until the next interval, instead of holding a connection
 * behind it up to the statement timeout.
 */
const LOCK_WAIT = '200ms';

export interface PendingFlush {
  /**
   * False when another process was flushing (nothing was done), or an index was locked for longer
   * than LOCK_WAIT (the lists merged before it stay merged).
   */
  ran: boolean;
  /** GIN indexes of this schema that this role may clean (owns). */
  indexes: number;
  /** Pending-list pages merged into their indexes. */
  pages: number;
}

/**
 * Merges the pending list of every GIN index of the current schema that this role owns into the
 * index (gin_clean_pending_list, as vacuum does). With fastupdate (PostgreSQL's default) a write
 * appends its GIN entries to the index's pending list, and every search through the index reads
 * the whole list: under a steady stream of writes the list sits anywhere up to
 * gin_pending_list_limit (4 MB) until a writer crosses it and merges it during its own statement.
 * Flushed often, searches read a short list and writers seldom wait for a merge
 * (bench/FINDINGS.md, 2026-12-07).
 */
export async function flushGinPendingLists(db: Db): Promise<PendingFlush> {
  // The merging runs only on rows joined with `lock`, so the lock and the lock timeout come first.
  const rows = db<{ ran: boolean; indexes: number; pages: number }[]>`
    with lock as (select pg_try_advisory_xact_lock(${FLUSH_LOCK}) as ran, set_config('lock_timeout', ${LOCK_WAIT}, true)),
    cleaned as (
      select gin_clean_pending_list(c.oid) as pages
      from lock, pg_class c join pg_am a on a.oid = c.relam
      where lock.ran and a.amname = 'gin' and c.relkind = 'i'
        and c.relnamespace = current_schema()::regnamespace and pg_has_role(c.relowner, 'USAGE'))
    select (select ran from lock) as ran, count(*)::int as indexes, coalesce(sum(pages), 0)::int as pages from cleaned`;
  try {
    const [row] = await rows;
    return row!;
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') return { ran: false, indexes: 0, pages: 0 }; // lock_not_available
    throw err;
  }
}
