// GIN pending lists (#14): a worker merges the entries that writes leave in the pending lists of the
// GIN indexes (objects' JSON data and trigram indexes, events' related collections) into the
// indexes every SVC_GIN_PENDING_FLUSH_INTERVAL_MS, one process at a time, and only the indexes its
// role owns. On a database of this file's own: the service processes other tests start on the
// shared one flush it every second.
import pino from 'pino';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { createDatabase, type OwnDatabase } from './db-fixtures.ts';
import { collection, createClass, createObject } from './class-fixtures.ts';
import { flushGinPendingLists } from '../src/db/index-upkeep.ts';
import { startWorkers } from '../src/workers/index.ts';
import { ginPendingFlushLoop } from '../src/workers/index-upkeep.ts';
import { ginPendingPagesMerged } from '../src/metrics.ts';
import type { Deps } from '../src/deps.ts';

let db: OwnDatabase;
let t: TestApp;
let classId: number;
beforeAll(async () => {
  db = await createDatabase('svc_gin_flush', { migrate: true });
  t = await startTestApp({ SVC_DATABASE_URL: db.url });
  classId = (await createClass(t, await collection(t))).id;
}, 60_000);
afterAll(async () => {
  await t?.close();
  await db?.drop();
});

/** Objects created through the API: each leaves entries for the five GIN indexes of objects and its event's. */
async function write(n: number, tag: string): Promise<void> {
  for (let i = 0; i < n; i++) {
    await createObject(t, classId, { tag, host: `host-${i}`, metrics: { cpu: i % 8 } }, { description: uniq('rack row') });
  }
}

async function merged(): Promise<number> {
  return (await ginPendingPagesMerged.get()).values.reduce((sum, v) => sum + v.value, 0);
}

describe('GIN pending lists', () => {
  it('are merged into their indexes, which then hold nothing pending, and searches find every row', async () => {
    await flushGinPendingLists(t.deps.sql);
    await write(40, 'first');
    const first = await flushGinPendingLists(t.deps.sql);
    // objects: json_data, name, lower(name), description, lower(description); events: related collections
    expect(first).toMatchObject({ ran: true, indexes: 6 });
    expect(first.pages).toBeGreaterThan(0);
    expect(await flushGinPendingLists(t.deps.sql)).toEqual({ ran: true, indexes: 6, pages: 0 });
    const found = await t.request('GET', `/api/v1/classes/${classId}/objects`, {
      query: { json_data__equals: 'tag=first', name__contains: 'obj-', limit: 100 },
    });
    expect(found.status).toBe(200);
    expect((found.body as unknown[]).length).toBe(40);
  });

  it('is skipped, not waited for, while another process flushes', async () => {
    await write(5, 'held');
    const other = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      await other`select pg_advisory_lock(727330)`;
      expect(await flushGinPendingLists(t.deps.sql)).toEqual({ ran: false, indexes: 0, pages: 0 });
      await other`select pg_advisory_unlock(727330)`;
      const r = await flushGinPendingLists(t.deps.sql);
      expect(r).toMatchObject({ ran: true, indexes: 6 });
      expect(r.pages).toBeGreaterThan(0);
    } finally {
      await other.end();
    }
  });

  it('gives up until the next interval when an index stays locked (a restore, a migration), without an error', async () => {
    await write(3, 'locked');
    const other = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      const held = other.begin(async (tx) => {
        await tx`drop index objects_description_trgm_idx`;
        // (waiting instead would never end: the lock is this transaction's, and it waits for the flush)
        expect(await flushGinPendingLists(t.deps.sql)).toEqual({ ran: false, indexes: 0, pages: 0 });
        throw new Error('roll back');
      });
      await expect(held).rejects.toThrow('roll back');
    } finally {
      await other.end();
    }
    const r = await flushGinPendingLists(t.deps.sql);
    expect(r).toMatchObject({ ran: true, indexes: 6 });
  });

  it('leaves alone the indexes of a role the service does not own, without an error', async () => {
    const role = `svc_gin_reader_${uniq('r').slice(2)}`;
    const admin = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      // with a password: the embedded PostgreSQL asks for one (scram), the CI machine's trusts
      const password = uniq('pw');
      await admin.unsafe(`create role ${role} login password '${password}'`);
      const url = new URL(db.url);
      url.username = role;
      url.password = password;
      const reader = postgres(url.toString(), { max: 1, onnotice: () => {} });
      try {
        await write(3, 'unowned');
        expect(await flushGinPendingLists(reader)).toEqual({ ran: true, indexes: 0, pages: 0 });
        // the worker says so once, not at every interval
        const logs: string[] = [];
        const deps: Deps = {
          ...t.deps,
          sql: reader,
          log: pino({ level: 'info' }, { write: (line: string) => void logs.push(line) }),
          config: { ...t.deps.config, SVC_GIN_PENDING_FLUSH_INTERVAL_MS: 20 },
        };
        const loop = startWorkers(deps, [ginPendingFlushLoop]);
        await new Promise((ok) => setTimeout(ok, 400));
        await loop.stop();
        const said = logs.map((l) => JSON.parse(l) as { level: number; msg: string; worker?: string });
        expect(said.filter((l) => l.worker === 'gin-pending-flush').map((l) => [l.level, l.msg.slice(0, 58)])).toEqual([
          [40, 'the database role owns none of the GIN indexes, so their p'],
        ]);
      } finally {
        await reader.end();
      }
      const r = await flushGinPendingLists(t.deps.sql);
      expect(r.pages).toBeGreaterThan(0);
    } finally {
      await admin.unsafe(`drop role if exists ${role}`);
      await admin.end();
    }
  });

  it('the worker flushes every SVC_GIN_PENDING_FLUSH_INTERVAL_MS, and never at 0', async () => {
    const withInterval = (ms: number): Deps => ({ ...t.deps, config: { ...t.deps.config, SVC_GIN_PENDING_FLUSH_INTERVAL_MS: ms } });
    await flushGinPendingLists(t.deps.sql);

    await write(5, 'off');
    const beforeOff = await merged();
    const off = startWorkers(withInterval(0), [ginPendingFlushLoop]);
    await new Promise((ok) => setTimeout(ok, 500));
    await off.stop();
    // the worker merged nothing (the pages it left may still be merged by autovacuum, which the other
    // test files' writes to the same tables start, so they are not counted here)
    expect(await merged()).toBe(beforeOff);
    await flushGinPendingLists(t.deps.sql);

    const before = await merged();
    await write(5, 'on');
    const on = startWorkers(withInterval(50), [ginPendingFlushLoop]);
    try {
      const deadline = Date.now() + 10_000;
      while ((await merged()) === before && Date.now() < deadline) await new Promise((ok) => setTimeout(ok, 25));
    } finally {
      await on.stop();
    }
    expect(await merged()).toBeGreaterThan(before);
    expect(await flushGinPendingLists(t.deps.sql)).toEqual({ ran: true, indexes: 6, pages: 0 });
  });
});
