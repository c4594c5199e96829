// The benchmark harness: timing, the baseline, memory sampling and the report. Absolute times
// depend on the machine and on whatever else runs on it, so every case is reported as a ratio to
// a baseline (GET /healthz through the whole HTTP stack) measured interleaved with that case; the
// table also keeps the absolute numbers for reading alongside.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** BENCH_ITERATIONS scales every case (default 500: the iteration count of a cheap request). */
export const ITER = Math.max(1, Number(process.env.BENCH_ITERATIONS ?? 500) || 500);
const SCALE = ITER / 500;
/** No timed case runs longer than this (scaled), so a slow machine still finishes in minutes. */
const CASE_BUDGET_MS = 12_000 * Math.max(1, SCALE);

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

export interface TimedRow {
  area: string;
  name: string;
  n: number;
  /** Median, 95th and 99th percentile, in µs per request (or per item for throughput rows). */
  median: number;
  p95: number;
  p99: number;
  unit: 'request' | 'item';
  baseline: number;
  note?: string;
}

export interface MemoryRow {
  area: string;
  name: string;
  items: number;
  /** Peak growth of V8 heap + external memory (Buffers) over the run, sampled every few ms. */
  peakBytes: number;
  rssBytes: number;
  baselinePerItem: number;
  note?: string;
}

const timed: TimedRow[] = [];
const memory: MemoryRow[] = [];
let baselineFn: () => Promise<void> = async () => {};
let baselineSamples: number[] = [];

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

async function sample(fn: (i: number) => Promise<void>, n: number, budgetMs = CASE_BUDGET_MS): Promise<number[]> {
  return (await samplePaired(fn, n, budgetMs, false)).samples;
}

const elapsedUs = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e3;

/**
 * Times n calls of fn (after a short warm-up). With `paired`, one baseline request runs right
 * before every call, so the case and its baseline see the same machine load (other processes on
 * a shared machine make a baseline measured minutes earlier useless).
 */
async function samplePaired(
  fn: (i: number) => Promise<void>,
  n: number,
  budgetMs: number,
  paired: boolean,
): Promise<{ samples: number[]; base: number[] }> {
  for (let i = 0; i < Math.min(20, Math.ceil(n / 10)); i++) {
    if (paired) await baselineFn();
    await fn(-1 - i);
  }
  const samples: number[] = [];
  const base: number[] = [];
  const deadline = performance.now() + budgetMs;
  for (let i = 0; i < n; i++) {
    if (paired) {
      const b = process.hrtime.bigint();
      await baselineFn();
      base.push(elapsedUs(b));
    }
    const start = process.hrtime.bigint();
    await fn(i);
    samples.push(elapsedUs(start));
    if (samples.length >= 5 && performance.now() > deadline) break;
  }
  return { samples: samples.sort((a, b) => a - b), base: base.sort((a, b) => a - b) };
}

/** The baseline request; measured once in full here, and again alongside every case. */
export async function setBaseline(fn: () => Promise<void>): Promise<number> {
  baselineFn = fn;
  baselineSamples = await sample(() => fn(), ITER);
  return percentile(baselineSamples, 0.5);
}

export function baselineSummary(): { n: number; median: number; p95: number } {
  return { n: baselineSamples.length, median: percentile(baselineSamples, 0.5), p95: percentile(baselineSamples, 0.95) };
}

/** A burst of baseline requests (around long runs, where pairing per call is not possible). */
async function baselineBurst(): Promise<number[]> {
  return sample(() => baselineFn(), 200, 2_000);
}

/**
 * Times `fn` (one request per call, `i` counts from 0; warm-up calls get negative i) for
 * `weight` × BENCH_ITERATIONS iterations, at least 5, and records the row.
 */
export async function timeCase(
  area: string,
  name: string,
  weight: number,
  fn: (i: number) => Promise<void>,
  note?: string,
): Promise<TimedRow> {
  const { samples: s, base } = await samplePaired(fn, Math.max(5, Math.round(ITER * weight)), CASE_BUDGET_MS, true);
  const row: TimedRow = {
    area,
    name,
    n: s.length,
    median: percentile(s, 0.5),
    p95: percentile(s, 0.95),
    p99: percentile(s, 0.99),
    unit: 'request',
    baseline: percentile(base, 0.5),
    note,
  };
  timed.push(row);
  progress(area, name);
  return row;
}

/**
 * Records a throughput row: `runs` runs of `fn`, reported per item. fn returns how many items it
 * processed (the whole call is timed), or the items and the µs of the part it timed itself (when
 * the call also prepares its workload).
 */
