// Groups and their members: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import type { Principal } from '../principals.ts';
import type { NewEvent } from '../new-event.ts';

export interface GroupRow {
  id: number;
  name: string;
  description: string;
  identity_scope: string;
  managed_by: string | null;
  external_key: string | null;
  last_sync_attempted_at: Date | null;
  last_sync_success_at: Date | null;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/** The public representation and audit snapshot of a group (the row has nothing secret). */
export function groupView(r: GroupRow) {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    identity_scope: r.identity_scope,
    managed_by: r.managed_by,
    external_key: r.external_key,
    last_sync_attempted_at: r.last_sync_attempted_at,
    last_sync_success_at: r.last_sync_success_at,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}

export function groupEvent(action: 'created' | 'updated', after: GroupRow, before: GroupRow | null): NewEvent {
  return {
    entityType: 'group',
    entityId: after.id,
    entityName: after.name,
    action,
    summary: `group ${after.name} ${action}`,
    before: before ? groupView(before) : null,
    after: groupView(after),
    beforeRevision: before?.revision ?? null,
    afterRevision: after.revision,
  };
}

/** A member of a group: a principal. */
export type MemberRow = Principal;

export function memberView(r: MemberRow) {
  return {
    id: r.id,
    kind: r.kind,
    name: r.name,
    identity_scope: r.identity_scope,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}

/** The audit event of a membership change. */
export function membershipEvent(action: 'added' | 'removed', g: GroupRow, p: MemberRow): NewEvent {
  const snapshot = { group_id: g.id, group_name: g.name, principal_id: p.id, principal_name: p.name, principal_kind: p.kind };
  const event: NewEvent = {
    entityType: 'group_membership',
    entityId: g.id,
    entityName: g.name,
    action,
    summary: action === 'added' ? `${p.name} added to group ${g.name}` : `${p.name} removed from group ${g.name}`,
  };
  // assigned after the literal, in the order the event had (eslint.config.js)
  if (action === 'added') event.after = snapshot;
  else event.before = snapshot;
  event.metadata = { group_id: g.id, principal_id: p.id };
  return event;
}
