// Restores: SQL only. Staging (a dry run of every section against copies of the real tables, then
// the stage row), and applying a staged document: every backed-up table is emptied and refilled
// from the document in one transaction, transient tables are cleared, identity sequences move
// past the restored ids, password hashes of identities that survive are carried over, and the
// bootstrap administrator is kept able to log in.
import type { Db, TransactionSql } from './sql.ts';
import { appendEvent } from './events.ts';
import { savepoint } from './tx.ts';
import type { Actor } from '../domain/actor.ts';
import type { Fragment } from './list.ts';
import type { ErrorDetail } from '../domain/errors.ts';
import { ENTITY_HISTORY, EXCLUDED_TABLES, SECTIONS, type BackupDocument, type BackupFormat } from '../domain/backup-format.ts';

export interface StageRow {
  id: number;
  status: 'validated' | 'confirmed' | 'succeeded' | 'failed' | 'expired';
  sha256: string;
  capability_hash: Buffer;
  backup_version: BackupFormat;
  item_counts: Record<string, number>;
  created_by: number;
  confirmed_by: number | null;
  created_at: Date;
  expires_at: Date;
  confirmed_at: Date | null;
  finished_at: Date | null;
  error: string | null;
  /** expires_at has passed (a validated stage can no longer be confirmed). */
  expired: boolean;
}

function stageColumns(db: Db) {
  return db`id, status, sha256, capability_hash, backup_version, item_counts, created_by, confirmed_by, created_at, expires_at,
    confirmed_at, finished_at, error, (expires_at <= now()) as expired`;
}

/** Validated stages past their expiry become `expired` and drop their document. */
export async function expireStages(db: Db): Promise<void> {
  await db`update restore_stages set status = 'expired', document = null where status = 'validated' and expires_at <= now()`;
}

const CHECK_PREFIX = 'svc_restore_check_';

function publicPgMessage(err: unknown): string {
  const e = err as { message?: string; detail?: string };
  const text = `${e.message ?? 'the rows are invalid'}${e.detail ? ` (${e.detail})` : ''}`;
  return text.replaceAll(CHECK_PREFIX, '');
}

/**
 * The dry run of a restore: inserts every section into a temporary copy of its table (types,
 * NOT NULL, CHECK and unique constraints, no foreign keys: the document's links are checked in
 * src/domain/backup-format.ts). Nothing real is touched; the copies vanish with the transaction.
 * Returns one detail per failing section.
 */
export async function dryRunDocument(tx: TransactionSql, doc: BackupDocument): Promise<ErrorDetail[]> {
  const details: ErrorDetail[] = [];
  const sections = [
    ...SECTIONS.map((s) => ({ s, path: `body.${s.part}.${s.section}`, rows: (s.part === 'state' ? doc.state : doc.history)?.[s.section] })),
    // Entity versions: the table's checks, and each version's valid_to against the next version.
    { s: ENTITY_HISTORY, path: `body.${ENTITY_HISTORY.section}`, rows: doc.entity_history },
  ];
  for (const { s, path, rows = [] } of sections) {
    if (rows.length === 0) continue;
    const copy = `${CHECK_PREFIX}${s.table}`;
    const fields = [...s.fields];
    const versions = s === ENTITY_HISTORY;
    try {
      await savepoint(tx, async (sp) => {
        await sp`create temp table ${sp(copy)} (like ${sp(s.table)} including defaults including constraints including indexes including identity)
          on commit drop`;
        // The documents' valid_to, which the table does not store (entity_versions derives it).
        if (versions) await sp`alter table ${sp(copy)} add column valid_to timestamptz`;
        await sp`insert into ${sp(copy)} (${sp(fields)}) overriding system value
          select ${sp(fields)} from jsonb_populate_recordset(null::${sp(copy)}, ${sp.json(rows as never)}::jsonb)`;
      });
    } catch (err) {
      if (!(err && typeof err === 'object' && 'code' in err)) throw err;
      details.push({ path, message: publicPgMessage(err) });
      continue;
    }
    if (versions) {
      const broken = await brokenInterval(tx, copy);
      if (broken) {
        const i = rows.findIndex((r) => (r as { id?: unknown }).id === broken.id);
        details.push({ path: `${path}.${i}.valid_to`, message: broken.message });
      }
    }
  }
  return details;
}

