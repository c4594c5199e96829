// What users and service accounts share as principals.
import { appendEvent } from '../db/events.ts';
import { deletePrincipal, principalGroupIds } from '../db/users.ts';
import type { MutationContext } from './context.ts';

/**
 * Deletes a principal (its row locked by the caller): its profile, memberships, tokens and
 * settings go with it. The `deleted` event records the groups it was removed from.
 */
export async function deletePrincipalRecorded(
  m: MutationContext,
  what: { entityType: 'user' | 'service_account'; label: string },
  before: { id: number; name: string; revision: number },
  snapshot: unknown,
  metadata: Record<string, unknown> = {},
): Promise<void> {
  const groupIds = await principalGroupIds(m.tx, before.id);
  await deletePrincipal(m.tx, before.id);
  await appendEvent(
    m.tx,
    m.actor,
    {
      entityType: what.entityType,
      entityId: before.id,
      entityName: before.name,
      action: 'deleted',
      summary: `${what.label} ${before.name} deleted`,
      before: snapshot,
      beforeRevision: before.revision,
      metadata: { ...metadata, removed_from_group_ids: groupIds },
    },
    m.final,
  );
}
