// Remote targets and remote-call results: SQL only. Rules are in src/domain/remote-targets.ts.
import { textPart, type Db, type TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import type { Method, Subject, SubjectContext, SubjectType } from '../domain/remote-targets.ts';
import type { Authority, Permission } from '../domain/authz.ts';
import { badRequest, notFound } from '../domain/errors.ts';
import {
  lockInCollectionAs,
  readInCollectionAs,
  requireClassPermission,
  requireCollectionPermission,
  requireObjectPermission,
} from './authz.ts';
import { type RemoteTargetRow } from '../domain/views/remote-targets.ts';
import { writeWithEvents } from './events.ts';
import type { Final } from './tx.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';

export const REMOTE_TARGET_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'rt.id', notNull: true },
    name: { type: 'text', column: 'rt.name', notNull: true },
    description: { type: 'text', column: 'rt.description', notNull: true },
    collection_id: { type: 'integer', column: 'rt.collection_id', notNull: true },
    kind: { type: 'text', column: 'rt.method', sortable: false, values: ['get', 'post', 'patch', 'delete'] },
    created_at: { type: 'timestamp', column: 'rt.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'rt.updated_at', notNull: true },
    revision: { type: 'integer', column: 'rt.revision', notNull: true },
  },
  aliases: { collections: 'collection_id' },
  defaultSort: [{ field: 'id', desc: false }],
};

const REMOTE_TARGET_COLUMN_LIST =
  'rt.id, rt.collection_id, rt.class_id, rt.name, rt.description, rt.method, rt.url_template, rt.headers_template, rt.body_template, rt.auth_config, rt.allowed_subject_types, rt.timeout_ms, rt.enabled, rt.created_at, rt.updated_at, rt.revision';

function cols(db: Db): Fragment {
  return textPart(db, REMOTE_TARGET_COLUMN_LIST) as Fragment;
}

export function listRemoteTargetRows(db: Db, parsed: ParsedList, where: Fragment[]): Promise<ListPage<RemoteTargetRow>> {
  return runList<RemoteTargetRow>(db, {
    from: db`remote_targets rt` as Fragment,
    select: cols(db),
    where,
    parsed,
    spec: REMOTE_TARGET_LIST_SPEC,
  });
}

/** The target `id` as readInCollectionAs and lockInCollectionAs read it. */
function targetById(db: Db, id: number) {
  return {
    columns: cols(db),
    from: db`remote_targets rt` as Fragment,
    where: db`rt.id = ${id}::int` as Fragment,
    collection: 'rt.collection_id',
  };
}

/** The target and the check of `perm` on its collection, in one statement: 404 or 403 otherwise. */
export function readRemoteTargetAs(db: Db, auth: Authority, id: number, perm: Permission): Promise<RemoteTargetRow> {
  return readInCollectionAs<RemoteTargetRow>(db, auth, perm, 'remote target', targetById(db, id));
}

export async function findRemoteTarget(db: Db, id: number): Promise<RemoteTargetRow | undefined> {
  const [row] = await db<RemoteTargetRow[]>`select ${cols(db)} from remote_targets rt where rt.id = ${id}::int`;
  return row;
}

/** The target locked for a write, with now() and the check of `perm` on its collection: 404 or 403 otherwise. */
export function lockRemoteTargetAs(tx: TransactionSql, auth: Authority, id: number, perm: Permission) {
  return lockInCollectionAs<RemoteTargetRow>(tx, auth, perm, 'remote target', Object.assign(targetById(tx, id), { lock: 'rt' }));
}

/** The collection of a class (undefined when the class does not exist). */
export async function classCollectionId(db: Db, classId: number): Promise<number | undefined> {
  const [row] = await db<{ collection_id: number }[]>`select collection_id from classes where id = ${classId}::int`;
  return row?.collection_id;
}

/** Inserts the target `t` (its id and times reserved: reserveId) with its audit events, in one statement. */
export function insertRemoteTarget(
  tx: TransactionSql,
  actor: Actor,
  t: RemoteTargetRow,
  events: NewEvent[],
  final?: Final,
): Promise<RemoteTargetRow> {
  const write = tx`
    insert into remote_targets as rt (id, collection_id, class_id, name, description, method, url_template, headers_template,
      body_template, auth_config, allowed_subject_types, timeout_ms, enabled)
    values (${t.id}::int, ${t.collection_id}::int, ${t.class_id}::int, ${t.name}, ${t.description}, ${t.method}, ${t.url_template},
      ${tx.json(t.headers_template as never)}, ${t.body_template}::text, ${tx.json(t.auth_config as never)},
      ${t.allowed_subject_types}::text[], ${t.timeout_ms}::int, ${t.enabled}::boolean)
    returning ${cols(tx)}` as Fragment;
  return writeWithEvents(tx, actor, write, events, final);
}

