// Summarises a V8 heap snapshot (`node --heapsnapshot-signal=SIGUSR2`, or two of them to compare):
// self size by constructor / node type, largest first; with two files, the growth from the first
// to the second.
//   node --import tsx bench/heapsnapshot-top.ts <a.heapsnapshot> [b.heapsnapshot] [top N, default 30]
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

function summarise(file: string): Map<string, { size: number; count: number }> {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];
  const types = s.snapshot.meta.node_types[0];
  const out = new Map<string, { size: number; count: number }>();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt]!]!;
    const name = s.strings[s.nodes[i + nameAt]!]!;
    // objects by constructor; strings, code, arrays and the rest by type
    const key = type === 'object' || type === 'closure' || type === 'native' ? `${type}:${name.slice(0, 60)}` : type;
    const e = out.get(key) ?? { size: 0, count: 0 };
    e.size += s.nodes[i + sizeAt]!;
    e.count++;
    out.set(key, e);
  }
  return out;
}

const args = process.argv.slice(2);
const top = /^\d+$/.test(args.at(-1) ?? '') ? Number(args.pop()) : 30;
const [a, b] = args;
if (!a) throw new Error('usage: bench/heapsnapshot-top.ts <a.heapsnapshot> [b.heapsnapshot] [top N]');
const first = summarise(a);
const mb = (n: number) => (n / 1e6).toFixed(1).padStart(7);
const total = (m: Map<string, { size: number }>) => [...m.values()].reduce((t, e) => t + e.size, 0);
if (!b) {
  console.log(`${a}: ${mb(total(first))} MB`);
  for (const [k, e] of [...first].sort((x, y) => y[1].size - x[1].size).slice(0, top))
    console.log(`${mb(e.size)} MB  ${String(e.count).padStart(8)}  ${k}`);
} else {
  const second = summarise(b);
  console.log(`${a} ${mb(total(first))} MB -> ${b} ${mb(total(second))} MB`);
  const keys = new Set([...first.keys(), ...second.keys()]);
  const growth = [...keys].map((k) => {
    const x = first.get(k) ?? { size: 0, count: 0 };
    const y = second.get(k) ?? { size: 0, count: 0 };
    return { k, d: y.size - x.size, dc: y.count - x.count };
  });
  for (const g of growth.sort((x, y) => y.d - x.d).slice(0, top)) console.log(`${mb(g.d)} MB  ${String(g.dc).padStart(8)}  ${g.k}`);
}
