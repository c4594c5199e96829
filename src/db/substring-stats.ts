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
const LARGE_TABLE_ROWS = 1_200_000;
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
 * The text to look the rows holding a substring filter's `text` up by in the trigram indexes of
 * `columns` (see rareKey): a rare word of it, or `text` itself when it is rare in each column by its
 * lowercase histogram while the objects table is large enough for PostgreSQL to misplan it;
 * undefined otherwise. Starts or refreshes the statistics in the background; undefined until they
 * are there, and for a transaction.
 */
export function substringKey(db: Db, columns: Column[], text: string): string | undefined {
  return rareKey(db, columns, [text], LARGE_TABLE_ROWS);
}

/**
 * For a `like` or `regex` filter's pattern: the text to look up the rows that may match it by, in
 * the trigram index of the column, from the texts every match of it must hold (likeRequiredTexts,
 * regexRequiredTexts; see rareKey); undefined when none is rare or the pattern is not read. Every
 * match holds that text, so the rows holding it are all the candidates.
 * - A LIKE pattern: as a substring's text. pg_trgm reads a LIKE pattern's trigrams from its literal
 *   texts itself.
 * - A regular expression: a text of 3 characters or more, at any size. pg_trgm reads an
 *   expression's trigrams from its automaton and gives up on them where a character class under
 *   repetition stands between literal characters: `^srv-[0-9a-f]*beef` was searched by the trigrams
 *   of `srv-`, every object's, and each one rechecked (2M objects: 3.9 s, by hand as well; 50,000: 73
 *   ms against 3 ms through the ids holding `beef`; bench/FINDINGS.md).
 * A pattern without such a text (`%`, `.*`, an alternation) is left to PostgreSQL. The pattern itself
 * is never run here: a regular expression a client sends may take JavaScript's backtracking engine
 * exponential time, PostgreSQL's does not.
 */
export function patternKey(db: Db, column: Column, op: 'like' | 'regex', pattern: string): string | undefined {
  if (op === 'like') {
    const texts = likeRequiredTexts(pattern);
    return texts?.length ? rareKey(db, [column], texts, LARGE_TABLE_ROWS) : undefined;
  }
  const texts = regexRequiredTexts(pattern)?.filter((t) => t.length >= 3);
  return texts?.length ? rareKey(db, [column], texts, 0) : undefined;
}

/** A word as pg_trgm reads one: a run of letters and digits. */
const WORD = /[\p{L}\p{N}]+/gu;

/**
 * Of `texts`, which every match holds, and the words in them (3 characters or more), one rare in
 * each of `columns` (in at most RARE_BOUNDS of its bounds): the longest rare word, else the rarest
 * text. Where that is less than all there is to match (a word of a text, one of several texts), at
 * any size: the trigram index intersects the rows of every trigram it is given, and the trigrams of a
 * word in most rows cost reading their lists whole (2M objects: `LIKE '%srv-02d0e1ed%'` 30 ms,
 * `'%02d0e1ed%'` 0.7 ms; bench/FINDINGS.md), which the rare part alone leaves out. Where it is the
 * one text, only in a table of `minRows` rows or more.
 */
function rareKey(db: Db, columns: Column[], texts: string[], minRows: number): string | undefined {
  const s = statsFor(db);
  if (!s?.bounds) return undefined;
  const bounds = s.bounds;
  const whole = texts.length === 1 ? texts[0] : undefined;
  const allowed = (key: string) => key !== whole || s.rows >= minRows;
  /** The most bounds of a column holding `text`, counted up to `limit`. */
  const held = (text: string, limit: number): number => {
    const t = text.toLowerCase();
    let most = 0;
    for (const column of columns) {
      let found = 0;
      for (const bound of bounds[column]) if (bound.includes(t) && ++found >= limit) break;
      most = Math.max(most, found);
      if (most >= limit) break;
    }
    return most;
  };
  const words = [...new Set(texts.flatMap((t) => t.match(WORD) ?? []))].filter((w) => w.length >= 3 && allowed(w));
  words.sort((a, b) => b.length - a.length);
  for (const word of words) if (held(word, RARE_BOUNDS + 1) <= RARE_BOUNDS) return word;
  let best: string | undefined;
  let fewest = RARE_BOUNDS + 1;
  for (const text of texts.filter(allowed)) {
    const n = held(text, fewest);
    if (n < fewest) {
      best = text;
      fewest = n;
    }
  }
  return best;
}

