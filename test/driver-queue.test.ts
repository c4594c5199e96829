// The postgres.js queue as patched by patches/postgres+3.4.9.patch, driven directly in each copy
// Node can load: the one `import 'postgres'` resolves to, the one `require('postgres')` resolves
// to, and the workerd copy. Upstream's queue kept an array that only reset when empty, so a queue
// that never empties grew without bound; these tests pin the semantics the driver relies on and
// that the patched queue holds nothing but its live elements (no timing: structure and heap).
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { GCProfiler, setFlagsFromString, type GCProfilerResult } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';

interface DriverQueue<T> {
  readonly length: number;
  push(x: T): T;
  shift(): T | undefined;
  remove(x: T): T | null;
}
type QueueFactory = <T>(initial?: T[]) => DriverQueue<T>;

const require = createRequire(import.meta.url);
const esmEntry = fileURLToPath(import.meta.resolve('postgres'));
const cjsEntry = require.resolve('postgres');
const packageRoot = join(dirname(cjsEntry), '..', '..');

const copies: [string, () => Promise<QueueFactory>][] = [
  [
    'ESM (import)',
    async () => ((await import(pathToFileURL(join(dirname(esmEntry), 'queue.js')).href)) as { default: QueueFactory }).default,
  ],
  ['CJS (require)', async () => require(join(dirname(cjsEntry), 'queue.js')) as QueueFactory],
  [
    'workerd',
    async () => ((await import(pathToFileURL(join(packageRoot, 'cf', 'src', 'queue.js')).href)) as { default: QueueFactory }).default,
  ],
];

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void;

/** The old space's growth between collections while `run` runs: what went there without a young GC. */
function oldSpaceAllocated(run: () => void): number {
  gc();
  const profiler = new GCProfiler();
  profiler.start();
  run();
  gc({ type: 'minor' });
  const { statistics } = profiler.stop() as GCProfilerResult;
  const old = (s: GCProfilerResult['statistics'][number]['beforeGC']) =>
    s.heapSpaceStatistics.find((space) => space.spaceName === 'old_space')!.spaceUsedSize;
  let grown = 0;
  for (let i = 1; i < statistics.length; i++) grown += Math.max(0, old(statistics[i]!.beforeGC) - old(statistics[i - 1]!.afterGC));
  return grown;
}

function drain<T>(q: DriverQueue<T>): T[] {
  const out: T[] = [];
  while (q.length) out.push(q.shift() as T);
  return out;
}

