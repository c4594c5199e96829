// Event sinks: the one write path, for the API and the import worker alike. A sink's kind stays
// while subscriptions use it, a changed config must fit the routing of every subscription, and a
// sink in use cannot be deleted.
import { conflict, notFound } from '../domain/errors.ts';
import { applySinkPatch, sameJson, type SinkFields, type SinkPatch } from '../domain/event-subscriptions.ts';
import { appendEvent, deleteRowWithEvents } from '../db/events.ts';
import { insertEventSink, lockEventSink, subscriptionRoutingsOfSink, updateEventSink as updateEventSinkRow } from '../db/event-sinks.ts';
import { eventSinkEvent, sinkFields, type EventSinkRow } from '../domain/views/event-sinks.ts';
import { countSubscriptionsOfSink } from '../db/event-subscriptions.ts';
import { DELIVERIES_CHANNEL, markWake } from '../db/wakeups.ts';
import { validateSink, validateSinkChange } from '../sinks/index.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

const KIND = 'event_sink';

/** Where the name sits in the caller's input (error details name it): the API's default, `name` for an import item. */
const API_NAME_PATH = 'body.name';

/**
 * Locks the sink, with `behind` (a read of what the write checks: the sink's subscriptions) sent
 * right behind the lock, in the same round trip; then If-Match.
 */
async function lockForWrite<T>(
  m: MutationContext,
  id: number,
  ifMatch: string | undefined,
  behind: () => Promise<T>,
): Promise<{ before: EventSinkRow; now: Date; read: Promise<T> }> {
  const locking = lockEventSink(m.tx, id);
  const read = behind();
  read.catch(() => undefined); // awaited by the caller, once the sink is known
  const locked = await locking;
  if (!locked) throw notFound('event sink');
  requireMatch(ifMatch, KIND, locked.id, locked.revision);
  const { svc_now: now, ...before } = locked;
  return { before, now, read };
}

export async function createEventSink(m: MutationContext, fields: SinkFields, namePath = API_NAME_PATH): Promise<EventSinkRow> {
  validateSink(fields, namePath);
  const created = await insertEventSink(m.tx, fields);
  await appendEvent(m.tx, m.actor, eventSinkEvent(created, 'created', null), m.final);
  return created;
}

/** Two round trips: the lock with the routings of the sink's subscriptions; then the change with its event (and COMMIT). */
export async function updateEventSink(
  m: MutationContext,
  id: number,
  patch: SinkPatch,
  ifMatch?: string,
  namePath = API_NAME_PATH,
): Promise<Written<EventSinkRow>> {
  const { before, now, read: routings } = await lockForWrite(m, id, ifMatch, () => subscriptionRoutingsOfSink(m.tx, id));
  const prev = sinkFields(before);
  const next = applySinkPatch(prev, patch);
  return skipWhenUnchanged(before, sameJson(next, prev), async () => {
    validateSinkChange(prev, next, await routings, namePath);
    const after: EventSinkRow = Object.assign({}, before, {
      name: next.name,
      kind: next.kind,
      config: next.config,
      secret_ref: next.secret_ref,
      enabled: next.enabled,
      min_interval_ms: next.delivery_policy.min_interval_ms,
      updated_at: now,
      revision: before.revision + 1,
    });
    // the deliveries it held while disabled are due: the delivery workers hear of it after the commit
    if (!before.enabled && after.enabled) markWake(m.tx, DELIVERIES_CHANNEL);
    return updateEventSinkRow(m.tx, m.actor, after, [eventSinkEvent(after, 'updated', before)], m.final);
  });
}

/** Two round trips: the lock with the count of the sink's subscriptions; then the delete with its event (and COMMIT). */
export async function deleteEventSink(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  const { before, read: counted } = await lockForWrite(m, id, ifMatch, () => countSubscriptionsOfSink(m.tx, id));
  const used = await counted;
  if (used > 0) {
    throw conflict(`the sink is used by ${used} subscription(s); delete or re-point them first (or disable the sink)`, 'sink_in_use');
  }
  await deleteRowWithEvents(m.tx, m.actor, 'event_sinks', id, [eventSinkEvent(before, 'deleted', before)], m.final);
}
