import { createHash } from 'node:crypto';
import type { HandlerMap } from '../http/contract.ts';
import { actorOf, storedOutput } from '../http/contract.ts';
import { ApiError, notFound } from '../domain/errors.ts';
import { requireUnscopedAdmin } from './gates.ts';
import { findTask } from '../db/tasks.ts';
import { toTaskWire } from '../domain/views/tasks.ts';
import { findBackupOutput } from '../db/backups.ts';
import { parseIdempotencyKey } from '../domain/tasks.ts';
import { submitBackup } from '../mutations/backups.ts';

export const backupsHandlers = {
  createBackup: async (input, ctx) => {
    const auth = requireUnscopedAdmin(ctx);
    const body = (input.body ?? {}) as { include_history?: boolean; include_entity_history?: boolean };
    const includeHistory = body.include_history ?? true;
    const idempotencyKey = parseIdempotencyKey(input.headers['idempotency-key']);
    const task = await submitBackup(
      ctx.deps,
      actorOf(ctx),
      { principal: auth.principal, token: { id: auth.token.id, scope: auth.token.scope } },
      includeHistory,
      idempotencyKey,
      body.include_entity_history ?? false,
    );
    return { status: 202, body: toTaskWire(task), headers: { location: `/api/v1/tasks/${task.id}` } };
  },

  getBackup: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const task = await findTask(ctx.deps.sql, input.params.task_id);
    if (!task || task.kind !== 'backup') throw notFound('backup task');
    return { status: 200, body: toTaskWire(task) };
  },

  getBackupOutput: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const id = input.params.task_id;
    const row = await findBackupOutput(ctx.deps.sql, id);
    if (!row || row.kind !== 'backup') throw notFound('backup task');
    if (row.expired) throw new ApiError('gone', 'the backup output has expired; submit a new backup', { reason: 'output_expired' });
    if (row.status !== 'succeeded' || !row.output) throw notFound('backup output (the task has not succeeded)');
    const bytes = new Uint8Array(row.output);
    const digest = createHash('sha256').update(bytes);
    const raw = digest.copy().digest('base64');
    return storedOutput<'getBackupOutput'>(bytes, 'application/json', {
      'cache-control': 'no-store',
      'content-disposition': `attachment; filename="svc-backup-${id}.json"`,
      digest: `SHA-256=${raw}`,
      'x-svc-backup-sha256': digest.digest('hex'),
    });
  },
} satisfies Partial<HandlerMap>;
