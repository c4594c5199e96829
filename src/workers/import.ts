// The `import` task executor. The stored request was checked when it was submitted
// (src/domain/imports.ts); here the plan is run item by item in processing order through each
// entity's own db functions, with the same rules and audit events as the API (actor_kind worker,
// initiator = submitter, task_id set). Every item is authorized against the submitter's live
// grants intersected with the token scope snapshot (TaskRunContext.authority, fail closed); the
// identity and integration sections also need that authority to be an unscoped administrator.
//
//   strict       one transaction: the first failure stops the import and rolls everything back
//                (earlier items `rolled_back`, later ones `skipped`); status succeeded or failed.
//   best_effort  each item commits on its own together with its result row and the progress
//                counters (fenced by the claim token); an item whose ref dependency failed is
//                `skipped`; status succeeded, partially_succeeded or failed.
//   dry_run      the same work inside a transaction that is always rolled back (best effort uses
//                a savepoint per item), so results say what would happen and nothing is written.
//
// Natural keys are resolved here: a key that matches nothing fails its item. An existing row is
// a collision: `abort` fails the item, `overwrite` updates it with the members the item supplies
// (omitted members keep their values) and reports `unchanged` when nothing differs. Object
// relations and group memberships that already exist are no-ops; collection permission items
// merge into the group's grant (or replace it with replace_existing).
import type { Deps } from '../deps.ts';
import type { Actor } from '../db/events.ts';
import { appendEvent } from '../db/events.ts';
import type { TransactionSql } from '../db/sql.ts';
import { withTx } from '../db/tx.ts';
import { translatePgError } from '../db/pg-errors.ts';
import { ApiError, badRequest, conflict, forbidden, notFound } from '../http/errors.ts';
import { requireClassPermission, requireCollectionPermission, requireObjectPermission } from '../db/authz.ts';
import { isUnscoped, requireRootAuthority, sortPermissions, type Authority } from '../domain/authz.ts';
import { collectionEvent, findCollection, insertCollection, lockCollection, updateCollectionRow } from '../db/collections.ts';
import {
  classIdByName,
  classCreatedEvent,
  classUpdatedEvent,
  insertClass,
  lockClass,
  moveClassObjects,
  shareLockClass,
  updateClassRow,
  type ClassValues,
} from '../db/classes.ts';
import { insertObject, lockObject, objectCreatedEvent, objectIdByName, objectUpdatedEvent, updateObjectRow } from '../db/objects.ts';
import {
  classRelationEvent,
  assertRoomForRelation,
  findClassRelation,
  findObjectEnds,
  insertClassRelation,
  insertObjectRelation,
  lockRelationEnds,
  objectRelationEvent,
  objectRelationExists,
  updateClassRelationRow,
} from '../db/relations.ts';
import { findGroup as findGrantGroup, grantPermissions, groupPermissions, lockGrants, revokePermissions } from '../db/permissions.ts';
import {
  findPrincipalForMembership,
  groupEvent,
  membershipEvent,
  insertGroup,
  insertMembership,
  lockGroup,
  shareLockGroup,
  updateGroupRow,
  type GroupRow,
  type MemberRow,
} from '../db/groups.ts';
import { insertUser, lockUser, updateUserRow, userCreatedEvent, userUpdatedEvent } from '../db/users.ts';
import { findUserPasswordHash } from '../db/approvals.ts';
import {
  disableServiceAccount,
  serviceAccountEvent,
  insertServiceAccount,
  lockServiceAccount,
  updateServiceAccountRow,
} from '../db/service-accounts.ts';
import {
  classCollectionId,
  insertRemoteTarget,
  lockRemoteTarget,
  remoteTargetEvent,
  rowFields,
  updateRemoteTargetRow,
} from '../db/remote-targets.ts';
import {
  childCollectionId,
  classRelationIdBetween,
  collectionIdByPath,
  eventSinkIdByName,
  eventSubscriptionIdByName,
  exportTemplateIdByName,
  groupIdByKey,
  maxRelationsInUse,
  principalByKey,
  remoteTargetIdByName,
  replaceImportRequest,
  setImportProgress,
  upsertImportResults,
  type NewImportResult,
} from '../db/imports.ts';
import { NO_IMPACT, assertFitsClass, compileClassSchema } from '../domain/class-schema.ts';
import {
  SchemaChangeRefused,
  checkClassSchemaChange,
  recordClassSchemaChange,
  recordObjectCompliance,
  recordRefusedSchemaChange,
} from '../db/class-schema-events.ts';
import { jsonEqual } from '../domain/json-patch.ts';
import { classRelationView } from '../domain/relations.ts';
import { applyPatch, fieldsFromNew, sameFields, validateTarget, type TemplateLimits } from '../domain/remote-targets.ts';
import { templateLimits } from '../domain/templates.ts';
import {
  ADMIN_SECTIONS,
  RESULT_OUTCOMES,
  finalStatus,
  planImport,
  scopeOf,
  sinkBody,
  subscriptionBody,
  targetBody,
  templateBody,
  type ClassKey,
  type CollectionKey,
  type IdentityKey,
  type ImportClass,
  type ImportClassRelation,
  type ImportCollection,
  type ImportCollectionPermission,
  type ImportEventSink,
  type ImportEventSubscription,
  type ImportExportTemplate,
  type SinkKey,
  type ImportGroup,
  type ImportGroupMembership,
  type ImportHuman,
  type ImportObject,
  type ImportObjectRelation,
  type ImportPlan,
  type ImportPrincipal,
  type ImportRemoteTarget,
  type ImportRequest,
  type ImportServiceAccount,
  type ObjectKey,
  type PlanItem,
  type ResultAction,
  type ResultOutcome,
} from '../domain/imports.ts';
import type { TaskProgress } from '../db/tasks.ts';
import {
  insertExportTemplate,
  lockExportTemplate,
  validateTemplateWithIncludes,
  exportTemplateEvent,
  templateRowFields,
  updateExportTemplateRow,
} from '../db/export-templates.ts';
import { applyTemplatePatch, sameTemplateFields, templateFieldsFromNew } from '../domain/exports.ts';
import {
  eventSinkEvent,
  findEventSink,
  insertEventSink,
  lockEventSink,
  sinkFields,
  subscriptionRoutingsOfSink,
  updateEventSinkRow,
} from '../db/event-sinks.ts';
import {
  eventSubscriptionEvent,
  insertEventSubscription,
  lockEventSubscription,
  subscriptionFields,
  updateEventSubscriptionRow,
} from '../db/event-subscriptions.ts';
import { repointSubscriptionDeliveries } from '../db/event-deliveries.ts';
import {
  applySinkPatch,
  applySubscriptionPatch,
  sameJson,
  sinkFromNew,
  subscriptionFromNew,
  type SinkPatch,
  type SubscriptionPatch,
} from '../domain/event-subscriptions.ts';
import { validateSink, validateSinkChange, validateSubscriptionForSink } from '../sinks/index.ts';
import { ClaimLostError, TaskCancelledError, type TaskOutcome, type TaskRunContext } from './tasks.ts';

