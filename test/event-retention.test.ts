// Event retention purge and archival. The purge deletes every eligible event of its database, so
// this file runs it in a database of its own (created and migrated here, dropped afterwards): the
// other test files' events in the shared database are never in reach.
import { randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import postgres from 'postgres';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import type { Config } from '../src/config.ts';
import type { Deps } from '../src/deps.ts';
import { migrate } from '../src/db/migrate.ts';
import { createSql, type Sql } from '../src/db/sql.ts';
import { BatchNotOwned, BatchProtected, claimNewBatch, completeBatch, releaseBatch } from '../src/db/event-retention.ts';
import { archiveBatch, BATCH_LEASE_MS, eventRetentionLoop, runEventRetention } from '../src/workers/event-retention.ts';
import { testConfig, uniq } from './helpers.ts';

const DAY = 86_400_000;
let adminUrl: string;
let dbName: string;
let sql: Sql;
let dir: string;
let sinkId: number;
let subscriptionId: number;

function deps(overrides: Partial<Config> = {}): Deps {
  const config = testConfig({
    SVC_EVENT_RETENTION_DAYS: 30,
    SVC_EVENT_DELIVERY_RETENTION_DAYS: 7,
    SVC_EVENT_RETENTION_PURGE_BATCH_SIZE: 3,
    ...overrides,
  });
  return { config, sql, log: pino({ level: 'silent' }), tokenKey: Buffer.alloc(32), services: {} };
}

beforeAll(async () => {
  const base = new URL(inject('dbUrl'));
  dbName = `svc_retention_${Date.now()}_${randomBytes(3).toString('hex')}`;
  adminUrl = base.toString();
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${dbName}`);
  await admin.end();
  base.pathname = `/${dbName}`;
  sql = createSql(base.toString(), testConfig());
  await migrate(sql);
  const [sink] = await sql<{ id: number }[]>`
    insert into event_sinks (name, kind, config) values (${uniq('sink')}, 'webhook', '{}'::jsonb) returning id`;
  sinkId = sink!.id;
  const [sub] = await sql<{ id: number }[]>`
    insert into event_subscriptions (sink_id, name, entity_types, actions, routing)
    values (${sinkId}, ${uniq('sub')}, '{object}', '{created}', '{"url":"https://example.com/"}'::jsonb) returning id`;
  subscriptionId = sub!.id;
  dir = mkdtempSync(join(tmpdir(), 'svc-retention-'));
});

afterAll(async () => {
  await sql.end();
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

// Each test starts from an empty event stream (this database belongs to this file alone).
beforeEach(async () => {
  await sql`truncate events, event_fanout_queue, event_deliveries, event_retention_batches, event_retention_batch_events`;
});

interface Ev {
  id: number;
  event_id: string;
  name: string;
}

/** An event `ageDays` old; fanned out already unless `queued`. */
async function event(ageDays: number, opts: { queued?: boolean } = {}): Promise<Ev> {
  const name = uniq('ev');
  const at = new Date(Date.now() - ageDays * DAY).toISOString();
  const [row] = await sql<{ id: number; event_id: string }[]>`
    insert into events (entity_type, entity_id, entity_name, action, actor_kind, provenance, summary, after, occurred_at)
    values ('object', 1, ${name}, 'created', 'system', '{"actor":{"kind":"system","principal":null}}'::jsonb, 'made',
      '{"n":1}'::jsonb, ${at}::text::timestamptz)
    returning id, event_id`;
  if (!opts.queued) await sql`delete from event_fanout_queue where event_id = ${row!.id}`;
  return { ...row!, name };
}

async function delivery(ev: Ev, status: string, updatedDaysAgo = 0, purpose: 'event' | 'test' = 'event'): Promise<number> {
  const at = new Date(Date.now() - updatedDaysAgo * DAY).toISOString();
  const [row] = await sql<{ id: number }[]>`
    insert into event_deliveries (event_id, subscription_id, sink_id, purpose, status, updated_at)
    values (${ev.event_id}, ${subscriptionId}, ${sinkId}, ${purpose}, ${status}, ${at}::text::timestamptz) returning id`;
  return row!.id;
}

async function remainingEvents(): Promise<string[]> {
  const rows = await sql<{ entity_name: string }[]>`select entity_name from events order by id`;
  return rows.map((r) => r.entity_name);
}

async function remainingDeliveries(): Promise<number[]> {
  return (await sql<{ id: number }[]>`select id from event_deliveries order by id`).map((r) => r.id);
}

async function documents(evs: Ev[]): Promise<Record<string, unknown>[]> {
  const rows = await sql<{ doc: Record<string, unknown> }[]>`
    select to_jsonb(e) as doc from events e where e.id = any(${evs.map((e) => e.id)}::bigint[]) order by e.id`;
  return rows.map((r) => r.doc);
}

async function openBatches(): Promise<{ batch_id: string; last_error: string | null; docs: number }[]> {
  return sql<{ batch_id: string; last_error: string | null; docs: number }[]>`
    select b.batch_id, b.last_error, (select count(*)::int from event_retention_batch_events c where c.batch_id = b.batch_id) as docs
    from event_retention_batches b where b.completed_at is null order by b.created_at`;
}

describe('runEventRetention', () => {
  it('purges old events in batches, keeps recent and protected ones, cascades to their remaining deliveries', async () => {
    await event(40);
    const b = await event(35);
    const c = await event(31);
    await event(100);
    const pending = await event(60);
    const failed = await event(60);
    const inFlight = await event(60);
    const queued = await event(60, { queued: true });
    const recent = await event(10);
    const bSucceeded = await delivery(b, 'succeeded', 1);
    const cDead = await delivery(c, 'dead', 0);
    await delivery(pending, 'pending');
    await delivery(failed, 'failed');
    await delivery(inFlight, 'in_flight');
    await delivery(pending, 'succeeded', 1, 'test');
    const recentDelivery = await delivery(recent, 'succeeded', 1);

    const run = await runEventRetention(deps());
    expect(run).toEqual({ deliveriesPurged: 0, batchesCompleted: 2, eventsPurged: 4, failed: null });
    expect(await remainingEvents()).toEqual([pending.name, failed.name, inFlight.name, queued.name, recent.name]);
    const left = await remainingDeliveries();
    expect(left).not.toContain(bSucceeded);
    expect(left).not.toContain(cDead);
    expect(left).toContain(recentDelivery);
    expect(left).toHaveLength(5);
    // completed batches stay as a ledger without their documents
    const ledger = await sql<{ event_count: number; completed: boolean; docs: number }[]>`
      select event_count, completed_at is not null as completed,
        (select count(*)::int from event_retention_batch_events c where c.batch_id = b.batch_id) as docs
      from event_retention_batches b order by created_at`;
    expect(ledger).toEqual([
      { event_count: 3, completed: true, docs: 0 },
      { event_count: 1, completed: true, docs: 0 },
    ]);
    // a second run finds nothing more
    expect(await runEventRetention(deps())).toEqual({ deliveriesPurged: 0, batchesCompleted: 0, eventsPurged: 0, failed: null });
  });

  it('purges succeeded and dead deliveries after the delivery retention period counted from updated_at', async () => {
    const ev = await event(1);
    const oldSucceeded = await delivery(ev, 'succeeded', 8);
    const oldDead = await delivery(ev, 'dead', 9, 'test');
    const newSucceeded = await delivery(ev, 'succeeded', 6, 'test');
    const oldFailed = await delivery(ev, 'failed', 20, 'test');
    const oldPending = await delivery(ev, 'pending', 20, 'test');
    const run = await runEventRetention(deps({ SVC_EVENT_RETENTION_PURGE_BATCH_SIZE: 1 }));
    expect(run.deliveriesPurged).toBe(2);
    const left = await remainingDeliveries();
    expect(left).toEqual([newSucceeded, oldFailed, oldPending]);
    expect(left).not.toContain(oldSucceeded);
    expect(left).not.toContain(oldDead);
    expect(await remainingEvents()).toEqual([ev.name]);
  });

  it('archives each batch to <batch-uuid>.jsonl (dir 0700, file 0600) with the full event rows before deleting', async () => {
    const evs = [await event(50), await event(45), await event(40), await event(35)];
    const docs = await documents(evs);
    const archive = join(dir, uniq('archive'), 'nested');
    const run = await runEventRetention(
      deps({ SVC_EVENT_RETENTION_FILE_ARCHIVE_ENABLED: true, SVC_EVENT_RETENTION_ARCHIVE_PATH: archive }),
    );
    expect(run).toMatchObject({ batchesCompleted: 2, eventsPurged: 4, failed: null });
    expect(await remainingEvents()).toEqual([]);
    expect(statSync(archive).mode & 0o777).toBe(0o700);
    const batches = await sql<{ batch_id: string; archived: boolean }[]>`
      select batch_id, archived_at is not null as archived from event_retention_batches order by created_at`;
    expect(readdirSync(archive).sort()).toEqual(batches.map((b) => `${b.batch_id}.jsonl`).sort());
    const lines: { retention_batch_id: string; archived_at: string; event: Record<string, unknown> }[] = [];
    for (const b of batches) {
      expect(b.archived).toBe(true);
      const file = join(archive, `${b.batch_id}.jsonl`);
      expect(lstatSync(file).mode & 0o777).toBe(0o600);
      const text = readFileSync(file, 'utf8');
      expect(text.endsWith('\n')).toBe(true);
      for (const line of text.trimEnd().split('\n')) {
        const parsed = JSON.parse(line) as (typeof lines)[number];
        expect(parsed.retention_batch_id).toBe(b.batch_id);
        expect(Number.isNaN(Date.parse(parsed.archived_at))).toBe(false);
        lines.push(parsed);
      }
    }
    expect(lines.map((l) => l.event)).toEqual(docs);
    expect(lines[0]!.event).toMatchObject({ entity_name: evs[0]!.name, event_id: evs[0]!.event_id, summary: 'made', after: { n: 1 } });
  });

  it('accepts an existing final file that matches the claim (archive written, completion interrupted)', async () => {
    await event(50);
    await event(45);
    const archive = join(dir, uniq('archive'));
    const batch = (await claimNewBatch(sql, new Date(Date.now() - 30 * DAY), 10, BATCH_LEASE_MS))!;
    const claimed = await sql<{ event_id: number; document: Record<string, unknown> }[]>`
      select event_id, document from event_retention_batch_events where batch_id = ${batch.batch_id} order by event_id`;
    const path = await archiveBatch(archive, batch.batch_id, claimed);
    const before = readFileSync(path, 'utf8');
    await releaseBatch(sql, batch, 'simulated crash');
    const run = await runEventRetention(
      deps({ SVC_EVENT_RETENTION_FILE_ARCHIVE_ENABLED: true, SVC_EVENT_RETENTION_ARCHIVE_PATH: archive }),
    );
    expect(run).toMatchObject({ batchesCompleted: 1, eventsPurged: 2, failed: null });
    expect(readFileSync(path, 'utf8')).toBe(before);
    expect(readdirSync(archive)).toEqual([`${batch.batch_id}.jsonl`]);
    const [row] = await sql<{ attempts: number }[]>`select attempts from event_retention_batches where batch_id = ${batch.batch_id}`;
    expect(row!.attempts).toBe(2);
  });

  it('refuses a mismatching existing file (claim and events kept); the next run gets the same batch', async () => {
    const evs = [await event(50), await event(45), await event(44)];
    const archive = join(dir, uniq('archive'));
    const cfg = deps({ SVC_EVENT_RETENTION_FILE_ARCHIVE_ENABLED: true, SVC_EVENT_RETENTION_ARCHIVE_PATH: archive });
    const batch = (await claimNewBatch(sql, new Date(Date.now() - 30 * DAY), 10, BATCH_LEASE_MS))!;
    await releaseBatch(sql, batch, 'simulated crash');
    mkdirSync(archive, { mode: 0o700 });
    const finalPath = join(archive, `${batch.batch_id}.jsonl`);

    const cases: [string, RegExp][] = [
      [`${JSON.stringify({ retention_batch_id: batch.batch_id, archived_at: 'x', event: {} })}\n`, /has 1 lines, the claim 3 events/],
      ['{"retention_batch_id":"other"}\n{}\n{}\n', /names another batch/],
      [
        (await documents(evs))
          .map((d, i) =>
            JSON.stringify({ retention_batch_id: batch.batch_id, archived_at: 'x', event: i === 1 ? { ...d, summary: 'changed' } : d }),
          )
          .join('\n'),
        /line 2 of the existing archive file does not match/,
      ],
    ];
    for (const [content, error] of cases) {
      writeFileSync(finalPath, content, { mode: 0o600 });
      const run = await runEventRetention(cfg);
      expect(run.failed).toEqual({ batchId: batch.batch_id, error: expect.stringMatching(error) });
      expect(run.eventsPurged).toBe(0);
      expect(await remainingEvents()).toEqual(evs.map((e) => e.name));
      expect(await openBatches()).toEqual([{ batch_id: batch.batch_id, last_error: expect.stringMatching(error), docs: 3 }]);
      expect(readFileSync(finalPath, 'utf8')).toBe(content);
    }

    rmSync(finalPath);
    const run = await runEventRetention(cfg);
    expect(run).toMatchObject({ batchesCompleted: 1, eventsPurged: 3, failed: null });
    expect(readdirSync(archive)).toEqual([`${batch.batch_id}.jsonl`]);
    expect(readFileSync(finalPath, 'utf8').trimEnd().split('\n')).toHaveLength(3);
    expect(await openBatches()).toEqual([]);
  });

  it('refuses a symlinked archive directory or final file, and a missing archive path', async () => {
    await event(50);
    const real = join(dir, uniq('real'));
    mkdirSync(real, { mode: 0o700 });
    const link = join(dir, uniq('link'));
    symlinkSync(real, link);
    const viaLink = await runEventRetention(
      deps({ SVC_EVENT_RETENTION_FILE_ARCHIVE_ENABLED: true, SVC_EVENT_RETENTION_ARCHIVE_PATH: link }),
    );
    expect(viaLink.failed?.error).toBe('the archive directory is a symbolic link');
    const [open] = await openBatches();
    const target = join(real, 'elsewhere.jsonl');
    writeFileSync(target, '');
    symlinkSync(target, join(real, `${open!.batch_id}.jsonl`));
    const fileLink = await runEventRetention(
      deps({ SVC_EVENT_RETENTION_FILE_ARCHIVE_ENABLED: true, SVC_EVENT_RETENTION_ARCHIVE_PATH: real }),
    );
    expect(fileLink.failed).toEqual({ batchId: open!.batch_id, error: 'the existing archive file is a symbolic link' });
    const noPath = await runEventRetention(deps({ SVC_EVENT_RETENTION_FILE_ARCHIVE_ENABLED: true }));
    expect(noPath.failed?.error).toMatch(/SVC_EVENT_RETENTION_ARCHIVE_PATH is not set/);
    expect(await remainingEvents()).toHaveLength(1);
    // with archival off the same batch completes
    expect(await runEventRetention(deps())).toMatchObject({ batchesCompleted: 1, eventsPurged: 1, failed: null });
    expect(readFileSync(target, 'utf8')).toBe('');
  });

  it('leaves a batch leased by another worker alone and claims nothing new meanwhile', async () => {
    await event(50);
    const batch = (await claimNewBatch(sql, new Date(Date.now() - 30 * DAY), 10, BATCH_LEASE_MS))!;
    await event(49);
    expect(await runEventRetention(deps())).toEqual({ deliveriesPurged: 0, batchesCompleted: 0, eventsPurged: 0, failed: null });
    expect(await remainingEvents()).toHaveLength(2);
    // once the lease has run out, the next run takes the same batch over, then claims the rest
    await sql`update event_retention_batches set locked_until = now() - interval '1 second' where batch_id = ${batch.batch_id}`;
    expect(await runEventRetention(deps())).toMatchObject({ batchesCompleted: 2, eventsPurged: 2, failed: null });
    const ids = await sql<{ batch_id: string }[]>`select batch_id from event_retention_batches order by created_at`;
    expect(ids[0]!.batch_id).toBe(batch.batch_id);
  });
});

describe('completeBatch', () => {
  it('refuses a stale claim token and a claimed event that gained an active delivery (nothing deleted)', async () => {
    const ev = await event(50);
    const batch = (await claimNewBatch(sql, new Date(Date.now() - 30 * DAY), 10, BATCH_LEASE_MS))!;
    await expect(completeBatch(sql, { ...batch, claim_token: '00000000-0000-4000-8000-000000000000' })).rejects.toBeInstanceOf(
      BatchNotOwned,
    );
    const test = await delivery(ev, 'pending', 0, 'test');
    await expect(completeBatch(sql, batch)).rejects.toBeInstanceOf(BatchProtected);
    expect(await remainingEvents()).toEqual([ev.name]);
    await sql`update event_deliveries set status = 'dead' where id = ${test}`;
    expect(await completeBatch(sql, batch)).toBe(1);
    expect(await remainingEvents()).toEqual([]);
    expect(await remainingDeliveries()).toEqual([]);
  });

  it('the events table still refuses deletes outside the purge', async () => {
    const ev = await event(50);
    await expect(sql`delete from events where id = ${ev.id}`).rejects.toThrow(/append-only/);
  });
});

describe('eventRetentionLoop', () => {
  it('does nothing while disabled; runs when enabled, then waits for the interval', async () => {
    await event(50);
    const off = deps({ SVC_EVENT_RETENTION_PURGE_ENABLED: false });
    await eventRetentionLoop.tick(off, new AbortController().signal);
    expect(await remainingEvents()).toHaveLength(1);
    const on = deps({ SVC_EVENT_RETENTION_PURGE_ENABLED: true, SVC_EVENT_RETENTION_PURGE_INTERVAL_SECONDS: 3600 });
    await eventRetentionLoop.tick(on, new AbortController().signal);
    expect(await remainingEvents()).toHaveLength(0);
    await event(50);
    await eventRetentionLoop.tick(on, new AbortController().signal);
    expect(await remainingEvents()).toHaveLength(1);
  });
});