/** Writes `t` over the locked target of its id (updated_at now(), the revision one up) with its audit events, in one statement. */
export function updateRemoteTarget(
  tx: TransactionSql,
  actor: Actor,
  t: RemoteTargetRow,
  events: NewEvent[],
  final?: Final,
): Promise<RemoteTargetRow> {
  const write = tx`
    update remote_targets rt set collection_id = ${t.collection_id}::int, class_id = ${t.class_id}::int, name = ${t.name},
      description = ${t.description}, method = ${t.method}, url_template = ${t.url_template},
      headers_template = ${tx.json(t.headers_template as never)}, body_template = ${t.body_template}::text,
      auth_config = ${tx.json(t.auth_config as never)}, allowed_subject_types = ${t.allowed_subject_types}::text[],
      timeout_ms = ${t.timeout_ms}::int, enabled = ${t.enabled}::boolean, updated_at = now(), revision = rt.revision + 1
    where rt.id = ${t.id}::int
    returning ${cols(tx)}` as Fragment;
  return writeWithEvents(tx, actor, write, events, final);
}

// ---- invocation -----------------------------------------------------------------------------

/**
 * Serializes remote-call submissions of one principal (the active-task cap is counted under it),
 * then counts its queued, validating and running remote-call tasks.
 */
export async function lockAndCountActiveRemoteCalls(tx: TransactionSql, principalId: number): Promise<number> {
  // the count goes out right behind the lock (one round trip; both sent as tx.ts's Pipelines say)
  // and runs once the lock is held
  const locking = (async () => void (await tx`select pg_advisory_xact_lock(727070, ${principalId}::int)`))();
  const counting = (async () =>
    await tx<{ n: number }[]>`
      select count(*)::int as n from tasks
      where submitted_by = ${principalId}::int and kind = 'remote_call' and status in ('queued', 'validating', 'running')`)();
  counting.catch(() => undefined); // awaited below, after the lock
  await locking;
  const [row] = await counting;
  return row?.n ?? 0;
}

/** Whether the principal already has a remote-call task with this Idempotency-Key. */
export async function hasIdempotentRemoteCall(db: Db, principalId: number, key: string): Promise<boolean> {
  const [row] = await db<{ n: number }[]>`
    select count(*)::int as n from tasks
    where submitted_by = ${principalId}::int and kind = 'remote_call' and idempotency_key = ${key}::text`;
  return (row?.n ?? 0) > 0;
}

// ---- subjects -------------------------------------------------------------------------------

type Rec = Record<string, unknown>;

// Each reader takes the row's id as an SQL expression: a value, or a scalar subquery through the
// subject's row, so that every statement of a subject's context can be sent at once (one round
// trip, tx.ts's "Pipelines") instead of each waiting for the ids the one before it read.

function given(db: Db, id: number): Fragment {
  return db`${id}::int` as Fragment;
}

/** The id in `column` of class relation `id`, as a subquery. */
function classRelationEnd(db: Db, id: number, column: 'from_class_id' | 'to_class_id'): Fragment {
  return db`(select ${db(column)} from class_relations where id = ${id}::int)` as Fragment;
}

/** The id in `column` of object relation `id`, as a subquery. */
function objectRelationEnd(db: Db, id: number, column: 'from_object_id' | 'to_object_id' | 'class_relation_id'): Fragment {
  return db`(select ${db(column)} from object_relations where id = ${id}::int)` as Fragment;
}

async function collectionRec(db: Db, id: Fragment): Promise<Rec | undefined> {
  const [r] = await db<Rec[]>`
    select id, name, description, parent_collection_id, created_at, updated_at, revision from collections where id = ${id}`;
  return r;
}

async function classRec(db: Db, id: Fragment): Promise<Rec | undefined> {
  const [r] = await db<Rec[]>`
    select id, name, description, collection_id, validate_schema, json_schema, created_at, updated_at, revision
    from classes where id = ${id}`;
  return r;
}

async function objectRec(db: Db, id: Fragment): Promise<Rec | undefined> {
  const [r] = await db<Rec[]>`
    select id, name, description, collection_id, class_id as svc_class_id, json_data as data, created_at, updated_at, revision
    from objects where id = ${id}`;
  return r;
}

