// Summarises a V8 CPU profile (`node --cpu-prof`, e.g. a service process run by
// `BENCH_SVC_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=/tmp/prof" make bench-throughput`): the
// functions with the most self time, and the files (ours, dependencies, node internals) it falls in.
//   node --import tsx bench/cpuprofile-top.ts <file.cpuprofile> [top N, default 40] [last S seconds only | A-B]
// (the last seconds of a profile leave out start-up and warm-up; the process's shutdown is short;
// A-B counts the samples from A to B seconds after the profile's start: two windows of one long
// profile, e.g. a soak's first and last minutes, compared).
// On a host of few cores V8's sampling thread gets to run mostly while the main thread waits in a
// system call, so the socket writes (`writev`, `writeBuffer`) collect far more samples than their
// CPU time; `perf record -e cpu-clock` with `--perf-basic-prof` shows where the CPU goes
// (bench/FINDINGS.md, 2026-12-06, morning).
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const [file, topArg, lastArg] = process.argv.slice(2);
if (!file) throw new Error('usage: bench/cpuprofile-top.ts <file.cpuprofile> [top N]');
const top = Number(topArg ?? 40);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map<number, number>();
const at: number[] = [];
profile.timeDeltas.reduce((t, d, i) => (at[i] = t + d), profile.startTime);
const span = /^(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)$/.exec(lastArg ?? '');
const from = span ? profile.startTime + Number(span[1]) * 1e6 : lastArg ? profile.endTime - Number(lastArg) * 1e6 : -Infinity;
const to = span ? profile.startTime + Number(span[2]) * 1e6 : Infinity;
const counted = (i: number) => at[i]! >= from && at[i]! < to;
profile.samples.forEach((id, i) => {
  if (counted(i)) selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);

const short = (url: string) => {
  const path = url.replace(/^file:\/\//, '');
  return path.includes('/node_modules/') ? path.replace(/.*\/node_modules\//, 'npm:') : path.replace(/.*\/(src|bench|test|dist)\//, '$1/');
};
const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
const fns = new Map<string, number>();
const files = new Map<string, number>();
for (const [id, us] of selfUs) {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
  const where = url ? `${short(url)}:${lineNumber + 1}` : '(native)';
  add(fns, `${functionName || '(anonymous)'}  ${where}`, us);
  add(files, url ? short(url).replace(/^(npm:(@[^/]+\/)?[^/]+).*/, '$1') : functionName, us);
}
// Inclusive time: a sample counts once for every function on its stack (once per function, however
// often it recurses).
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const keyOf = (id: number) => {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
  return `${functionName || '(anonymous)'}  ${url ? `${short(url)}:${lineNumber + 1}` : '(native)'}`;
};
const inclusive = new Map<string, number>();
profile.samples.forEach((id, i) => {
  if (!counted(i)) return;
  const seen = new Set<string>();
  for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) seen.add(keyOf(n));
  for (const k of seen) add(inclusive, k, profile.timeDeltas[i] ?? 0);
});
const ours = process.env.ALL ? inclusive : new Map([...inclusive].filter(([k]) => /\s(src|bench|dist|npm:hono|npm:@hono)\//.test(k)));

const pct = (us: number) => `${((us / total) * 100).toFixed(1).padStart(5)} %`;
const print = (title: string, m: Map<string, number>, n: number) => {
  console.log(`\n${title}`);
  for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n)) console.log(`${pct(us)}  ${k}`);
};
console.log(`${file}: ${(total / 1e6).toFixed(1)} s of samples`);
print('self time by function', fns, top);
print('self time by file or package', files, 25);
print('inclusive time of our functions and Hono', ours, top);
