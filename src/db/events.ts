import type { Db } from './sql.ts';
import { notFinal, type Final } from './tx.ts';
import type { Fragment } from './list.ts';
import type { Actor } from '../domain/actor.ts';
import { AUTH_ENTITY_TYPES, markAuthChange } from './auth-changes.ts';
import type { NewEvent } from '../domain/new-event.ts';

/**
 * Appends one audit event inside the caller's transaction, so the event exists only if the change
 * commits. Snapshots must never hold secrets, raw tokens, token hashes or password hashes.
 */
export async function appendEvent(tx: Db, actor: Actor, e: NewEvent, final: Final = notFinal): Promise<{ id: number; event_id: string }> {
  const [row] = await final(tx<{ id: number; event_id: string }[]>`
    insert into events (${EVENT_COLUMNS(tx)}) values ${eventValues(tx, actor, e)}
    returning id, event_id`);
  return row!;
}

/**
 * The `insert into events` of `events` as a statement fragment, for a write that appends its events
 * in the same statement as its row (a data-modifying CTE): one round trip instead of two.
 */
export function insertEventsSql(tx: Db, actor: Actor, events: NewEvent[]): Fragment {
  const values = events.map((e) => eventValues(tx, actor, e));
  return tx`insert into events (${EVENT_COLUMNS(tx)}) values ${values.slice(1).reduce((all, v) => tx`${all}, ${v}` as Fragment, values[0]!)}` as Fragment;
}

/** `, e as (insert into events …)`: the events as one more CTE of a write's statement; nothing when there are none. */
export function eventsCte(tx: Db, actor: Actor, events: NewEvent[]): Fragment {
  return (events.length ? tx`, e as (${insertEventsSql(tx, actor, events)})` : tx``) as Fragment;
}

function EVENT_COLUMNS(tx: Db): Fragment {
  return tx`entity_type, entity_id, entity_name, collection_id, related_collection_ids, action,
      actor_kind, actor_user_id, initiator_user_id, task_id, provenance, request_id, correlation_id,
      summary, before, after, before_revision, after_revision, metadata, schema_version` as Fragment;
}

/**
 * `, e as (insert into events … select … from o)`: the event of the row that the statement's `o` CTE
 * inserts, for a write that does not know that row's id and times before the statement runs. The
 * event's entity_id is `o.id`, and its `after` snapshot is `e.after` with `id`, `created_at` and
 * `updated_at` taken from `o` (the times as ISO 8601 UTC text cut to milliseconds, as isoTime writes
 * them); no event is written when `o` inserts nothing.
 */
export function rowEventCte(tx: Db, actor: Actor, e: NewEvent): Fragment {
  const after = tx`${tx.json((e.after ?? {}) as never)}::jsonb || jsonb_build_object('id', o.id,
      'created_at', to_char(o.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'updated_at', to_char(o.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))` as Fragment;
  return tx`, e as (insert into events (${EVENT_COLUMNS(tx)}) select ${eventValueList(tx, actor, e, tx`o.id` as Fragment, after)} from o)` as Fragment;
}

/** One parenthesised row of event values (columns as EVENT_COLUMNS). */
function eventValues(tx: Db, actor: Actor, e: NewEvent): Fragment {
  return tx`(${eventValueList(tx, actor, e)})` as Fragment;
}

/** The values of one event (columns as EVENT_COLUMNS); `entityId` and `after` replace e's when given. */
function eventValueList(tx: Db, actor: Actor, e: NewEvent, entityId?: Fragment, after?: Fragment): Fragment {
  if (AUTH_ENTITY_TYPES.has(e.entityType)) markAuthChange(tx);
  const initiatorId = actor.initiatorId ?? (actor.kind === 'user' ? actor.principalId : null);
  const initiatorName = actor.initiatorName ?? (actor.kind === 'user' ? actor.principalName : null);
  const provenance = {
    actor: {
      kind: actor.kind,
      principal: actor.principalId === null ? null : { id: actor.principalId, name: actor.principalName },
    },
    initiator: initiatorId === null ? null : { principal_id: initiatorId, name: initiatorName },
    task_id: actor.taskId ?? null,
  };
  const related = [...new Set(e.relatedCollectionIds ?? [])].filter((c) => c !== e.collectionId);
  const metadata = { ...(e.metadata ?? {}), ...(related.length ? { related_collection_ids: related } : {}) };
  return tx`${e.entityType}, ${entityId ?? e.entityId}, ${e.entityName ?? null}, ${e.collectionId ?? null}, ${related}::int[],
      ${e.action}, ${actor.kind}, ${actor.kind === 'user' ? actor.principalId : null}, ${initiatorId},
      ${actor.taskId ?? null}, ${tx.json(provenance as never)}, ${actor.requestId ?? null}, ${actor.correlationId ?? null},
      ${e.summary ?? null}, ${e.before === undefined || e.before === null ? null : tx.json(e.before as never)},
      ${after ?? (e.after === undefined || e.after === null ? null : tx.json(e.after as never))},
      ${e.beforeRevision ?? null}, ${e.afterRevision ?? null}, ${tx.json(metadata as never)}, 2` as Fragment;
}
