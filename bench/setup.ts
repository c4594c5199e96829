// The app and database of one benchmark run: a fresh database on SVC_DATABASE_URL (or an embedded
// PostgreSQL in a temporary directory), migrated and bootstrapped, and the app called in-process
// through app.fetch (the whole HTTP stack except the socket). Fixtures that are not under
// measurement (principals, grants, tokens, bulk rows) go straight to SQL.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createSql, type Sql } from '../src/db/sql.ts';
import { migrate } from '../src/db/migrate.ts';
import { bootstrap } from '../src/db/bootstrap.ts';
import { tokenHashKey } from '../src/db/meta.ts';
import { insertToken } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import type { Permission } from '../src/domain/authz.ts';
import { createApp } from '../src/app.ts';
import type { Deps } from '../src/deps.ts';
import type { App } from '../src/http/contract.ts';

export const ADMIN_PASSWORD = 'bench-password';

export interface RequestInit {
  token?: string;
  body?: unknown;
  contentType?: string;
  query?: Record<string, string | number | boolean>;
}

export interface Bench {
  deps: Deps;
  sql: Sql;
  /**
   * One connection to the same database without a statement timeout, for seeding in bulk: the
   * service's pool has its SVC_DB_STATEMENT_TIMEOUT_MS (30 s), which a seed of hundreds of
   * thousands of rows, each through the history triggers, can outlast on a slow machine.
   */
  seed: postgres.Sql;
  adminToken: string;
  adminId: number;
  /** One request through the app; the body is read to the end. */
  request(method: string, path: string, init?: RequestInit): Promise<{ status: number; text: string; headers: Headers }>;
  /** A request that must answer `status` (anything else aborts the run: a benchmark of errors measures nothing). */
  expect(status: number, method: string, path: string, init?: RequestInit): Promise<{ text: string; headers: Headers }>;
  json<T>(status: number, method: string, path: string, init?: RequestInit): Promise<T>;
  /** A human in a new group holding `perms` on each collection, with an unscoped token. */
  principalWith(grants: [number, Permission[]][]): Promise<{ id: number; token: string }>;
  /** The app (for bench/served.ts). */
  app: App;
  close(): Promise<void>;
}

export const uniq = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

export async function startBench(): Promise<Bench> {
  const tmp = process.env.SVC_DATABASE_URL ? undefined : await mkdtemp(join(tmpdir(), 'svc-bench-'));
  const embedded = tmp ? await startEmbeddedPostgres(tmp) : undefined;
  const baseUrl = process.env.SVC_DATABASE_URL ?? embedded!.url;
  const dbName = `svc_bench_${Date.now()}`;
  const admin = postgres(baseUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${dbName}`);
  const url = new URL(baseUrl);
  url.pathname = `/${dbName}`;
  const config = loadConfig({ SVC_DATABASE_URL: url.toString(), SVC_ADMIN_PASSWORD: ADMIN_PASSWORD });
  const sql = createSql(url.toString(), config);
  const seed = postgres(url.toString(), { max: 1, onnotice: () => {}, connection: { statement_timeout: 0 } });
  const close = async () => {
    await Promise.all([sql.end(), seed.end()]);
    await admin.unsafe(`drop database if exists ${dbName} with (force)`);
    await admin.end();
    await embedded?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  };
  try {
    await migrate(sql);
    await bootstrap(sql, config);
    const deps: Deps = { config, sql, log: pino({ level: 'silent' }), tokenKey: await tokenHashKey(sql, undefined), services: {} };
    const app = await createApp(deps);

    const request: Bench['request'] = async (method, path, init = {}) => {
      const u = new URL(path, 'http://bench.local');
      for (const [k, v] of Object.entries(init.query ?? {})) u.searchParams.set(k, String(v));
      const headers: Record<string, string> = {};
      if (init.token) headers.authorization = `Bearer ${init.token}`;
      if (init.body !== undefined) headers['content-type'] = init.contentType ?? 'application/json';
      const res = await app.fetch(
        new Request(u, { method, headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) }),
      );
      return { status: res.status, text: await res.text(), headers: res.headers };
    };
    const expect: Bench['expect'] = async (status, method, path, init) => {
      const res = await request(method, path, init);
      if (res.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${res.status}: ${res.text.slice(0, 500)}`);
      return res;
    };
    const json: Bench['json'] = async <T>(status: number, method: string, path: string, init?: RequestInit) =>
      JSON.parse((await expect(status, method, path, init)).text) as T;

    const login = await json<{ token: string }>(200, 'POST', '/api/v0/auth/login', { body: { name: 'admin', password: ADMIN_PASSWORD } });
    const [me] = await sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;

    const principalWith: Bench['principalWith'] = async (grants) => {
      const [g] = await sql<{ id: number }[]>`insert into groups (name) values (${uniq('bench-g')}) returning id`;
      for (const [cid, ps] of grants) {
        await sql`insert into collection_permissions (collection_id, group_id, permission)
          select ${cid}, ${g!.id}, p from unnest(${ps}::text[]) p`;
      }
      const [p] = await sql<{ id: number }[]>`insert into principals (kind, name) values ('human', ${uniq('bench-u')}) returning id`;
      await sql`insert into users (principal_id) values (${p!.id})`;
      await sql`insert into group_members (group_id, principal_id) values (${g!.id}, ${p!.id})`;
      const raw = newRawToken();
      await insertToken(sql, { principalId: p!.id, hash: hashToken(deps.tokenKey, raw), expiresAt: new Date(Date.now() + 3600_000) });
      return { id: p!.id, token: raw };
    };

    return { deps, sql, seed, adminToken: login.token, adminId: me!.id, request, expect, json, principalWith, app, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** A collection created through the API (it also appends its audit event). */
export async function createCollection(b: Bench, name = uniq('bench-col')): Promise<number> {
  return (await b.json<{ id: number }>(201, 'POST', '/api/v1/collections', { token: b.adminToken, body: { name } })).id;
}

export async function createClass(b: Bench, collectionId: number, extra: Record<string, unknown> = {}): Promise<number> {
  const body = { name: uniq('bench-class'), collection_id: collectionId, ...extra };
  return (await b.json<{ id: number }>(201, 'POST', '/api/v1/classes', { token: b.adminToken, body })).id;
}

/**
 * `n` server-like objects in one INSERT: names in random order relative to ids (so a name sort is
 * not the id order), cpu 1..16, env prod/staging/dev, an IP, tags, a counter; every tenth
 * description mentions "production".
 */
export async function seedObjects(b: Bench, collectionId: number, classId: number, n: number): Promise<void> {
  await b.seed`
    insert into objects (name, description, collection_id, class_id, json_data)
    select 'srv-' || substr(md5(g::text), 1, 8) || '-' || g,
      'bench server ' || g || case when g % 10 = 0 then ' production' else '' end,
      ${collectionId}, ${classId},
      jsonb_build_object(
        'hostname', 'srv-' || g || '.example.net',
        'env', (array['prod', 'staging', 'dev'])[1 + g % 3],
        'metrics', jsonb_build_object('cpu', 1 + g % 16, 'mem_gb', 2 * (1 + g % 32)),
        'ip', '10.' || (g / 65536) % 256 || '.' || (g / 256) % 256 || '.' || g % 256,
        'tags', jsonb_build_array('rack-' || g % 40, case when g % 2 = 0 then 'even' else 'odd' end),
        'counter', 0)
    from generate_series(1, ${n}::int) g`;
}
