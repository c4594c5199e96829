// Users: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import type { NewEvent } from '../new-event.ts';

/** A human user as stored: the principal joined with its profile (never the password hash). */
export interface UserRow {
  id: number;
  name: string;
  identity_scope: string;
  proper_name: string | null;
  email: string | null;
  created_at: Date;
  updated_at: Date;
  revision: number;
  provider_managed: boolean;
}

/** The public representation (and the audit snapshot): no password, no hash. */
export function userView(r: UserRow) {
  return {
    id: r.id,
    name: r.name,
    identity_scope: r.identity_scope,
    proper_name: r.proper_name,
    email: r.email,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}

export function userCreatedEvent(row: UserRow, metadata?: Record<string, unknown>): NewEvent {
  return {
    entityType: 'user',
    entityId: row.id,
    entityName: row.name,
    action: 'created',
    summary: `user ${row.name} created`,
    after: userView(row),
    afterRevision: row.revision,
    ...(metadata ? { metadata } : {}),
  };
}

export function userUpdatedEvent(before: UserRow, after: UserRow, passwordChanged: boolean): NewEvent {
  return {
    entityType: 'user',
    entityId: after.id,
    entityName: after.name,
    action: 'updated',
    summary: passwordChanged ? `user ${after.name} updated (password changed)` : `user ${after.name} updated`,
    before: userView(before),
    after: userView(after),
    beforeRevision: before.revision,
    afterRevision: after.revision,
    metadata: { password_changed: passwordChanged },
  };
}
