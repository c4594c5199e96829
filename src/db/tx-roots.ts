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

/** The transaction of withTx that `db` is or is inside of; undefined for a pool or another handle. */
export function transactionOf(db: object): object | undefined {
  return roots.get(db);
}
