// Imports: SQL only. Natural-key lookups the import resolves (the entities' own writes are their
// modules' functions), the per-item result rows, and the fenced progress updates of a running
// import. Rules are in src/domain/imports.ts; the executor is src/workers/import.ts.
import type { Db, TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { ENTITY_KINDS, RESULT_OUTCOMES, type EntityKind, type ResultAction, type ResultOutcome } from '../domain/imports.ts';
import type { TaskProgress } from '../domain/views/tasks.ts';
import { type ImportResultRow } from '../domain/views/import-results.ts';

/** The id of the collection named `name` under `parentId` (null: top level). */
export async function childCollectionId(db: Db, parentId: number | null, name: string): Promise<number | undefined> {
  const [row] = await db<{ id: number }[]>`
    select c.id from collections c
    where c.parent_collection_id is not distinct from ${parentId}::int and c.name = ${name}::text`;
  return row?.id;
}

/** The collection at `path` (names from the top level down), or undefined. */
export async function collectionIdByPath(db: Db, path: readonly string[]): Promise<number | undefined> {
  let id: number | null = null;
  for (const name of path) {
    const next = await childCollectionId(db, id, name);
    if (next === undefined) return undefined;
    id = next;
  }
  return id ?? undefined;
}

/** The class relation from one class to another (at most one per ordered pair). */
export async function classRelationIdBetween(db: Db, fromClassId: number, toClassId: number): Promise<number | undefined> {
  const [row] = await db<{ id: number }[]>`
    select id from class_relations where from_class_id = ${fromClassId}::int and to_class_id = ${toClassId}::int`;
  return row?.id;
}

/** The most relations any one object has on each side of a class relation (0 when none). */
export async function maxRelationsInUse(db: Db, classRelationId: number): Promise<{ from: number; to: number }> {
  const [row] = await db<{ from: number; to: number }[]>`
    select
      coalesce((select max(n) from (select count(*)::int as n from object_relations
        where class_relation_id = ${classRelationId}::int group by from_object_id) f), 0) as from,
      coalesce((select max(n) from (select count(*)::int as n from object_relations
        where class_relation_id = ${classRelationId}::int group by to_object_id) t), 0) as to`;
  return row ?? { from: 0, to: 0 };
}

export async function groupIdByKey(db: Db, name: string, identityScope: string): Promise<number | undefined> {
  const [row] = await db<{ id: number }[]>`
    select id from groups where name = ${name}::text and identity_scope = ${identityScope}::text`;
  return row?.id;
}

export async function principalByKey(
  db: Db,
  name: string,
  identityScope: string,
): Promise<{ id: number; kind: 'human' | 'service_account' } | undefined> {
  const [row] = await db<{ id: number; kind: 'human' | 'service_account' }[]>`
    select id, kind from principals where name = ${name}::text and identity_scope = ${identityScope}::text`;
  return row;
}

export async function remoteTargetIdByName(db: Db, collectionId: number, name: string): Promise<number | undefined> {
  const [row] = await db<{ id: number }[]>`
    select id from remote_targets where collection_id = ${collectionId}::int and name = ${name}::text`;
  return row?.id;
}

export async function exportTemplateIdByName(db: Db, collectionId: number, name: string): Promise<number | undefined> {
  const [row] = await db<{ id: number }[]>`
    select id from export_templates where collection_id = ${collectionId}::int and name = ${name}::text`;
  return row?.id;
}

export async function eventSinkIdByName(db: Db, name: string): Promise<number | undefined> {
  const [row] = await db<{ id: number }[]>`select id from event_sinks where name = ${name}::text`;
  return row?.id;
}

/** A subscription by name within a collection, or among system subscriptions (collectionId null). */
export async function eventSubscriptionIdByName(db: Db, collectionId: number | null, name: string): Promise<number | undefined> {
  const [row] = await db<{ id: number }[]>`
    select id from event_subscriptions
    where collection_id is not distinct from ${collectionId}::int and name = ${name}::text`;
  return row?.id;
}

// ---- results ------------------------------------------------------------------------------------

export interface NewImportResult {
  seq: number;
  itemRef: string;
  kind: EntityKind;
  action: ResultAction;
  outcome: ResultOutcome;
  error: string | null;
  entityId: number | null;
}

export const IMPORT_RESULT_LIST_SPEC: ListSpec = {
  fields: {
    seq: { type: 'integer', column: 'r.seq', filterable: false, notNull: true },
    outcome: { type: 'text', column: 'r.outcome', sortable: false, values: RESULT_OUTCOMES },
    entity_kind: { type: 'text', column: 'r.entity_kind', sortable: false, values: ENTITY_KINDS },
  },
  defaultSort: [{ field: 'seq', desc: false }],
  idField: 'seq',
};

export function listImportResultRows(db: Db, taskId: number, parsed: ParsedList): Promise<ListPage<ImportResultRow>> {
  return runList<ImportResultRow>(db, {
    from: db`import_results r` as Fragment,
    select: db`r.seq, r.item_ref, r.entity_kind, r.action, r.outcome, r.error` as Fragment,
    where: [db`r.task_id = ${taskId}::int` as Fragment],
    parsed,
    spec: IMPORT_RESULT_LIST_SPEC,
  });
}

/** Writes result rows (a later write of the same item replaces the earlier one). */
export async function upsertImportResults(db: Db, taskId: number, rows: NewImportResult[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 1000) {
    const chunk = rows.slice(i, i + 1000);
    await db`
      insert into import_results (task_id, seq, item_ref, entity_kind, action, outcome, error, entity_id)
      select ${taskId}::int, r.seq, r.item_ref, r.entity_kind, r.action, r.outcome, r.error, r.entity_id
      from unnest(${chunk.map((r) => r.seq)}::int[], ${chunk.map((r) => r.itemRef)}::text[], ${chunk.map((r) => r.kind)}::text[],
        ${chunk.map((r) => r.action)}::text[], ${chunk.map((r) => r.outcome)}::text[], ${chunk.map((r) => r.error) as string[]}::text[],
        ${chunk.map((r) => r.entityId) as number[]}::int[])
        as r (seq, item_ref, entity_kind, action, outcome, error, entity_id)
      on conflict (task_id, seq) do update set item_ref = excluded.item_ref, entity_kind = excluded.entity_kind,
        action = excluded.action, outcome = excluded.outcome, error = excluded.error, entity_id = excluded.entity_id`;
  }
}

// ---- the running task ---------------------------------------------------------------------------

/**
 * Sets the progress counters of a running import while the claim is still ours; false when the
 * claim is gone (inside an item's transaction this fences the item's commit).
 */
export async function setImportProgress(db: Db, taskId: number, claimToken: string, progress: TaskProgress): Promise<boolean> {
  const rows = await db`
    update tasks set progress = ${db.json(progress as never)}, updated_at = now()
    where id = ${taskId}::int and claim_token = ${claimToken}::uuid and status in ('validating', 'running')
    returning id`;
  return rows.length > 0;
}

/** Replaces the stored request of a finished import (drops the password hashes it carried). */
export async function replaceImportRequest(tx: TransactionSql, taskId: number, request: Record<string, unknown>): Promise<void> {
  await tx`update tasks set request = ${tx.json(request as never)} where id = ${taskId}::int and kind = 'import'`;
}
