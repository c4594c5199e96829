// What every entity's write path takes. A mutation runs inside the caller's transaction: a
// handler opens one per request (inTx), the import worker runs many in one transaction or one
// savepoint per item. The write path itself does lock → If-Match → rules → write → audit event;
// the caller only decides where the transaction begins and ends.
import type { Db, TransactionSql } from '../db/sql.ts';
import { finalFor, withTx, type Final } from '../db/tx.ts';
import { bindActor } from '../db/history.ts';
import type { Actor } from '../domain/actor.ts';
import type { Authority } from '../domain/authz.ts';
import { requireIfMatch } from '../domain/preconditions.ts';

/** Who a mutation runs as: the audit actor and the authority every rule is checked against. */
export interface Caller {
  actor: Actor;
  auth: Authority;
}

export interface MutationContext extends Caller {
  tx: TransactionSql;
  /**
   * Wraps the mutation's final statement. Set by inTx: when the mutation has the transaction to itself,
   * COMMIT goes out with that statement (one round trip for both), else it is the identity. Absent
   * where the caller builds the context and runs more in the same transaction, such as an import.
   */
  final?: Final;
  /**
   * Set by inTx with `actorInStatement`: no statement has bound the actor in this transaction, so
   * the mutation's one writing statement binds it itself (actorBinding, actorBindingText).
   */
  actorUnbound?: true;
}

/**
 * Runs fn as one mutation in its own transaction (or in db, when db already is one). The actor is
 * bound first (bindActor), unless `actorInStatement`: fn's mutation writes in one statement, which
 * binds it itself (m.actorUnbound), and PostgreSQL and the driver are spared a statement.
 */
export function inTx<T>(db: Db, caller: Caller, fn: (m: MutationContext) => Promise<T>, opts?: { actorInStatement: true }): Promise<T> {
  return withTx(db, async (tx) => {
    // The context's members written out (see eslint.config.js, no members after a spread).
    if (opts?.actorInStatement) return fn({ actor: caller.actor, auth: caller.auth, tx, final: finalFor(db, tx), actorUnbound: true });
    // Not awaited: the binding is pipelined with the mutation's first statement (postgres.js writes
    // both before the first answer comes back), which PostgreSQL runs after it on the same connection.
    const bound = bindActor(tx, caller.actor);
    bound.catch(() => undefined); // its failure aborts the transaction, so fn's statement fails too
    const result = await fn({ actor: caller.actor, auth: caller.auth, tx, final: finalFor(db, tx) });
    await bound;
    return result;
  });
}

/** A row after a write; changed is false when nothing differed, so nothing was written or recorded. */
export interface Written<R> {
  row: R;
  changed: boolean;
}

/** Writes only when something changes: `same` says whether the next state equals `before`. */
export async function skipWhenUnchanged<R>(before: R, same: boolean, write: () => Promise<R>): Promise<Written<R>> {
  if (same) return { row: before, changed: false };
  return { row: await write(), changed: true };
}

/**
 * The If-Match precondition of a write, checked with the row locked. `ifMatch` is the raw header
 * value; undefined means unconditional (no header, or a caller such as the importer that has none).
 */
export function requireMatch(ifMatch: string | undefined, kind: string, id: number, revision: number): void {
  requireIfMatch(ifMatch, kind, id, revision);
}
