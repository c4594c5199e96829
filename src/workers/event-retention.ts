// Event retention: purges terminal deliveries after SVC_EVENT_DELIVERY_RETENTION_DAYS and events
// after SVC_EVENT_RETENTION_DAYS, in claimed batches. Per batch: claim (batch id + exact event
// documents, durable) -> optional file archive `<batch-uuid>.jsonl` (idempotent by batch id) ->
// completion deleting exactly the claimed ids. Any failure keeps the claim and the events; the
// next run, on any worker, takes the same batch over.
import { randomUUID } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { chmod, lstat, mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Deps } from '../deps.ts';
import { intervalGate, type Loop } from './loop.ts';
import {
  batchDocuments,
  claimNewBatch,
  claimOpenBatch,
  completeBatch,
  markArchived,
  purgeTerminalDeliveries,
  releaseBatch,
  type ClaimedEvent,
} from '../db/event-retention.ts';

const DAY_MS = 86_400_000;
/** How long a worker owns a batch before another may take it over (a crashed worker's batch). */
export const BATCH_LEASE_MS = 15 * 60_000;

export interface RetentionRun {
  deliveriesPurged: number;
  batchesCompleted: number;
  eventsPurged: number;
  /** The batch that failed this run (kept for the next run), with the reason. */
  failed: { batchId: string; error: string } | null;
}

export class ArchiveError extends Error {}

/** One purge run at `now`: terminal deliveries, then event batches until none is left or one fails. */
export async function runEventRetention(deps: Deps, now: Date = new Date(), signal?: AbortSignal): Promise<RetentionRun> {
  const cfg = deps.config;
  const batchSize = cfg.SVC_EVENT_RETENTION_PURGE_BATCH_SIZE;
  const run: RetentionRun = { deliveriesPurged: 0, batchesCompleted: 0, eventsPurged: 0, failed: null };

  const deliveryCutoff = new Date(now.getTime() - cfg.SVC_EVENT_DELIVERY_RETENTION_DAYS * DAY_MS);
  for (;;) {
    const n = await purgeTerminalDeliveries(deps.sql, deliveryCutoff, batchSize);
    run.deliveriesPurged += n;
    if (n < batchSize || signal?.aborted) break;
  }

  const eventCutoff = new Date(now.getTime() - cfg.SVC_EVENT_RETENTION_DAYS * DAY_MS);
  while (!signal?.aborted) {
    const batch =
      (await claimOpenBatch(deps.sql, BATCH_LEASE_MS)) ?? (await claimNewBatch(deps.sql, eventCutoff, batchSize, BATCH_LEASE_MS));
    if (!batch) break;
    try {
      if (cfg.SVC_EVENT_RETENTION_FILE_ARCHIVE_ENABLED) {
        const dir = cfg.SVC_EVENT_RETENTION_ARCHIVE_PATH;
        if (!dir) throw new ArchiveError('file archival is enabled but SVC_EVENT_RETENTION_ARCHIVE_PATH is not set');
        await archiveBatch(dir, batch.batch_id, await batchDocuments(deps.sql, batch.batch_id));
        if (!(await markArchived(deps.sql, batch))) throw new ArchiveError('the retention batch was taken over by another worker');
      }
      run.eventsPurged += await completeBatch(deps.sql, batch);
      run.batchesCompleted++;
    } catch (err) {
      const error = (err as Error).message;
      await releaseBatch(deps.sql, batch, error).catch(() => {});
      run.failed = { batchId: batch.batch_id, error };
      deps.log.warn(
        { worker: 'event-retention', batch_id: batch.batch_id, attempts: batch.attempts, err },
        'event retention batch failed; kept for the next run',
      );
      break;
    }
  }
  return run;
}

// ---- the archive file -----------------------------------------------------------------------

/** JSON with object keys sorted, so documents compare by content, not by member order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as Record<string, unknown>)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

async function lstatOrNull(path: string): Promise<Stats | null> {
  try {
    return await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** The archive directory: created 0700 when missing; a symlink or non-directory is refused. */
