// Background paths: an export of the large class run through the task executor (time and memory
// per exported item, at two sizes so growth beyond linear shows), the event fan-out of N new
// events to a few subscriptions, and the webhook delivery of N deliveries to a local HTTPS peer
// trusted through a CA file, beside the same number of bare POSTs to it.
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { Pool } from 'undici';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { runEventFanoutOnce } from '../src/workers/event-fanout.ts';
import { MAX_CLAIM, runDeliveryWorkers } from '../src/workers/event-delivery.ts';
import { startPeer } from '../test/tls-fixtures.ts';
import { createCollection, uniq, type Bench } from './setup.ts';
import type { SeededClass } from './objects.ts';
import { fmtBytes, fmtCount, recordMemory, sampleMemory, throughputCase } from './harness.ts';

const AREA = 'tasks';

interface TaskBody {
  id: number;
  status: string;
  summary: { count?: number; output_bytes?: number } | null;
  details: unknown;
}

/** Submits an export through the API and runs exactly that task through the executor. */
async function runExport(b: Bench, token: string, classId: number, items: number): Promise<{ outputBytes: number }> {
  const task = await b.json<TaskBody>(202, 'POST', '/api/v1/exports', {
    token,
    body: { scope: { kind: 'objects_in_class', class_id: classId }, limits: { max_items: items, max_output_bytes: 64 * 1_048_576 } },
  });
  const done = await runTaskOnce(b.deps, { taskIds: [task.id] });
  const summary = done?.summary as TaskBody['summary'];
  if (done?.status !== 'succeeded' || summary?.count !== items) {
    throw new Error(
      `export task ${task.id} ended ${done?.status} with ${JSON.stringify(summary ?? done?.details)} (wanted ${items} items)`,
    );
  }
  return { outputBytes: summary.output_bytes ?? 0 };
}

export async function benchExport(b: Bench, big: SeededClass, runs: number): Promise<void> {
  const reader = await b.principalWith([[big.collectionId, ['ReadCollection', 'ReadClass', 'ReadObject']]]);
  const sizes = [...new Set([Math.min(5000, big.size), big.size])];
  // The baseline allocation: the same rows read with one plain SELECT and serialized once.
  const baseline = new Map<number, number>();
  for (const n of sizes) {
    const peaks: number[] = [];
    for (let r = 0; r < 3; r++) {
      const m = await sampleMemory(async () => {
        const rows = await b.sql`
          select id, name, description, collection_id, created_at, updated_at, revision, json_data
          from objects where class_id = ${big.classId} order by id limit ${n}`;
        return JSON.stringify(rows).length;
      });
      peaks.push(m.peakBytes);
    }
    baseline.set(n, median(peaks));
  }

  const measured = new Map<number, { peak: number; rss: number; outputBytes: number }>();
  for (const n of sizes) {
    const peaks: number[] = [];
    const rss: number[] = [];
    let outputBytes = 0;
    await throughputCase(
      AREA,
      `export ${fmtCount(n)} objects (JSON, executor)`,
      n === big.size ? runs : Math.max(2, runs),
      async () => {
        const m = await sampleMemory(() => runExport(b, reader.token, big.classId, n));
        peaks.push(m.peakBytes);
        rss.push(m.rssBytes);
        outputBytes = m.result.outputBytes;
        return n;
      },
      (perSecond) => `${fmtCount(perSecond)} items/s, output ${fmtBytes(outputBytes)}; non-admin, SQL visibility`,
    );
    measured.set(n, { peak: median(peaks), rss: median(rss), outputBytes });
    recordMemory({
      area: AREA,
      name: `export ${fmtCount(n)} objects`,
      items: n,
      peakBytes: median(peaks),
      rssBytes: median(rss),
      baselinePerItem: baseline.get(n)! / n,
      note: `stored output ${fmtCount(outputBytes / n)} B/item; baseline ${fmtCount(baseline.get(n)! / n)} B/item`,
    });
  }
  // Fixed costs and young-generation garbage cancel out in the difference between the two sizes:
  // what each further exported item costs. Flat or falling = linear in what is stored.
  const [small, large] = sizes;
  if (small !== undefined && large !== undefined && large > small) {
    const d = large - small;
    const s = measured.get(small)!;
    const l = measured.get(large)!;
    recordMemory({
      area: AREA,
      name: `export, marginal ${fmtCount(small)} -> ${fmtCount(large)}`,
      items: d,
      peakBytes: l.peak - s.peak,
      rssBytes: l.rss - s.rss,
      baselinePerItem: (baseline.get(large)! - baseline.get(small)!) / d,
      note: `stored output ${fmtCount((l.outputBytes - s.outputBytes) / d)} B/item; baseline ${fmtCount((baseline.get(large)! - baseline.get(small)!) / d)} B/item`,
    });
  }
}

