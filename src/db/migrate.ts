import { readdir, readFile } from 'node:fs/promises';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from './sql.ts';

export const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'migrations');
const LOCK_KEY = 727_001;

/** Applies pending forward-only migrations under an advisory lock; returns the names applied. */
export async function migrate(sql: Sql, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${LOCK_KEY})`;
    await tx`create table if not exists schema_migrations (name text primary key, applied_at timestamptz not null default now())`;
    const done = new Set((await tx<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) continue;
      await tx.unsafe(await readFile(join(dir, file), 'utf8'));
      await tx`insert into schema_migrations (name) values (${file})`;
      applied.push(file);
    }
  });
  return applied;
}

/** True when every migration file has been applied. */
export async function isMigrated(sql: Sql, dir = MIGRATIONS_DIR): Promise<boolean> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f));
  const [row] = await sql<{ t: string | null }[]>`select to_regclass('schema_migrations')::text as t`;
  if (!row?.t) return false;
  const done = await sql<{ name: string }[]>`select name from schema_migrations`;
  const names = new Set(done.map((r) => r.name));
  return files.every((f) => names.has(f));
}

/** Migration files applied and pending, read without changing anything (no table is created). */
export async function migrationStatus(sql: Sql, dir = MIGRATIONS_DIR): Promise<{ applied: string[]; pending: string[] }> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  const [row] = await sql<{ t: string | null }[]>`select to_regclass('schema_migrations')::text as t`;
  const done = row?.t ? new Set((await sql<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name)) : new Set<string>();
  return { applied: files.filter((f) => done.has(f)), pending: files.filter((f) => !done.has(f)) };
}
