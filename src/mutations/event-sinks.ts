// Event sinks: the one write path, for the API and the import worker alike. A sink's kind stays
// while subscriptions use it, a changed config must fit the routing of every subscription, and a
// sink in use cannot be deleted.
import { conflict, notFound } from '../domain/errors.ts';
import { applySinkPatch, sameJson, type SinkFields, type SinkPatch } from '../domain/event-subscriptions.ts';
import { appendEvent } from '../db/events.ts';
import { deleteEventSinkRow, insertEventSink, lockEventSink, subscriptionRoutingsOfSink, updateEventSinkRow } from '../db/event-sinks.ts';
import { eventSinkEvent, sinkFields, type EventSinkRow } from '../domain/views/event-sinks.ts';
import { countSubscriptionsOfSink } from '../db/event-subscriptions.ts';
import { validateSink, validateSinkChange } from '../sinks/index.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

const KIND = 'event_sink';

/** Where the name sits in the caller's input (error details name it): the API's default, `name` for an import item. */
const API_NAME_PATH = 'body.name';

async function lockForWrite(m: MutationContext, id: number, ifMatch: string | undefined): Promise<EventSinkRow> {
  const before = await lockEventSink(m.tx, id);
  if (!before) throw notFound('event sink');
  requireMatch(ifMatch, KIND, before.id, before.revision);
  return before;
}

export async function createEventSink(m: MutationContext, fields: SinkFields, namePath = API_NAME_PATH): Promise<EventSinkRow> {
  validateSink(fields, namePath);
  const created = await insertEventSink(m.tx, fields);
  await appendEvent(m.tx, m.actor, eventSinkEvent(created, 'created', null), m.final);
  return created;
}

export async function updateEventSink(
  m: MutationContext,
  id: number,
  patch: SinkPatch,
  ifMatch?: string,
  namePath = API_NAME_PATH,
): Promise<Written<EventSinkRow>> {
  const before = await lockForWrite(m, id, ifMatch);
  const prev = sinkFields(before);
  const next = applySinkPatch(prev, patch);
  return skipWhenUnchanged(before, sameJson(next, prev), async () => {
    validateSinkChange(prev, next, await subscriptionRoutingsOfSink(m.tx, id), namePath);
    const after = await updateEventSinkRow(m.tx, id, next);
    await appendEvent(m.tx, m.actor, eventSinkEvent(after, 'updated', before), m.final);
    return after;
  });
}

export async function deleteEventSink(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  const before = await lockForWrite(m, id, ifMatch);
  const used = await countSubscriptionsOfSink(m.tx, id);
  if (used > 0) {
    throw conflict(`the sink is used by ${used} subscription(s); delete or re-point them first (or disable the sink)`, 'sink_in_use');
  }
  await deleteEventSinkRow(m.tx, id);
  await appendEvent(m.tx, m.actor, eventSinkEvent(before, 'deleted', before), m.final);
}