async function archiveDir(dir: string): Promise<void> {
  let st = await lstatOrNull(dir);
  if (!st) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    st = await lstat(dir);
  }
  if (st.isSymbolicLink()) throw new ArchiveError('the archive directory is a symbolic link');
  if (!st.isDirectory()) throw new ArchiveError('the archive path is not a directory');
  if ((st.mode & 0o777) !== 0o700) await chmod(dir, 0o700);
}

async function fsyncPath(path: string, flags: number): Promise<void> {
  const fh = await open(path, flags);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** An existing final file is accepted only when batch id, line count and documents match the claim. */
async function verifyExisting(path: string, batchId: string, docs: ClaimedEvent[]): Promise<void> {
  const text = await readFile(path, { encoding: 'utf8', flag: constants.O_RDONLY | constants.O_NOFOLLOW });
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length !== docs.length) {
    throw new ArchiveError(`the existing archive file has ${lines.length} lines, the claim ${docs.length} events`);
  }
  lines.forEach((line, i) => {
    let parsed: { retention_batch_id?: unknown; event?: unknown };
    try {
      parsed = JSON.parse(line) as typeof parsed;
    } catch {
      throw new ArchiveError(`line ${i + 1} of the existing archive file is not JSON`);
    }
    if (parsed.retention_batch_id !== batchId) throw new ArchiveError(`line ${i + 1} of the existing archive file names another batch`);
    if (canonical(parsed.event) !== canonical(docs[i]!.document)) {
      throw new ArchiveError(`line ${i + 1} of the existing archive file does not match the claimed event`);
    }
  });
}

/**
 * Writes `<batch-uuid>.jsonl` atomically (temp file 0600, fsync, rename, directory fsync), one line
 * per claimed event: `{retention_batch_id, archived_at, event}` with the full event row. A final
 * file already there (an earlier attempt of this batch) is verified instead of rewritten.
 */
export async function archiveBatch(dir: string, batchId: string, docs: ClaimedEvent[]): Promise<string> {
  await archiveDir(dir);
  const finalPath = join(dir, `${batchId}.jsonl`);
  const existing = await lstatOrNull(finalPath);
  if (existing) {
    if (existing.isSymbolicLink()) throw new ArchiveError('the existing archive file is a symbolic link');
    if (!existing.isFile()) throw new ArchiveError('the existing archive path is not a regular file');
    await verifyExisting(finalPath, batchId, docs);
    if ((existing.mode & 0o777) !== 0o600) await chmod(finalPath, 0o600);
    await fsyncPath(finalPath, constants.O_RDONLY | constants.O_NOFOLLOW);
    await fsyncPath(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    return finalPath;
  }
  // temp files of an earlier, interrupted attempt of this batch
  for (const name of await readdir(dir)) {
    if (name.startsWith(`.${batchId}.`) && name.endsWith('.tmp')) await unlink(join(dir, name)).catch(() => {});
  }
  const archivedAt = new Date().toISOString();
  const body = docs.map((d) => `${JSON.stringify({ retention_batch_id: batchId, archived_at: archivedAt, event: d.document })}\n`).join('');
  const tmpPath = join(dir, `.${batchId}.${randomUUID()}.tmp`);
  const fh = await open(tmpPath, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    try {
      await fh.writeFile(body, 'utf8');
      await fh.chmod(0o600); // exactly 0600 whatever the umask
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmpPath, finalPath);
  } catch (err) {
    await unlink(tmpPath).catch(() => {});
    throw err;
  }
  await fsyncPath(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  return finalPath;
}

const due = intervalGate();

/** Runs runEventRetention every SVC_EVENT_RETENTION_PURGE_INTERVAL_SECONDS while enabled. */
export const eventRetentionLoop: Loop = {
  name: 'event-retention',
  intervalMs: 10_000,
  async tick(deps, signal) {
    const cfg = deps.config;
    if (!cfg.SVC_EVENT_RETENTION_PURGE_ENABLED) return;
    if (!due(deps, cfg.SVC_EVENT_RETENTION_PURGE_INTERVAL_SECONDS * 1000)) return;
    const run = await runEventRetention(deps, new Date(), signal);
    if (run.eventsPurged > 0 || run.deliveriesPurged > 0) {
      deps.log.info(
        { worker: 'event-retention', events: run.eventsPurged, batches: run.batchesCompleted, deliveries: run.deliveriesPurged },
        'event retention purge',
      );
    }
  },
};
