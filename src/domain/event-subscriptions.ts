// Event sinks and subscriptions: pure rules (no SQL, no HTTP). The stored documents, partial
// updates, catalog validation, and which events a subscription matches.
//
// Matching (interface spec, "Subscriptions"; openapi.yaml createCollectionEventSubscription):
//   scope   collection subscription C: the event is attached to C (collection_id = C) or references
//           C as a related collection; descendants of C are not included (a child collection's
//           events match only the child's own subscriptions). System subscription: the event has
//           neither a collection nor related collections.
//   type    entity_type ∈ entity_types and action ∈ actions.
//   filter  each populated member must match (AND); values inside a member are alternatives (OR);
//           an omitted or empty member matches everything.
//   time    the event occurred at or after the subscription was created (no replay of history).
import { badRequest, type ErrorDetail } from './errors.ts';
import { ACTIONS, ENTITY_TYPES, EVENT_CATALOG, isCatalogPair } from './event-catalog.ts';
import { canonicalJson } from './canonical-json.ts';
import { defineMember } from './json-patch.ts';
import type { TaskKind } from './tasks.ts';
import { eventWire, type EventRow } from './audit.ts';

export type SinkKind = 'webhook' | 'amqp' | 'redis_stream' | 'email';

/** An event sink as its transport sees it (src/sinks). */
export interface SinkDefinition {
  id: number;
  name: string;
  kind: SinkKind;
  config: Record<string, unknown>;
  secret_ref: string | null;
}

export const MAX_NAME = 255;
export const MAX_FILTER_VALUES = 1000;

export interface SubscriptionFilter {
  collection_ids?: number[];
  related_collection_ids?: number[];
  entity_ids?: number[];
  entity_names?: string[];
  actor_kinds?: ('user' | 'system' | 'worker')[];
  actor_user_ids?: number[];
  initiator_user_ids?: number[];
  request_ids?: string[];
  correlation_ids?: string[];
  task_kinds?: TaskKind[];
}

export const FILTER_MEMBERS = [
  'collection_ids',
  'related_collection_ids',
  'entity_ids',
  'entity_names',
  'actor_kinds',
  'actor_user_ids',
  'initiator_user_ids',
  'request_ids',
  'correlation_ids',
  'task_kinds',
] as const;

/** The stored, user-controlled members of a subscription. */
export interface SubscriptionFields {
  collection_id: number | null;
  sink_id: number;
  name: string;
  description: string;
  entity_types: string[];
  actions: string[];
  filter: SubscriptionFilter;
  routing: Record<string, unknown>;
  enabled: boolean;
}

interface NewSubscriptionBody {
  sink_id: number;
  name: string;
  description?: string;
  entity_types: string[];
  actions: string[];
  filter?: SubscriptionFilter;
  routing?: Record<string, unknown>;
  enabled?: boolean;
}

export type SubscriptionPatch = Partial<NewSubscriptionBody>;

/** Routing as stored: the request alias `to` (email) is kept as `recipients` (both given stays invalid). */
export function normalizeRouting(routing: Record<string, unknown>): Record<string, unknown> {
  if (routing.to === undefined || routing.recipients !== undefined) return routing;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(routing)) if (k !== 'to') defineMember(out, k, routing[k]);
  out.recipients = routing.to;
  return out;
}

export function subscriptionFromNew(collectionId: number | null, body: NewSubscriptionBody): SubscriptionFields {
  return {
    collection_id: collectionId,
    sink_id: body.sink_id,
    name: body.name,
    description: body.description ?? '',
    entity_types: body.entity_types,
    actions: body.actions,
    filter: body.filter ?? {},
    routing: normalizeRouting(body.routing ?? {}),
    enabled: body.enabled ?? true,
  };
}

function has<T extends object>(patch: T, key: keyof T): boolean {
  return Object.prototype.hasOwnProperty.call(patch, key) && patch[key] !== undefined;
}

export function applySubscriptionPatch(before: SubscriptionFields, patch: SubscriptionPatch): SubscriptionFields {
  return {
    collection_id: before.collection_id,
    sink_id: has(patch, 'sink_id') ? patch.sink_id! : before.sink_id,
    name: has(patch, 'name') ? patch.name! : before.name,
    description: has(patch, 'description') ? patch.description! : before.description,
    entity_types: has(patch, 'entity_types') ? patch.entity_types! : before.entity_types,
    actions: has(patch, 'actions') ? patch.actions! : before.actions,
    filter: has(patch, 'filter') ? patch.filter! : before.filter,
    routing: has(patch, 'routing') ? normalizeRouting(patch.routing!) : before.routing,
    enabled: has(patch, 'enabled') ? patch.enabled! : before.enabled,
  };
}