/** Items between cancel checkpoints (and progress updates of transactional runs). */
const CHECKPOINT_EVERY = 25;

/** Thrown to roll back the transaction of a strict or dry run; never leaves this module. */
class Rollback extends Error {}

interface Applied {
  action: ResultAction;
  id: number | null;
}

/** What an item does, known as soon as it is decided (a failure reports it). */
interface ItemState {
  action: ResultAction;
}

const collide = (what: string) => new ApiError(409, `${what} already exists (collision_policy abort)`, { reason: 'import_collision' });

/** The public text of an item failure; null for an internal error (logged, never shown). */
function publicError(err: unknown): string | null {
  const e = translatePgError(err);
  if (!(e instanceof ApiError) || e.status >= 500) return null;
  const details = (e.details ?? []).slice(0, 3).map((d) => `${d.path} ${d.message}`);
  return details.length ? `${e.message} (${details.join('; ')})` : e.message;
}

function cancelOrLost(err: unknown): boolean {
  return err instanceof TaskCancelledError || err instanceof ClaimLostError;
}

/** One run of one import plan. */
class ImportRun {
  private readonly results: (NewImportResult | undefined)[];
  /** ref → the row the item created or matched; null when the item did not succeed. */
  private readonly refs = new Map<string, number | null>();
  private readonly auth: Authority;
  private readonly actor: Actor;
  private readonly adminOk: boolean;
  private readonly claimToken: string;

  constructor(
    private readonly ctx: TaskRunContext,
    private readonly plan: ImportPlan,
    private readonly limits: TemplateLimits,
  ) {
    this.results = new Array<NewImportResult | undefined>(plan.items.length);
    this.auth = ctx.authority!;
    this.actor = ctx.actor;
    this.adminOk = this.auth.isAdmin && isUnscoped(this.auth);
    this.claimToken = ctx.task.claim_token!;
  }

  private get deps(): Deps {
    return this.ctx.deps;
  }

  // ---- results and progress -------------------------------------------------------------------

  private record(item: PlanItem, action: ResultAction, outcome: ResultOutcome, error: string | null, id: number | null): NewImportResult {
    const r: NewImportResult = { seq: item.seq, itemRef: item.itemRef, kind: item.kind, action, outcome, error, entityId: id };
    this.results[item.seq] = r;
    if (item.ref !== undefined) this.refs.set(item.ref, outcome === 'succeeded' ? id : null);
    return r;
  }

  private counts(): Record<ResultOutcome, number> {
    const c = Object.fromEntries(RESULT_OUTCOMES.map((o) => [o, 0])) as Record<ResultOutcome, number>;
    for (const r of this.results) if (r) c[r.outcome]++;
    return c;
  }

  progress(): TaskProgress {
    const c = this.counts();
    return {
      total_items: this.plan.items.length,
      processed_items: c.succeeded + c.failed + c.skipped + c.rolled_back,
      success_items: c.succeeded,
      failed_items: c.failed,
    };
  }

  /** The dependency of an item that did not succeed, if any. */
  private failedDependency(item: PlanItem): string | undefined {
    return item.deps.find((ref) => this.refs.get(ref) === null || !this.refs.has(ref));
  }

  private skip(item: PlanItem, reason: string): NewImportResult {
    return this.record(item, 'create', 'skipped', `not attempted: ${reason}`, null);
  }

  private fail(item: PlanItem, state: ItemState, err: unknown): NewImportResult {
    let message = publicError(err);
    if (message === null) {
      this.deps.log.error({ err, task_id: this.ctx.task.id, item_seq: item.seq }, 'import item failed with an internal error');
      message = 'the item failed with an internal error';
    }
    return this.record(item, state.action, 'failed', message, null);
  }

  // ---- the runs ---------------------------------------------------------------------------------

  /** Runs the plan; returns when every item has a result (or throws a cancel or lost claim). */
  async run(): Promise<void> {
    try {
      if (this.plan.atomicity === 'strict') await this.runStrict();
      else if (this.plan.dryRun) await this.runBestEffortDry();
      else await this.runBestEffort();
    } catch (err) {
      if (err instanceof TaskCancelledError) await this.recordCancelled();
      throw err;
    }
  }

  private async checkpoint(i: number, transactional: boolean): Promise<void> {
    if (i % CHECKPOINT_EVERY !== 0) return;
    await this.ctx.checkpoint();
    if (transactional) await setImportProgress(this.deps.sql, this.ctx.task.id, this.claimToken, this.progress());
  }

