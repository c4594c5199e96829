// The `backup` task executor. Re-checks that the submitter is still an administrator (with the
// unscoped token it submitted with), reads every section of src/domain/backup-format.ts from one
// consistent snapshot, writes the format 7 document as compact JSON and stores those exact bytes
// on the task for SVC_BACKUP_OUTPUT_RETENTION_HOURS. The summary carries the counts, the size and
// the SHA-256 that GET /api/v1/backups/{id}/output also sends.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readSnapshot, storeBackupOutput } from '../db/backups.ts';
import { BACKUP_FORMAT, buildDocument } from '../domain/backup-format.ts';
import { isUnscoped } from '../domain/authz.ts';
import type { TaskOutcome, TaskRunContext } from './task-context.ts';

export const SOURCE_VERSION: string = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export async function executeBackup(ctx: TaskRunContext): Promise<TaskOutcome> {
  const { deps, task } = ctx;
  const auth = ctx.authority;
  if (!auth || !auth.isAdmin || !isUnscoped(auth)) {
    return {
      status: 'failed',
      details: { reason: 'permission_denied', message: 'the submitter is no longer an administrator with an unscoped token' },
      message: 'backup task failed: the submitter is no longer an administrator',
    };
  }
  const includeHistory = task.request.include_history !== false;
  const includeEntityHistory = task.request.include_entity_history === true;
  const startedAt = new Date();
  const { state, history, entityHistory } = await readSnapshot(deps.sql, includeHistory, () => ctx.checkpoint(), includeEntityHistory);
  await ctx.checkpoint();
  const doc = buildDocument(SOURCE_VERSION, startedAt, state, history, entityHistory);
  const bytes = Buffer.from(JSON.stringify(doc), 'utf8');
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const rows = Object.values(doc.manifest.item_counts).reduce((a, b) => a + b, 0);
  const summary = {
    backup_version: BACKUP_FORMAT,
    include_history: includeHistory,
    include_entity_history: includeEntityHistory,
    item_counts: doc.manifest.item_counts,
    bytes: bytes.length,
    sha256,
  };
  return {
    status: 'succeeded',
    progress: { total_items: rows, processed_items: rows, success_items: rows, failed_items: 0 },
    summary,
    message: `backup written: ${rows} rows, ${bytes.length} bytes`,
    finalize: async (tx) => {
      await storeBackupOutput(tx, task.id, bytes, deps.config.SVC_BACKUP_OUTPUT_RETENTION_HOURS);
    },
  };
}
