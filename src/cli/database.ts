// Which PostgreSQL the command line works on: SVC_DATABASE_URL (or DATABASE_URL) when set, else
// the embedded database of SVC_DATA_DIR. When a server already runs on that data directory (its
// postmaster.pid names a live process) the command connects to it, with the port from that file
// and the password the service keeps in <data dir>/postgres.password; only otherwise does it start
// the embedded server itself, and stop it when the command ends.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Config } from '../config.ts';
import { startEmbeddedPostgres } from '../db/embedded.ts';
import { Failure } from './errors.ts';

export interface Database {
  url: string;
  /** Where the database is, for people (never the URL: it may hold a password). */
  source: string;
  /** Stops what the command started (the embedded server), if anything. */
  stop(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to another user (the postgres user, when run as root).
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The URL of a server already running on the embedded data directory, or null. */
export async function runningEmbeddedUrl(dataDir: string): Promise<string | null> {
  const root = resolve(dataDir);
  const pidFile = join(root, 'postgres', 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  // Lines: pid, data directory, start time, port, socket directory, listen address, …
  const lines = (await readFile(pidFile, 'utf8')).split('\n');
  const pid = Number(lines[0]?.trim());
  const port = Number(lines[3]?.trim());
  if (!Number.isInteger(pid) || pid < 1 || !alive(pid)) return null;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Failure(`${pidFile} names no port; is the server still starting?`);
  const pwFile = join(root, 'postgres.password');
  if (!existsSync(pwFile)) throw new Failure(`a PostgreSQL server runs on ${root} but ${pwFile} is missing`);
  const password = (await readFile(pwFile, 'utf8')).trim();
  // The first listen address (the embedded server listens on 127.0.0.1 only).
  const listen = lines[5]?.trim().split(/[\s,]+/)[0] ?? '';
  const host = listen === '' || listen === '*' ? '127.0.0.1' : listen.includes(':') ? `[${listen}]` : listen;
  return `postgres://postgres:${encodeURIComponent(password)}@${host}:${port}/postgres`;
}

export async function openDatabase(cfg: Config, debug: (msg: string) => void): Promise<Database> {
  if (cfg.SVC_DATABASE_URL) return { url: cfg.SVC_DATABASE_URL, source: 'SVC_DATABASE_URL', stop: async () => {} };
  const root = resolve(cfg.SVC_DATA_DIR);
  const running = await runningEmbeddedUrl(root);
  if (running) return { url: running, source: `the running embedded PostgreSQL of ${root}`, stop: async () => {} };
  const embedded = await startEmbeddedPostgres(root, debug);
  return { url: embedded.url, source: `the embedded PostgreSQL of ${root} (started for this command)`, stop: () => embedded.stop() };
}