/**
 * The first version (by id) in `copy` (a dry run's copy of the entity versions) whose valid_to is
 * not what entity_versions would derive for it: the valid_from of the entity's next version, null
 * for its last; and never before its own valid_from (so valid_from never decreases along an
 * entity's versions, which the as-of read relies on).
 */
async function brokenInterval(tx: TransactionSql, copy: string): Promise<{ id: number; message: string } | undefined> {
  const [row] = await tx<{ id: number; next_id: number | null; next_from: string | null; backwards: boolean }[]>`
    select id::float8 as id, next_id::float8 as next_id,
      to_char(next_from at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as next_from, (valid_to < valid_from) as backwards
    from (
      select id, valid_from, valid_to,
        lead(id) over w as next_id, lead(valid_from) over w as next_from
      from ${tx(copy)}
      window w as (partition by entity_kind, entity_id order by id)
    ) x
    where valid_to is distinct from next_from or valid_to < valid_from
    order by id limit 1`;
  if (!row) return undefined;
  if (row.backwards) return { id: row.id, message: 'is before valid_from (a version ends after it begins)' };
  if (row.next_id === null) return { id: row.id, message: 'must be null: this is the newest version of its entity (the current one)' };
  return {
    id: row.id,
    message: `must be ${row.next_from}, the valid_from of the next version of its entity (id ${row.next_id}): a version is current until the next one begins`,
  };
}

export interface NewStage {
  sha256: string;
  capabilityHash: Buffer;
  format: BackupFormat;
  document: BackupDocument;
  createdBy: number;
  ttlMinutes: number;
}

export async function insertStage(tx: TransactionSql, s: NewStage): Promise<StageRow> {
  const [row] = await tx<StageRow[]>`
    insert into restore_stages (sha256, capability_hash, backup_version, document, item_counts, created_by, expires_at)
    values (${s.sha256}, ${s.capabilityHash}, ${s.format}, ${tx.json(s.document as never)}, ${tx.json(s.document.manifest.item_counts)},
      ${s.createdBy}::int, now() + make_interval(mins => ${s.ttlMinutes}::int))
    returning ${stageColumns(tx)}`;
  return row!;
}

export async function findStage(db: Db, id: number): Promise<StageRow | undefined> {
  const [row] = await db<StageRow[]>`select ${stageColumns(db)} from restore_stages where id = ${id}::int`;
  return row;
}

export async function lockStage(tx: TransactionSql, id: number): Promise<StageRow | undefined> {
  const [row] = await tx<StageRow[]>`select ${stageColumns(tx)} from restore_stages where id = ${id}::int for update`;
  return row;
}

/** Ends a stage: its outcome, who confirmed it, and the document dropped. */
export async function finishStage(
  tx: TransactionSql,
  id: number,
  f: { status: 'succeeded' | 'failed'; error: string | null; confirmedBy: number },
): Promise<StageRow> {
  const [row] = await tx<StageRow[]>`
    update restore_stages set status = ${f.status}, error = ${f.error}, confirmed_by = ${f.confirmedBy}::int,
      confirmed_at = now(), finished_at = now(), document = null
    where id = ${id}::int
    returning ${stageColumns(tx)}`;
  return row!;
}

/** Try-lock of RESTORE_LOCK (src/db/backups.ts) for the transaction; false when another restore holds it. */
export async function tryLockRestore(tx: TransactionSql, key: readonly [number, number]): Promise<boolean> {
  const [row] = await tx<{ ok: boolean }[]>`select pg_try_advisory_xact_lock(${key[0]}, ${key[1]}) as ok`;
  return row?.ok ?? false;
}

