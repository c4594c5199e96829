// The `import` task executor: a driver over the entities' write paths (src/mutations), which
// hold every rule, lock and audit event, exactly as for the API. The stored request was checked
// when it was submitted (src/domain/imports.ts); here the plan is run item by item in processing
// order, each item one call of its entity's create or update (actor_kind worker, initiator =
// submitter, task_id set). Every item is authorized against the submitter's live grants
// intersected with the token scope snapshot (TaskRunContext.authority, fail closed); the identity
// and integration sections also need that authority to be an unscoped administrator. The modes
// only decide where transactions begin and end:
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
// a collision: `abort` fails the item, `overwrite` runs the entity's update with the members the
// item supplies (omitted members keep their values) and reports `unchanged` when nothing differs. Object
// relations and group memberships that already exist are no-ops; collection permission items
// merge into the group's grant (or replace it with replace_existing).
import type { Deps } from '../deps.ts';
import type { Actor } from '../domain/actor.ts';
import type { TransactionSql } from '../db/sql.ts';
import { savepoint, withTx } from '../db/tx.ts';
import { bindActor } from '../db/history.ts';
import { translatePgError } from '../db/pg-errors.ts';
import { ApiError, badRequest, conflict, forbidden, isClientError, notFound } from '../domain/errors.ts';
import { isUnscoped, sortPermissions, type Authority } from '../domain/authz.ts';
import { createCollection, updateCollection } from '../mutations/collections.ts';
import { classIdByName } from '../db/classes.ts';
import { createClass, recordingRefusal, updateClass } from '../mutations/classes.ts';
import { objectIdByName } from '../db/objects.ts';
import type { MutationContext, Written } from '../mutations/context.ts';
import { createObject, updateObject } from '../mutations/objects.ts';
import { findObjectEnds } from '../db/relations.ts';
import { createClassRelation, ensureObjectRelation, updateClassRelation } from '../mutations/relations.ts';
import { grantCollectionPermissions } from '../mutations/permissions.ts';
import { addGroupMember, createGroup, updateGroup } from '../mutations/groups.ts';
import { createUser, updateUser } from '../mutations/users.ts';
import { createServiceAccount, updateServiceAccount } from '../mutations/service-accounts.ts';
import { classCollectionId } from '../db/remote-targets.ts';
import { createRemoteTarget, updateRemoteTarget, type RemoteTargetPatch } from '../mutations/remote-targets.ts';
import {
  childCollectionId,
  classRelationIdBetween,
  collectionIdByPath,
  eventSinkIdByName,
  eventSubscriptionIdByName,
  exportTemplateIdByName,
  groupIdByKey,
  principalByKey,
  remoteTargetIdByName,
  replaceImportRequest,
  setImportProgress,
  upsertImportResults,
  type NewImportResult,
} from '../db/imports.ts';
import { fieldsFromNew, type TemplateLimits } from '../domain/remote-targets.ts';
import { mergeMembers } from '../domain/json-patch.ts';
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
import type { TaskProgress } from '../domain/views/tasks.ts';
import { templateFieldsFromNew } from '../domain/exports.ts';
import { createExportTemplate, updateExportTemplate } from '../mutations/export-templates.ts';
import { sinkFromNew, subscriptionFromNew, type SinkPatch, type SubscriptionPatch } from '../domain/event-subscriptions.ts';
import { createEventSink, updateEventSink } from '../mutations/event-sinks.ts';
import { createEventSubscription, updateEventSubscription } from '../mutations/event-subscriptions.ts';
import { ClaimLostError, TaskCancelledError, type TaskOutcome, type TaskRunContext } from './task-context.ts';

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

const collide = (what: string) =>
  new ApiError('conflict', `${what} already exists (collision_policy abort)`, { reason: 'import_collision' });

