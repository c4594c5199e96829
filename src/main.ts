import type { Server } from 'node:http';
import { bind, ConfigError, loadConfig, type Config } from './config.ts';
import { createLogger, stdoutLogDestination } from './log.ts';
import { logLinesDropped } from './metrics.ts';
import { startEmbeddedPostgres, type EmbeddedDb } from './db/embedded.ts';
import { createSql, type Sql } from './db/sql.ts';
import { migrate, migrationStatus } from './db/migrate.ts';
import { bootstrap } from './db/bootstrap.ts';
import { tokenHashKey } from './db/meta.ts';
import { createApp } from './app.ts';
import { serveApp, serveOptionsOf } from './http/server.ts';
import { Lifecycle } from './http/lifecycle.ts';
import type { Deps } from './deps.ts';
import { sleep, startWorkers, type Workers } from './workers/index.ts';
import { closeLoginLimiter, loginLimiter } from './services/login-limiter.ts';
import { closeTokenCache } from './services/token-cache.ts';
import { RedisLoginLimiter } from './services/login-limiter-redis.ts';
import { closeTransports } from './sinks/index.ts';
import { serveMetrics } from './http/metrics-listener.ts';

// The embedded server, once started: stopped on shutdown and when start-up fails after it started.
let embedded: EmbeddedDb | undefined;
// Set by the first stop signal; start-up steps still under way then end quietly.
let stopping = false;

/** What this process does about migrations at start (SVC_MIGRATE; auto: only api processes wait). */
function migrationMode(cfg: Pick<Config, 'SVC_MIGRATE' | 'SVC_RUNTIME_ROLE'>): 'apply' | 'wait' {
  if (cfg.SVC_MIGRATE !== 'auto') return cfg.SVC_MIGRATE;
  return cfg.SVC_RUNTIME_ROLE === 'api' ? 'wait' : 'apply';
}

