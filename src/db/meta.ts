import { randomBytes } from 'node:crypto';
import type { Db } from './sql.ts';

/** The token hash key: SVC_TOKEN_HASH_KEY when set, else one generated once and kept here. */
export async function tokenHashKey(db: Db, configured: string | undefined): Promise<Buffer> {
  if (configured) return Buffer.from(configured, 'utf8');
  const fresh = randomBytes(32).toString('base64');
  await db`insert into meta_kv (key, value) values ('token_hash_key', ${fresh}) on conflict (key) do nothing`;
  const [row] = await db<{ value: string }[]>`select value from meta_kv where key = 'token_hash_key'`;
  return Buffer.from(row!.value, 'base64');
}