/** The public text of an item failure; null for an internal error (logged, never shown). */
function publicError(err: unknown): string | null {
  const e = translatePgError(err);
  if (!isClientError(e)) return null;
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

  /** Strict: one transaction; the first failure stops the run; rolled back on failure and for a dry run. */
  private async runStrict(): Promise<void> {
    let failedAt: PlanItem | undefined;
    await this.inOneTransaction(async (tx) => {
      failedAt = await this.eachItem({
        transactional: true,
        stopAtFailure: true,
        attempt: (item, state) => this.applyItem(tx, item, state),
      });
      return failedAt !== undefined || this.plan.dryRun;
    });
    if (failedAt) {
      for (const r of this.results) if (r?.outcome === 'succeeded') r.outcome = 'rolled_back';
      for (const item of this.plan.items) {
        if (!this.results[item.seq]) this.skip(item, `the strict import stopped at ${failedAt.itemRef}`);
      }
    }
  }

  /** Best effort: each item in its own transaction with its result row and the progress (fenced). */
  private async runBestEffort(): Promise<void> {
    const db = this.deps.sql;
    const taskId = this.ctx.task.id;
    const fencedWrite = async (tx: TransactionSql, r: NewImportResult) => {
      await upsertImportResults(tx, taskId, [r]);
      if (!(await setImportProgress(tx, taskId, this.claimToken, this.progress()))) throw new ClaimLostError();
    };
    await this.eachItem({
      transactional: false,
      attempt: (item, state) => withTx(db, async (tx) => fencedWrite(tx, await this.applyItem(tx, item, state))),
      keep: (r) => withTx(db, (tx) => fencedWrite(tx, r)),
    });
  }

  /** Best effort, dry run: one transaction that is always rolled back; a savepoint per item. */
  private async runBestEffortDry(): Promise<void> {
    await this.inOneTransaction(async (tx) => {
      await this.eachItem({ transactional: true, attempt: (item, state) => savepoint(tx, (sp) => this.applyItem(sp, item, state)) });
      return true;
    });
  }

  /** Runs fn in one transaction, rolled back when fn returns true. */
  private async inOneTransaction(fn: (tx: TransactionSql) => Promise<boolean>): Promise<void> {
    try {
      await withTx(this.deps.sql, async (tx) => {
        if (await fn(tx)) throw new Rollback();
      });
    } catch (err) {
      if (!(err instanceof Rollback)) throw err;
    }
  }

  /**
   * The item loop of every mode: a cancel checkpoint every CHECKPOINT_EVERY items, `skipped` for
   * an item whose ref dependency did not succeed, else one attempt (the mode's transaction,
   * savepoint or own transaction) and `failed` when it throws. `keep` stores a result the attempt
   * did not store itself; `stopAtFailure` ends the loop at the first failure, which it returns.
   */
  private async eachItem(mode: {
    transactional: boolean;
    attempt: (item: PlanItem, state: ItemState) => Promise<unknown>;
    keep?: (r: NewImportResult) => Promise<void>;
    stopAtFailure?: boolean;
  }): Promise<PlanItem | undefined> {
    for (const [i, item] of this.plan.items.entries()) {
      await this.checkpoint(i, mode.transactional);
      const dep = this.failedDependency(item);
      if (dep !== undefined) {
        const skipped = this.skip(item, `it depends on ${dep}, which did not succeed`);
        await mode.keep?.(skipped);
        continue;
      }
      const state: ItemState = { action: 'create' };
      try {
        await mode.attempt(item, state);
      } catch (err) {
        if (cancelOrLost(err)) throw err;
        const failed = this.fail(item, state, err);
        await mode.keep?.(failed);
        if (mode.stopAtFailure) return item;
      }
    }
    return undefined;
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
    return {
      status,
      summary: {
        dry_run: this.plan.dryRun,
        atomicity: this.plan.atomicity,
        collision_policy: this.plan.collisionPolicy,
        outcomes: counts,
        actions,
      },
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

  /** Applies one item in tx and records it as succeeded. */
  private async applyItem(tx: TransactionSql, item: PlanItem, state: ItemState): Promise<NewImportResult> {
    await bindActor(tx, this.actor);
    const applied = await this.apply(tx, item, state);
    return this.record(item, applied.action, 'succeeded', null, applied.id);
  }

  /** The item's entity write path, behind the admin rule of the identity and integration sections. */
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

  // ---- the write paths ----------------------------------------------------------------------------

  /** The mutation context of an item: the run's actor and authority in the item's transaction. */
  private as(tx: TransactionSql): MutationContext {
    return { tx, actor: this.actor, auth: this.auth };
  }

  /**
   * An item whose natural key matched an existing row: `abort` fails it, `overwrite` runs the
   * entity's update path (omitted members keep their values), `unchanged` when nothing differed.
   */
  private async overwrite(state: ItemState, what: string, update: () => Promise<Written<{ id: number }>>): Promise<Applied> {
    state.action = 'update';
    if (this.plan.collisionPolicy === 'abort') throw collide(what);
    const { row, changed } = await update();
    state.action = changed ? 'update' : 'unchanged';
    return { action: state.action, id: row.id };
  }

  /**
   * An item keyed by a natural key: created when no row has the key (`existing` undefined),
   * otherwise a collision that overwrite() resolves with the entity's update path.
   */
  private async upsert(
    state: ItemState,
    what: string,
    existing: number | undefined,
    create: () => Promise<{ id: number }>,
    update: (id: number) => Promise<Written<{ id: number }>>,
  ): Promise<Applied> {
    if (existing === undefined) return { action: 'create', id: (await create()).id };
    return this.overwrite(state, what, () => update(existing));
  }

  // ---- references -------------------------------------------------------------------------------

  private refId(ref: string): number {
    const id = this.refs.get(ref);
    if (id === undefined || id === null) throw new ApiError('conflict', `the item named by ref "${ref}" did not succeed`);
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
    const m = this.as(tx);
    return this.upsert(
      state,
      `collection ${JSON.stringify(b.name)}`,
      await childCollectionId(tx, parentId, b.name),
      () => createCollection(m, { name: b.name, description: b.description, parent_collection_id: parentId }),
      (id) => updateCollection(m, id, { description: b.description }),
    );
  }

  // ---- classes ----------------------------------------------------------------------------------

  private async klass(tx: TransactionSql, b: ImportClass, state: ItemState): Promise<Applied> {
    const collectionId = await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const fields = {
      description: b.description,
      collection_id: collectionId,
      json_schema: b.json_schema,
      validate_schema: b.validate_schema,
    };
    // A refused schema change is recorded in its own transaction (not for a dry run), so the
    // import's rollback cannot take the record with it.
    const refused = this.plan.dryRun ? (err: unknown) => Promise.reject(err) : recordingRefusal(this.deps.sql, this.deps.log, this.actor);
    const m = this.as(tx);
    return this.upsert(
      state,
      `class ${JSON.stringify(b.name)}`,
      await classIdByName(tx, b.name),
      () => createClass(m, { name: b.name, ...fields }),
      (id) => updateClass(m, { classId: id }, fields).catch(refused),
    );
  }

  // ---- objects ----------------------------------------------------------------------------------

  private async object(tx: TransactionSql, b: ImportObject, state: ItemState): Promise<Applied> {
    const classId = await this.classOf(tx, b.class_ref, b.class_key);
    const m = this.as(tx);
    return this.upsert(
      state,
      `object ${JSON.stringify(b.name)}`,
      await objectIdByName(tx, classId, b.name),
      () => createObject(m, classId, null, { name: b.name, description: b.description, json_data: b.json_data }),
      (id) => updateObject(m, { classId, objectId: id }, { description: b.description, json_data: b.json_data }),
    );
  }

  // ---- relations --------------------------------------------------------------------------------

  private async classRelation(tx: TransactionSql, b: ImportClassRelation, state: ItemState): Promise<Applied> {
    const fromId = await this.classOf(tx, b.from_class_ref, b.from_class_key);
    const toId = await this.classOf(tx, b.to_class_ref, b.to_class_key);
    const { forward_alias, reverse_alias, from_max_relations, to_max_relations } = b;
    const settings = { forward_alias, reverse_alias, from_max_relations, to_max_relations };
    const m = this.as(tx);
    return this.upsert(
      state,
      `the class relation from class ${fromId} to class ${toId}`,
      await classRelationIdBetween(tx, fromId, toId),
      () => createClassRelation(m, { from_class_id: fromId, to_class_id: toId, ...settings }),
      (id) => updateClassRelation(m, id, settings),
    );
  }

  /** An object relation that exists already is left as it is (unchanged). */
  private async objectRelation(tx: TransactionSql, b: ImportObjectRelation, state: ItemState): Promise<Applied> {
    const fromId = await this.objectOf(tx, b.from_object_ref, b.from_object_key);
    const toId = await this.objectOf(tx, b.to_object_ref, b.to_object_key);
    const ends = await findObjectEnds(tx, [fromId, toId]);
    const fromEnd = ends.get(fromId);
    const toEnd = ends.get(toId);
    if (!fromEnd || !toEnd) throw notFound('object');
    const crId = await classRelationIdBetween(tx, fromEnd.class_id, toEnd.class_id);
    if (crId === undefined) throw notFound(`class relation from class ${fromEnd.class_id} to class ${toEnd.class_id}`);
    const created = await ensureObjectRelation(this.as(tx), { class_relation_id: crId, from_object_id: fromId, to_object_id: toId });
    if (created === null) state.action = 'unchanged';
    return { action: state.action, id: created?.id ?? null };
  }

  // ---- permissions ------------------------------------------------------------------------------

  private async collectionPermission(tx: TransactionSql, b: ImportCollectionPermission, _state: ItemState): Promise<Applied> {
    const collectionId = await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const groupId = await this.groupOf(tx, b.group_ref, b.group_key);
    const wanted = sortPermissions(b.permissions);
    const c = await grantCollectionPermissions(this.as(tx), collectionId, groupId, wanted, { replace: b.replace_existing === true });
    const action: ResultAction = c.before.length === 0 ? 'create' : c.added.length || c.removed.length ? 'update' : 'unchanged';
    return { action, id: null };
  }

  // ---- identities -------------------------------------------------------------------------------

  private async group(tx: TransactionSql, b: ImportGroup, state: ItemState): Promise<Applied> {
    const scope = scopeOf(b);
    const existing = await groupIdByKey(tx, b.name, scope);
    if (existing === undefined) {
      const g = await createGroup(this.as(tx), { name: b.name, description: b.description, identity_scope: scope });
      return { action: 'create', id: g.id };
    }
    return this.overwrite(state, `group ${JSON.stringify(b.name)}`, () =>
      updateGroup(this.as(tx), existing, { description: b.description }),
    );
  }

  private async human(tx: TransactionSql, b: ImportHuman, state: ItemState): Promise<Applied> {
    const scope = scopeOf(b);
    const password = b.password_hash === undefined ? undefined : { hash: b.password_hash };
    const existing = await principalByKey(tx, b.name, scope);
    if (!existing) {
      const created = await createUser(this.as(tx), {
        name: b.name,
        identity_scope: scope,
        email: b.email,
        proper_name: b.proper_name,
        password,
      });
      return { action: 'create', id: created.id };
    }
    if (existing.kind !== 'human') {
      state.action = 'update';
      throw conflict(`principal ${JSON.stringify(b.name)} exists as a service account`);
    }
    return this.overwrite(state, `user ${JSON.stringify(b.name)}`, () =>
      updateUser(this.as(tx), existing.id, { email: b.email, proper_name: b.proper_name, password }),
    );
  }

  private async serviceAccount(tx: TransactionSql, b: ImportServiceAccount, state: ItemState): Promise<Applied> {
    const scope = scopeOf(b);
    const ownerId = await this.groupOf(tx, b.owner_group_ref, b.owner_group_key);
    const existing = await principalByKey(tx, b.name, scope);
    if (!existing) {
      const created = await createServiceAccount(this.as(tx), {
        name: b.name,
        identity_scope: scope,
        description: b.description,
        owner_group_id: ownerId,
        disabled: b.disabled,
      });
      return { action: 'create', id: created.id };
    }
    if (existing.kind !== 'service_account') {
      state.action = 'update';
      throw conflict(`principal ${JSON.stringify(b.name)} exists as a human user`);
    }
    return this.overwrite(state, `service account ${JSON.stringify(b.name)}`, () =>
      updateServiceAccount(this.as(tx), existing.id, { description: b.description, owner_group_id: ownerId, disabled: b.disabled }),
    );
  }

  private async membership(tx: TransactionSql, b: ImportGroupMembership, _state: ItemState): Promise<Applied> {
    const principalId = await this.principalOf(tx, b.principal_ref, b.principal_key);
    const groupId = await this.groupOf(tx, b.group_ref, b.group_key);
    const { changed } = await addGroupMember(this.as(tx), groupId, principalId);
    return { action: changed ? 'create' : 'unchanged', id: null };
  }

  // ---- remote targets ---------------------------------------------------------------------------

  private async remoteTarget(tx: TransactionSql, b: ImportRemoteTarget, state: ItemState): Promise<Applied> {
    const collectionId = await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const hasClass = b.class_ref !== undefined || b.class_key !== undefined;
    const classId = hasClass ? await this.classOf(tx, b.class_ref, b.class_key) : null;
    if (classId !== null && (await classCollectionId(tx, classId)) !== collectionId) {
      throw badRequest('the remote target is invalid', [{ path: 'class', message: 'must be a class of the target collection' }]);
    }
    const body: { collection_id: number; class_id: number | null } = mergeMembers(targetBody(b), {
      collection_id: collectionId,
      class_id: classId,
    });
    const config = this.deps.config;
    const existing = await remoteTargetIdByName(tx, collectionId, b.name);
    if (existing === undefined) {
      const created = await createRemoteTarget(this.as(tx), fieldsFromNew(body as Parameters<typeof fieldsFromNew>[0]), config);
      return { action: 'create', id: created.id };
    }
    return this.overwrite(state, `remote target ${JSON.stringify(b.name)}`, () =>
      updateRemoteTarget(this.as(tx), existing, body as RemoteTargetPatch, config),
    );
  }

  // ---- export templates -------------------------------------------------------------------------

  private async exportTemplate(tx: TransactionSql, b: ImportExportTemplate, state: ItemState): Promise<Applied> {
    const collectionId = await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const body = mergeMembers(templateBody(b), { collection_id: collectionId });
    const rules = { limits: this.limits, templatePath: 'template' };
    const existing = await exportTemplateIdByName(tx, collectionId, b.name);
    if (existing === undefined) {
      const created = await createExportTemplate(this.as(tx), templateFieldsFromNew(body), rules);
      return { action: 'create', id: created.id };
    }
    return this.overwrite(state, `export template ${JSON.stringify(b.name)}`, () =>
      updateExportTemplate(this.as(tx), existing, body, rules),
    );
  }

  // ---- event sinks and subscriptions ------------------------------------------------------------

  private async eventSink(tx: TransactionSql, b: ImportEventSink, state: ItemState): Promise<Applied> {
    const body = sinkBody(b);
    const existing = await eventSinkIdByName(tx, b.name);
    if (existing === undefined) {
      const created = await createEventSink(this.as(tx), sinkFromNew(body as Parameters<typeof sinkFromNew>[0]), 'name');
      return { action: 'create', id: created.id };
    }
    return this.overwrite(state, `event sink ${JSON.stringify(b.name)}`, () =>
      updateEventSink(this.as(tx), existing, body as SinkPatch, undefined, 'name'),
    );
  }

  private async eventSubscription(tx: TransactionSql, b: ImportEventSubscription, state: ItemState): Promise<Applied> {
    const system = b.collection_ref === undefined && b.collection_key === undefined;
    const collectionId = system ? null : await this.collectionOf(tx, b.collection_ref, b.collection_key);
    const sinkId = await this.sinkOf(tx, b.sink_ref, b.sink_key);
    const body = mergeMembers(subscriptionBody(b), { sink_id: sinkId }) as Parameters<typeof subscriptionFromNew>[1];
    const existing = await eventSubscriptionIdByName(tx, collectionId, b.name);
    if (existing === undefined) {
      const created = await createEventSubscription(this.as(tx), subscriptionFromNew(collectionId, body));
      return { action: 'create', id: created.id };
    }
    return this.overwrite(state, `event subscription ${JSON.stringify(b.name)}`, () =>
      updateEventSubscription(this.as(tx), collectionId, existing, body as SubscriptionPatch),
    );
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
