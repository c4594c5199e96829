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
import { appendEvent } from '../db/events.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import { findEventSink } from '../db/event-sinks.ts';
import {
  deleteEventSubscriptionRow,
  insertEventSubscription,
  lockEventSubscription,
  updateEventSubscriptionRow,
} from '../db/event-subscriptions.ts';
import { eventSubscriptionEvent, subscriptionFields, type EventSubscriptionRow } from '../domain/views/event-subscriptions.ts';
import { repointSubscriptionDeliveries } from '../db/event-deliveries.ts';
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
async function sinkFor(m: MutationContext, f: SubscriptionFields) {
  const sink = await findEventSink(m.tx, f.sink_id);
  validateSubscriptionForSink(f, sink);
  return sink!;
}

export async function createEventSubscription(m: MutationContext, fields: SubscriptionFields): Promise<EventSubscriptionRow> {
  await requireSubscriptionScope(m.tx, m.auth, fields.collection_id);
  const sink = await sinkFor(m, fields);
  const approved = isUnscopedAdmin(m.auth);
  if (!approved) requireListedRouting(sink.id, sink.kind, fields.routing, sink.config);
  const created = await insertEventSubscription(m.tx, fields, approved);
  await appendEvent(m.tx, m.actor, eventSubscriptionEvent(created, 'created', null), m.final);
  return created;
}

async function lockForWrite(m: MutationContext, scope: SubscriptionScope, id: number, ifMatch: string | undefined) {
  await requireSubscriptionScope(m.tx, m.auth, scope);
  const before = await lockEventSubscription(m.tx, id, scope);
  if (!before) throw notFound('event subscription');
  requireMatch(ifMatch, KIND, before.id, before.revision);
  return before;
}

export async function updateEventSubscription(
  m: MutationContext,
  scope: SubscriptionScope,
  id: number,
  patch: SubscriptionPatch,
  ifMatch?: string,
): Promise<Written<EventSubscriptionRow>> {
  const before = await lockForWrite(m, scope, id, ifMatch);
  const prev = subscriptionFields(before);
  const next = applySubscriptionPatch(prev, patch);
  const admin = isUnscopedAdmin(m.auth);
  const namesDestination = patch.routing !== undefined || patch.sink_id !== undefined;
  // an administrator who names the routing or the sink approves it, even when it is unchanged
  const approving = admin && namesDestination && !before.routing_admin_approved;
  return skipWhenUnchanged(before, sameJson(next, prev) && !approving, async () => {
    const sink = await sinkFor(m, next);
    const destinationChanged = next.sink_id !== prev.sink_id || !sameJson(next.routing, prev.routing);
    if (!admin && destinationChanged) requireListedRouting(sink.id, sink.kind, next.routing, sink.config);
    const after = await updateEventSubscriptionRow(m.tx, id, next, admin && namesDestination);
    if (after.sink_id !== before.sink_id) await repointSubscriptionDeliveries(m.tx, id, after.sink_id);
    await appendEvent(m.tx, m.actor, eventSubscriptionEvent(after, 'updated', before), m.final);
    return after;
  });
}

export async function deleteEventSubscription(m: MutationContext, scope: SubscriptionScope, id: number, ifMatch?: string): Promise<void> {
  const before = await lockForWrite(m, scope, id, ifMatch);
  await deleteEventSubscriptionRow(m.tx, id);
  await appendEvent(m.tx, m.actor, eventSubscriptionEvent(before, 'deleted', before), m.final);
}
