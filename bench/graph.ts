// Relation graph (#11): GET /api/v1/classes/{class_id}/{object_id}/related/graph at depth 4 over
// 100,000 objects and 400,000 object relations (BENCH_GRAPH_OBJECTS scales both; four relations
// per object), from a different root on every request. Seeded with two generate_series INSERTs.
// Every object points at four others at pseudo-random offsets (never itself, never the same one
// twice), so each has about eight relations and a depth-4 neighbourhood of a few thousand objects.
//
// `npx tsx bench/graph.ts` runs this case alone (with its own baseline); `make bench-latency` runs it with the rest.
import { fileURLToPath } from 'node:url';
import { createClass, createCollection, startBench, type Bench } from './setup.ts';
import { report, setBaseline, timeCase } from './harness.ts';

const AREA = 'relations';
const PER_OBJECT = 4;
const DEPTH = 4;

export async function benchGraph(b: Bench, objects = Number(process.env.BENCH_GRAPH_OBJECTS ?? 100_000)): Promise<void> {
  const n = Math.max(1000, Math.floor(objects));
  const collectionId = await createCollection(b);
  const classId = await createClass(b, collectionId);
  const [cr] = await b.sql<{ id: number }[]>`
    insert into class_relations (from_class_id, to_class_id) values (${classId}, ${classId}) returning id`;
  const seeded = performance.now();
  await b.seed`
    insert into objects (name, description, collection_id, class_id, json_data)
    select 'node-' || g, 'graph node ' || g, ${collectionId}, ${classId}, jsonb_build_object('n', g, 'rack', 'r-' || g % 97)
    from generate_series(1, ${n}) g`;
  const [ids] = await b.sql<{ lo: number; hi: number }[]>`select min(id) as lo, max(id) as hi from objects where class_id = ${classId}`;
  if (ids!.hi - ids!.lo + 1 !== n) throw new Error('graph bench: object ids are not contiguous');
  const lo = ids!.lo;
  // Object i (0-based) points at i + 1 + ((i * 2654435761 + k * n/4) mod (n - 1)) mod n for k = 0..3.
  await b.seed`
    insert into object_relations (class_relation_id, from_object_id, to_object_id)
    select ${cr!.id}::int, ${lo}::int + i, ${lo}::int + ((i + 1 + ((i::bigint * 2654435761 + k * (${n}::bigint / 4)) % (${n}::bigint - 1))) % ${n})::int
    from generate_series(0, ${n - 1}) i, generate_series(0, ${PER_OBJECT - 1}) k`;
  await b.seed`analyze objects`;
  await b.seed`analyze object_relations`;
  const seedSeconds = ((performance.now() - seeded) / 1000).toFixed(1);

  const token = b.adminToken;
  const root = (i: number) => lo + ((Math.abs(i) * 7919) % n);
  const sizes: number[] = [];
  const row = await timeCase(AREA, `object graph, depth ${DEPTH}`, 0.2, async (i) => {
    const g = await b.json<{ objects: unknown[] }>(200, 'GET', `/api/v1/classes/${classId}/${root(i)}/related/graph`, {
      token,
      query: { depth: DEPTH, ignore_self_class: false },
    });
    if (i >= 0) sizes.push(g.objects.length);
  });
  sizes.sort((x, y) => x - y);
  const median = sizes[Math.floor(sizes.length / 2)] ?? 0;
  row.note =
    `${n.toLocaleString('en-US')} objects, ${(n * PER_OBJECT).toLocaleString('en-US')} relations (seeded in ${seedSeconds} s); ` +
    `graphs of ~${median.toLocaleString('en-US')} objects`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const b = await startBench();
  try {
    await setBaseline(async () => void (await b.expect(200, 'GET', '/healthz')));
    await benchGraph(b);
    console.log(report());
  } finally {
    await b.close();
  }
}