export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/**
 * Rules that need neither the database nor the sink: name, catalog pairs, and the filter members a
 * system subscription may not use. 400 with details listing every problem (routing problems from
 * the sink's transport are appended by the caller through `extra`).
 */
export function validateSubscription(f: SubscriptionFields, extra: ErrorDetail[] = []): void {
  const details: ErrorDetail[] = [];
  const bad = (path: string, message: string) => details.push({ path: `body.${path}`, message });
  if (f.name.trim() === '' || f.name.length > MAX_NAME) bad('name', `must be 1 to ${MAX_NAME} characters and not blank`);
  for (const t of f.entity_types) {
    if (!EVENT_CATALOG[t]) bad('entity_types', `unknown entity type ${JSON.stringify(t)} (known: ${ENTITY_TYPES.join(', ')})`);
  }
  for (const a of f.actions) {
    if (!ACTIONS.includes(a)) {
      bad('actions', `unknown action ${JSON.stringify(a)}`);
      continue;
    }
    for (const t of f.entity_types) {
      if (EVENT_CATALOG[t] && !isCatalogPair(t, a)) {
        bad('actions', `${t} events never have action ${JSON.stringify(a)} (${t}: ${EVENT_CATALOG[t]!.join(', ')})`);
      }
    }
  }
  if (new Set(f.entity_types).size !== f.entity_types.length) bad('entity_types', 'must not contain duplicates');
  if (new Set(f.actions).size !== f.actions.length) bad('actions', 'must not contain duplicates');
  for (const m of FILTER_MEMBERS) {
    const v = f.filter[m] as unknown[] | undefined;
    if (v !== undefined && v.length > MAX_FILTER_VALUES) bad(`filter.${m}`, `at most ${MAX_FILTER_VALUES} values`);
  }
  if (f.collection_id === null) {
    for (const m of ['collection_ids', 'related_collection_ids'] as const) {
      if ((f.filter[m]?.length ?? 0) > 0) {
        bad(`filter.${m}`, 'a system subscription matches only collection-less events; omit this member or leave it empty');
      }
    }
  }
  details.push(...extra);
  if (details.length) throw badRequest('the event subscription is invalid', details);
}

// ---- matching -------------------------------------------------------------------------------

/** The event members matching looks at. */
export interface MatchableEvent {
  entity_type: string;
  action: string;
  entity_id: number | null;
  entity_name: string | null;
  collection_id: number | null;
  related_collection_ids: number[];
  actor_kind: string;
  actor_user_id: number | null;
  initiator_user_id: number | null;
  request_id: string | null;
  correlation_id: string | null;
  metadata: Record<string, unknown>;
  occurred_at: Date;
}

export interface MatchableSubscription {
  collection_id: number | null;
  entity_types: string[];
  actions: string[];
  filter: SubscriptionFilter;
  created_at: Date;
}

/** Whether the event lies in the subscription's scope (ignoring types, filter and time). */
export function inSubscriptionScope(
  s: { collection_id: number | null },
  e: Pick<MatchableEvent, 'collection_id' | 'related_collection_ids'>,
): boolean {
  if (s.collection_id === null) return e.collection_id === null && e.related_collection_ids.length === 0;
  return e.collection_id === s.collection_id || e.related_collection_ids.includes(s.collection_id);
}

/** True when the subscription's collection is only a related collection of the event (snapshots are redacted). */
export function relatedOnly(s: { collection_id: number | null }, e: Pick<MatchableEvent, 'collection_id'>): boolean {
  return s.collection_id !== null && e.collection_id !== s.collection_id;
}

function member<T>(list: T[] | undefined, ok: (values: T[]) => boolean): boolean {
  return list === undefined || list.length === 0 || ok(list);
}

