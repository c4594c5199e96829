// Entity history (#11): the versions that the triggers of migrations/0170_entity_history.sql
// (insert-only since 0330) write, read through the view entity_versions (which derives each
// version's valid_to from the next one), and the one place that tells those triggers who is acting.
import { textPart, type Db } from './sql.ts';
import type { Actor } from '../domain/actor.ts';
import { isUnscopedAdmin, type Authority } from '../domain/authz.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { and, runList, type Fragment, type ListPage } from './list.ts';
import { classWhere, collectionWhere, objectWhere } from './authz.ts';
import { type HistoryKind, type VersionRow } from '../domain/views/history.ts';

/**
 * Binds the actor to the current transaction (transaction-local settings the history triggers
 * read). Called once where a mutation gets its actor: inTx, and the import worker per item; a
 * mutation whose writes are one statement may bind it in that statement instead (actorBinding,
 * actorBindingText).
 */
export function bindActor(tx: Db, actor: Actor): Promise<unknown> {
  // Sent at once (execute), not when the caller first awaits it: `await` takes a query's then() a
  // microtask later, so a final statement issued meanwhile (commitWith) would go out before it.
  return tx`with ${actorBindingCte(tx, actor)} select 1 from svc_actor`.execute();
}

/**
 * The actor's binding as a CTE (`svc_actor`, one row) of a statement that writes. The statement must
 * read that row where the rows it writes come from (a join, `using`, `from`), so the settings are
 * made before anything is written; the history triggers are AFTER ROW triggers, which run at the
 * end of the statement.
 */
function actorBindingCte(tx: Db, actor: Actor): Fragment {
  const [kind, id, initiator, task] = actorBindingParams(actor);
  return tx`svc_actor as materialized (
      select set_config('svc.actor_kind', ${kind}::text, true), set_config('svc.actor_id', ${id}::text, true),
        set_config('svc.initiator_id', ${initiator}::text, true), set_config('svc.task_id', ${task}::text, true)
    )` as Fragment;
}

/**
 * What a writing statement adds to bind the actor itself when `binds` (a transaction that has not:
 * MutationContext.actorUnbound), else empty parts: `with ${b.cte}o as (…)`, and `b.from` / `b.using`
 * where the rows it writes come from (an INSERT's SELECT or an UPDATE's FROM, a DELETE's USING).
 */
export function actorBinding(tx: Db, actor: Actor, binds: boolean): { cte: Fragment; from: Fragment; using: Fragment } {
  if (!binds) {
    const none = textPart(tx, '') as unknown as Fragment;
    return { cte: none, from: none, using: none };
  }
  return {
    cte: tx`${actorBindingCte(tx, actor)}, ` as Fragment,
    from: textPart(tx, 'from svc_actor') as unknown as Fragment,
    using: textPart(tx, 'using svc_actor') as unknown as Fragment,
  };
}

/** The values bindActor sets, in its order: actor kind, principal, initiator, task ('' for none). */
export function actorBindingParams(actor: Actor): [string, string, string, string] {
  const initiatorId = actor.initiatorId ?? (actor.kind === 'user' ? actor.principalId : null);
  return [actor.kind, str(actor.principalId), str(initiatorId), str(actor.taskId ?? null)];
}

/**
 * actorBindingCte as constant statement text, with actorBindingParams as parameters $first to
 * $first+3 (for a statement kept as text; read it as actorBindingCte says).
 */
export function actorBindingText(first: number): string {
  const p = (i: number) => `$${first + i}::text`;
  return `svc_actor as materialized (
      select set_config('svc.actor_kind', ${p(0)}, true), set_config('svc.actor_id', ${p(1)}, true),
        set_config('svc.initiator_id', ${p(2)}, true), set_config('svc.task_id', ${p(3)}, true)
    )`;
}

function str(n: number | null | undefined): string {
  return n === null || n === undefined ? '' : String(n);
}

