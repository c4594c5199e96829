import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inject } from 'vitest';
import pino from 'pino';
import { loadConfig, type Config } from '../src/config.ts';
import { createSql, listPoolOf, type Sql } from '../src/db/sql.ts';
import { bootstrap } from '../src/db/bootstrap.ts';
import { tokenHashKey } from '../src/db/meta.ts';
import { createApp } from '../src/app.ts';
import { serveApp, serveOptionsOf } from '../src/http/server.ts';
import type { App } from '../src/http/contract.ts';
import type { Deps } from '../src/deps.ts';
import { checkResponse, decodedText, type CheckedResponse } from './contract-check.ts';

export const ADMIN_PASSWORD = 'test-admin-password';

/** A test app served on a real socket, as main.ts serves it (serveApp with the app's settings). */
export interface Listening {
  server: Server;
  port: number;
  /** Closes the listener and every connection still open. */
  close(): Promise<void>;
}

export async function listen(t: Pick<TestApp, 'app' | 'deps'>): Promise<Listening> {
  const server = serveApp(t.app, '127.0.0.1', 0, serveOptionsOf(t.deps.config)) as Server;
  await new Promise<void>((ok) => server.once('listening', () => ok()));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}

export interface RequestOptions {
  token?: string | null;
  body?: unknown;
  /** Sent as-is (no JSON encoding) when given. */
  rawBody?: string;
  contentType?: string;
  headers?: Record<string, string>;
  query?: Record<string, string | number | boolean | (string | number)[]>;
}

export interface TestApp {
  deps: Deps;
  app: App;
  adminToken: string;
  request(method: string, path: string, opts?: RequestOptions): Promise<CheckedResponse>;
  login(name: string, password: string, identityScope?: string): Promise<string>;
  close(): Promise<void>;
}

/** A unique name for test isolation (files run in parallel against one database). */
export function uniq(prefix = 't'): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

// The token cache is off in tests unless a test (or SVC_TOKEN_CACHE_SIZE in the environment) turns
// it on: many tests change tokens, memberships and service accounts with plain SQL and use the token
// at once, which a cache learns of only by NOTIFY, a moment later (test/token-cache.test.ts covers it).
export function testConfig(overrides: Partial<Config> = {}): Config {
  return loadConfig(
    {
      SVC_TOKEN_CACHE_SIZE: '0',
      ...process.env,
      SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
      SVC_DATABASE_URL: inject('dbUrl'),
      SVC_LOG_LEVEL: 'silent',
    },
    overrides,
  );
}

/** The app on the per-run test database, with every response checked against openapi.yaml. */
export async function startTestApp(overrides: Partial<Config> = {}): Promise<TestApp> {
  const config = testConfig(overrides);
  const sql = createSql(config.SVC_DATABASE_URL!, config);
  await bootstrap(sql, config);
  const deps: Deps = {
    config,
    sql,
    log: pino({ level: 'silent' }),
    tokenKey: await tokenHashKey(sql, config.SVC_TOKEN_HASH_KEY),
    services: {},
  };
  const app = await createApp(deps);

  async function request(method: string, path: string, opts: RequestOptions = {}): Promise<CheckedResponse> {
    const url = new URL(path, 'http://test.local');
    for (const [k, v] of Object.entries(opts.query ?? {})) {
      if (Array.isArray(v)) for (const item of v) url.searchParams.append(k, String(item));
      else url.searchParams.set(k, String(v));
    }
    const headers = new Headers(opts.headers);
    const token = opts.token === undefined ? t.adminToken : opts.token;
    if (token) headers.set('authorization', `Bearer ${token}`);
    let body: string | undefined;
    if (opts.rawBody !== undefined) body = opts.rawBody;
    else if (opts.body !== undefined) body = JSON.stringify(opts.body);
    if (body !== undefined) headers.set('content-type', opts.contentType ?? 'application/json');
    const res = await app.fetch(new Request(url, { method, headers, body }));
    const text = await decodedText(res);
    return checkResponse(method, url.pathname, res.status, res.headers, text);
  }

  async function login(name: string, password: string, identityScope?: string): Promise<string> {
    const res = await request('POST', '/api/v0/auth/login', {
      token: null,
      body: { name, password, ...(identityScope ? { identity_scope: identityScope } : {}) },
    });
    if (res.status !== 200) throw new Error(`login of ${name} failed: ${res.status} ${res.text}`);
    return (res.body as { token: string }).token;
  }

  const t: TestApp = {
    deps,
    app,
    adminToken: '',
    request,
    login,
    close: () => sql.end({ timeout: 5 }),
  };
  t.adminToken = await login('admin', ADMIN_PASSWORD);
  return t;
}

/** The audit events of one entity, oldest first. */
export async function eventsOf(t: TestApp, entityType: string, entityId: number) {
  return t.deps.sql<
    {
      action: string;
      entity_name: string | null;
      collection_id: number | null;
      actor_user_id: number | null;
      before: unknown;
      after: unknown;
      before_revision: number | null;
      after_revision: number | null;
      metadata: Record<string, unknown>;
    }[]
  >`select action, entity_name, collection_id, actor_user_id, before, after, before_revision, after_revision, metadata
    from events where entity_type = ${entityType} and entity_id = ${entityId} order by id`;
}

/** A statement as postgres.js wrote it (its `debug` hook): the text and its parameters. */
export interface SentStatement {
  text: string;
  parameters: unknown[];
}

/**
 * The plan of a statement the service sent, explained with its parameters and planned for their
 * values (as the list pool's sessions plan it, and a prepared statement's custom plan).
 */
export function planOfSent(sql: Sql, sent: SentStatement): Promise<string> {
  return sql.begin(async (tx) => {
    await tx`set local plan_cache_mode = force_custom_plan`;
    const rows = await tx.unsafe(`explain ${sent.text}`, sent.parameters as never[]);
    return rows.map((r) => r['QUERY PLAN'] as string).join('\n');
  });
}

/** What `run` returned, and the statements `sql` and its list pool wrote while it ran. */
export async function statementsDuring<T>(sql: Sql, run: () => Promise<T>): Promise<{ result: T; statements: SentStatement[] }> {
  const statements: SentStatement[] = [];
  const pools = [sql, listPoolOf(sql)].flatMap((p) => (p ? [p.options as unknown as { debug: unknown }] : []));
  for (const o of pools) o.debug = (_c: number, text: string, parameters: unknown[]) => statements.push({ text, parameters });
  try {
    return { result: await run(), statements };
  } finally {
    for (const o of pools) o.debug = false;
  }
}