/** A deterministic PRNG (mulberry32), so a failing sequence can be replayed. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

it('the ESM and CJS entries Node resolves are the ones whose queue is patched', async () => {
  expect(esmEntry).toBe(join(packageRoot, 'src', 'index.js'));
  expect(cjsEntry).toBe(join(packageRoot, 'cjs', 'src', 'index.js'));
});

describe.each(copies)('postgres.js queue, %s copy', (_name, load) => {
  it('is first in, first out, with length counting what is left', async () => {
    const q = (await load())<string>();
    expect(q.push('a')).toBe('a');
    q.push('b');
    q.push('c');
    expect(q.length).toBe(3);
    expect(q.shift()).toBe('a');
    expect(q.length).toBe(2);
    q.push('d');
    expect(drain(q)).toEqual(['b', 'c', 'd']);
    expect(q.shift()).toBeUndefined();
    expect(q.length).toBe(0);
    q.push('e');
    expect(q.length).toBe(1);
    expect(q.shift()).toBe('e');
  });

  it('copies its initial elements', async () => {
    const initial = [1, 2, 3];
    const q = (await load())(initial);
    initial.push(4);
    expect(q.length).toBe(3);
    expect(drain(q)).toEqual([1, 2, 3]);
  });

  it('removes from the middle, the head and the tail, and answers null for what it does not hold', async () => {
    const q = (await load())<{ id: number }>();
    const xs = [0, 1, 2, 3, 4, 5].map((id) => ({ id }));
    xs.forEach((x) => q.push(x));
    expect(q.remove(xs[2]!)).toBe(xs[2]);
    expect(q.remove(xs[2]!)).toBeNull();
    expect(q.remove({ id: 3 })).toBeNull();
    expect(q.remove(xs[0]!)).toBe(xs[0]);
    expect(q.remove(xs[5]!)).toBe(xs[5]);
    expect(q.length).toBe(3);
    q.push(xs[2]!);
    expect(drain(q)).toEqual([xs[1], xs[3], xs[4], xs[2]]);
    expect(q.remove(xs[1]!)).toBeNull();
  });

  it('removes the oldest occurrence of a value held twice', async () => {
    const q = (await load())<string>();
    ['a', 'b', 'a', 'c', 'a'].forEach((x) => q.push(x));
    expect(q.remove('a')).toBe('a');
    expect(q.length).toBe(4);
    q.push('d');
    expect(q.remove('a')).toBe('a');
    expect(drain(q)).toEqual(['b', 'c', 'a', 'd']);
  });

  it('agrees with a plain array (indexOf + splice) over 200,000 random operations', async () => {
    const q = (await load())<number>();
    const model: number[] = [];
    const random = rng(14);
    let mismatch = '';
    for (let i = 0; i < 200_000 && !mismatch; i++) {
      const r = random();
      // values from a small range, so duplicates and removal of absent values both happen often
      const v = Math.floor(random() * 40);
      let got: number | null | undefined;
      let want: number | null | undefined;
      if (r < 0.45) {
        got = q.push(v);
        want = v;
        model.push(v);
      } else if (r < 0.75) {
        got = q.shift();
        want = model.shift();
      } else {
        const at = model.indexOf(v);
        got = q.remove(v);
        want = at === -1 ? null : v;
        if (at !== -1) model.splice(at, 1);
      }
      if (got !== want || q.length !== model.length) {
        mismatch = `operation ${i}: got ${got} (length ${q.length}), want ${want} (length ${model.length})`;
      }
    }
    expect(mismatch).toBe('');
    expect(drain(q)).toEqual(model);
  });

  it('holds no reference to what left it', async () => {
    const q = (await load())<object>();
    const refs = Array.from({ length: 300 }, (_, i) => new WeakRef(q.push({ i })));
    for (let i = 0; i < 100; i++) q.shift();
    for (let i = 100; i < 200; i++) q.remove(refs[i]!.deref()!);
    expect(q.length).toBe(100);
    // WeakRef targets stay alive until the current job ends
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(refs.slice(0, 200).filter((r) => r.deref() !== undefined)).toHaveLength(0);
    expect(refs.slice(200).filter((r) => r.deref() !== undefined)).toHaveLength(100);
    expect(drain(q)).toEqual(refs.slice(200).map((r) => r.deref()));
  });

  it('does not grow when it never empties (2,000,000 push/shift cycles behind a backlog of 50)', async () => {
    const q = (await load())<number>();
    for (let i = 0; i < 50; i++) q.push(i);
    gc();
    const before = process.memoryUsage().heapUsed;
    let order = 0;
    for (let i = 0; i < 2_000_000; i++) {
      q.push(50 + i);
      if (q.shift() !== order++) break;
    }
    gc();
    // upstream's array holds a slot for every element ever pushed here (about 16 MiB)
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(4 * 1024 * 1024);
    expect(order).toBe(2_000_000);
    expect(drain(q)).toEqual(Array.from({ length: 50 }, (_, i) => 2_000_000 + i));
  });

  it('allocates nothing in the old space as the pool moves connections (500,000 moves between two queues)', async () => {
    // The queue used to index its values in a Map: a long-lived Map that gains and loses a key per
    // operation gets a new table every few operations, allocated in the old space (~370 bytes a
    // query in the pool's pattern), which only a full GC frees.
    const Queue = await load();
    const open = Queue<{ id: number }>();
    const busy = Queue<{ id: number }>();
    const connections = Array.from({ length: 10 }, (_, id) => ({ id }));
    connections.forEach((c) => open.push(c));
    // both queues old already, as a running pool's are
    gc();
    gc();
    const grown = oldSpaceAllocated(() => {
      for (let i = 0; i < 500_000; i++) {
        const c = open.shift()!;
        busy.push(c);
        busy.remove(c);
        open.push(c);
      }
    });
    expect(grown).toBeLessThan(4 * 1024 * 1024);
    expect(drain(open)).toEqual(connections);
  });

  it('keeps the pool pattern flat: a shifted connection removed again (absent) and pushed back, 1,000,000 times', async () => {
    const busy = (await load())<{ id: number }>();
    const connections = Array.from({ length: 10 }, (_, id) => ({ id }));
    connections.forEach((c) => busy.push(c));
    gc();
    const before = process.memoryUsage().heapUsed;
    let found = 0;
    for (let i = 0; i < 1_000_000; i++) {
      // what the pool's move() does to a connection it just took from the busy queue
      const c = busy.shift()!;
      if (busy.remove(c) !== null) found++;
      busy.push(c);
    }
    gc();
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(4 * 1024 * 1024);
    expect(found).toBe(0);
    expect(drain(busy)).toEqual(connections);
  });
});
