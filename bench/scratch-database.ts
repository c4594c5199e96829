// A database of a benchmark's own: on the server of SVC_DATABASE_URL when it is set, else on an
// embedded PostgreSQL in a temporary directory; created empty, dropped (and the embedded server
// stopped, its directory removed) by drop(). Used by bench/throughput.ts and bench/pending-lists.ts.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';

export interface ScratchDatabase {
  url: string;
  /** A connection to the server itself (its maintenance database). */
  server: postgres.Sql;
  /** Whether the server is an embedded PostgreSQL started for this database. */
  embedded: boolean;
  /** Drops the database, and stops the embedded server; safe to call more than once. */
  drop(): Promise<void>;
}

/** A new empty database named `<prefix>_<time>`. */
export async function scratchDatabase(prefix: string): Promise<ScratchDatabase> {
  let base = process.env.SVC_DATABASE_URL;
  let tmp: string | undefined;
  const embedded = base ? undefined : await startEmbeddedPostgres((tmp = await mkdtemp(join(tmpdir(), `${prefix}-`))));
  base ??= embedded!.url;
  const name = `${prefix}_${Date.now()}`;
  const server = postgres(base, { max: 1, onnotice: () => {} });
  await server.unsafe(`create database ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  let dropping: Promise<void> | undefined;
  return {
    url: url.toString(),
    server,
    embedded: embedded !== undefined,
    drop() {
      dropping ??= (async () => {
        await server.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
        await server.end({ timeout: 5 });
        await embedded?.stop();
        if (tmp) await rm(tmp, { recursive: true, force: true });
      })();
      return dropping;
    },
  };
}
