// Which transaction of withTx a transaction handle or a savepoint inside one belongs to, for what
// runs once that transaction has committed (db/auth-changes.ts, db/wakeups.ts): withTx
// registers each transaction it opens, `savepoint` (db/tx.ts) each savepoint under its outer one.
//
// The root is a property of the handle, not an entry of a WeakMap: V8's young-generation GC (the
// scavenger) treats a WeakMap's values as strong, so an entry whose value is its key (a transaction
// is its own root) or leads to it kept every transaction, and all its request's objects reachable
// from it, alive through each scavenge until a full GC: ~8 KB of garbage promoted to the old space
// per object create, which made the heap and RSS grow under load and the scavenges slow
// (bench/FINDINGS.md, 2026-12-06). test/tx-roots.test.ts holds it.

const ROOT = Symbol('svc.transaction-root');
type Tracked = { [ROOT]?: object };

/** withTx registers each transaction it opens. */
export function trackTransaction(tx: object): void {
  (tx as Tracked)[ROOT] = tx;
}

/** A savepoint opened in `parent` belongs to the transaction `parent` belongs to. */
export function trackSavepoint(sp: object, parent: object): void {
  const root = (parent as Tracked)[ROOT];
  if (root) (sp as Tracked)[ROOT] = root;
}

/**
 * Adds `values` to what `notes` keeps for the transaction of withTx that `db` is or is inside of,
 * for after its COMMIT; false, keeping nothing, when `db` is in none (a pool or another handle).
 * A note must not refer to the transaction (see above: it would keep it through young GCs).
 */
export function noteForCommit<T>(notes: WeakMap<object, Set<T>>, db: object, values: Iterable<T>): boolean {
  const tx = (db as Tracked)[ROOT];
  if (!tx) return false;
  let set = notes.get(tx);
  if (!set) notes.set(tx, (set = new Set()));
  for (const v of values) set.add(v);
  return true;
}
