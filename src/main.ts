import { serve, type ServerType } from '@hono/node-server';
import { bind, ConfigError, loadConfig, type Config } from './config.ts';
import { createLogger } from './log.ts';
import { startEmbeddedPostgres, type EmbeddedDb } from './db/embedded.ts';
import { createSql, type Sql } from './db/sql.ts';
import { migrate } from './db/migrate.ts';
import { bootstrap } from './db/bootstrap.ts';
import { tokenHashKey } from './db/meta.ts';
import { createApp } from './app.ts';
import type { Deps } from './deps.ts';
import { startWorkers, type Workers } from './workers/index.ts';
import { closeLoginLimiter } from './services/login-limiter.ts';
import { closeTransports } from './sinks/index.ts';

// The embedded server, once started: stopped on shutdown and when start-up fails after it started.
let embedded: EmbeddedDb | undefined;

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
  const log = createLogger(cfg.SVC_LOG_LEVEL);
  let url = cfg.SVC_DATABASE_URL;
  if (!url) {
    log.info({ data_dir: cfg.SVC_DATA_DIR }, 'SVC_DATABASE_URL is not set: starting the embedded PostgreSQL');
    embedded = await startEmbeddedPostgres(cfg.SVC_DATA_DIR, (m) => log.debug({ component: 'embedded-postgres' }, m));
    url = embedded.url;
  }
  const sql: Sql = createSql(url, cfg);
  const applied = await migrate(sql);
  if (applied.length) log.info({ migrations: applied }, 'migrations applied');
  const boot = await bootstrap(sql, cfg);
  const deps: Deps = { config: cfg, sql, log, tokenKey: await tokenHashKey(sql, cfg.SVC_TOKEN_HASH_KEY), services: {} };

  let server: ServerType | undefined;
  const { host, port } = bind(cfg.SVC_BIND);
  if (cfg.SVC_RUNTIME_ROLE !== 'worker') {
    const app = await createApp(deps);
    server = serve({ fetch: app.fetch, hostname: host, port });
    await new Promise<void>((ok) => server!.once('listening', () => ok()));
  }
  const workers: Workers = cfg.SVC_RUNTIME_ROLE !== 'api' ? startWorkers(deps) : { stop: async () => {} };

  const base = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
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
  process.stdout.write(lines.join('\n') + '\n');

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const deadline = setTimeout(() => process.exit(1), 15_000);
    deadline.unref();
    await new Promise<void>((ok) => (server ? server.close(() => ok()) : ok()));
    await workers.stop();
    await closeTransports();
    await closeLoginLimiter(deps);
    await sql.end({ timeout: 5 });
    await embedded?.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

main().catch(async (err: unknown) => {
  console.error('start-up failed:', err instanceof Error ? err.message : err);
  await embedded?.stop().catch(() => {});
  process.exit(1);
});