export interface AdminIdentity {
  group: string;
  scope: string;
  /** Argon2id hash of SVC_ADMIN_PASSWORD, used only when the admin had no password to carry. */
  fallbackPasswordHash: () => Promise<string | null>;
}

export interface ApplyResult {
  /** Restored humans that kept the password they had before the restore. */
  passwordsCarried: number;
  /** What had to be re-created so that the bootstrap administrator can still log in. */
  adminRepairs: string[];
}

/**
 * Replaces all application data with the staged document, inside the caller's transaction.
 * Rows are deleted (not truncated: a backup's snapshot running meanwhile keeps seeing the old
 * rows) in reverse section order and inserted in section order, one statement per section,
 * straight from the stored document. Tables marked `clear` lose every row (tokens, approvals,
 * transient delivery scheduling; the fan-out queue that restored events fill is cleared too).
 */
export async function applyStage(tx: TransactionSql, stageId: number, actor: Actor, admin: AdminIdentity): Promise<ApplyResult> {
  const cleared = EXCLUDED_TABLES.filter((t) => t.onRestore === 'clear').map((t) => t.table);
  // Writers wait until the restore commits (readers, backups included, go on): nothing written
  // meanwhile can survive next to the restored data.
  const tables = [...cleared, ...SECTIONS.map((s) => s.table)];
  const list = tables.slice(1).reduce<Fragment>((acc, t) => tx`${acc}, ${tx(t)}` as Fragment, tx`${tx(tables[0]!)}` as Fragment);
  await tx`lock table ${list} in exclusive mode`;
  // The event stream's append-only trigger admits deletes only with this flag set.
  await tx`select set_config('svc.event_purge', 'on', true)`;
  // Password hashes of today's humans, kept inside the database for the carry-over below.
  await tx`
    create temp table svc_restore_passwords on commit drop as
    select p.id, p.name, p.identity_scope, u.password_hash
    from principals p join users u on u.principal_id = p.id
    where p.kind = 'human' and u.password_hash is not null`;

  for (const t of cleared) await tx`delete from ${tx(t)}`;
  for (const s of [...SECTIONS].reverse()) await tx`delete from ${tx(s.table)}`;

  for (const s of SECTIONS) {
    const fields = s.fields as string[];
    const path = [s.part, s.section];
    await tx`
      insert into ${tx(s.table)} (${tx(fields)}) overriding system value
      select ${tx(fields)} from jsonb_populate_recordset(null::${tx(s.table)},
        coalesce((select document #> ${path}::text[] from restore_stages where id = ${stageId}::int), '[]'::jsonb))`;
  }
  for (const t of cleared) await tx`delete from ${tx(t)}`;

  // Entity versions: a document with the section replaces the table (the versions the deletes and
  // inserts above wrote by trigger go with it: the past of the restored entities is the
  // document's); without it the table stays, with the restore recorded as deletes and inserts.
  const [eh] = await tx<{ present: boolean }[]>`
    select (document ? ${ENTITY_HISTORY.section}) as present from restore_stages where id = ${stageId}::int`;
  const restoreVersions = eh?.present === true;
  if (restoreVersions) {
    // valid_to is derived (the dry run checked the document's against it); `supersedes` marks each
    // version with an earlier one of its entity, for retention (migration 0330).
    const derived: readonly string[] = ENTITY_HISTORY.derived;
    const fields = ENTITY_HISTORY.fields.filter((f) => !derived.includes(f));
    await tx`delete from ${tx(ENTITY_HISTORY.table)}`;
    await tx`
      insert into ${tx(ENTITY_HISTORY.table)} (${tx(fields)}, supersedes) overriding system value
      select ${tx(fields)}, row_number() over (partition by entity_kind, entity_id order by id) > 1
      from jsonb_populate_recordset(null::${tx(ENTITY_HISTORY.table)},
        (select document -> ${ENTITY_HISTORY.section} from restore_stages where id = ${stageId}::int))`;
  }

  for (const s of [...SECTIONS, ...(restoreVersions ? [ENTITY_HISTORY] : [])]) {
    if (s.key.length !== 1) continue;
    const [seq] = await tx<{ name: string | null }[]>`select pg_get_serial_sequence(${s.table}, ${s.key[0]!}) as name`;
    if (!seq?.name) continue;
    await tx`
      select setval(${seq.name}::regclass,
        greatest((select coalesce(max(${tx(s.key[0]!)}), 0) from ${tx(s.table)}), nextval(${seq.name}::regclass)))`;
  }

  // A restored human keeps today's password when it is the same identity (id, name and identity
  // scope); the bootstrap administrator keeps it by name and scope alone.
  const carried = await tx`
    update users u set password_hash = c.password_hash
    from principals p, svc_restore_passwords c
    where p.id = u.principal_id and p.kind = 'human' and c.name = p.name and c.identity_scope = p.identity_scope
      and (c.id = p.id or (p.name = 'admin' and p.identity_scope = ${admin.scope}))
    returning u.principal_id`;

  const adminRepairs = await ensureBootstrapAdmin(tx, actor, admin);
  return { passwordsCarried: carried.length, adminRepairs };
}

