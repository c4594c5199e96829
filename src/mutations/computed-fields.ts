// Computed fields: their one write path. A shared field belongs to its class and changing it needs
// UpdateCollection on the class's collection; a personal field belongs to the human who made it
// and only its owner sees or changes it (any other caller gets 404).
import { conflict, notFound } from '../domain/errors.ts';
import {
  MAX_PERSONAL_PER_CLASS,
  MAX_SHARED_PER_CLASS,
  validateOperation,
  type ComputedOperation,
  type ResultType,
} from '../domain/computed.ts';
import { jsonEqual } from '../domain/json-patch.ts';
import type { Db } from '../db/sql.ts';
import { appendEvent } from '../db/events.ts';
import { type NewEvent } from '../domain/new-event.ts';
import { requireClassPermission, requireCollectionPermission } from '../db/authz.ts';
import { findClassExpanded } from '../db/classes.ts';
import { countFields, deleteField, insertField, lockClassFields, lockField, updateField, type FieldValues } from '../db/computed-fields.ts';
import { computedFieldView, type ComputedFieldRow } from '../domain/views/computed-fields.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

const KIND = 'computed_field';

/** Whose fields a write is about: the shared fields of a class, or the caller's personal ones. */
export type FieldOwner = { visibility: 'shared'; classId: number } | { visibility: 'personal' };

export interface NewComputedField {
  key: string;
  label?: string;
  description?: string;
  enabled?: boolean;
  operation: ComputedOperation;
  result_type: ResultType;
}

/** Members to change; an omitted member keeps its value. */
export interface ComputedFieldChanges {
  label?: string;
  description?: string;
  enabled?: boolean;
  operation?: ComputedOperation;
  result_type?: ResultType;
}

/** The class's collection (404 when the class does not exist). */
async function classCollection(db: Db, classId: number): Promise<number> {
  const cls = await findClassExpanded(db, classId);
  if (!cls) throw notFound('class');
  return cls.collection_id;
}

/** Changing shared fields needs UpdateCollection on the class's collection. */
async function requireSharedChange(m: MutationContext, classId: number): Promise<number> {
  const collectionId = await classCollection(m.tx, classId);
  await requireCollectionPermission(m.tx, m.auth, collectionId, 'UpdateCollection');
  return collectionId;
}

/** Locks a field for a write: it must be the owner's (else 404) and the caller may change it; then If-Match. */
async function lockForWrite(
  m: MutationContext,
  fieldId: number,
  owner: FieldOwner,
  ifMatch: string | undefined,
): Promise<{ row: ComputedFieldRow; collectionId: number }> {
  const row = await lockField(m.tx, fieldId);
  let collectionId: number | undefined;
  if (owner.visibility === 'shared') collectionId = await requireSharedChange(m, owner.classId);
  const mine =
    owner.visibility === 'shared'
      ? row?.class_id === owner.classId && row.visibility === 'shared'
      : row?.visibility === 'personal' && row.owner_user_id === m.auth.principal.id;
  if (!row || !mine) throw notFound('computed field');
  collectionId ??= await classCollection(m.tx, row.class_id);
  requireMatch(ifMatch, KIND, row.id, row.revision);
  return { row, collectionId };
}

function fieldEvent(row: ComputedFieldRow, collectionId: number, action: string, before: ComputedFieldRow | null): NewEvent {
  return {
    entityType: KIND,
    entityId: row.id,
    entityName: row.key,
    collectionId,
    action,
    summary: `${row.visibility} computed field ${row.key} ${action}`,
    ...(action === 'deleted' ? {} : { after: computedFieldView(row), afterRevision: row.revision }),
    ...(before ? { before: computedFieldView(before), beforeRevision: before.revision } : {}),
    metadata: { class_id: row.class_id },
  };
}

export async function createComputedField(
  m: MutationContext,
  classId: number,
  owner: FieldOwner['visibility'],
  v: NewComputedField,
): Promise<ComputedFieldRow> {
  validateOperation(v.operation, v.result_type);
  const ownerUserId = owner === 'shared' ? null : m.auth.principal.id;
  const collectionId =
    owner === 'shared'
      ? await requireSharedChange(m, classId)
      : (await requireClassPermission(m.tx, m.auth, classId, 'ReadClass')).collection_id;
  await lockClassFields(m.tx, classId);
  if ((await countFields(m.tx, classId, ownerUserId)) >= (owner === 'shared' ? MAX_SHARED_PER_CLASS : MAX_PERSONAL_PER_CLASS)) {
    throw conflict(
      owner === 'shared'
        ? `a class has at most ${MAX_SHARED_PER_CLASS} shared computed fields`
        : `you have at most ${MAX_PERSONAL_PER_CLASS} personal computed fields per class`,
      'computed_field_limit',
    );
  }
  const row = await insertField(m.tx, {
    classId,
    key: v.key,
    label: v.label ?? v.key,
    description: v.description ?? '',
    enabled: v.enabled ?? true,
    operation: { type: v.operation.type, paths: v.operation.paths },
    result_type: v.result_type,
    visibility: owner,
    ownerUserId,
  });
  await appendEvent(m.tx, m.actor, fieldEvent(row, collectionId, 'created', null), m.final);
  return row;
}

export async function updateComputedField(
  m: MutationContext,
  fieldId: number,
  owner: FieldOwner,
  changes: ComputedFieldChanges,
  ifMatch?: string,
): Promise<Written<ComputedFieldRow>> {
  const { row: before, collectionId } = await lockForWrite(m, fieldId, owner, ifMatch);
  const next: FieldValues = {
    label: changes.label ?? before.label,
    description: changes.description ?? before.description,
    enabled: changes.enabled ?? before.enabled,
    operation: changes.operation ? { type: changes.operation.type, paths: changes.operation.paths } : before.operation,
    result_type: changes.result_type ?? before.result_type,
  };
  const same =
    next.label === before.label &&
    next.description === before.description &&
    next.enabled === before.enabled &&
    next.result_type === before.result_type &&
    jsonEqual(next.operation, { type: before.operation.type, paths: before.operation.paths });
  return skipWhenUnchanged(before, same, async () => {
    validateOperation(next.operation, next.result_type);
    const after = await updateField(m.tx, before.id, next);
    await appendEvent(m.tx, m.actor, fieldEvent(after, collectionId, 'updated', before), m.final);
    return after;
  });
}

export async function deleteComputedField(m: MutationContext, fieldId: number, owner: FieldOwner, ifMatch?: string): Promise<void> {
  const { row, collectionId } = await lockForWrite(m, fieldId, owner, ifMatch);
  await deleteField(m.tx, row.id);
  await appendEvent(m.tx, m.actor, fieldEvent(row, collectionId, 'deleted', row), m.final);
}
