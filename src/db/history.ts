// Entity history (#11): the versions that the triggers of migrations/0170_entity_history.sql
// write, and the one place that tells those triggers who is acting.
import type { Db } from './sql.ts';
import type { Actor } from '../domain/actor.ts';

/**
 * Binds the actor to the current transaction (transaction-local settings the history triggers
 * read). Called once where a mutation gets its actor: inTx, and the import worker per item.
 */
export async function bindActor(tx: Db, actor: Actor): Promise<void> {
  const initiatorId = actor.initiatorId ?? (actor.kind === 'user' ? actor.principalId : null);
  await tx`select set_config('svc.actor_kind', ${actor.kind}, true), set_config('svc.actor_id', ${str(actor.principalId)}, true),
    set_config('svc.initiator_id', ${str(initiatorId)}, true), set_config('svc.task_id', ${str(actor.taskId ?? null)}, true)`;
}

function str(n: number | null | undefined): string {
  return n === null || n === undefined ? '' : String(n);
}
