// The server bundle (dist/server/main.js) is rebuilt first. One unique database per test run: on SVC_DATABASE_URL / DATABASE_URL when set, else on an
// embedded PostgreSQL in a temporary directory (as root, wherever src/db/embedded.ts finds a place
// the postgres user can reach). Migrated once here; test files share it and
// isolate by unique names.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedDb } from '../src/db/embedded.ts';
import { createSql } from '../src/db/sql.ts';
import { migrate } from '../src/db/migrate.ts';
import { loadConfig } from '../src/config.ts';
import { bundle, SERVER_BUNDLE } from '../scripts/build-server.ts';

let embedded: EmbeddedDb | undefined;
let tmp: string | undefined;
let adminUrl = '';
let dbName = '';

export async function setup(project: TestProject): Promise<void> {
  // The tests that start real processes run the bundle, as deploy/*.service does: built from these sources.
  await bundle('src/main.ts', SERVER_BUNDLE);
  adminUrl = process.env.SVC_DATABASE_URL || process.env.DATABASE_URL || '';
  if (!adminUrl) {
    tmp = await mkdtemp(join(tmpdir(), 'svc-test-'));
    embedded = await startEmbeddedPostgres(tmp);
    adminUrl = embedded.url;
  }
  dbName = `svc_test_${Date.now()}_${process.pid}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${dbName}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  const sql = createSql(url.toString(), loadConfig({}));
  await migrate(sql);
  await sql.end();
  project.provide('dbUrl', url.toString());
}

export async function teardown(): Promise<void> {
  if (adminUrl && dbName && !process.env.SVC_TEST_KEEP_DB) {
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists ${dbName} with (force)`).catch(() => {});
    await admin.end();
  }
  await embedded?.stop();
  if (tmp) await rm(tmp, { recursive: true, force: true });
  // As root the cluster may live outside the temporary directory (src/db/embedded.ts).
  if (embedded && tmp && !embedded.clusterDir.startsWith(tmp + '/')) await rm(embedded.clusterDir, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    dbUrl: string;
  }
}
