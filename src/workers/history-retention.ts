// History retention (#11): with SVC_HISTORY_RETENTION_DAYS > 0, closed entity versions (those a
// later change replaced) older than that are deleted in batches. Current versions and tombstones
// stay. Event retention (event-retention.ts) never touches entity history, nor this the events.
import type { Deps } from '../deps.ts';
import { intervalGate, type Loop } from './loop.ts';
import { purgeReplacedVersions } from '../db/history.ts';

const DAY_MS = 86_400_000;
const BATCH = 1000;
const INTERVAL_MS = 3_600_000;

/** Purges closed versions whose valid_to lies more than SVC_HISTORY_RETENTION_DAYS before `now`; 0 days = off. */
export async function purgeHistory(deps: Deps, now: Date = new Date(), signal?: AbortSignal): Promise<number> {
  const days = deps.config.SVC_HISTORY_RETENTION_DAYS;
  if (days <= 0) return 0;
  const cutoff = new Date(now.getTime() - days * DAY_MS);
  let total = 0;
  for (;;) {
    const { taken, deleted } = await purgeReplacedVersions(deps.sql, cutoff, BATCH);
    total += deleted;
    if (taken < BATCH || signal?.aborted) break;
  }
  return total;
}

const due = intervalGate();

/** Runs purgeHistory hourly while SVC_HISTORY_RETENTION_DAYS is set. */
export const historyRetentionLoop: Loop = {
  name: 'history-retention',
  intervalMs: 60_000,
  async tick(deps, signal) {
    if (deps.config.SVC_HISTORY_RETENTION_DAYS <= 0) return;
    if (!due(deps, INTERVAL_MS)) return;
    const n = await purgeHistory(deps, new Date(), signal);
    if (n > 0) deps.log.info({ worker: 'history-retention', purged: n }, 'closed entity versions purged');
  },
};
