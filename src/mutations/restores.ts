// Restores: staging a backup document and applying a staged one, each with its audit event in one
// transaction. Used by the restore handlers and the admin command line.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Deps } from '../deps.ts';
import type { TransactionSql } from '../db/sql.ts';
import { ApiError, badRequest, conflict, forbidden, notFound } from '../domain/errors.ts';
import { savepoint, withTx } from '../db/tx.ts';
import { bindActor } from '../db/history.ts';
import { appendEvent } from '../db/events.ts';
import type { Actor } from '../domain/actor.ts';
import { noRestoreRunning, RESTORE_LOCK } from '../db/backups.ts';
import {
  applyStage,
  dryRunDocument,
  expireStages,
  finishStage,
  insertStage,
  lockStage,
  tryLockRestore,
  type StageRow,
} from '../db/restores.ts';
import { validateDocument } from '../domain/backup-format.ts';
import { hashPassword } from '../domain/passwords.ts';
import { hashToken, newRawToken } from '../domain/token-secret.ts';

/** How long a staged restore can be confirmed. */
export const STAGE_TTL_MINUTES = 60;

/** The Restore representation of a stage. */
export function statusWire(s: StageRow) {
  return {
    id: s.id,
    status: s.status === 'validated' && s.expired ? 'expired' : s.status,
    sha256: s.sha256,
    backup_version: s.backup_version,
    created_at: s.created_at,
    expires_at: s.expires_at,
    confirmed_at: s.confirmed_at,
    finished_at: s.finished_at,
    error: s.error,
  };
}

/** Whether raw is the capability of the stage (compared in constant time). */
export function capabilityMatches(tokenKey: Buffer, stage: StageRow, raw: string): boolean {
  const h = hashToken(tokenKey, raw);
  return h.length === stage.capability_hash.length && timingSafeEqual(h, stage.capability_hash);
}

/** The public reason of a failed apply: database messages name tables and constraints, never values of other rows. */
function applyError(err: unknown): string {
  if (err && typeof err === 'object' && 'code' in err) {
    const e = err as { message?: string; detail?: string };
    return `the document could not be applied: ${e.message ?? 'database error'}${e.detail ? ` (${e.detail})` : ''}`;
  }
  return 'the document could not be applied because of an internal error';
}

/**
 * Validates and stages a backup document (the dry run, then the stage row and its
 * `restore.staged` event). Shared by createRestore and the admin command line, which pass the
 * actor and the principal recorded as the stage's creator. Returns the stage and its capability
 * (shown once).
 */
export async function stageRestore(
  deps: Deps,
  actor: Actor,
  createdBy: number,
  body: unknown,
): Promise<{ stage: StageRow; capability: string }> {
  // The SHA-256 is over the document's compact JSON text, which is byte for byte what
  // getBackupOutput serves; re-formatting a downloaded file does not change it.
  const sha256 = createHash('sha256').update(JSON.stringify(body), 'utf8').digest('hex');
  const { document, format } = validateDocument(body);
  const capability = newRawToken();
  await expireStages(deps.sql);
  const stage = await withTx(deps.sql, async (tx) => {
    if (!(await noRestoreRunning(tx)))
      throw conflict('a restore is being applied; stage the document after it finished', 'restore_running');
    const problems = await dryRunDocument(tx, document);
    if (problems.length) throw badRequest(`the backup document is invalid: ${problems[0]!.path} ${problems[0]!.message}`, problems);
    const staged = await insertStage(tx, {
      sha256,
      capabilityHash: hashToken(deps.tokenKey, capability),
      format,
      document,
      createdBy,
      ttlMinutes: STAGE_TTL_MINUTES,
    });
    await appendEvent(tx, actor, {
      entityType: 'restore',
      entityId: staged.id,
      entityName: null,
      action: 'staged',
      summary: `restore ${staged.id} staged (backup format ${staged.backup_version}); no data changed yet`,
      after: statusWire(staged),
      metadata: { restore_id: staged.id, sha256: staged.sha256, backup_version: staged.backup_version, item_counts: staged.item_counts },
    });
    return staged;
  });
  return { stage, capability };
}

/**
 * Applies a staged restore (all data replaced) or records why it failed, in one transaction with
 * its `restore.succeeded` / `restore.failed` event. `approve` runs after the stage checks, inside
 * the transaction, and returns the id of the credential approval it consumed (the API) or null
 * (the admin command line, whose operator already holds the database). Shared by confirmRestore
 * and the admin command line.
 */
export async function confirmStagedRestore(
  deps: Deps,
  actor: Actor,
  confirmedBy: number,
  id: number,
  body: { restore_capability: string; sha256: string },
  approve: (tx: TransactionSql) => Promise<number | null>,
): Promise<StageRow> {
  const cfg = deps.config;
  return withTx(deps.sql, async (tx) => {
    await bindActor(tx, actor);
    const stage = await lockStage(tx, id);
    if (!stage) throw notFound('restore');
    if (!capabilityMatches(deps.tokenKey, stage, body.restore_capability))
      throw forbidden('the restore capability does not match this restore');
    if (stage.status === 'validated' && stage.expired) {
      throw new ApiError('gone', 'the staged restore has expired; stage the document again', { reason: 'restore_expired' });
    }
    if (stage.status !== 'validated')
      throw conflict(`the restore is ${stage.status}; a stage is applied at most once`, 'restore_not_validated');
    if (body.sha256 !== stage.sha256) throw conflict('sha256 does not match the staged document', 'sha256_mismatch');
    if (!(await tryLockRestore(tx, RESTORE_LOCK))) {
      throw conflict('another restore is being applied (or a backup or restore is being submitted); retry', 'restore_running');
    }
    const approvalId = await approve(tx);
    const meta = {
      restore_id: stage.id,
      sha256: stage.sha256,
      backup_version: stage.backup_version,
      item_counts: stage.item_counts,
      ...(approvalId === null ? {} : { credential_approval_id: approvalId }),
    };
    try {
      const result = await savepoint(tx, (sp) =>
        applyStage(sp, stage.id, actor, {
          group: cfg.SVC_ADMIN_GROUPNAME,
          scope: cfg.SVC_ADMIN_IDENTITY_SCOPE,
          fallbackPasswordHash: async () => (cfg.SVC_ADMIN_PASSWORD ? hashPassword(cfg.SVC_ADMIN_PASSWORD) : null),
        }),
      );
      const after = await finishStage(tx, stage.id, { status: 'succeeded', error: null, confirmedBy });
      await appendEvent(tx, actor, {
        entityType: 'restore',
        entityId: stage.id,
        entityName: null,
        action: 'succeeded',
        summary: `restore ${stage.id} replaced all data (backup format ${stage.backup_version})`,
        after: statusWire(after),
        metadata: Object.assign({}, meta, { passwords_carried: result.passwordsCarried, admin_repairs: result.adminRepairs }),
      });
      return after;
    } catch (err) {
      deps.log.warn({ err, restore_id: stage.id }, 'restore failed; no data changed');
      const after = await finishStage(tx, stage.id, { status: 'failed', error: applyError(err), confirmedBy });
      await appendEvent(tx, actor, {
        entityType: 'restore',
        entityId: stage.id,
        entityName: null,
        action: 'failed',
        summary: `restore ${stage.id} failed; no data changed`,
        after: statusWire(after),
        metadata: meta,
      });
      return after;
    }
  });
}
