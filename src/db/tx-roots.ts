// Which transaction of withTx a transaction handle or a savepoint inside one belongs to, for what
// runs once that transaction has committed (db/auth-changes.ts, db/wakeups.ts): withTx
// registers each transaction it opens, `savepoint` (db/tx.ts) each savepoint under its outer one.

const roots = new WeakMap<object, object>();

/** withTx registers each transaction it opens. */
export function trackTransaction(tx: object): void {
  roots.set(tx, tx);
}

/** A savepoint opened in `parent` belongs to the transaction `parent` belongs to. */
export function trackSavepoint(sp: object, parent: object): void {
  const root = roots.get(parent);
  if (root) roots.set(sp, root);
}

/**
 * Adds `values` to what `notes` keeps for the transaction of withTx that `db` is or is inside of,
 * for after its COMMIT; false, keeping nothing, when `db` is in none (a pool or another handle).
 */
export function noteForCommit<T>(notes: WeakMap<object, Set<T>>, db: object, values: Iterable<T>): boolean {
  const tx = roots.get(db);
  if (!tx) return false;
  let set = notes.get(tx);
  if (!set) notes.set(tx, (set = new Set()));
  for (const v of values) set.add(v);
  return true;
}