async function main(): Promise<void> {
  let cfg: Config;
  try {
    cfg = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`configuration error: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(
    cfg.SVC_LOG_LEVEL,
    stdoutLogDestination(() => logLinesDropped.inc()),
  );
  // A stop requested while the embedded PostgreSQL starts ends the process at once; the server,
  // started or starting, is told to stop as the process exits (src/db/embedded.ts).
  let shutdown = async (signal: string): Promise<void> => {
    stopping = true;
    log.info({ signal }, 'stopped during start-up');
    process.exit(0);
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void shutdown(signal));
  let url = cfg.SVC_DATABASE_URL;
  if (!url) {
    log.info({ data_dir: cfg.SVC_DATA_DIR }, 'SVC_DATABASE_URL is not set: starting the embedded PostgreSQL');
    embedded = await startEmbeddedPostgres(cfg.SVC_DATA_DIR, (m) => log.debug({ component: 'embedded-postgres' }, m));
    if (embedded.notice) log.warn({ cluster_dir: embedded.clusterDir }, embedded.notice);
    url = embedded.url;
  }
  // A worker serves no list pages: no list pool (a read planned for its values runs in a transaction there).
  const sql: Sql = createSql(url, cfg.SVC_RUNTIME_ROLE === 'worker' ? Object.assign({}, cfg, { SVC_DB_LIST_POOL_MAX: 0 }) : cfg);
  const life = new Lifecycle();
  const startup = new AbortController();
  const { host, port } = bind(cfg.SVC_BIND);
  const base = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  let server: Server | undefined;
  let metricsServer: Server | undefined;
  let workers: Workers | undefined;
  // the services the app and the workers registered (the login limiter), once built
  const built: { deps?: Deps } = {};

  // From here on a stop drains what runs, whatever start-up reached. Every step runs even when one
  // before it fails, so the embedded PostgreSQL is always stopped, and stopped last.
  shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    life.stop();
    startup.abort();
    log.info({ signal, drain_ms: cfg.SVC_SHUTDOWN_DRAIN_MS }, 'shutting down');
    const deadline = setTimeout(
      () => {
        log.error('shutdown did not finish in time');
        process.exit(1);
      },
      Math.max(cfg.SVC_SHUTDOWN_DRAIN_MS, 10_000) + 20_000,
    );
    deadline.unref();
    let code = 0;
    const run = async (name: string, step: () => Promise<unknown>) => {
      try {
        await step();
      } catch (err) {
        code = 1;
        log.error({ err, step: name }, 'shutdown step failed');
      }
    };
    // HTTP and the workers wind down side by side: requests drain within SVC_SHUTDOWN_DRAIN_MS, the
    // workers stop claiming at once, running tasks get their grace period, deliveries in flight are
    // released; both still need the pool.
    await Promise.all([
      run('http server', async () => {
        if (!server) return;
        const cut = await life.drain(server, cfg.SVC_SHUTDOWN_DRAIN_MS);
        if (cut > 0)
          log.warn({ requests: cut, drain_ms: cfg.SVC_SHUTDOWN_DRAIN_MS }, 'requests still in flight were cut at the drain bound');
      }),
      run('workers', async () => workers?.stop()),
    ]);
    await run('metrics listener', async () => {
      if (!metricsServer) return;
      const closed = new Promise<void>((ok) => metricsServer!.close(() => ok()));
      metricsServer.closeAllConnections();
      await closed;
    });
    await run('transports', () => closeTransports());
    if (built.deps) await run('login limiter', () => closeLoginLimiter(built.deps!));
    if (built.deps) await run('token cache', () => closeTokenCache(built.deps!));
    await run('database pool', () => sql.end({ timeout: 5 }));
    await run('embedded PostgreSQL', async () => embedded?.stop());
    process.exit(code);
  };

  if (cfg.SVC_RUNTIME_ROLE !== 'worker') {
    // Listening before the schema is ready: /healthz answers, /readyz says 503 until it is.
    server = serveApp(life.front(), host, port, serveOptionsOf(cfg)) as Server;
    life.track(server);
    await new Promise<void>((ok, fail) => {
      server!.once('listening', () => ok());
      server!.once('error', fail);
    });
  }

  if (cfg.SVC_METRICS_BIND) {
    // scrapable from the start (svc_database_up says whether the database answers yet)
    const m = bind(cfg.SVC_METRICS_BIND, 'SVC_METRICS_BIND');
    metricsServer = await serveMetrics({ config: cfg, sql }, m.host, m.port);
    log.info({ bind: cfg.SVC_METRICS_BIND }, 'metrics listener (GET /metrics) started');
  }

  const mode = migrationMode(cfg);
  if (mode === 'apply') {
    const applied = await migrate(sql);
    if (applied.length) log.info({ migrations: applied }, 'migrations applied');
  } else {
    await waitForMigrations(sql, life, log, startup.signal, server ? base : undefined);
  }
  if (stopping) return;
  const boot = await bootstrap(sql, cfg);
  const deps: Deps = { config: cfg, sql, log, tokenKey: await tokenHashKey(sql, cfg.SVC_TOKEN_HASH_KEY), services: {} };
  built.deps = deps;
  if (server) {
    const app = await createApp(deps);
    // Shared login limits from the first login on: a limiter still connecting to Redis would admit
    // logins under this process's own counts (its fallback for an unreachable Redis).
    const limiter = loginLimiter(deps);
    if (limiter instanceof RedisLoginLimiter && !(await limiter.ready())) {
      log.warn("Redis (SVC_LOGIN_RATE_LIMIT_REDIS_URL) is not reachable: login limits are this process's own until it is");
    }
    life.serve(app);
  }
  if (stopping) return;
  if (cfg.SVC_RUNTIME_ROLE !== 'api') workers = startWorkers(deps);

  const lines = [`Inventory Data Service (role ${cfg.SVC_RUNTIME_ROLE})`];
  if (server) {
    lines.push(`  listening on  ${base}`, `  API reference ${base}/docs`);
    if (boot.generatedPassword) {
      lines.push(`  admin password (generated now, shown once; set SVC_ADMIN_PASSWORD to choose it): ${boot.generatedPassword}`);
    }
    lines.push(
      `  log in:       curl -s -X POST ${base}/api/v0/auth/login -H 'content-type: application/json' \\`,
      `                  -d '{"name":"admin","password":"<admin password>"}'`,
    );
  }
  if (embedded) lines.push(`  database      embedded PostgreSQL, data in ${embedded.clusterDir}`);
  lines.push(`  stop with     Ctrl-C or SIGTERM to process ${process.pid}`);
  process.stdout.write(lines.join('\n') + '\n');
}

/**
 * Waits until every migration is applied (by `bin/svc migrate` or a process that applies them),
 * retrying while the database is unreachable; each change of the reason is logged once.
 */
async function waitForMigrations(
  sql: Sql,
  life: Lifecycle,
  log: Deps['log'],
  signal: AbortSignal,
  listening: string | undefined,
): Promise<void> {
  let said = '';
  while (!signal.aborted) {
    let reason: string;
    try {
      const { pending } = await migrationStatus(sql);
      if (pending.length === 0) return;
      reason = `waiting for the database migrations (${pending.length} pending): run bin/svc migrate, or start a worker process`;
    } catch (err) {
      reason = `waiting for the database: ${err instanceof Error ? err.message : String(err)}`;
    }
    life.startingMessage = reason;
    if (reason !== said) {
      log.warn({ listening }, reason);
      said = reason;
    }
    await sleep(1000, signal);
  }
}

main().catch(async (err: unknown) => {
  // a stop during start-up ends its steps with errors of their own (the pool closes under them)
  if (stopping) return;
  console.error('start-up failed:', err instanceof Error ? err.message : err);
  await embedded?.stop().catch(() => {});
  process.exit(1);
});
