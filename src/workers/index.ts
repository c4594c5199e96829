import type { Deps } from '../deps.ts';
import { taskLoop } from './tasks.ts';

export interface Workers {
  stop(): Promise<void>;
}

/** A background loop: runs `tick` every intervalMs (and when woken) until stopped. */
export interface Loop {
  name: string;
  intervalMs: number;
  tick(deps: Deps, signal: AbortSignal): Promise<void>;
}

const loops: Loop[] = [];
registerLoop(taskLoop);

/** Capabilities register their worker loops here at import time. */
export function registerLoop(loop: Loop): void {
  loops.push(loop);
}

/** Starts every registered loop; stop() aborts them and waits (bounded) for the current tick. */
export function startWorkers(deps: Deps): Workers {
  const ctl = new AbortController();
  const running = loops.map(async (loop) => {
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
      await Promise.race([Promise.allSettled(running), sleep(10_000)]);
    },
  };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((ok) => {
    const t = setTimeout(ok, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        ok();
      },
      { once: true },
    );
  });
}

import { tokenPurgeLoop } from './token-purge.ts';
registerLoop(tokenPurgeLoop);

import { eventFanoutLoop } from './event-fanout.ts';
import { eventDeliveryLoop } from './event-delivery.ts';
registerLoop(eventFanoutLoop);
registerLoop(eventDeliveryLoop);
import { eventRetentionLoop } from './event-retention.ts';
registerLoop(eventRetentionLoop);
