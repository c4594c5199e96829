// Background loops share one AbortSignal for the life of the process: every wait on it must take its
// abort listener away again when it ends, or the listeners pile up (the server printed
// MaxListenersExceededWarning about 30 seconds after every start).
import { getEventListeners } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.ts';
import { sleep, startWorkers, type Loop } from '../src/workers/index.ts';
import { Waker } from '../src/workers/waker.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

describe('worker loops', () => {
  it('leave no abort listener behind from one tick to the next', async () => {
    const seen: number[] = [];
    let done!: () => void;
    const enough = new Promise<void>((ok) => (done = ok));
    const loop: Loop = {
      name: 'listener-probe',
      intervalMs: 0,
      async tick(_deps, signal) {
        seen.push(getEventListeners(signal, 'abort').length);
        if (seen.length === 30) done();
        if (seen.length % 2 === 0) throw new Error('a failing tick still sleeps and goes on');
      },
    };
    const workers = startWorkers(t.deps, [loop]);
    await enough;
    await workers.stop();
    expect(seen.length).toBeGreaterThanOrEqual(30);
    expect(seen.filter((n) => n !== 0)).toEqual([]);
  });

  it('stop() ends the loops at once, also in the middle of a long sleep', async () => {
    let ticks = 0;
    let first!: () => void;
    const started = new Promise<void>((ok) => (first = ok));
    const loop: Loop = {
      name: 'long-sleeper',
      intervalMs: 3_600_000,
      async tick() {
        ticks++;
        first();
      },
    };
    const workers = startWorkers(t.deps, [loop]);
    await started;
    await workers.stop();
    expect(ticks).toBe(1);
  });

  it('sleep and Waker.wait remove their listener when the time runs out', async () => {
    const ctl = new AbortController();
    const waker = new Waker();
    for (let i = 0; i < 20; i++) {
      await sleep(0, ctl.signal);
      expect(await waker.wait(0, ctl.signal)).toBe(false);
    }
    expect(getEventListeners(ctl.signal, 'abort')).toHaveLength(0);
    const pending = sleep(3_600_000, ctl.signal);
    expect(getEventListeners(ctl.signal, 'abort')).toHaveLength(1);
    ctl.abort();
    await pending;
    expect(getEventListeners(ctl.signal, 'abort')).toHaveLength(0);
  });
});
