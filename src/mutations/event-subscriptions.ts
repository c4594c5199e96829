// Event subscriptions: the one write path, for the API and the import worker alike. A
// subscription lives in a collection (ManageEventSubscription on it) or in the system scope
// (unscoped administrators). The destination rule (src/sinks/allowed-routing.ts) applies when the
// routing or the sink is written: an unscoped administrator approves whatever they name
// (routing_admin_approved); anyone else may only name destinations the sink's
// config.allowed_routing lists (403 otherwise) and approves nothing.
import { forbidden, notFound } from '../domain/errors.ts';
import { isUnscoped, type Authority } from '../domain/authz.ts';
import { applySubscriptionPatch, sameJson, type SubscriptionFields, type SubscriptionPatch } from '../domain/event-subscriptions.ts';
import type { Db } from '../db/sql.ts';
import { deleteRowWithEvents, reserveId } from '../db/events.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import { findEventSink } from '../db/event-sinks.ts';
import {
  findSinkOfSubscription,
  insertEventSubscription,
  lockEventSubscription,
  updateEventSubscription as updateEventSubscriptionRow,
} from '../db/event-subscriptions.ts';
import type { EventSinkRow } from '../domain/views/event-sinks.ts';
import { eventSubscriptionEvent, subscriptionFields, type EventSubscriptionRow } from '../domain/views/event-subscriptions.ts';
import { repointSubscriptionDeliveries } from '../db/event-deliveries.ts';
import { DELIVERIES_CHANNEL, markWake } from '../db/wakeups.ts';
import { requireListedRouting, validateSubscriptionForSink } from '../sinks/index.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

const KIND = 'event_subscription';

/** A collection id, or null for the system scope. */
export type SubscriptionScope = number | null;

const isUnscopedAdmin = (auth: Authority) => auth.isAdmin && isUnscoped(auth);

/** Who may manage the subscriptions of a scope (reads use it too). */
export async function requireSubscriptionScope(db: Db, auth: Authority, scope: SubscriptionScope): Promise<void> {
  if (scope !== null) await requireCollectionPermission(db, auth, scope, 'ManageEventSubscription');
  else if (!isUnscopedAdmin(auth)) throw forbidden('an unscoped administrator is required');
}

/** The sink of a subscription write (404) and the subscription's fit to it (400). */
async function sinkFor(f: SubscriptionFields, found: Promise<EventSinkRow | undefined>): Promise<EventSinkRow> {
  const sink = await found;
  validateSubscriptionForSink(f, sink);
  return sink!;
}

/** Two round trips: the scope's check, the sink and the new id with now(); then the subscription with its event (and COMMIT). */
export async function createEventSubscription(m: MutationContext, fields: SubscriptionFields): Promise<EventSubscriptionRow> {
  const checked = requireSubscriptionScope(m.tx, m.auth, fields.collection_id);
  const found = findEventSink(m.tx, fields.sink_id);
  const reserved = reserveId(m.tx, 'event_subscriptions');
  for (const p of [found, reserved]) p.catch(() => undefined); // awaited below, after the check
  await checked;
  const sink = await sinkFor(fields, found);
  const approved = isUnscopedAdmin(m.auth);
  if (!approved) requireListedRouting(sink.id, sink.kind, fields.routing, sink.config);
  const { id, now } = await reserved;
  const created: EventSubscriptionRow = {
    collection_id: fields.collection_id,
    sink_id: fields.sink_id,
    name: fields.name,
    description: fields.description,
    entity_types: fields.entity_types,
    actions: fields.actions,
    filter: fields.filter,
    routing: fields.routing,
    enabled: fields.enabled,
    id,
    routing_admin_approved: approved,
    created_at: now,
    updated_at: now,
    revision: 1,
  };
  return insertEventSubscription(m.tx, m.actor, created, [eventSubscriptionEvent(created, 'created', null)], m.final);
}

/**
 * The scope's check, then the subscription locked and `behind` (a read the write needs) in the same
 * round trip; then If-Match.
 */
async function lockForWrite<T>(
  m: MutationContext,
  scope: SubscriptionScope,
  id: number,
  ifMatch: string | undefined,
  behind?: () => Promise<T>,
): Promise<{ before: EventSubscriptionRow; now: Date; read: Promise<T> | undefined }> {
  const checked = requireSubscriptionScope(m.tx, m.auth, scope);
  const locking = lockEventSubscription(m.tx, id, scope);
  const read = behind?.();
  for (const p of [locking, read]) p?.catch(() => undefined); // awaited below (read: by the caller), after the check
  await checked;
  const locked = await locking;
  if (!locked) throw notFound('event subscription');
  requireMatch(ifMatch, KIND, locked.id, locked.revision);
  const { svc_now: now, ...before } = locked;
  return { before, now, read };
}

/** Two round trips unless it moves to another sink: the check, the lock and the sink; then the change with its event (and COMMIT). */
export async function updateEventSubscription(
  m: MutationContext,
  scope: SubscriptionScope,
  id: number,
  patch: SubscriptionPatch,
  ifMatch?: string,
): Promise<Written<EventSubscriptionRow>> {
  const { before, now, read } = await lockForWrite(m, scope, id, ifMatch, () => findSinkOfSubscription(m.tx, id, patch.sink_id ?? null));
  const prev = subscriptionFields(before);
  const next = applySubscriptionPatch(prev, patch);
  const admin = isUnscopedAdmin(m.auth);
  const namesDestination = patch.routing !== undefined || patch.sink_id !== undefined;
  // an administrator who names the routing or the sink approves it, even when it is unchanged
  const approving = admin && namesDestination && !before.routing_admin_approved;
  return skipWhenUnchanged(before, sameJson(next, prev) && !approving, async () => {
    const sink = await sinkFor(next, read!);
    const destinationChanged = next.sink_id !== prev.sink_id || !sameJson(next.routing, prev.routing);
    if (!admin && destinationChanged) requireListedRouting(sink.id, sink.kind, next.routing, sink.config);
    if (next.sink_id !== before.sink_id) await repointSubscriptionDeliveries(m.tx, id, next.sink_id);
    // the deliveries it held while disabled are due: the delivery workers hear of it after the commit
    if (!before.enabled && next.enabled) markWake(m.tx, DELIVERIES_CHANNEL);
    // routing_admin_approved is the statement's to decide (updateEventSubscriptionRow)
    const after: EventSubscriptionRow = Object.assign({}, before, next, { updated_at: now, revision: before.revision + 1 });
    const event = eventSubscriptionEvent(after, 'updated', before);
    return updateEventSubscriptionRow(m.tx, m.actor, after, admin && namesDestination, event, m.final);
  });
}

/** Two round trips: the check and the lock; then the delete with its event (and COMMIT). */
export async function deleteEventSubscription(m: MutationContext, scope: SubscriptionScope, id: number, ifMatch?: string): Promise<void> {
  const { before } = await lockForWrite(m, scope, id, ifMatch);
  await deleteRowWithEvents(m.tx, m.actor, 'event_subscriptions', id, [eventSubscriptionEvent(before, 'deleted', before)], m.final);
}
