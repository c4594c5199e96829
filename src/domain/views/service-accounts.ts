// Service accounts: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import { type NewEvent } from '../new-event.ts';

export interface ServiceAccountRow {
  id: number;
  name: string;
  description: string;
  identity_scope: string;
  owner_group_id: number;
  created_by: number | null;
  disabled_at: Date | null;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/** Public representation and audit snapshot (a service account has no password or secret). */
export function serviceAccountView(r: ServiceAccountRow) {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    identity_scope: r.identity_scope,
    owner_group_id: r.owner_group_id,
    created_by: r.created_by,
    disabled_at: r.disabled_at,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}

/** The audit event of a created or updated account. */
export function serviceAccountEvent(action: 'created' | 'updated', after: ServiceAccountRow, before: ServiceAccountRow | null): NewEvent {
  return {
    entityType: 'service_account',
    entityId: after.id,
    entityName: after.name,
    action,
    summary: `service account ${after.name} ${action}`,
    before: before ? serviceAccountView(before) : null,
    after: serviceAccountView(after),
    beforeRevision: before?.revision ?? null,
    afterRevision: after.revision,
    metadata: { owner_group_id: after.owner_group_id },
  };
}