export function filterMatches(f: SubscriptionFilter, e: MatchableEvent): boolean {
  const lowerRequest = e.request_id?.toLowerCase() ?? null;
  const taskKind = typeof e.metadata?.task_kind === 'string' ? e.metadata.task_kind : null;
  return (
    member(f.collection_ids, (v) => e.collection_id !== null && v.includes(e.collection_id)) &&
    member(f.related_collection_ids, (v) => e.related_collection_ids.some((c) => v.includes(c))) &&
    member(f.entity_ids, (v) => e.entity_id !== null && v.includes(e.entity_id)) &&
    member(f.entity_names, (v) => e.entity_name !== null && v.includes(e.entity_name)) &&
    member(f.actor_kinds, (v) => (v as string[]).includes(e.actor_kind)) &&
    member(f.actor_user_ids, (v) => e.actor_user_id !== null && v.includes(e.actor_user_id)) &&
    member(f.initiator_user_ids, (v) => e.initiator_user_id !== null && v.includes(e.initiator_user_id)) &&
    member(f.request_ids, (v) => lowerRequest !== null && v.some((r) => r.toLowerCase() === lowerRequest)) &&
    member(f.correlation_ids, (v) => e.correlation_id !== null && v.includes(e.correlation_id)) &&
    member(f.task_kinds, (v) => taskKind !== null && v.some((k) => k === taskKind))
  );
}

/** The whole matching rule of the header comment. */
export function subscriptionMatches(s: MatchableSubscription, e: MatchableEvent): boolean {
  return (
    inSubscriptionScope(s, e) &&
    s.entity_types.includes(e.entity_type) &&
    s.actions.includes(e.action) &&
    e.occurred_at.getTime() >= s.created_at.getTime() &&
    filterMatches(s.filter, e)
  );
}

// ---- sinks ----------------------------------------------------------------------------------

export interface DeliveryPolicy {
  min_interval_ms: number | null;
}

export interface SinkFields {
  name: string;
  kind: SinkKind;
  config: Record<string, unknown>;
  secret_ref: string | null;
  enabled: boolean;
  delivery_policy: DeliveryPolicy;
}

interface NewSinkBody {
  name: string;
  kind: SinkKind;
  config?: Record<string, unknown>;
  secret_ref?: string | null;
  enabled?: boolean;
  delivery_policy?: DeliveryPolicy;
}

export type SinkPatch = Partial<NewSinkBody>;

export function sinkFromNew(body: NewSinkBody): SinkFields {
  return {
    name: body.name,
    kind: body.kind,
    config: body.config ?? {},
    secret_ref: body.secret_ref ?? null,
    enabled: body.enabled ?? true,
    delivery_policy: { min_interval_ms: body.delivery_policy?.min_interval_ms ?? null },
  };
}

export function applySinkPatch(before: SinkFields, patch: SinkPatch): SinkFields {
  return {
    name: has(patch, 'name') ? patch.name! : before.name,
    kind: has(patch, 'kind') ? patch.kind! : before.kind,
    config: has(patch, 'config') ? patch.config! : before.config,
    // secret_ref: null clears the alias
    secret_ref:
      Object.prototype.hasOwnProperty.call(patch, 'secret_ref') && patch.secret_ref !== undefined ? patch.secret_ref : before.secret_ref,
    enabled: has(patch, 'enabled') ? patch.enabled! : before.enabled,
    delivery_policy: has(patch, 'delivery_policy')
      ? { min_interval_ms: patch.delivery_policy!.min_interval_ms ?? null }
      : before.delivery_policy,
  };
}

/**
 * Exponential backoff after the n-th failed attempt (n ≥ 1): base · 2^(n−1), capped at max.
 */
export function backoffMs(attempt: number, baseMs: number, maxMs: number): number {
  const exp = Math.min(Math.max(attempt - 1, 0), 40);
  return Math.min(maxMs, baseMs * 2 ** exp);
}

/** The audit event envelope as delivered (the public AuditEvent representation). */
export type EventEnvelope = Record<string, unknown> & { event_id: string; entity_type: string; action: string };

/** The envelope a subscription receives: the public event, snapshots redacted for related-only matches. */
export function deliveryEnvelope(event: EventRow, subscription: { collection_id: number | null }): EventEnvelope {
  const wire = JSON.parse(JSON.stringify(eventWire(event))) as EventEnvelope;
  if (relatedOnly(subscription, event)) {
    wire.before = null;
    wire.after = null;
  }
  return wire;
}
