// Benchmarks: each case is timed in the same run as a baseline (GET /healthz through the whole
// HTTP stack, no database) and reported as a ratio to it, so results compare across machines.
// Uses SVC_DATABASE_URL when set, else an embedded PostgreSQL in a temporary directory.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createSql } from '../src/db/sql.ts';
import { migrate } from '../src/db/migrate.ts';
import { bootstrap } from '../src/db/bootstrap.ts';
import { tokenHashKey } from '../src/db/meta.ts';
import { createApp } from '../src/app.ts';

const ITER = Number(process.env.BENCH_ITERATIONS ?? 500);

async function time(fn: () => Promise<void>): Promise<number> {
  for (let i = 0; i < 20; i++) await fn();
  const start = process.hrtime.bigint();
  for (let i = 0; i < ITER; i++) await fn();
  return Number(process.hrtime.bigint() - start) / ITER / 1e3;
}

const tmp = process.env.SVC_DATABASE_URL ? undefined : await mkdtemp(join(tmpdir(), 'svc-bench-'));
const embedded = tmp ? await startEmbeddedPostgres(tmp) : undefined;
const baseUrl = process.env.SVC_DATABASE_URL ?? embedded!.url;
const dbName = `svc_bench_${Date.now()}`;
const admin = postgres(baseUrl, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database ${dbName}`);
const url = new URL(baseUrl);
url.pathname = `/${dbName}`;
const config = loadConfig({ SVC_DATABASE_URL: url.toString(), SVC_ADMIN_PASSWORD: 'bench-password' });
const sql = createSql(url.toString(), config);
try {
  await migrate(sql);
  await bootstrap(sql, config);
  const app = await createApp({ config, sql, log: pino({ level: 'silent' }), tokenKey: await tokenHashKey(sql, undefined), services: {} });
  const req = (method: string, path: string, init: { token?: string; body?: unknown } = {}) =>
    app.fetch(
      new Request(`http://bench.local${path}`, {
        method,
        headers: { ...(init.token ? { authorization: `Bearer ${init.token}` } : {}), 'content-type': 'application/json' },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      }),
    );
  const login = await req('POST', '/api/v0/auth/login', { body: { name: 'admin', password: 'bench-password' } });
  const { token } = (await login.json()) as { token: string };

  const baseline = await time(async () => void (await (await req('GET', '/healthz')).text()));
  const cases: [string, () => Promise<void>][] = [
    ['validateToken (auth + one UPDATE)', async () => void (await (await req('GET', '/api/v0/auth/validate', { token })).text())],
    [
      'login rejected by validation (400)',
      async () => void (await (await req('POST', '/api/v0/auth/login', { body: { name: 'x'.repeat(300), password: 'p' } })).text()),
    ],
  ];
  console.log(`baseline GET /healthz: ${baseline.toFixed(1)} µs/request (${ITER} iterations)`);
  for (const [name, fn] of cases) {
    const us = await time(fn);
    console.log(`${name}: ${(us / baseline).toFixed(2)}x baseline (${us.toFixed(1)} µs/request)`);
  }
} finally {
  await sql.end();
  await admin.unsafe(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  await embedded?.stop();
  if (tmp) await rm(tmp, { recursive: true, force: true });
}