  /** One transaction; stop at the first failure; roll back on failure and for dry runs. */
  private async runStrict(): Promise<void> {
    let failedAt: PlanItem | undefined;
    try {
      await withTx(this.deps.sql, async (tx) => {
        for (const [i, item] of this.plan.items.entries()) {
          await this.checkpoint(i, true);
          const state: ItemState = { action: 'create' };
          try {
            const r = await this.apply(tx, item, state);
            this.record(item, r.action, 'succeeded', null, r.id);
          } catch (err) {
            if (cancelOrLost(err)) throw err;
            this.fail(item, state, err);
            failedAt = item;
            throw new Rollback();
          }
        }
        if (this.plan.dryRun) throw new Rollback();
      });
    } catch (err) {
      if (!(err instanceof Rollback)) throw err;
    }
    if (failedAt) {
      for (const r of this.results) if (r?.outcome === 'succeeded') r.outcome = 'rolled_back';
      for (const item of this.plan.items) {
        if (!this.results[item.seq]) this.skip(item, `the strict import stopped at ${failedAt.itemRef}`);
      }
    }
  }

  /** Each item in its own transaction with its result row and the progress (fenced). */
  private async runBestEffort(): Promise<void> {
    const db = this.deps.sql;
    const taskId = this.ctx.task.id;
    const fencedWrite = async (tx: TransactionSql, r: NewImportResult) => {
      await upsertImportResults(tx, taskId, [r]);
      if (!(await setImportProgress(tx, taskId, this.claimToken, this.progress()))) throw new ClaimLostError();
    };
    for (const [i, item] of this.plan.items.entries()) {
      await this.checkpoint(i, false);
      const dep = this.failedDependency(item);
      if (dep !== undefined) {
        const r = this.skip(item, `it depends on ${dep}, which did not succeed`);
        await withTx(db, (tx) => fencedWrite(tx, r));
        continue;
      }
      const state: ItemState = { action: 'create' };
      try {
        await withTx(db, async (tx) => {
          const applied = await this.apply(tx, item, state);
          await fencedWrite(tx, this.record(item, applied.action, 'succeeded', null, applied.id));
        });
      } catch (err) {
        if (cancelOrLost(err)) throw err;
        const r = this.fail(item, state, err);
        await withTx(db, (tx) => fencedWrite(tx, r));
      }
    }
  }

  /** One transaction that is always rolled back; a savepoint per item. */
  private async runBestEffortDry(): Promise<void> {
    try {
      await withTx(this.deps.sql, async (tx) => {
        for (const [i, item] of this.plan.items.entries()) {
          await this.checkpoint(i, true);
          const dep = this.failedDependency(item);
          if (dep !== undefined) {
            this.skip(item, `it depends on ${dep}, which did not succeed`);
            continue;
          }
          const state: ItemState = { action: 'create' };
          try {
            const applied = await tx.savepoint((sp) => this.apply(sp, item, state));
            this.record(item, applied.action, 'succeeded', null, applied.id);
          } catch (err) {
            if (cancelOrLost(err)) throw err;
            this.fail(item, state, err);
          }
        }
        throw new Rollback();
      });
    } catch (err) {
      if (!(err instanceof Rollback)) throw err;
    }
  }

  /** After a cancel: what was not attempted is skipped; a transactional run wrote nothing. */
  private async recordCancelled(): Promise<void> {
    const transactional = this.plan.atomicity === 'strict' || this.plan.dryRun;
    if (transactional && !this.plan.dryRun) {
      for (const r of this.results) if (r?.outcome === 'succeeded') r.outcome = 'rolled_back';
    }
    for (const item of this.plan.items) if (!this.results[item.seq]) this.skip(item, 'the import was cancelled');
    await withTx(this.deps.sql, async (tx) => {
      if (!(await setImportProgress(tx, this.ctx.task.id, this.claimToken, this.progress()))) return;
      await this.store(tx);
    });
  }

  /** Stores every result and drops the password hashes from the stored request. */
  async store(tx: TransactionSql): Promise<void> {
    await upsertImportResults(
      tx,
      this.ctx.task.id,
      this.results.filter((r): r is NewImportResult => r !== undefined),
    );
    await replaceImportRequest(tx, this.ctx.task.id, scrubRequest(this.ctx.task.request));
  }

  outcome(): TaskOutcome {
    const counts = this.counts();
    const status = finalStatus(this.plan.atomicity, counts);
    const actions: Record<ResultAction, number> = { create: 0, update: 0, unchanged: 0 };
    for (const r of this.results) if (r && (r.outcome === 'succeeded' || r.outcome === 'rolled_back')) actions[r.action]++;
    const firstFailure = this.results.find((r) => r?.outcome === 'failed');
    const mode = { dry_run: this.plan.dryRun, atomicity: this.plan.atomicity, collision_policy: this.plan.collisionPolicy };
    return {
      status,
      summary: { ...mode, outcomes: counts, actions },
      details: firstFailure
        ? {
            reason: 'import_item_failed',
            message: `${firstFailure.itemRef}: ${firstFailure.error}`,
            failed_item: { item_ref: firstFailure.itemRef, entity_kind: firstFailure.kind, error: firstFailure.error },
          }
        : null,
      progress: this.progress(),
      message: `${this.plan.dryRun ? 'dry-run ' : ''}import ${status}: ${counts.succeeded} succeeded, ${counts.failed} failed, ${counts.skipped} skipped${
        counts.rolled_back ? `, ${counts.rolled_back} rolled back` : ''
      }`,
      finalize: (tx) => this.store(tx),
    };
  }

  // ---- one item ---------------------------------------------------------------------------------

