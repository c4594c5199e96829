import type { Deps } from '../deps.ts';
import { sleep, type Loop } from './loop.ts';
import { taskLoop } from './tasks.ts';
import { tokenPurgeLoop } from './token-purge.ts';
import { eventFanoutLoop } from './event-fanout.ts';
import { eventDeliveryLoop } from './event-delivery.ts';
import { eventRetentionLoop } from './event-retention.ts';
import { ldapSyncLoop } from './ldap-sync.ts';
import { historyRetentionLoop } from './history-retention.ts';
import { ginPendingFlushLoop } from './index-upkeep.ts';

export { sleep, type Loop } from './loop.ts';

export interface Workers {
  stop(): Promise<void>;
}

/** Every background loop of a worker process. */
const LOOPS: readonly Loop[] = [
  taskLoop,
  tokenPurgeLoop,
  eventFanoutLoop,
  eventDeliveryLoop,
  eventRetentionLoop,
  ldapSyncLoop,
  historyRetentionLoop,
  ginPendingFlushLoop,
];

/**
 * Starts the given loops (every one by default); stop() aborts them and waits (bounded) for the
 * current tick.
 */
export function startWorkers(deps: Deps, only: readonly Loop[] = LOOPS): Workers {
  const ctl = new AbortController();
  const running = only.map(async (loop) => {
    while (!ctl.signal.aborted) {
      try {
        await loop.tick(deps, ctl.signal);
      } catch (err) {
        deps.log.error({ err, worker: loop.name }, 'worker tick failed');
      }
      await sleep(loop.intervalMs, ctl.signal);
    }
  });
  return {
    async stop() {
      ctl.abort();
      const bound = new AbortController();
      await Promise.race([Promise.allSettled(running), sleep(10_000, bound.signal)]);
      bound.abort();
    },
  };
}
