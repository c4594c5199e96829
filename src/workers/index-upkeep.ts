// GIN pending lists (SVC_GIN_PENDING_FLUSH_INTERVAL_MS): merged into their indexes every interval by
// one worker process at a time, so that searches through the indexes read short lists under a
// steady stream of writes (src/db/index-upkeep.ts).
import type { Deps } from '../deps.ts';
import { intervalGate, type Loop } from './loop.ts';
import { flushGinPendingLists } from '../db/index-upkeep.ts';
import { ginPendingPagesMerged } from '../metrics.ts';

const due = intervalGate();
const warned = new WeakSet<Deps>();

/** Flushes the GIN pending lists every SVC_GIN_PENDING_FLUSH_INTERVAL_MS (0 = never). */
export const ginPendingFlushLoop: Loop = {
  name: 'gin-pending-flush',
  intervalMs: 100,
  async tick(deps) {
    const every = deps.config.SVC_GIN_PENDING_FLUSH_INTERVAL_MS;
    if (every <= 0) return;
    if (!due(deps, every)) return;
    const r = await flushGinPendingLists(deps.sql);
    if (r.pages > 0) ginPendingPagesMerged.inc(r.pages);
    if (r.ran && r.indexes === 0 && !warned.has(deps)) {
      warned.add(deps);
      deps.log.warn(
        { worker: 'gin-pending-flush' },
        "the database role owns none of the GIN indexes, so their pending lists are left to autovacuum and the writers: run the service as the tables' owner, or set SVC_GIN_PENDING_FLUSH_INTERVAL_MS=0",
      );
    }
  },
};