  private apply(tx: TransactionSql, item: PlanItem, state: ItemState): Promise<Applied> {
    if (ADMIN_SECTIONS.includes(item.section) && !this.adminOk) {
      throw forbidden(`importing ${item.section} needs an unscoped administrator`);
    }
    const b = item.body;
    switch (item.section) {
      case 'collections':
        return this.collection(tx, b as unknown as ImportCollection, state);
      case 'classes':
        return this.klass(tx, b as unknown as ImportClass, state);
      case 'objects':
        return this.object(tx, b as unknown as ImportObject, state);
      case 'class_relations':
        return this.classRelation(tx, b as unknown as ImportClassRelation, state);
      case 'object_relations':
        return this.objectRelation(tx, b as unknown as ImportObjectRelation, state);
      case 'collection_permissions':
        return this.collectionPermission(tx, b as unknown as ImportCollectionPermission, state);
      case 'groups':
        return this.group(tx, b as unknown as ImportGroup, state);
      case 'principals':
        return (b as unknown as ImportPrincipal).kind === 'human'
          ? this.human(tx, b as unknown as ImportHuman, state)
          : this.serviceAccount(tx, b as unknown as ImportServiceAccount, state);
      case 'group_memberships':
        return this.membership(tx, b as unknown as ImportGroupMembership, state);
      case 'remote_targets':
        return this.remoteTarget(tx, b as unknown as ImportRemoteTarget, state);
      case 'export_templates':
        return this.exportTemplate(tx, b as unknown as ImportExportTemplate, state);
      case 'event_sinks':
        return this.eventSink(tx, b as unknown as ImportEventSink, state);
      case 'event_subscriptions':
        return this.eventSubscription(tx, b as unknown as ImportEventSubscription, state);
    }
  }

  // ---- references -------------------------------------------------------------------------------

  private refId(ref: string): number {
    const id = this.refs.get(ref);
    if (id === undefined || id === null) throw new ApiError(409, `the item named by ref "${ref}" did not succeed`);
    return id;
  }

  private async collectionOf(tx: TransactionSql, ref: string | undefined, key: CollectionKey | undefined): Promise<number> {
    if (ref !== undefined) return this.refId(ref);
    const id = await collectionIdByPath(tx, key!.path);
    if (id === undefined) throw notFound(`collection ${JSON.stringify(key!.path.join('/'))}`);
    return id;
  }

  private async classOf(tx: TransactionSql, ref: string | undefined, key: ClassKey | undefined): Promise<number> {
    if (ref !== undefined) return this.refId(ref);
    const id = await classIdByName(tx, key!.name);
    if (id === undefined) throw notFound(`class ${JSON.stringify(key!.name)}`);
    return id;
  }

  private async objectOf(tx: TransactionSql, ref: string | undefined, key: ObjectKey | undefined): Promise<number> {
    if (ref !== undefined) return this.refId(ref);
    const classId = await classIdByName(tx, key!.class.name);
    const id = classId === undefined ? undefined : await objectIdByName(tx, classId, key!.name);
    if (id === undefined) throw notFound(`object ${JSON.stringify(key!.name)} of class ${JSON.stringify(key!.class.name)}`);
    return id;
  }

  private async groupOf(tx: TransactionSql, ref: string | undefined, key: IdentityKey | undefined): Promise<number> {
    if (ref !== undefined) return this.refId(ref);
    const id = await groupIdByKey(tx, key!.name, key!.identity_scope);
    if (id === undefined) throw notFound(`group ${JSON.stringify(key!.name)} in identity scope ${JSON.stringify(key!.identity_scope)}`);
    return id;
  }

  private async sinkOf(tx: TransactionSql, ref: string | undefined, key: SinkKey | undefined): Promise<number> {
    if (ref !== undefined) return this.refId(ref);
    const id = await eventSinkIdByName(tx, key!.name);
    if (id === undefined) throw notFound(`event sink ${JSON.stringify(key!.name)}`);
    return id;
  }

  private async principalOf(tx: TransactionSql, ref: string | undefined, key: IdentityKey | undefined): Promise<number> {
    if (ref !== undefined) return this.refId(ref);
    const p = await principalByKey(tx, key!.name, key!.identity_scope);
    if (!p) throw notFound(`principal ${JSON.stringify(key!.name)} in identity scope ${JSON.stringify(key!.identity_scope)}`);
    return p.id;
  }

  // ---- collections ------------------------------------------------------------------------------