/** The list query language on versions: newest first (version_id is the order they were written in). */
export const HISTORY_LIST_SPEC: ListSpec = {
  fields: {
    version_id: { type: 'integer', column: 'h.id', filterable: false, notNull: true },
    revision: { type: 'integer', column: 'h.revision', notNull: true },
    operation: { type: 'text', column: 'h.operation', values: ['insert', 'update', 'delete'], notNull: true },
    valid_from: { type: 'timestamp', column: 'h.valid_from', notNull: true },
    valid_to: { type: 'timestamp', column: 'h.valid_to' },
    actor_kind: { type: 'text', column: 'h.actor_kind', values: ['user', 'worker', 'system'], notNull: true },
    actor_principal_id: { type: 'integer', column: 'h.actor_principal_id' },
  },
  defaultSort: [{ field: 'version_id', desc: true }],
  idField: 'version_id',
};

function versionCols(db: Db): Fragment {
  return db`h.revision, h.operation, h.data, h.valid_from, h.valid_to, h.actor_kind, h.actor_principal_id,
    h.initiator_principal_id, h.task_id` as Fragment;
}

/**
 * Boolean fragment over `entity_history h`: the caller may read this version, judged by the
 * attributes stored in it (the collection it lived in then), never by the entity's current state.
 * Tombstones are for unscoped administrators only. Relations are judged by their ends' versions
 * current at the relation version's valid_from.
 */
export function versionVisible(db: Db, auth: Authority, kind: HistoryKind): Fragment {
  const tombstones = isUnscopedAdmin(auth) ? (db`true` as Fragment) : (db`h.operation <> 'delete'` as Fragment);
  return and(db, [tombstones, kindVisible(db, auth, kind)]);
}

function kindVisible(db: Db, auth: Authority, kind: HistoryKind): Fragment {
  switch (kind) {
    case 'collection':
      return collectionWhere(db, auth, 'ReadCollection', { id: 'h.entity_id' });
    case 'class':
      return classWhere(db, auth, 'ReadClass', { id: 'h.entity_id', collectionId: 'h.collection_id' });
    case 'object':
      return objectWhere(db, auth, 'ReadObject', { id: 'h.entity_id', classId: 'h.class_id', collectionId: 'h.collection_id' });
    case 'export_template':
      return collectionWhere(db, auth, 'ReadTemplate', { id: 'h.collection_id' });
    case 'remote_target':
      return collectionWhere(db, auth, 'ReadRemoteTarget', { id: 'h.collection_id' });
    case 'class_relation':
      return and(db, [
        endVisible(
          db,
          'class',
          'from_class_id',
          classWhere(db, auth, 'ReadClassRelation', { id: 'e.entity_id', collectionId: 'e.collection_id' }),
        ),
        endVisible(
          db,
          'class',
          'to_class_id',
          classWhere(db, auth, 'ReadClassRelation', { id: 'e.entity_id', collectionId: 'e.collection_id' }),
        ),
      ]);
    case 'object_relation': {
      const ends = { id: 'e.entity_id', classId: 'e.class_id', collectionId: 'e.collection_id' };
      return and(db, [
        endVisible(db, 'object', 'from_object_id', objectWhere(db, auth, 'ReadObjectRelation', ends)),
        endVisible(db, 'object', 'to_object_id', objectWhere(db, auth, 'ReadObjectRelation', ends)),
      ]);
    }
  }
}

/** The end's version current when the relation version began (alias e) satisfies `test`. */
function endVisible(db: Db, kind: HistoryKind, member: string, test: Fragment): Fragment {
  return db`exists (
    select 1 from (
      select eh.entity_id, eh.collection_id, eh.class_id from entity_history eh
      where eh.entity_kind = ${kind} and eh.entity_id = (h.data ->> ${member})::int and eh.valid_from <= h.valid_from
      order by eh.id desc limit 1) e
    where ${test})` as Fragment;
}

