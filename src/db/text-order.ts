// Whether the database sorts text by code point, so a `startswith` filter can be a range of
// the ordinary b-tree indexes. PostgreSQL turns `name LIKE 'srv-c%'` into an index range only
// under the C (POSIX) collation; under C.UTF-8 (glibc's code-point order, or the builtin provider)
// it does not, although the range `name >= 'srv-c' AND name < 'srv-d'` holds exactly the strings
// that start with `srv-c` there too. Under a linguistic collation (en_US, ICU) that range is not
// the same set, so the filter stays a plain LIKE (correct, not indexed).
import type { Db, Sql } from './sql.ts';

const codePointOrder = new WeakSet<object>();

/**
 * Strings a linguistic collation orders differently from their code points (case, accents,
 * punctuation, symbols); sorted by code point here.
 */
const PROBE = [' ', '-a', 'A', 'B', 'Z', '_x', 'a', 'a-b', 'ab', 'b', 'f', '~', 'á', 'é', 'Ω', '€', 'ﬀ', '😀'];

/**
 * Learns whether `sql`'s database sorts text by code point (its default collation is C, POSIX or
 * C.UTF-8 and it orders a probe exactly as "C" does). Until it has answered, and wherever it fails,
 * filters keep the plain form.
 */
export async function learnTextOrder(sql: Sql): Promise<boolean> {
  const [row] = await sql<{ provider: string; collate: string | null; agrees: boolean }[]>`
    select d.datlocprovider::text as provider, d.datcollate as collate,
      (select array_agg(x order by x) = array_agg(x order by x collate "C") from unnest(${PROBE}::text[]) x) as agrees
    from pg_database d where d.datname = current_database()`;
  const named = row?.provider === 'b' || (row?.provider === 'c' && /^(c|posix|c\.utf-?8)$/i.test(row.collate ?? ''));
  const yes = Boolean(named && row?.agrees);
  if (yes) codePointOrder.add(sql);
  else codePointOrder.delete(sql);
  return yes;
}

/** Whether `db` is a pool whose database learnTextOrder found in code-point order. */
export function sortsByCodePoint(db: Db): boolean {
  return codePointOrder.has(db);
}

/**
 * The least string greater than every string that starts with `prefix`, in code-point order: the
 * prefix with its last code point raised by one (a last U+10FFFF is dropped first); null when there
 * is none (an empty prefix, or only U+10FFFF).
 */
export function prefixUpperBound(prefix: string): string | null {
  const points = Array.from(prefix, (ch) => ch.codePointAt(0)!);
  while (points.length && points[points.length - 1] === 0x10ffff) points.pop();
  if (!points.length) return null;
  let last = points.pop()! + 1;
  if (last >= 0xd800 && last <= 0xdfff) last = 0xe000; // no surrogates in text
  return String.fromCodePoint(...points, last);
}
