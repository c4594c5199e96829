// The event catalog (contract.md, "Events"): which actions each entity type emits. Subscriptions
// are validated against it at write time, so a subscription can never wait for an event that
// cannot happen.

const CRUD = ['created', 'updated', 'deleted'] as const;

export const EVENT_CATALOG: Readonly<Record<string, readonly string[]>> = {
  collection: CRUD,
  class: CRUD,
  object: CRUD,
  class_relation: CRUD,
  object_relation: CRUD,
  export_template: CRUD,
  remote_target: [...CRUD, 'invoked'],
  user: CRUD,
  group: CRUD,
  service_account: [...CRUD, 'disabled'],
  event_sink: [...CRUD, 'invoked'],
  event_subscription: CRUD,
  // Administrator actions on one delivery (retry releases a failed or dead row; dead dead-letters it).
  event_delivery: ['retried', 'dead'],
  computed_field: CRUD,
  group_membership: ['added', 'removed'],
  permission: ['granted', 'revoked'],
  token: ['created', 'renewed', 'revoked', 'purged'],
  principal: ['updated'],
  task: ['queued', 'validating', 'running', 'succeeded', 'failed', 'partially_succeeded', 'cancelled'],
  // The class-schema lifecycle: staging, abandonment, activation, work requests, cancellation, deletion.
  class_schema: ['staged', 'abandoned', 'activated', 'work_requested', 'cancelled', 'deleted'],
  object_validation: ['succeeded', 'failed', 'updated'],
  credential_approval: ['created', 'consumed'],
  restore: ['staged', 'succeeded', 'failed'],
};

export const ENTITY_TYPES: readonly string[] = Object.keys(EVENT_CATALOG);
export const ACTIONS: readonly string[] = [...new Set(Object.values(EVENT_CATALOG).flat())];

export function isCatalogPair(entityType: string, action: string): boolean {
  return EVENT_CATALOG[entityType]?.includes(action) ?? false;
}
