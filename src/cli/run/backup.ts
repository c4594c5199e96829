import { open, rename, rm } from 'node:fs/promises';
import { findBackupOutput } from '../../db/backups.ts';
import { submitBackup } from '../../mutations/backups.ts';
import { Failure } from '../errors.ts';
import type { Progress } from '../progress.ts';
import { runTask } from '../run-task.ts';
import type { Session } from '../session.ts';

/** svc backup's checked arguments. */
export interface BackupArgs {
  out: string;
  includeHistory: boolean;
  includeEntityHistory: boolean;
}

const CHUNK = 1 << 20;

/** Writes next to the target and renames at the end, so FILE is never half a document. */
async function writeFileWithProgress(path: string, bytes: Uint8Array, progress: Progress): Promise<void> {
  const partial = `${path}.partial-${process.pid}`;
  progress.step(`writing ${path}`, bytes.length, 'bytes');
  const fh = await open(partial, 'w', 0o600);
  try {
    for (let at = 0; at < bytes.length; at += CHUNK) {
      await fh.write(bytes, at, Math.min(CHUNK, bytes.length - at));
      progress.update(Math.min(at + CHUNK, bytes.length));
    }
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(partial, { force: true });
    throw err;
  }
  await fh.close();
  await rename(partial, path);
}

export async function run(session: Session, args: BackupArgs): Promise<number> {
  const deps = await session.deps();
  const admin = await session.bootstrapAdmin();
  const progress = session.progress;
  const task = await submitBackup(
    deps,
    session.actor(admin),
    { principal: { id: admin.id }, token: { id: null, scope: null } },
    args.includeHistory,
    null,
    args.includeEntityHistory,
  );
  progress.step(`backup task ${task.id}: reading a consistent snapshot`);
  const done = await runTask(deps, task.id, () => progress.tick());
  if (done.status !== 'succeeded') {
    const why = (done.details as { message?: string } | null)?.message;
    throw new Failure(`backup task ${task.id} ${done.status}${why ? `: ${why}` : ''}`);
  }
  const summary = done.summary as { item_counts: Record<string, number>; bytes: number; sha256: string };
  const rows = Object.values(summary.item_counts).reduce((a, b) => a + b, 0);
  progress.end(`backup task ${task.id} succeeded: ${rows} rows`);
  const output = await findBackupOutput(deps.sql, task.id);
  if (!output?.output) throw new Failure(`backup task ${task.id} has no output (expired already?)`);
  await writeFileWithProgress(args.out, new Uint8Array(output.output), progress);
  progress.end(`wrote ${args.out} (${summary.bytes} bytes, sha256 ${summary.sha256})`);
  process.stdout.write(`${summary.sha256}  ${args.out}\n`);
  return 0;
}