export async function benchFanout(b: Bench, collectionId: number, events: number, runs: number): Promise<void> {
  // Events appended by the earlier cases (and any seeded ones) are not part of this measurement.
  await b.sql`delete from event_fanout_queue`;
  const [sink] = await b.sql<{ id: number }[]>`
    insert into event_sinks (name, kind, config) values (${uniq('bench-sink')}, 'webhook', ${b.sql.json({ url: 'https://hooks.bench.invalid/in' })})
    returning id`;
  const subs: [string[], string[], Record<string, unknown>][] = [
    [['object'], ['created', 'updated', 'deleted'], {}],
    [['object', 'class'], ['updated'], { actor_kinds: ['user'] }],
    [['object'], ['updated'], { entity_names: ['srv-1', 'srv-2', 'srv-3'] }],
  ];
  for (const [types, actions, filter] of subs) {
    await b.sql`
      insert into event_subscriptions (collection_id, sink_id, name, entity_types, actions, filter)
      values (${collectionId}, ${sink!.id}, ${uniq('bench-sub')}, ${types}::text[], ${actions}::text[], ${b.sql.json(filter as never)})`;
  }
  const expectedPerEvent = (g: number) => 2 + (g <= 3 ? 1 : 0);
  let expected = 0;
  for (let g = 1; g <= events; g++) expected += expectedPerEvent(g);

  await throughputCase(
    AREA,
    `event fan-out of ${fmtCount(events)} events to 3 subscriptions`,
    runs,
    async () => {
      await appendEvents(b, collectionId, events);
      const start = process.hrtime.bigint();
      let created = 0;
      for (;;) {
        const r = await runEventFanoutOnce(b.deps);
        if (r.claimed === 0) break;
        created += r.created;
      }
      if (created !== expected) throw new Error(`fan-out created ${created} deliveries, expected ${expected}`);
      // Only the fan-out is timed: the INSERT above is the workload, not the work.
      return { items: events, us: Number(process.hrtime.bigint() - start) / 1e3 };
    },
    (perSecond) =>
      `${fmtCount(perSecond)} events/s, ${(expected / events).toFixed(2)} deliveries/event, batch ${b.deps.config.SVC_EVENT_FANOUT_BATCH_SIZE}`,
  );
}

/** Appends `n` object.updated events to collection `collectionId` (the workload, not the work). */
async function appendEvents(b: Bench, collectionId: number, n: number): Promise<void> {
  await b.sql`
    insert into events (entity_type, entity_id, entity_name, collection_id, action, actor_kind, actor_user_id,
      initiator_user_id, provenance, summary, after, after_revision)
    select 'object', g, 'srv-' || g, ${collectionId}, 'updated', 'user', ${b.adminId}, ${b.adminId},
      jsonb_build_object('actor', jsonb_build_object('kind', 'user', 'principal', jsonb_build_object('id', ${b.adminId}::int, 'name', 'admin')),
        'initiator', jsonb_build_object('principal_id', ${b.adminId}::int, 'name', 'admin'), 'task_id', null),
      'object updated', jsonb_build_object('counter', g), 2
    from generate_series(1, ${n}::int) g`;
}

/**
 * Webhook delivery: `deliveries` rows to a local HTTPS peer whose certificate is trusted through
 * SVC_OUTBOUND_CA_FILE, sent by `WORKERS` delivery cycles at once (each sends up to 8 rows at once),
 * per delivery. Beside it, two baselines on kept-alive connections (as the service's are) with one
 * TLS context: a bare delivery loop doing the minimum SQL for the same job (claim up to 8 due rows
 * with their events in one statement, POST each, mark each sent: `WORKERS` loops at once), and
 * the same number of bare POSTs of the same size, as many at once as the service sends, no SQL.
 */
