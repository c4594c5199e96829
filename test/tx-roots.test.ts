// What withTx notes for after COMMIT (src/db/tx-roots.ts) must not keep a transaction alive through
// V8's young-generation collections. They used to live in a WeakMap whose value was the transaction
// itself, and V8's scavenger treats a WeakMap's values as strong: every transaction, and all that its
// request left reachable from it, survived each scavenge and was promoted to the old space (~8 KB per
// object create), to be freed only by a full GC. Measured as V8 measures it: the old space's growth
// across two young collections, forced; nothing is timed.
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { noteForCommit, trackSavepoint, trackTransaction } from '../src/db/tx-roots.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void;
const oldSpaceUsed = () => getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')!.space_used_size;

describe('transaction roots', () => {
  it('finds the transaction a savepoint belongs to, and nothing for a handle outside one', () => {
    const notes = new WeakMap<object, Set<string>>();
    const tx = {};
    const sp = {};
    const inner = {};
    trackTransaction(tx);
    trackSavepoint(sp, tx);
    trackSavepoint(inner, sp);
    expect(noteForCommit(notes, tx, ['a'])).toBe(true);
    expect(noteForCommit(notes, inner, ['b'])).toBe(true);
    expect([...notes.get(tx)!]).toEqual(['a', 'b']);
    expect(noteForCommit(notes, {}, ['c'])).toBe(false);
    const untracked = {};
    trackSavepoint(untracked, {});
    expect(noteForCommit(notes, untracked, ['d'])).toBe(false);
  });

  it('leaves a finished transaction to the young generation: it is not promoted', () => {
    const notes = new WeakMap<object, Set<string>>();
    // 4,000 transactions with ~2 KB each reachable from them (a request's objects), ~8 MB in all
    const run = () => {
      for (let i = 0; i < 4000; i++) {
        const tx = { request: Array.from({ length: 250 }, (_, j) => j + i) };
        trackTransaction(tx);
        noteForCommit(notes, tx, ['svc_events']);
      }
    };
    gc({ type: 'major' });
    const before = oldSpaceUsed();
    run();
    // anything still held at the first young collection is copied; at the second, promoted
    gc({ type: 'minor' });
    gc({ type: 'minor' });
    const promoted = oldSpaceUsed() - before;
    expect(promoted).toBeLessThan(2 * 1024 * 1024);
  });
});
