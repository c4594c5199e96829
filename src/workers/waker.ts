// Wake-ups of the polling workers (tasks, event fan-out, event delivery): a LISTEN notification
// wakes a waiting worker at once; polling after a timeout is the fallback when notifications are
// lost or LISTEN is unavailable.
import type { Deps } from '../deps.ts';

/** Resolves on a notification, after the timeout, or on abort. */
export class Waker {
  private waiters: (() => void)[] = [];
  private pending = false;
  wake(): void {
    if (this.waiters.length === 0) this.pending = true;
    for (const w of this.waiters.splice(0)) w();
  }
  /** True when woken by a notification, false on timeout or abort. */
  wait(ms: number, signal: AbortSignal): Promise<boolean> {
    if (this.pending || signal.aborted) {
      const woken = this.pending;
      this.pending = false;
      return Promise.resolve(woken);
    }
    return new Promise((ok) => {
      const finish = (woken: boolean) => {
        clearTimeout(t);
        signal.removeEventListener('abort', onAbort);
        this.waiters = this.waiters.filter((w) => w !== onWake);
        ok(woken);
      };
      const onWake = () => finish(true);
      const onAbort = () => finish(false);
      const t = setTimeout(() => finish(false), ms);
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(onWake);
    });
  }
}

/**
 * LISTEN on a channel, waking `waker` (and calling `onNotify`) on each notification; returns the
 * unlisten function, or undefined when LISTEN failed (the workers then poll only).
 */
export async function listenForWakeups(
  deps: Deps,
  channel: string,
  waker: Waker,
  onNotify?: () => void,
): Promise<(() => Promise<void>) | undefined> {
  try {
    const sub = await deps.sql.listen(channel, () => {
      onNotify?.();
      waker.wake();
    });
    return () => sub.unlisten();
  } catch (err) {
    deps.log.warn({ err, channel }, 'LISTEN failed; the worker polls only');
    return undefined;
  }
}

/** Resolves when `signal` aborts. */
export function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((ok) => (signal.aborted ? ok() : signal.addEventListener('abort', () => ok(), { once: true })));
}

/**
 * Runs `count` copies of `worker` sharing one waker on `channel` until they all return (they loop
 * until `signal` aborts); with no workers configured, just waits for the abort.
 */
export async function runWokenWorkers(
  deps: Deps,
  signal: AbortSignal,
  opts: { count: number; channel: string; onNotify?: () => void },
  worker: (waker: Waker) => Promise<void>,
): Promise<void> {
  if (opts.count <= 0) return untilAborted(signal);
  const waker = new Waker();
  const unlisten = await listenForWakeups(deps, opts.channel, waker, opts.onNotify);
  try {
    await Promise.all(Array.from({ length: opts.count }, () => worker(waker)));
  } finally {
    await unlisten?.().catch(() => {});
  }
}
