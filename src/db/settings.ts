import type { Db, TransactionSql } from './sql.ts';

/** A principal's settings document and its own revision (separate from the principal's revision). */
export interface SettingsRow {
  id: number;
  name: string;
  settings: Record<string, unknown>;
  settings_revision: number;
}

export async function findSettings(db: Db, principalId: number): Promise<SettingsRow | undefined> {
  const [row] = await db<SettingsRow[]>`select id, name, settings, settings_revision from principals where id = ${principalId}`;
  return row;
}

/**
 * The settings with the principal row locked: the per-principal lock every settings mutation
 * takes. "No key update" is enough (the key never changes) and does not block foreign-key checks
 * of concurrent token or membership inserts.
 */
export async function lockSettings(tx: TransactionSql, principalId: number): Promise<SettingsRow | undefined> {
  const [row] = await tx<SettingsRow[]>`
    select id, name, settings, settings_revision from principals where id = ${principalId} for no key update`;
  return row;
}

/**
 * Stores a new document and advances the settings revision, unless it equals the stored one as
 * jsonb (then nothing is written and undefined is returned: a no-op).
 */
export async function writeSettings(
  tx: TransactionSql,
  principalId: number,
  doc: Record<string, unknown>,
): Promise<SettingsRow | undefined> {
  const [row] = await tx<SettingsRow[]>`
    with n as (select ${tx.json(doc as never)}::jsonb as doc)
    update principals p set settings = n.doc, settings_revision = p.settings_revision + 1
    from n
    where p.id = ${principalId} and p.settings is distinct from n.doc
    returning p.id, p.name, p.settings, p.settings_revision`;
  return row;
}
