// Event subscriptions: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import type { NewEvent } from '../new-event.ts';
import type { SubscriptionFields } from '../event-subscriptions.ts';
import type { ResponseBody } from '../wire.ts';

export interface EventSubscriptionRow extends SubscriptionFields {
  [key: string]: unknown;
  id: number;
  /** An unscoped administrator set this routing for this sink (see src/sinks/allowed-routing.ts). */
  routing_admin_approved: boolean;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/** The stored, user-controlled members of a subscription. */
export function subscriptionFields(r: EventSubscriptionRow): SubscriptionFields {
  return {
    collection_id: r.collection_id,
    sink_id: r.sink_id,
    name: r.name,
    description: r.description,
    entity_types: r.entity_types,
    actions: r.actions,
    filter: r.filter,
    routing: r.routing,
    enabled: r.enabled,
  };
}

/** The public representation (components.schemas.EventSubscription); also the audit snapshot. */
export function eventSubscriptionView(r: EventSubscriptionRow): ResponseBody<'getCollectionEventSubscription', 200> {
  return Object.assign({ id: r.id }, subscriptionFields(r), {
    routing_admin_approved: r.routing_admin_approved,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  });
}

/** The audit event of a subscription change; a deleted subscription has no after snapshot. */
export function eventSubscriptionEvent(row: EventSubscriptionRow, action: string, before: EventSubscriptionRow | null): NewEvent {
  return {
    entityType: 'event_subscription',
    entityId: row.id,
    entityName: row.name,
    collectionId: row.collection_id,
    action,
    summary: `event subscription ${row.name} ${action}`,
    before: before ? eventSubscriptionView(before) : null,
    after: action === 'deleted' ? null : eventSubscriptionView(row),
    beforeRevision: before?.revision ?? null,
    afterRevision: action === 'deleted' ? null : row.revision,
    metadata: { sink_id: row.sink_id },
  };
}