async function classRelationRec(db: Db, id: Fragment): Promise<Rec | undefined> {
  const [r] = await db<Rec[]>`
    select id, from_class_id, to_class_id, forward_alias, reverse_alias, from_max_relations, to_max_relations,
      created_at, updated_at, revision
    from class_relations where id = ${id}`;
  return r;
}

async function objectRelationRec(db: Db, id: Fragment): Promise<Rec | undefined> {
  const [r] = await db<Rec[]>`
    select id, class_relation_id, from_object_id, to_object_id, created_at, updated_at, revision
    from object_relations where id = ${id}`;
  return r;
}

/** The collections whose ids `ids` (a subquery) selects, by id. */
async function collectionsRec(db: Db, ids: Fragment): Promise<Rec[]> {
  return db<Rec[]>`
    select id, name, description, parent_collection_id, created_at, updated_at, revision
    from collections where id in (${ids}) order by id`;
}

/**
 * Loads a subject and everything its template context names, in one round trip. undefined when
 * any part is missing (the subject, or for objects a class_id that is not the object's class).
 */
export async function loadSubjectContext(db: Db, s: Subject): Promise<SubjectContext | undefined> {
  const type: SubjectType = s.type;
  switch (s.type) {
    case 'collection': {
      const collection = await collectionRec(db, given(db, s.id));
      if (!collection) return undefined;
      return { subject_type: type, subject: collection, collection, collectionIds: [s.id] };
    }
    case 'class': {
      const [klass, collection] = await Promise.all([
        classRec(db, given(db, s.id)),
        collectionRec(db, db`(select collection_id from classes where id = ${s.id}::int)` as Fragment),
      ]);
      if (!klass) return undefined;
      return { subject_type: type, subject: klass, class: klass, collection, collectionIds: [klass.collection_id as number] };
    }
    case 'object': {
      const [object, klass, collection] = await Promise.all([
        objectRec(db, given(db, s.object_id)),
        classRec(db, given(db, s.class_id)),
        collectionRec(db, db`(select collection_id from objects where id = ${s.object_id}::int)` as Fragment),
      ]);
      if (!object || object.svc_class_id !== s.class_id || !klass) return undefined;
      return {
        subject_type: type,
        subject: object,
        object,
        class: klass,
        collection,
        collectionIds: [object.collection_id as number, klass.collection_id as number],
      };
    }
    case 'class_relation': {
      const end = (column: 'from_class_id' | 'to_class_id') => classRelationEnd(db, s.id, column);
      const [rel, from, to, collections] = await Promise.all([
        classRelationRec(db, given(db, s.id)),
        classRec(db, end('from_class_id')),
        classRec(db, end('to_class_id')),
        collectionsRec(db, db`select collection_id from classes where id in (${end('from_class_id')}, ${end('to_class_id')})` as Fragment),
      ]);
      if (!rel || !from || !to) return undefined;
      return {
        subject_type: type,
        subject: rel,
        class_relation: rel,
        from_class: from,
        to_class: to,
        collections,
        collectionIds: [from.collection_id as number, to.collection_id as number],
      };
    }
    case 'object_relation': {
      const end = (column: 'from_object_id' | 'to_object_id' | 'class_relation_id') => objectRelationEnd(db, s.id, column);
      const classOf = (column: 'from_object_id' | 'to_object_id') =>
        db`(select class_id from objects where id = ${end(column)})` as Fragment;
      const [rel, from, to, classRel, fromClass, toClass, collections] = await Promise.all([
        objectRelationRec(db, given(db, s.id)),
        objectRec(db, end('from_object_id')),
        objectRec(db, end('to_object_id')),
        classRelationRec(db, end('class_relation_id')),
        classRec(db, classOf('from_object_id')),
        classRec(db, classOf('to_object_id')),
        collectionsRec(
          db,
          db`select collection_id from objects where id in (${end('from_object_id')}, ${end('to_object_id')})` as Fragment,
        ),
      ]);
      if (!rel || !from || !to || !classRel || !fromClass || !toClass) return undefined;
      return {
        subject_type: type,
        subject: rel,
        object_relation: rel,
        from_object: from,
        to_object: to,
        class_relation: classRel,
        from_class: fromClass,
        to_class: toClass,
        collections,
        collectionIds: [from.collection_id as number, to.collection_id as number],
      };
    }
  }
}

/** Awaits checks sent together (one round trip), failing with the first in order that failed. */
async function inOrder(checks: Promise<unknown>[]): Promise<void> {
  for (const c of checks) c.catch(() => undefined); // awaited below, in order
  for (const c of checks) await c;
}