export async function benchDelivery(b: Bench, deliveries: number, runs: number): Promise<void> {
  const WORKERS = 4;
  const peer = await startPeer({ prefix: 'svc-bench-peer-' });
  try {
    const config = Object.assign({}, b.deps.config, { SVC_OUTBOUND_CA_FILE: peer.caFile, SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: true });
    const deps = Object.assign({}, b.deps, { config });
    const collectionId = await createCollection(b);
    const [sink] = await b.sql<{ id: number }[]>`
      insert into event_sinks (name, kind, config) values (${uniq('bench-hook')}, 'webhook', ${b.sql.json({})}) returning id`;
    await b.sql`
      insert into event_subscriptions (collection_id, sink_id, name, entity_types, actions, filter, routing, routing_admin_approved)
      values (${collectionId}, ${sink!.id}, ${uniq('bench-hook-sub')}, ${['object']}::text[], ${['updated']}::text[], ${b.sql.json({})},
        ${b.sql.json({ url: peer.url() })}, true)`;
    let bodyBytes = 0;
    let delivered = 0;

    await throughputCase(
      AREA,
      `webhook delivery of ${fmtCount(deliveries)} events (HTTPS, CA file)`,
      runs,
      async () => {
        await appendEvents(b, collectionId, deliveries);
        while ((await runEventFanoutOnce(b.deps)).claimed > 0);
        peer.seen.length = 0;
        const [before] = await b.sql<{ n: number }[]>`
          select count(*)::int as n from event_deliveries where sink_id = ${sink!.id} and status = 'succeeded'`;
        // the delivery workers as deployed (each a window of 8 claimed rows), until every row is recorded
        const workers = Object.assign({}, deps, {
          config: Object.assign({}, config, { SVC_EVENT_DELIVERY_WORKERS: WORKERS, SVC_EVENT_DELIVERY_POLL_INTERVAL_MS: 60_000 }),
        });
        const stop = new AbortController();
        const start = process.hrtime.bigint();
        const running = runDeliveryWorkers(workers, stop.signal, { notification: 0, poll: 0 }, { sinkIds: [sink!.id] });
        let recorded = 0;
        try {
          // the peer's count first (no SQL while the workers run), then the recorded rows
          while (peer.seen.length < deliveries) await new Promise((ok) => setTimeout(ok, 5));
          for (;;) {
            const [now] = await b.sql<{ n: number }[]>`
              select count(*)::int as n from event_deliveries where sink_id = ${sink!.id} and status = 'succeeded'`;
            recorded = now!.n - before!.n;
            if (recorded >= deliveries) break;
            await new Promise((ok) => setTimeout(ok, 5));
          }
        } finally {
          stop.abort();
          await running;
        }
        const us = Number(process.hrtime.bigint() - start) / 1e3;
        if (recorded !== deliveries || peer.seen.length !== deliveries) {
          throw new Error(`recorded ${recorded} (the peer saw ${peer.seen.length}), expected ${deliveries}`);
        }
        bodyBytes = Buffer.byteLength(peer.seen[0]!.body);
        return { items: deliveries, us };
      },
      (perSecond) => {
        delivered = perSecond;
        return `${fmtCount(perSecond)} deliveries/s, ${WORKERS} workers; bare loop and POSTs below`;
      },
    );

    // the bare delivery loop: the same rows, peer and concurrency (a window of 8 claimed rows per
    // loop, claiming again once half are done), the minimum SQL
    const secureContext = createSecureContext({ ca: readFileSync(peer.caFile) });
    let bareDelivered = 0;
    await throughputCase(
      AREA,
      `bare delivery loop of ${fmtCount(deliveries)} such events (claim + event, POST, mark)`,
      runs,
      async () => {
        await appendEvents(b, collectionId, deliveries);
        while ((await runEventFanoutOnce(b.deps)).claimed > 0);
        peer.seen.length = 0;
        const pool = new Pool(`https://127.0.0.1:${peer.port}`, { connect: { secureContext }, pipelining: 1 });
        const start = process.hrtime.bigint();
        let sent = 0;
        const deliver = async (r: { id: number; claim_token: string; event: unknown }) => {
          const res = await pool.request({ path: '/hook', method: 'POST', body: JSON.stringify(r.event) });
          await res.body.dump();
          if (res.statusCode !== 200) throw new Error(`the peer answered ${res.statusCode}`);
          await b.sql`
            update event_deliveries set status = 'succeeded', locked_until = null, claim_token = null, updated_at = now()
            where id = ${r.id}::int and claim_token = ${r.claim_token}::uuid and status = 'in_flight'`;
          sent++;
        };
        try {
          await Promise.all(
            Array.from({ length: WORKERS }, async () => {
              const inFlight = new Set<Promise<void>>();
              for (;;) {
                if (MAX_CLAIM - inFlight.size < MAX_CLAIM / 2) {
                  await Promise.race(inFlight);
                  continue;
                }
                const rows = await b.sql<{ id: number; claim_token: string; event: unknown }[]>`
                  with c as (
                    select id from event_deliveries
                    where sink_id = ${sink!.id}::int and status in ('pending', 'failed') and next_attempt_at <= now()
                    order by next_attempt_at, id limit ${MAX_CLAIM - inFlight.size}::int for update skip locked)
                  update event_deliveries d set status = 'in_flight', claim_token = gen_random_uuid(),
                    locked_until = now() + interval '30 seconds', updated_at = now()
                  from c, events e where d.id = c.id and e.event_id = d.event_id
                  returning d.id, d.claim_token::text as claim_token,
                    jsonb_build_object('event_id', e.event_id, 'entity_type', e.entity_type, 'entity_id', e.entity_id,
                      'action', e.action, 'summary', e.summary, 'provenance', e.provenance, 'after', e.after) as event`;
                if (rows.length === 0) {
                  if (inFlight.size === 0) return;
                  await Promise.race(inFlight);
                  continue;
                }
                for (const r of rows) {
                  const p: Promise<void> = deliver(r).finally(() => inFlight.delete(p));
                  inFlight.add(p);
                }
              }
            }),
          );
        } finally {
          await pool.close();
        }
        const us = Number(process.hrtime.bigint() - start) / 1e3;
        if (sent !== deliveries || peer.seen.length !== deliveries) {
          throw new Error(`the bare loop delivered ${sent} (the peer saw ${peer.seen.length}), expected ${deliveries}`);
        }
        return { items: deliveries, us };
      },
      (perSecond) => {
        bareDelivered = perSecond;
        return `${fmtCount(perSecond)} deliveries/s, ${WORKERS} loops at once; delivery / bare ${(delivered / perSecond).toFixed(2)}`;
      },
    );

    // the bare sends: the same peer, body size and concurrency, on kept-alive connections, no SQL
    const body = 'x'.repeat(bodyBytes);
    await throughputCase(
      AREA,
      `bare POSTs of ${fmtCount(deliveries)} such bodies (kept-alive connections)`,
      runs,
      async () => {
        peer.seen.length = 0;
        let next = 0;
        const pool = new Pool(`https://127.0.0.1:${peer.port}`, { connect: { secureContext }, pipelining: 1 });
        try {
          await Promise.all(
            Array.from({ length: WORKERS * MAX_CLAIM }, async () => {
              while (next < deliveries) {
                next++;
                const res = await pool.request({ path: '/hook', method: 'POST', body });
                await res.body.dump();
                if (res.statusCode !== 200) throw new Error(`the peer answered ${res.statusCode}`);
              }
            }),
          );
        } finally {
          await pool.close();
        }
        if (peer.seen.length !== deliveries) throw new Error(`the peer saw ${peer.seen.length} POSTs, expected ${deliveries}`);
        return deliveries;
      },
      (perSecond) =>
        `${fmtCount(perSecond)} POSTs/s, ${fmtCount(bodyBytes)} B bodies, ${WORKERS * MAX_CLAIM} at once; bare loop / POSTs ${(bareDelivered / perSecond).toFixed(2)}, delivery / POSTs ${(delivered / perSecond).toFixed(2)}`,
    );
  } finally {
    await peer.close();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}
