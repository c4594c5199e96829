// A background loop and the abortable sleep between its ticks (src/workers/index.ts runs them).
import type { Deps } from '../deps.ts';

/** A background loop: runs `tick` every intervalMs (and when woken) until stopped. */
export interface Loop {
  name: string;
  intervalMs: number;
  tick(deps: Deps, signal: AbortSignal): Promise<void>;
}

/**
 * Resolves after `ms` or on abort, whichever comes first. The abort listener goes when the sleep
 * ends either way: the loops share one signal for their whole life, and a listener left behind per
 * tick piles up (MaxListenersExceededWarning at the 11th).
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((ok) => {
    if (signal?.aborted) return ok();
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      ok();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * For a loop that works less often than it ticks: a gate that is open (and notes the time) when
 * `everyMs` has passed since it was last open for these deps, or it never was.
 */
export function intervalGate(): (deps: Deps, everyMs: number) => boolean {
  const last = new WeakMap<Deps, number>();
  return (deps, everyMs) => {
    const at = last.get(deps);
    if (at !== undefined && Date.now() - at < everyMs) return false;
    last.set(deps, Date.now());
    return true;
  };
}
