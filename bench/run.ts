// Benchmarks (`make bench-latency`, the first part of `make bench`): the hot paths of the service,
// each reported as a ratio to a baseline (GET /healthz through the whole HTTP stack, no database)
// measured in the same run, so results compare across machines; memory as bytes per item against
// a baseline allocation measured in the same run. Never timed assertions: this prints numbers for
// people to read.
//
// Uses SVC_DATABASE_URL when set (a fresh database is created and dropped), else an embedded
// PostgreSQL in a temporary directory. BENCH_ITERATIONS (default 500) scales the iteration counts;
// BENCH_OBJECTS (default 20000) the size of the large class, BENCH_EVENTS (default 50000) the
// audit table, BENCH_FANOUT_EVENTS (default 5000) the fan-out batch, BENCH_DELIVERIES (default
// 1000) the webhook deliveries of a run (bench/tasks.ts), BENCH_GRAPH_OBJECTS (default
// 100000, with four relations each) the relation graph (bench/graph.ts). The driver cases
// (bench/driver-queue.ts: the queue, then statements of tagged-template fragments) run last and
// print their own tables (BENCH_DRIVER_QUERIES, BENCH_DRIVER_UPSTREAM_QUERIES and
// BENCH_DRIVER_FRAGMENT_QUERIES size them).
import { createCollection, startBench } from './setup.ts';
import { ITER, report, setBaseline } from './harness.ts';
import { benchObjects, seedLargeClass } from './objects.ts';
import { benchSearch } from './search.ts';
import { benchGraph } from './graph.ts';
import { benchAudit } from './audit.ts';
import { benchIdentity } from './identity.ts';
import { benchDelivery, benchExport, benchFanout } from './tasks.ts';
import { benchDriverQueue } from './driver-queue.ts';
import { benchRoundTrips } from './round-trips.ts';

const int = (name: string, fallback: number) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
};
const OBJECTS = int('BENCH_OBJECTS', 20_000);
const EVENTS = int('BENCH_EVENTS', 50_000);
const FANOUT_EVENTS = int('BENCH_FANOUT_EVENTS', 5_000);
const DELIVERIES = int('BENCH_DELIVERIES', 1_000);
const RUNS = Math.max(2, Math.round(3 * (ITER / 500)));

const started = performance.now();
const b = await startBench();
try {
  process.stderr.write(`seeding: ${OBJECTS} objects, ${EVENTS} events\n`);
  const collectionId = await createCollection(b);
  const big = await seedLargeClass(b, collectionId, OBJECTS);
  await b.seed`analyze objects`;
  await setBaseline(async () => void (await b.expect(200, 'GET', '/healthz')));

  await benchIdentity(b);
  await benchObjects(b, big);
  await benchSearch(b, big);
  await benchGraph(b);
  await benchAudit(b, EVENTS);
  await benchExport(b, big, RUNS);
  await benchFanout(b, collectionId, FANOUT_EVENTS, RUNS);
  await benchDelivery(b, DELIVERIES, RUNS);
  const roundTrips = await benchRoundTrips(b, collectionId);
  const driverQueue = await benchDriverQueue(b.deps.config.SVC_DATABASE_URL!);

  console.log(report());
  console.log(`\n${roundTrips}`);
  console.log(`\n${driverQueue}`);
  console.log(`\n(BENCH_ITERATIONS=${ITER}; total run ${((performance.now() - started) / 1000).toFixed(0)} s)`);
} finally {
  await b.close();
}
