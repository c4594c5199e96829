// Remote targets: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import type { NewEvent } from '../new-event.ts';
import type { TargetFields } from '../remote-targets.ts';
import type { ResponseBody } from '../wire.ts';

export interface RemoteTargetRow extends TargetFields {
  [key: string]: unknown;
  id: number;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/** The stored, user-controlled members of a target. */
export function remoteTargetFields(r: RemoteTargetRow): TargetFields {
  return {
    collection_id: r.collection_id,
    class_id: r.class_id,
    name: r.name,
    description: r.description,
    method: r.method,
    url_template: r.url_template,
    headers_template: r.headers_template,
    body_template: r.body_template,
    auth_config: r.auth_config,
    allowed_subject_types: r.allowed_subject_types,
    timeout_ms: r.timeout_ms,
    enabled: r.enabled,
  };
}

/** The public representation (components.schemas.RemoteTarget); also the audit snapshot (no secrets: aliases only). */
export function remoteTargetView(r: RemoteTargetRow): ResponseBody<'getRemoteTarget', 200> {
  return Object.assign({ id: r.id }, remoteTargetFields(r), {
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  });
}

/** The audit event of a target change; a deleted target has no after snapshot. */
export function remoteTargetEvent(row: RemoteTargetRow, action: string, before: RemoteTargetRow | null, related: number[] = []): NewEvent {
  return {
    entityType: 'remote_target',
    entityId: row.id,
    entityName: row.name,
    collectionId: row.collection_id,
    relatedCollectionIds: related,
    action,
    summary: `remote target ${row.name} ${action}`,
    before: before ? remoteTargetView(before) : null,
    after: action === 'deleted' ? null : remoteTargetView(row),
    beforeRevision: before?.revision ?? null,
    afterRevision: action === 'deleted' ? null : row.revision,
  };
}
