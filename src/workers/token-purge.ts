import type { Deps } from '../deps.ts';
import { intervalGate, type Loop } from './loop.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import { SYSTEM_ACTOR } from '../domain/actor.ts';
import { deleteExpiredApprovals } from '../db/approvals.ts';
import { deleteTokens, lockPurgeableTokens } from '../db/tokens.ts';
import { tokenSnapshot } from '../domain/views/tokens.ts';

const DAY_MS = 86_400_000;

/**
 * Deletes tokens whose terminal time (the earlier of revocation and effective expiry) lies more
 * than SVC_TOKEN_RETENTION_DAYS before `now`, in batches of SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE.
 * Each batch is one transaction: a system `token.purged` event (with the exact scope in `before`)
 * is written for every row, then the rows are deleted; if an event cannot be written nothing is
 * deleted. Rows locked by another purger are skipped. Also forgets credential approvals that
 * expired more than a day ago. Returns the number of tokens deleted.
 */
export async function purgeTokens(deps: Deps, now: Date = new Date(), signal?: AbortSignal): Promise<number> {
  const cfg = deps.config;
  const cutoff = new Date(now.getTime() - cfg.SVC_TOKEN_RETENTION_DAYS * DAY_MS);
  const batch = cfg.SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE;
  let total = 0;
  for (;;) {
    const n = await withTx(deps.sql, async (tx) => {
      const rows = await lockPurgeableTokens(tx, cutoff, cfg.SVC_TOKEN_LIFETIME_HOURS, batch);
      for (const row of rows) {
        await appendEvent(tx, SYSTEM_ACTOR, {
          entityType: 'token',
          entityId: row.id,
          entityName: row.name,
          action: 'purged',
          summary: `token purged after the ${cfg.SVC_TOKEN_RETENTION_DAYS}-day retention period`,
          before: tokenSnapshot(row),
          beforeRevision: row.revision,
          metadata: { principal_id: row.principal_id, retention_days: cfg.SVC_TOKEN_RETENTION_DAYS },
        });
      }
      await deleteTokens(
        tx,
        rows.map((r) => r.id),
      );
      return rows.length;
    });
    total += n;
    if (n < batch || signal?.aborted) break;
  }
  await deleteExpiredApprovals(deps.sql, new Date(now.getTime() - DAY_MS), 10_000);
  return total;
}

const due = intervalGate();

/** Runs purgeTokens every SVC_TOKEN_RETENTION_PURGE_INTERVAL_SECONDS while enabled. */
export const tokenPurgeLoop: Loop = {
  name: 'token-purge',
  intervalMs: 10_000,
  async tick(deps, signal) {
    const cfg = deps.config;
    if (!cfg.SVC_TOKEN_RETENTION_PURGE_ENABLED) return;
    if (!due(deps, cfg.SVC_TOKEN_RETENTION_PURGE_INTERVAL_SECONDS * 1000)) return;
    const n = await purgeTokens(deps, new Date(), signal);
    if (n > 0) deps.log.info({ worker: 'token-purge', purged: n }, 'tokens purged');
  },
};
