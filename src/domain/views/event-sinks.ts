// Event sinks: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import type { ResponseBody } from '../wire.ts';
import type { NewEvent } from '../new-event.ts';
import type { SinkDefinition, SinkFields, SinkKind } from '../event-subscriptions.ts';

type SinkConfig = ResponseBody<'getEventSink', 200>['config'];

export interface EventSinkRow {
  [key: string]: unknown;
  id: number;
  name: string;
  kind: SinkKind;
  config: Record<string, unknown>;
  secret_ref: string | null;
  enabled: boolean;
  min_interval_ms: number | null;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/**
 * The stored `config` column as the contract's config type. It is the request's config as sent,
 * validated against the same schema on the way in (router, then the transport's own checks), so
 * this is the one cast here, of a payload the service itself stored. Caveat: openapi-typescript
 * types members that have a schema `default` as present, while the stored config (and the reply,
 * as the contract says) keeps defaults unfilled; the generated type claims more than the bytes hold.
 */
export function storedConfig(config: Record<string, unknown>): SinkConfig {
  return config as SinkConfig;
}

/** The public representation (components.schemas.EventSink); also the audit snapshot (aliases only). */
export function eventSinkView(r: EventSinkRow): ResponseBody<'getEventSink', 200> {
  return {
    id: r.id,
    name: r.name,
    kind: r.kind,
    config: storedConfig(r.config),
    secret_ref: r.secret_ref,
    enabled: r.enabled,
    delivery_policy: { min_interval_ms: r.min_interval_ms },
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}

/** The audit event of a sink change; a deleted sink has no after snapshot. */
export function eventSinkEvent(row: EventSinkRow, action: string, before: EventSinkRow | null): NewEvent {
  return {
    entityType: 'event_sink',
    entityId: row.id,
    entityName: row.name,
    collectionId: null,
    action,
    summary: `event sink ${row.name} ${action}`,
    before: before ? eventSinkView(before) : null,
    after: action === 'deleted' ? null : eventSinkView(row),
    beforeRevision: before?.revision ?? null,
    afterRevision: action === 'deleted' ? null : row.revision,
  };
}

export function sinkFields(r: EventSinkRow): SinkFields {
  return {
    name: r.name,
    kind: r.kind,
    config: r.config,
    secret_ref: r.secret_ref,
    enabled: r.enabled,
    delivery_policy: { min_interval_ms: r.min_interval_ms },
  };
}

export function sinkDefinition(r: EventSinkRow): SinkDefinition {
  return { id: r.id, name: r.name, kind: r.kind, config: r.config, secret_ref: r.secret_ref };
}