export interface HistoryFacts {
  /** Some version exists. */
  exists: boolean;
  /** The current version is a tombstone. */
  deleted: boolean;
  /** The class of an object (from its versions; an object never changes class). */
  classId: number | null;
  /** Some version is visible to the caller. */
  anyVisible: boolean;
}

export async function historyFacts(db: Db, auth: Authority, kind: HistoryKind, id: number): Promise<HistoryFacts> {
  const [row] = await db<{ n: number; deleted: boolean | null; class_id: number | null; visible: boolean | null }[]>`
    select count(*)::int as n, (array_agg(h.operation order by h.id desc))[1] = 'delete' as deleted, max(h.class_id) as class_id,
      bool_or(${versionVisible(db, auth, kind)}) as visible
    from entity_history h where h.entity_kind = ${kind} and h.entity_id = ${id}::int`;
  return { exists: (row?.n ?? 0) > 0, deleted: row?.deleted ?? false, classId: row?.class_id ?? null, anyVisible: row?.visible ?? false };
}

/** One page of an entity's versions visible to the caller. */
export function listVersions(db: Db, auth: Authority, kind: HistoryKind, id: number, parsed: ParsedList): Promise<ListPage<VersionRow>> {
  return runList<VersionRow>(db, {
    from: db`entity_versions h` as Fragment,
    select: versionCols(db),
    where: [db`h.entity_kind = ${kind} and h.entity_id = ${id}::int` as Fragment, versionVisible(db, auth, kind)],
    parsed,
    spec: HISTORY_LIST_SPEC,
  });
}

/** The version current at `at` (RFC 3339 text), with whether the caller may read it. */
export async function versionAt(
  db: Db,
  auth: Authority,
  kind: HistoryKind,
  id: number,
  at: string,
): Promise<(VersionRow & { visible: boolean }) | undefined> {
  // The newest version begun at or before `at`: valid_from never decreases along an entity's
  // versions, so the next one (which ends it) begins after `at`. Versions begun in one millisecond
  // end at the same instant they began but the last, which this picks.
  const [row] = await db<(VersionRow & { visible: boolean })[]>`
    select ${versionCols(db)}, ${versionVisible(db, auth, kind)} as visible
    from entity_versions h
    where h.id = (select c.id from entity_history c
      where c.entity_kind = ${kind} and c.entity_id = ${id}::int and c.valid_from <= ${at}::text::timestamptz
      order by c.id desc limit 1)`;
  return row;
}

/** Advisory lock key of the purge: one purger at a time (two deleting one entity's versions could deadlock). */
const PURGE_LOCK = 727331;

/**
 * One batch of retention: takes up to `limit` versions that replaced a kept version and began
 * before `cutoff` (the partial index of migration 0330), deletes every earlier version of their
 * entities (each ended when its next version began, so before `cutoff`) and clears their mark.
 * Current versions and tombstones are never purged. Another purger at work: nothing, this time.
 * Returns the versions taken (a batch that took `limit` may have left more) and those deleted.
 */
export async function purgeReplacedVersions(db: Db, cutoff: Date, limit: number): Promise<{ taken: number; deleted: number }> {
  const [row] = await db<{ taken: number; deleted: number }[]>`
    with taken as (
      select id, entity_kind, entity_id from entity_history
      where supersedes and valid_from < ${cutoff.toISOString()}::text::timestamptz
        and (select pg_try_advisory_xact_lock(${PURGE_LOCK}))
      order by valid_from limit ${limit}
      for update
    ), newest as (
      select distinct on (entity_kind, entity_id) id, entity_kind, entity_id from taken
      order by entity_kind, entity_id, id desc
    ), deleted as (
      delete from entity_history v using newest n
      where v.entity_kind = n.entity_kind and v.entity_id = n.entity_id and v.id < n.id
      returning v.id
    ), cleared as (
      update entity_history h set supersedes = false from newest n where h.id = n.id
    )
    select (select count(*) from taken)::int as taken, (select count(*) from deleted)::int as deleted`;
  return { taken: row?.taken ?? 0, deleted: row?.deleted ?? 0 };
}