/**
 * Read permission on a subject (404 missing, 403 denied or scoped out): ReadCollection, ReadClass,
 * ReadObject (an object of another class than class_id is 400, unsupported subject combination),
 * or ReadClassRelation / ReadObjectRelation on both endpoints (both inside the token's resource
 * scope).
 */
export async function requireSubjectRead(db: Db, auth: Authority, s: Subject): Promise<void> {
  switch (s.type) {
    case 'collection':
      await requireCollectionPermission(db, auth, s.id, 'ReadCollection');
      return;
    case 'class':
      await requireClassPermission(db, auth, s.id, 'ReadClass');
      return;
    case 'object': {
      const object = await requireObjectPermission(db, auth, s.object_id, 'ReadObject');
      if (object.class_id !== s.class_id) {
        throw badRequest('unsupported subject combination: the object is not of class_id', [
          { path: 'body.subject.object_id', message: 'unsupported subject combination: the object belongs to another class' },
        ]);
      }
      return;
    }
    // the relation and its ends' checks go out together, each end named through the relation
    case 'class_relation':
      await inOrder([
        relationFound(db, 'class_relations', s.id, 'class relation'),
        requireClassPermission(db, auth, { idBy: classRelationEnd(db, s.id, 'from_class_id') }, 'ReadClassRelation'),
        requireClassPermission(db, auth, { idBy: classRelationEnd(db, s.id, 'to_class_id') }, 'ReadClassRelation'),
      ]);
      return;
    case 'object_relation':
      await inOrder([
        relationFound(db, 'object_relations', s.id, 'object relation'),
        requireObjectPermission(db, auth, { idBy: objectRelationEnd(db, s.id, 'from_object_id') }, 'ReadObjectRelation'),
        requireObjectPermission(db, auth, { idBy: objectRelationEnd(db, s.id, 'to_object_id') }, 'ReadObjectRelation'),
      ]);
      return;
  }
}

/**
 * What a remote call re-checks of its submitter before it runs: ExecuteRemoteTarget on the
 * collection of target `targetId` (named through the target) and read permission on the subject
 * (requireSubjectRead), sent together (one round trip); fails with the first in that order that
 * failed.
 */
export async function requireRemoteCallPermissions(db: Db, auth: Authority, targetId: number, s: Subject): Promise<void> {
  await inOrder([
    requireCollectionPermission(
      db,
      auth,
      { idBy: db`(select collection_id from remote_targets where id = ${targetId}::int)` as Fragment },
      'ExecuteRemoteTarget',
    ),
    requireSubjectRead(db, auth, s),
  ]);
}

/** 404 (the `noun` not found) unless relation `id` of `table` exists. */
async function relationFound(db: Db, table: 'class_relations' | 'object_relations', id: number, noun: string): Promise<void> {
  const [rel] = await db`select 1 from ${db(table)} where id = ${id}::int`;
  if (!rel) throw notFound(noun);
}

// ---- results --------------------------------------------------------------------------------

export interface RemoteCallResult {
  taskId: number;
  targetId: number;
  subjectType: SubjectType;
  subjectId: number;
  method: Method;
  url: string | null;
  status: number | null;
  headers: Record<string, string>;
  bodyPreview: string | null;
  bodyTruncated: boolean;
  durationMs: number | null;
  success: boolean;
  error: string | null;
}

export interface RemoteCallResultRow {
  [key: string]: unknown;
  id: number;
  task_id: number;
  target_id: number;
  subject_type: string;
  subject_id: number;
  method: string;
  url: string | null;
  response_status: number | null;
  response_headers: Record<string, string>;
  body_preview: string | null;
  body_truncated: boolean;
  duration_ms: number | null;
  success: boolean;
  error: string | null;
  created_at: Date;
}

export async function insertRemoteCallResult(db: Db, r: RemoteCallResult): Promise<RemoteCallResultRow> {
  const [row] = await db<RemoteCallResultRow[]>`
    insert into remote_call_results (task_id, target_id, subject_type, subject_id, method, url, response_status,
      response_headers, body_preview, body_truncated, duration_ms, success, error)
    values (${r.taskId}::int, ${r.targetId}::int, ${r.subjectType}, ${r.subjectId}::int, ${r.method}, ${r.url}::text,
      ${r.status}::int, ${db.json(r.headers as never)}, ${r.bodyPreview}::text, ${r.bodyTruncated}::boolean,
      ${r.durationMs}::int, ${r.success}::boolean, ${r.error}::text)
    returning id, task_id, target_id, subject_type, subject_id, method, url, response_status, response_headers,
      body_preview, body_truncated, duration_ms, success, error, created_at`;
  return row!;
}