export async function throughputCase(
  area: string,
  name: string,
  runs: number,
  fn: () => Promise<number | { items: number; us: number }>,
  note?: (itemsPerSecond: number) => string,
): Promise<void> {
  const base = await baselineBurst();
  const perItem: number[] = [];
  for (let r = 0; r < runs; r++) {
    const start = process.hrtime.bigint();
    const r = await fn();
    const us = typeof r === 'number' ? Number(process.hrtime.bigint() - start) / 1e3 : r.us;
    perItem.push(us / (typeof r === 'number' ? r : r.items));
    base.push(...(await baselineBurst()));
  }
  base.sort((x, y) => x - y);
  perItem.sort((a, b) => a - b);
  const median = percentile(perItem, 0.5);
  timed.push({
    area,
    name,
    n: runs,
    median,
    p95: percentile(perItem, 0.95),
    p99: percentile(perItem, 0.99),
    unit: 'item',
    baseline: percentile(base, 0.5),
    note: note?.(1e6 / median) ?? `${fmtCount(1e6 / median)} items/s`,
  });
  progress(area, name);
}

export interface MemorySample<T> {
  result: T;
  peakBytes: number;
  rssBytes: number;
}

/** Runs fn after a full GC and samples heap + external memory and RSS every 2 ms; returns the peak growth. */
export async function sampleMemory<T>(fn: () => Promise<T>): Promise<MemorySample<T>> {
  gc();
  gc();
  const m0 = process.memoryUsage();
  const start = m0.heapUsed + m0.external;
  let peak = start;
  let rssPeak = m0.rss;
  const probe = () => {
    const m = process.memoryUsage();
    peak = Math.max(peak, m.heapUsed + m.external);
    rssPeak = Math.max(rssPeak, m.rss);
  };
  const timer = setInterval(probe, 2);
  try {
    const result = await fn();
    probe();
    return { result, peakBytes: peak - start, rssBytes: rssPeak - m0.rss };
  } finally {
    clearInterval(timer);
  }
}

export function recordMemory(row: MemoryRow): void {
  memory.push(row);
  progress(row.area, `${row.name} (memory)`);
}

function progress(area: string, name: string): void {
  process.stderr.write(`  done: ${area} / ${name}\n`);
}

export function fmtCount(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1);
}

function fmtUs(us: number): string {
  if (us >= 1e6) return `${(us / 1e6).toFixed(2)} s`;
  if (us >= 1e4) return `${(us / 1e3).toFixed(1)} ms`;
  if (us >= 1e3) return `${(us / 1e3).toFixed(2)} ms`;
  return `${us.toFixed(1)} µs`;
}

export function fmtBytes(b: number): string {
  const abs = Math.abs(b);
  if (abs >= 1024 * 1024) return `${(b / 1024 / 1024).toFixed(1)} MiB`;
  if (abs >= 1024) return `${(b / 1024).toFixed(1)} KiB`;
  return `${Math.round(b)} B`;
}

function table(header: string[], rows: string[][], right: boolean[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** The readable report: the time table, then the memory table. */
export function report(): string {
  const b = baselineSummary();
  const out: string[] = [];
  out.push(
    `Baseline GET /healthz (whole HTTP stack, no database): median ${fmtUs(b.median)}, p95 ${fmtUs(b.p95)} over ${b.n} requests.`,
    `ratio = median of the case / median of the baseline requests interleaved with it (one before every request; for "/item" rows`,
    `bursts around each run, and the ratio is per item).`,
    '',
  );
  out.push(
    table(
      ['area', 'case', 'n', 'median', 'p95', 'p99', 'ratio', 'note'],
      timed.map((r) => [
        r.area,
        r.name,
        String(r.n),
        `${fmtUs(r.median)}/${r.unit === 'item' ? 'item' : 'req'}`,
        fmtUs(r.p95),
        fmtUs(r.p99),
        `${(r.median / r.baseline).toFixed(r.median / r.baseline >= 100 ? 0 : 2)}x`,
        r.note ?? '',
      ]),
      [false, false, true, true, true, true, true, false],
    ),
  );
  if (memory.length) {
    out.push(
      '',
      'Memory: peak growth of V8 heap + external (Buffer) memory during the run, after a full GC; ratio = bytes per item /',
      'bytes per item of the baseline allocation (the same rows read with one plain SELECT and serialized with JSON.stringify).',
      '',
      table(
        ['area', 'case', 'items', 'peak Δ', 'B/item', 'RSS Δ', 'ratio', 'note'],
        memory.map((m) => [
          m.area,
          m.name,
          String(m.items),
          fmtBytes(m.peakBytes),
          fmtCount(m.peakBytes / m.items),
          fmtBytes(m.rssBytes),
          `${(m.peakBytes / m.items / m.baselinePerItem).toFixed(2)}x`,
          m.note ?? '',
        ]),
        [false, false, true, true, true, true, true, false],
      ),
    );
  }
  return out.join('\n');
}
