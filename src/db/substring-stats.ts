// Substring filters on objects' names and descriptions in a large table: which patterns PostgreSQL
// would read in id order where the trigram index finds their few rows.
//
// PostgreSQL estimates `name LIKE '%t%'` by the share of the column's histogram bounds holding t
// (1,001 bounds: migrations/0230, 0240), at least 0.01 %; a t found in one bound is estimated at
// 0.1 %. To fill a page in id order it then expects to read ~100,000 rows whatever the class's size,
// while the bitmap of the trigram index grows with the rows it estimates, so beyond ~1.3M objects
// in a class it walks the class, and a t with a few matches reads all of it (2M objects: 327–431 ms
// against 1–2 ms through the index; bench/FINDINGS.md, 2026-12-02). Such a t is rare: it is in at
// most a couple of bounds. This module keeps, per pool, the bounds of the lowercase of both columns
// (the statistics of the trigram indexes of migration 0240) and the table's estimated rows, loaded
// in the background and refreshed every few minutes, and says whether a text is such a case; src/db/
// list.ts then reads the matching ids from the index first (matchedIds). Until the bounds are
// loaded, or in a transaction, PostgreSQL plans as it would.
import { isPool, type Db } from './sql.ts';

/** Objects in the table from which the walk in id order may win over the index for a rare text. */
export const LARGE_TABLE_ROWS = 1_200_000;
/** A text in at most this many of the 1,001 bounds is rare (estimated at 0.2 % or less). */
const RARE_BOUNDS = 2;
const REFRESH_MS = 5 * 60_000;

type Column = 'name' | 'description';

interface Stats {
  loadedAt: number;
  loading: boolean;
  rows: number;
  bounds: Record<Column, string[]> | null;
}

const statsOf = new WeakMap<object, Stats>();

async function load(db: Db, s: Stats): Promise<void> {
  try {
    const [row] = await db<{ rows: number; name: string[] | null; description: string[] | null }[]>`
      select (select reltuples from pg_class where oid = 'objects'::regclass)::float8 as rows,
        (select histogram_bounds::text::text[] from pg_stats
          where schemaname = current_schema() and tablename = 'objects_name_lower_trgm_idx') as name,
        (select histogram_bounds::text::text[] from pg_stats
          where schemaname = current_schema() and tablename = 'objects_description_lower_trgm_idx') as description`;
    s.rows = row?.rows ?? 0;
    s.bounds = row?.name && row.description ? { name: row.name, description: row.description } : null;
  } catch {
    // no statistics this time (a database being migrated, a connection lost): PostgreSQL plans alone
    s.bounds = null;
  } finally {
    s.loadedAt = Date.now();
    s.loading = false;
  }
}

/**
 * Whether `text` (a substring filter's literal text) is rare in the column by its lowercase
 * histogram while the objects table is large enough for PostgreSQL to misplan it. Starts or refreshes
 * the statistics in the background; false until they are there, and for a transaction.
 */
export function rareInLargeTable(db: Db, column: Column, text: string): boolean {
  if (!isPool(db)) return false;
  let s = statsOf.get(db);
  if (!s) statsOf.set(db, (s = { loadedAt: 0, loading: false, rows: 0, bounds: null }));
  if (!s.loading && Date.now() - s.loadedAt > REFRESH_MS) {
    s.loading = true;
    void load(db, s);
  }
  if (!s.bounds || s.rows < LARGE_TABLE_ROWS) return false;
  const t = text.toLowerCase();
  let found = 0;
  for (const bound of s.bounds[column]) if (bound.includes(t) && ++found > RARE_BOUNDS) return false;
  return true;
}