  private async collection(tx: TransactionSql, b: ImportCollection, state: ItemState): Promise<Applied> {
    const hasParent = b.parent_collection_ref !== undefined || b.parent_collection_key !== undefined;
    const parentId = hasParent ? await this.collectionOf(tx, b.parent_collection_ref, b.parent_collection_key) : null;
    const existing = await childCollectionId(tx, parentId, b.name);
    if (existing === undefined) {
      if (parentId === null) requireRootAuthority(this.auth);
      else await requireCollectionPermission(tx, this.auth, parentId, 'DelegateCollection');
      const created = await insertCollection(tx, { name: b.name, description: b.description ?? '', parentId });
      await appendEvent(tx, this.actor, collectionEvent(created, 'created', null, [parentId]));
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(`collection ${JSON.stringify(b.name)}`);
    await requireCollectionPermission(tx, this.auth, existing, 'UpdateCollection');
    const before = await lockCollection(tx, existing);
    if (!before) throw notFound('collection');
    const description = b.description ?? before.description;
    if (description === before.description) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    const after = await updateCollectionRow(tx, before.id, { name: before.name, description });
    await appendEvent(tx, this.actor, collectionEvent(after, 'updated', before));
    return { action: 'update', id: after.id };
  }

  // ---- classes ----------------------------------------------------------------------------------

  private async klass(tx: TransactionSql, b: ImportClass, state: ItemState): Promise<Applied> {
    const collectionId = await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const existing = await classIdByName(tx, b.name);
    if (existing === undefined) {
      const values: ClassValues = {
        name: b.name,
        description: b.description ?? '',
        collection_id: collectionId,
        json_schema: b.json_schema ?? null,
        validate_schema: b.validate_schema ?? false,
      };
      if (values.validate_schema && values.json_schema === null) throw badRequest('validate_schema: true needs a json_schema');
      if (values.json_schema !== null) compileClassSchema(values.json_schema);
      await requireCollectionPermission(tx, this.auth, collectionId, 'CreateClass');
      const created = await insertClass(tx, values);
      await appendEvent(tx, this.actor, classCreatedEvent(created));
      await recordClassSchemaChange(tx, this.actor, null, created, NO_IMPACT);
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(`class ${JSON.stringify(b.name)}`);
    await requireClassPermission(tx, this.auth, existing, 'UpdateClass');
    const before = await lockClass(tx, existing);
    if (!before) throw notFound('class');
    const next: ClassValues = {
      name: before.name,
      description: b.description ?? before.description,
      collection_id: collectionId,
      json_schema: b.json_schema === undefined ? (before.json_schema ?? null) : b.json_schema,
      validate_schema: b.validate_schema ?? before.validate_schema,
    };
    if (next.validate_schema && next.json_schema === null) throw badRequest('validate_schema needs a json_schema');
    if (b.json_schema !== undefined && b.json_schema !== null) compileClassSchema(b.json_schema);
    const schemaChanged = !jsonEqual(next.json_schema, before.json_schema ?? null);
    const moved = next.collection_id !== before.collection_id;
    if (moved) await requireCollectionPermission(tx, this.auth, next.collection_id, 'CreateClass');
    if (!schemaChanged && !moved && next.description === before.description && next.validate_schema === before.validate_schema) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    // A refused change is recorded in its own transaction (not for a dry run), so the import's
    // rollback cannot take the record with it.
    const impact = await checkClassSchemaChange(tx, before, next).catch(async (err: unknown) => {
      if (err instanceof SchemaChangeRefused && !this.plan.dryRun) {
        await recordRefusedSchemaChange(this.deps.sql, this.deps.log, this.actor, err);
      }
      throw err;
    });
    const after = await updateClassRow(tx, before.id, next);
    const movedObjects = moved ? await moveClassObjects(tx, this.actor, before.id, next.collection_id) : null;
    await appendEvent(tx, this.actor, classUpdatedEvent(before, after, schemaChanged, movedObjects));
    await recordClassSchemaChange(tx, this.actor, before, after, impact);
    return { action: 'update', id: after.id };
  }

  // ---- objects ----------------------------------------------------------------------------------

  private async object(tx: TransactionSql, b: ImportObject, state: ItemState): Promise<Applied> {
    const classId = await this.classOf(tx, b.class_ref, b.class_key);
    const existing = await objectIdByName(tx, classId, b.name);
    if (existing === undefined) {
      await requireClassPermission(tx, this.auth, classId, 'CreateObject');
      const cls = await shareLockClass(tx, classId);
      if (!cls) throw notFound('class');
      assertFitsClass(cls, b.json_data);
      const created = await insertObject(tx, {
        name: b.name,
        description: b.description ?? '',
        collection_id: cls.collection_id,
        class_id: cls.id,
        json_data: b.json_data,
      });
      await appendEvent(tx, this.actor, objectCreatedEvent(created, cls));
      await recordObjectCompliance(tx, this.actor, cls, null, created);
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(`object ${JSON.stringify(b.name)}`);
    await requireObjectPermission(tx, this.auth, existing, 'UpdateObject', { classId });
    const cls = await shareLockClass(tx, classId);
    const before = await lockObject(tx, existing);
    if (!cls || !before) throw notFound('object');
    const next = { name: before.name, description: b.description ?? before.description, json_data: b.json_data };
    const dataChanged = !jsonEqual(next.json_data, before.json_data);
    if (!dataChanged && next.description === before.description) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    if (dataChanged) assertFitsClass(cls, next.json_data);
    const after = await updateObjectRow(tx, before.id, next);
    await appendEvent(tx, this.actor, objectUpdatedEvent(before, after, cls.id, dataChanged));
    if (dataChanged) await recordObjectCompliance(tx, this.actor, cls, before, after);
    return { action: 'update', id: after.id };
  }

  // ---- relations --------------------------------------------------------------------------------

  private async classRelation(tx: TransactionSql, b: ImportClassRelation, state: ItemState): Promise<Applied> {
    const fromId = await this.classOf(tx, b.from_class_ref, b.from_class_key);
    const toId = await this.classOf(tx, b.to_class_ref, b.to_class_key);
    const existing = await classRelationIdBetween(tx, fromId, toId);
    if (existing === undefined) {
      const from = await requireClassPermission(tx, this.auth, fromId, 'CreateClassRelation');
      const to = await requireClassPermission(tx, this.auth, toId, 'CreateClassRelation');
      const created = await insertClassRelation(tx, {
        from_class_id: fromId,
        to_class_id: toId,
        forward_alias: b.forward_alias ?? null,
        reverse_alias: b.reverse_alias ?? null,
        from_max_relations: b.from_max_relations ?? null,
        to_max_relations: b.to_max_relations ?? null,
      });
      await appendEvent(
        tx,
        this.actor,
        classRelationEvent({ ...created, from_collection_id: from.collection_id, to_collection_id: to.collection_id }, 'created'),
      );
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(`the class relation from class ${fromId} to class ${toId}`);
    await requireClassPermission(tx, this.auth, fromId, 'UpdateClassRelation');
    await requireClassPermission(tx, this.auth, toId, 'UpdateClassRelation');
    const before = await findClassRelation(tx, existing, 'update');
    if (!before) throw notFound('class relation');
    const pick = <K extends 'forward_alias' | 'reverse_alias' | 'from_max_relations' | 'to_max_relations'>(k: K) =>
      b[k] === undefined ? before[k] : (b[k] as (typeof before)[K]);
    const next = {
      forward_alias: pick('forward_alias'),
      reverse_alias: pick('reverse_alias'),
      from_max_relations: pick('from_max_relations'),
      to_max_relations: pick('to_max_relations'),
    };
    if (
      next.forward_alias === before.forward_alias &&
      next.reverse_alias === before.reverse_alias &&
      next.from_max_relations === before.from_max_relations &&
      next.to_max_relations === before.to_max_relations
    ) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    const inUse = await maxRelationsInUse(tx, before.id);
    if (
      (next.from_max_relations !== null && inUse.from > next.from_max_relations) ||
      (next.to_max_relations !== null && inUse.to > next.to_max_relations)
    ) {
      throw conflict('existing object relations exceed the new maximum counts of the class relation', 'max_relations_exceeded');
    }
    const after = await updateClassRelationRow(tx, before.id, next);
    await appendEvent(tx, this.actor, {
      entityType: 'class_relation',
      entityId: after.id,
      entityName: null,
      collectionId: before.from_collection_id,
      relatedCollectionIds: [before.to_collection_id],
      action: 'updated',
      summary: `class relation ${after.id} (class ${after.from_class_id} to class ${after.to_class_id}) updated`,
      before: classRelationView(before),
      after: classRelationView(after),
      beforeRevision: before.revision,
      afterRevision: after.revision,
      metadata: { from_class_id: after.from_class_id, to_class_id: after.to_class_id },
    });
    return { action: 'update', id: after.id };
  }

  private async objectRelation(tx: TransactionSql, b: ImportObjectRelation, state: ItemState): Promise<Applied> {
    const fromId = await this.objectOf(tx, b.from_object_ref, b.from_object_key);
    const toId = await this.objectOf(tx, b.to_object_ref, b.to_object_key);
    if (fromId === toId) throw badRequest('an object cannot be related to itself');
    const ends = await findObjectEnds(tx, [fromId, toId]);
    const fromEnd = ends.get(fromId);
    const toEnd = ends.get(toId);
    if (!fromEnd || !toEnd) throw notFound('object');
    const crId = await classRelationIdBetween(tx, fromEnd.class_id, toEnd.class_id);
    if (crId === undefined) throw notFound(`class relation from class ${fromEnd.class_id} to class ${toEnd.class_id}`);
    const cr = await findClassRelation(tx, crId, 'share');
    if (!cr) throw notFound('class relation');
    const from = await requireObjectPermission(tx, this.auth, fromId, 'CreateObjectRelation');
    const to = await requireObjectPermission(tx, this.auth, toId, 'CreateObjectRelation');
    await lockRelationEnds(tx, [from.id, to.id]);
    if (await objectRelationExists(tx, cr.id, from.id, to.id)) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: null };
    }
    await assertRoomForRelation(tx, cr, from.id, to.id);
    const created = await insertObjectRelation(tx, { class_relation_id: cr.id, from_object_id: from.id, to_object_id: to.id });
    await appendEvent(
      tx,
      this.actor,
      objectRelationEvent(created, { from_collection_id: from.collection_id, to_collection_id: to.collection_id }, 'created'),
    );
    return { action: 'create', id: created.id };
  }

  // ---- permissions ------------------------------------------------------------------------------

  private async collectionPermission(tx: TransactionSql, b: ImportCollectionPermission, state: ItemState): Promise<Applied> {
    const collectionId = await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const groupId = await this.groupOf(tx, b.group_ref, b.group_key);
    await requireCollectionPermission(tx, this.auth, collectionId, 'DelegateCollection');
    const group = await findGrantGroup(tx, groupId);
    if (!group) throw notFound('group');
    const collection = await findCollection(tx, collectionId);
    if (!collection) throw notFound('collection');
    await lockGrants(tx, collectionId, groupId);
    const current = await groupPermissions(tx, collectionId, groupId);
    state.action = current.length ? 'update' : 'create';
    const wanted = sortPermissions(b.permissions);
    const target = { collectionId, collectionName: collection.name, group };
    const removed = b.replace_existing
      ? await revokePermissions(
          tx,
          this.actor,
          target,
          current.filter((p) => !wanted.includes(p)),
        )
      : [];
    const added = await grantPermissions(tx, this.actor, target, wanted);
    const action: ResultAction = current.length === 0 ? 'create' : added.length || removed.length ? 'update' : 'unchanged';
    return { action, id: null };
  }

  // ---- identities -------------------------------------------------------------------------------

  private async group(tx: TransactionSql, b: ImportGroup, state: ItemState): Promise<Applied> {
    const scope = scopeOf(b);
    const existing = await groupIdByKey(tx, b.name, scope);
    if (existing === undefined) {
      const g = await insertGroup(tx, { name: b.name, description: b.description ?? '', identityScope: scope });
      await appendEvent(tx, this.actor, groupEvent('created', g, null));
      return { action: 'create', id: g.id };
    }
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(`group ${JSON.stringify(b.name)}`);
    const before = await lockGroup(tx, existing);
    if (!before) throw notFound('group');
    if (before.managed_by !== null) throw forbidden('this group is managed by an identity provider and is read-only here');
    const description = b.description ?? before.description;
    if (description === before.description) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    const after = await updateGroupRow(tx, before.id, { name: before.name, description });
    await appendEvent(tx, this.actor, groupEvent('updated', after, before));
    return { action: 'update', id: after.id };
  }

  private async human(tx: TransactionSql, b: ImportHuman, state: ItemState): Promise<Applied> {
    const scope = scopeOf(b);
    const existing = await principalByKey(tx, b.name, scope);
    if (!existing) {
      const created = await insertUser(tx, {
        name: b.name,
        identityScope: scope,
        passwordHash: b.password_hash ?? null,
        email: b.email ?? null,
        properName: b.proper_name ?? null,
      });
      await appendEvent(tx, this.actor, userCreatedEvent(created, { password_set: b.password_hash !== undefined }));
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (existing.kind !== 'human') throw conflict(`principal ${JSON.stringify(b.name)} exists as a service account`);
    if (this.plan.collisionPolicy === 'abort') throw collide(`user ${JSON.stringify(b.name)}`);
    const before = await lockUser(tx, existing.id);
    if (!before) throw notFound('user');
    if (before.provider_managed) throw forbidden('this user is managed by an identity provider and is read-only here');
    const email = b.email === undefined ? before.email : b.email;
    const properName = b.proper_name === undefined ? before.proper_name : b.proper_name;
    const passwordHash =
      b.password_hash !== undefined && b.password_hash !== (await findUserPasswordHash(tx, before.id)) ? b.password_hash : null;
    if (passwordHash === null && email === before.email && properName === before.proper_name) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    const after = await updateUserRow(tx, before.id, { email, properName, passwordHash });
    await appendEvent(tx, this.actor, userUpdatedEvent(before, after, passwordHash !== null));
    return { action: 'update', id: after.id };
  }

  private async serviceAccount(tx: TransactionSql, b: ImportServiceAccount, state: ItemState): Promise<Applied> {
    const scope = scopeOf(b);
    const ownerId = await this.groupOf(tx, b.owner_group_ref, b.owner_group_key);
    const owner: GroupRow | undefined = await shareLockGroup(tx, ownerId);
    if (!owner) throw notFound('owner group');
    const existing = await principalByKey(tx, b.name, scope);
    if (!existing) {
      const created = await insertServiceAccount(tx, {
        name: b.name,
        identityScope: scope,
        description: b.description ?? '',
        ownerGroupId: ownerId,
        createdBy: this.auth.principal.id,
      });
      await appendEvent(tx, this.actor, serviceAccountEvent('created', created, null));
      if (b.disabled === true) await disableServiceAccount(tx, this.actor, created);
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (existing.kind !== 'service_account') throw conflict(`principal ${JSON.stringify(b.name)} exists as a human user`);
    if (this.plan.collisionPolicy === 'abort') throw collide(`service account ${JSON.stringify(b.name)}`);
    const before = await lockServiceAccount(tx, existing.id);
    if (!before) throw notFound('service account');
    if (b.disabled === false && before.disabled_at !== null) throw badRequest('a disabled service account cannot be enabled again');
    const description = b.description ?? before.description;
    const changed = description !== before.description || ownerId !== before.owner_group_id;
    const disabling = b.disabled === true && before.disabled_at === null;
    if (!changed && !disabling) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    let current = before;
    if (changed) {
      current = await updateServiceAccountRow(tx, before.id, { description, ownerGroupId: ownerId });
      await appendEvent(tx, this.actor, serviceAccountEvent('updated', current, before));
    }
    if (disabling) await disableServiceAccount(tx, this.actor, current);
    return { action: 'update', id: before.id };
  }

  private async membership(tx: TransactionSql, b: ImportGroupMembership, state: ItemState): Promise<Applied> {
    const principalId = await this.principalOf(tx, b.principal_ref, b.principal_key);
    const groupId = await this.groupOf(tx, b.group_ref, b.group_key);
    const group = await shareLockGroup(tx, groupId);
    if (!group) throw notFound('group');
    if (group.managed_by !== null) throw forbidden('this group is managed by an identity provider and is read-only here');
    const principal: MemberRow | undefined = await findPrincipalForMembership(tx, principalId);
    if (!principal) throw notFound('principal');
    if (!(await insertMembership(tx, groupId, principalId))) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: null };
    }
    await appendEvent(tx, this.actor, membershipEvent('added', group, principal));
    return { action: 'create', id: null };
  }

  // ---- remote targets ---------------------------------------------------------------------------

  private async remoteTarget(tx: TransactionSql, b: ImportRemoteTarget, state: ItemState): Promise<Applied> {
    const collectionId = await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const hasClass = b.class_ref !== undefined || b.class_key !== undefined;
    const classId = hasClass ? await this.classOf(tx, b.class_ref, b.class_key) : null;
    if (classId !== null && (await classCollectionId(tx, classId)) !== collectionId) {
      throw badRequest('the remote target is invalid', [{ path: 'class', message: 'must be a class of the target collection' }]);
    }
    const body = { ...targetBody(b), collection_id: collectionId, class_id: classId };
    const existing = await remoteTargetIdByName(tx, collectionId, b.name);
    if (existing === undefined) {
      const fields = fieldsFromNew(body as Parameters<typeof fieldsFromNew>[0]);
      validateTarget(fields, this.limits);
      await requireCollectionPermission(tx, this.auth, collectionId, 'CreateRemoteTarget');
      const created = await insertRemoteTarget(tx, fields);
      await appendEvent(tx, this.actor, remoteTargetEvent(created, 'created', null));
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(`remote target ${JSON.stringify(b.name)}`);
    await requireCollectionPermission(tx, this.auth, collectionId, 'UpdateRemoteTarget');
    const before = await lockRemoteTarget(tx, existing);
    if (!before) throw notFound('remote target');
    const next = applyPatch(rowFields(before), body as Parameters<typeof applyPatch>[1]);
    if (sameFields(next, rowFields(before))) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    validateTarget(next, this.limits);
    const after = await updateRemoteTargetRow(tx, before.id, next);
    await appendEvent(tx, this.actor, remoteTargetEvent(after, 'updated', before));
    return { action: 'update', id: after.id };
  }

  // ---- export templates -------------------------------------------------------------------------

  private async exportTemplate(tx: TransactionSql, b: ImportExportTemplate, state: ItemState): Promise<Applied> {
    const collectionId = await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const body = { ...templateBody(b), collection_id: collectionId };
    const existing = await exportTemplateIdByName(tx, collectionId, b.name);
    if (existing === undefined) {
      const fields = templateFieldsFromNew(body);
      await requireCollectionPermission(tx, this.auth, collectionId, 'CreateTemplate');
      await validateTemplateWithIncludes(tx, fields, this.limits, 'template');
      const created = await insertExportTemplate(tx, fields);
      await appendEvent(tx, this.actor, exportTemplateEvent(created, 'created', null));
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(`export template ${JSON.stringify(b.name)}`);
    await requireCollectionPermission(tx, this.auth, collectionId, 'UpdateTemplate');
    const before = await lockExportTemplate(tx, existing);
    if (!before) throw notFound('export template');
    const next = applyTemplatePatch(templateRowFields(before), body);
    if (sameTemplateFields(next, templateRowFields(before))) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    await validateTemplateWithIncludes(tx, next, this.limits, 'template');
    const after = await updateExportTemplateRow(tx, before.id, next);
    await appendEvent(tx, this.actor, exportTemplateEvent(after, 'updated', before));
    return { action: 'update', id: after.id };
  }

  // ---- event sinks and subscriptions ------------------------------------------------------------

  private async eventSink(tx: TransactionSql, b: ImportEventSink, state: ItemState): Promise<Applied> {
    const body = sinkBody(b);
    const existing = await eventSinkIdByName(tx, b.name);
    if (existing === undefined) {
      const fields = sinkFromNew(body as Parameters<typeof sinkFromNew>[0]);
      validateSink(fields, 'name');
      const created = await insertEventSink(tx, fields);
      await appendEvent(tx, this.actor, eventSinkEvent(created, 'created', null));
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(`event sink ${JSON.stringify(b.name)}`);
    const before = await lockEventSink(tx, existing);
    if (!before) throw notFound('event sink');
    const prev = sinkFields(before);
    const next = applySinkPatch(prev, body as SinkPatch);
    if (sameJson(next, prev)) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    validateSinkChange(prev, next, await subscriptionRoutingsOfSink(tx, before.id), 'name');
    const after = await updateEventSinkRow(tx, before.id, next);
    await appendEvent(tx, this.actor, eventSinkEvent(after, 'updated', before));
    return { action: 'update', id: after.id };
  }

  private async eventSubscription(tx: TransactionSql, b: ImportEventSubscription, state: ItemState): Promise<Applied> {
    const system = b.collection_ref === undefined && b.collection_key === undefined;
    const collectionId = system ? null : await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const sinkId = await this.sinkOf(tx, b.sink_ref, b.sink_key);
    if (collectionId !== null) await requireCollectionPermission(tx, this.auth, collectionId, 'ManageEventSubscription');
    const body = { ...subscriptionBody(b), sink_id: sinkId } as Parameters<typeof subscriptionFromNew>[1];
    const existing = await eventSubscriptionIdByName(tx, collectionId, b.name);
    if (existing === undefined) {
      const fields = subscriptionFromNew(collectionId, body);
      validateSubscriptionForSink(fields, await findEventSink(tx, fields.sink_id));
      const created = await insertEventSubscription(tx, fields);
      await appendEvent(tx, this.actor, eventSubscriptionEvent(created, 'created', null));
      return { action: 'create', id: created.id };
    }
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(`event subscription ${JSON.stringify(b.name)}`);
    const before = await lockEventSubscription(tx, existing, collectionId);
    if (!before) throw notFound('event subscription');
    const prev = subscriptionFields(before);
    const next = applySubscriptionPatch(prev, body as SubscriptionPatch);
    if (sameJson(next, prev)) {
      state.action = 'unchanged';
      return { action: 'unchanged', id: before.id };
    }
    validateSubscriptionForSink(next, await findEventSink(tx, next.sink_id));
    const after = await updateEventSubscriptionRow(tx, before.id, next);
    if (after.sink_id !== before.sink_id) await repointSubscriptionDeliveries(tx, before.id, after.sink_id);
    await appendEvent(tx, this.actor, eventSubscriptionEvent(after, 'updated', before));
    return { action: 'update', id: after.id };
  }
}

/** The stored request without the password hashes it carried for the run. */
function scrubRequest(request: Record<string, unknown>): Record<string, unknown> {
  const req = structuredClone(request) as { graph?: { principals?: Record<string, unknown>[] } };
  for (const p of req.graph?.principals ?? []) {
    if ('password_hash' in p) {
      delete p.password_hash;
      p.password_removed = true;
    }
  }
  return req as Record<string, unknown>;
}

export async function executeImport(ctx: TaskRunContext): Promise<TaskOutcome> {
  const limits = templateLimits(ctx.deps.config);
  const request = ctx.task.request as unknown as ImportRequest;
  let plan: ImportPlan;
  try {
    plan = planImport(request, limits);
  } catch (err) {
    // Checked at submission; a request that no longer plans (e.g. after an upgrade) fails as a whole.
    const message = publicError(err) ?? 'the stored import request is invalid';
    return {
      status: 'failed',
      details: { reason: 'invalid_request', message },
      message: `import failed: ${message}`,
      finalize: (tx) => replaceImportRequest(tx, ctx.task.id, scrubRequest(ctx.task.request)),
    };
  }
  if (!ctx.authority) {
    return {
      status: 'failed',
      details: { reason: 'submitter_missing', message: 'the submitting principal no longer exists' },
      finalize: (tx) => replaceImportRequest(tx, ctx.task.id, scrubRequest(ctx.task.request)),
    };
  }
  await ctx.event('progress', `import of ${plan.items.length} item(s) started`, {
    dry_run: plan.dryRun,
    atomicity: plan.atomicity,
    collision_policy: plan.collisionPolicy,
  });
  const run = new ImportRun(ctx, plan, limits);
  await run.run();
  return run.outcome();
}
