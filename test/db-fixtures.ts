// A database of a test file's own on the test server (for tests that restore, truncate or otherwise
// change the whole database): created empty or migrated like the shared one, dropped by drop().
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { inject } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createSql } from '../src/db/sql.ts';
import { migrate } from '../src/db/migrate.ts';

export interface OwnDatabase {
  name: string;
  url: string;
  /** The test server itself (its maintenance database). */
  serverUrl: string;
  drop(): Promise<void>;
}

export async function createDatabase(prefix: string, opts: { migrate?: boolean } = {}): Promise<OwnDatabase> {
  const server = new URL(inject('dbUrl'));
  const name = `${prefix}_${Date.now()}_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = postgres(server.toString(), { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  if (opts.migrate) {
    const sql = createSql(url.toString(), loadConfig({}));
    try {
      await migrate(sql);
    } finally {
      await sql.end();
    }
  }
  return {
    name,
    url: url.toString(),
    serverUrl: server.toString(),
    async drop() {
      const a = postgres(server.toString(), { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
      await a.end();
    },
  };
}