/** The admin group, the human `admin` and its membership, re-created when the document lacks them. */
async function ensureBootstrapAdmin(tx: TransactionSql, actor: Actor, admin: AdminIdentity): Promise<string[]> {
  const repairs: string[] = [];
  let [group] = await tx<{ id: number }[]>`select id from groups where name = ${admin.group} and identity_scope = ${admin.scope}`;
  if (!group) {
    [group] = await tx<{ id: number }[]>`
      insert into groups (name, description, identity_scope) values (${admin.group}, 'Administrators', ${admin.scope}) returning id`;
    repairs.push('admin_group_created');
    await appendEvent(tx, actor, {
      entityType: 'group',
      entityId: group!.id,
      entityName: admin.group,
      action: 'created',
      summary: 'admin group re-created after a restore',
      after: { id: group!.id, name: admin.group, identity_scope: admin.scope },
      afterRevision: 1,
    });
  }
  let [user] = await tx<{ id: number; kind: string }[]>`
    select id, kind from principals where name = 'admin' and identity_scope = ${admin.scope}`;
  if (!user) {
    const [prev] = await tx<{ password_hash: string }[]>`
      select password_hash from svc_restore_passwords where name = 'admin' and identity_scope = ${admin.scope}`;
    const hash = prev?.password_hash ?? (await admin.fallbackPasswordHash());
    [user] = await tx<{ id: number; kind: string }[]>`
      insert into principals (kind, name, identity_scope) values ('human', 'admin', ${admin.scope}) returning id, kind`;
    await tx`insert into users (principal_id, password_hash, proper_name) values (${user!.id}, ${hash}, 'Administrator')`;
    repairs.push('admin_user_created');
    await appendEvent(tx, actor, {
      entityType: 'user',
      entityId: user!.id,
      entityName: 'admin',
      action: 'created',
      summary: 'bootstrap administrator re-created after a restore',
      after: { id: user!.id, name: 'admin', identity_scope: admin.scope },
      afterRevision: 1,
    });
  }
  if (user!.kind !== 'human') return repairs;
  const added = await tx`
    insert into group_members (group_id, principal_id) values (${group!.id}, ${user!.id})
    on conflict do nothing returning group_id`;
  if (added.length) {
    repairs.push('admin_membership_added');
    await appendEvent(tx, actor, {
      entityType: 'group_membership',
      entityId: group!.id,
      entityName: admin.group,
      action: 'added',
      summary: 'bootstrap administrator put back into the admin group after a restore',
      after: { group_id: group!.id, principal_id: user!.id },
    });
  }
  return repairs;
}
