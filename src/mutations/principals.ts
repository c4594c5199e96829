// What users and service accounts share as principals.
import { deleteRowWithEvents } from '../db/events.ts';
import { principalGroupIds } from '../db/users.ts';
import type { MutationContext } from './context.ts';

/**
 * Deletes the principal `id`, which `lock` locks (with whatever checks the kind needs): the read of
 * its groups goes out behind the lock, in the same round trip; then the delete with its `deleted`
 * event (and COMMIT), in one statement. Its profile, memberships, tokens and settings go with it.
 * The event records the groups it was removed from.
 */
export async function deletePrincipalRecorded<T extends { id: number; name: string; revision: number }>(
  m: MutationContext,
  what: { entityType: 'user' | 'service_account'; label: string },
  id: number,
  lock: () => Promise<T>,
  snapshot: (before: T) => unknown,
  metadata: (before: T) => Record<string, unknown> = () => ({}),
): Promise<void> {
  const locked = lock();
  const groups = principalGroupIds(m.tx, id);
  groups.catch(() => undefined); // awaited below, once the lock and its checks have passed
  const before = await locked;
  const groupIds = await groups;
  const event = {
    entityType: what.entityType,
    entityId: before.id,
    entityName: before.name,
    action: 'deleted',
    summary: `${what.label} ${before.name} deleted`,
    before: snapshot(before),
    beforeRevision: before.revision,
    metadata: Object.assign({}, metadata(before), { removed_from_group_ids: groupIds }),
  };
  await deleteRowWithEvents(m.tx, m.actor, 'principals', id, [event], m.final);
}