function statsFor(db: Db): Stats | undefined {
  if (!isPool(db)) return undefined;
  let s = statsOf.get(db);
  if (!s) statsOf.set(db, (s = { loadedAt: 0, loading: false, rows: 0, bounds: null }));
  if (!s.loading && Date.now() - s.loadedAt > REFRESH_MS) {
    s.loading = true;
    void load(db, s);
  }
  return s;
}

/** The texts between a LIKE pattern's wildcards (`%`, `_`; `\` escapes the next character). */
export function likeRequiredTexts(pattern: string): string[] | undefined {
  const runs: string[] = [];
  let run = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === '\\') {
      const next = pattern[++i];
      if (next === undefined) return undefined; // PostgreSQL refuses the pattern
      run += next;
    } else if (ch === '%' || ch === '_') {
      runs.push(run);
      run = '';
    } else run += ch;
  }
  runs.push(run);
  return texts(runs);
}

/**
 * The runs of literal characters, outside any group or bracket expression, that every match of a
 * PostgreSQL regular expression (an ARE, as `~` reads it) must hold; undefined where the pattern is
 * not read that simply: an alternation, embedded options or a director (`(?i)`, `***:`), an escape
 * other than \d \s \w (and their capitals) or of punctuation, an unclosed bracket, group or bound.
 * The quantifier after a character ends the run (without that character, unless it is `+`).
 */
export function regexRequiredTexts(pattern: string): string[] | undefined {
  if (pattern.startsWith('***=')) return texts([pattern.slice(4)]);
  if (pattern.startsWith('***') || /\(\?[a-zA-Z#]/.test(pattern) || pattern.includes('|')) return undefined;
  const runs: string[] = [];
  let run = '';
  const end = () => {
    runs.push(run);
    run = '';
  };
  let depth = 0;
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === '[') {
      i = bracketEnd(pattern, i);
      if (i < 0) return undefined;
      end();
    } else if (ch === '(') {
      depth++;
      end();
    } else if (ch === ')') {
      depth--;
      end();
    } else if (ch === '*' || ch === '?' || ch === '{') {
      // the atom before is optional or repeated: its character leaves the run, which ends
      run = run.slice(0, -1);
      end();
      if (ch === '{') {
        i = pattern.indexOf('}', i);
        if (i < 0) return undefined;
      }
    } else if (ch === '+' || ch === '.' || ch === '^' || ch === '$') end();
    else if (ch === '\\') {
      const next = pattern[++i];
      if (next === undefined) return undefined;
      if ('dDsSwW'.includes(next)) end();
      else if (/[a-zA-Z0-9]/.test(next)) return undefined;
      else if (depth === 0) run += next;
    } else if (depth === 0) run += ch;
  }
  end();
  return depth === 0 ? texts(runs) : undefined;
}

/** The index of the `]` closing the bracket expression opened at `open`, or -1. */
function bracketEnd(p: string, open: number): number {
  let i = open + 1;
  if (p[i] === '^') i++;
  if (p[i] === ']') i++;
  for (; i < p.length; i++) {
    if (p[i] === ']') return i;
    if (p[i] === '\\') i++;
    else if (p[i] === '[' && (p[i + 1] === ':' || p[i + 1] === '.' || p[i + 1] === '=')) {
      const close = p.indexOf(p[i + 1] + ']', i + 2);
      if (close < 0) return -1;
      i = close + 1;
    }
  }
  return -1;
}

function texts(runs: string[]): string[] {
  return runs.filter((r) => r.length > 0);
}
