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
import { deleteRowWithEvents, reserveId } from '../db/events.ts';
import { type NewEvent } from '../domain/new-event.ts';
import { requireClassCollectionPermission, requireClassPermission } from '../db/authz.ts';
import { countFields, insertField, lockClassFields, lockField, storedOperation, updateField } from '../db/computed-fields.ts';
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

/**
 * The check of a write of the caller's fields under a class, in one statement (404 when the class
 * does not exist): UpdateCollection on the class's collection for shared fields (decided as for the
 * collection itself), ReadClass for personal ones. Returns the class's collection.
 */
async function requireFieldChange(m: MutationContext, classId: number, visibility: FieldOwner['visibility']): Promise<number> {
  if (visibility === 'personal') return (await requireClassPermission(m.tx, m.auth, classId, 'ReadClass')).collection_id;
  return requireClassCollectionPermission(m.tx, m.auth, classId, 'UpdateCollection');
}

/**
 * Locks a field for a write: it must be the owner's (else 404) and the caller may change it; then
 * If-Match. One round trip: the lock, and for a shared field the check on its class behind it.
 */
async function lockForWrite(
  m: MutationContext,
  fieldId: number,
  owner: FieldOwner,
  ifMatch: string | undefined,
): Promise<{ row: ComputedFieldRow; collectionId: number; now: Date }> {
  const locking = lockField(m.tx, fieldId);
  const checked = owner.visibility === 'shared' ? requireFieldChange(m, owner.classId, 'shared') : undefined;
  checked?.catch(() => undefined); // awaited below, in the order they run
  const locked = await locking;
  await checked;
  const mine =
    owner.visibility === 'shared'
      ? locked?.class_id === owner.classId && locked.visibility === 'shared'
      : locked?.visibility === 'personal' && locked.owner_user_id === m.auth.principal.id;
  if (!locked || !mine) throw notFound('computed field');
  const { svc_collection_id: collectionId, svc_now: now, ...row } = locked;
  requireMatch(ifMatch, KIND, row.id, row.revision);
  return { row: row as ComputedFieldRow, collectionId, now };
}

function fieldEvent(row: ComputedFieldRow, collectionId: number, action: string, before: ComputedFieldRow | null): NewEvent {
  const event: NewEvent = {
    entityType: KIND,
    entityId: row.id,
    entityName: row.key,
    collectionId,
    action,
    summary: `${row.visibility} computed field ${row.key} ${action}`,
  };
  if (action !== 'deleted') {
    event.after = computedFieldView(row);
    event.afterRevision = row.revision;
  }
  if (before) {
    event.before = computedFieldView(before);
    event.beforeRevision = before.revision;
  }
  event.metadata = { class_id: row.class_id };
  return event;
}

/**
 * Two round trips: the check on the class, the class's definition lock, the count against the limit
 * and the new id with now(); then the field with its event (and COMMIT).
 */
export async function createComputedField(
  m: MutationContext,
  classId: number,
  owner: FieldOwner['visibility'],
  v: NewComputedField,
): Promise<ComputedFieldRow> {
  validateOperation(v.operation, v.result_type);
  const ownerUserId = owner === 'shared' ? null : m.auth.principal.id;
  const checked = requireFieldChange(m, classId, owner);
  const locked = lockClassFields(m.tx, classId); // the count behind it sees every definition committed before it
  const counted = countFields(m.tx, classId, ownerUserId);
  const reserved = reserveId(m.tx, 'computed_fields');
  for (const p of [locked, counted, reserved]) p.catch(() => undefined); // awaited below, after the check
  const collectionId = await checked;
  await locked;
  if ((await counted) >= (owner === 'shared' ? MAX_SHARED_PER_CLASS : MAX_PERSONAL_PER_CLASS)) {
    throw conflict(
      owner === 'shared'
        ? `a class has at most ${MAX_SHARED_PER_CLASS} shared computed fields`
        : `you have at most ${MAX_PERSONAL_PER_CLASS} personal computed fields per class`,
      'computed_field_limit',
    );
  }
  const { id, now } = await reserved;
  const created: ComputedFieldRow = {
    id,
    class_id: classId,
    key: v.key,
    label: v.label ?? v.key,
    description: v.description ?? '',
    enabled: v.enabled ?? true,
    operation: storedOperation(v.operation),
    result_type: v.result_type,
    visibility: owner,
    owner_user_id: ownerUserId,
    created_at: now,
    updated_at: now,
    revision: 1,
  };
  return insertField(m.tx, m.actor, created, [fieldEvent(created, collectionId, 'created', null)], m.final);
}

/** Two round trips: the lock with the check; then the change with its event (and COMMIT). */
export async function updateComputedField(
  m: MutationContext,
  fieldId: number,
  owner: FieldOwner,
  changes: ComputedFieldChanges,
  ifMatch?: string,
): Promise<Written<ComputedFieldRow>> {
  const { row: before, collectionId, now } = await lockForWrite(m, fieldId, owner, ifMatch);
  const next = {
    label: changes.label ?? before.label,
    description: changes.description ?? before.description,
    enabled: changes.enabled ?? before.enabled,
    operation: changes.operation ? storedOperation(changes.operation) : before.operation,
    result_type: changes.result_type ?? before.result_type,
  };
  const same =
    next.label === before.label &&
    next.description === before.description &&
    next.enabled === before.enabled &&
    next.result_type === before.result_type &&
    jsonEqual(next.operation, storedOperation(before.operation));
  return skipWhenUnchanged(before, same, async () => {
    validateOperation(next.operation, next.result_type);
    const after: ComputedFieldRow = Object.assign({}, before, next, { updated_at: now, revision: before.revision + 1 });
    return updateField(m.tx, m.actor, after, [fieldEvent(after, collectionId, 'updated', before)], m.final);
  });
}

/** Two round trips: the lock with the check; then the delete with its event (and COMMIT). */
export async function deleteComputedField(m: MutationContext, fieldId: number, owner: FieldOwner, ifMatch?: string): Promise<void> {
  const { row, collectionId } = await lockForWrite(m, fieldId, owner, ifMatch);
  await deleteRowWithEvents(m.tx, m.actor, 'computed_fields', row.id, [fieldEvent(row, collectionId, 'deleted', row)], m.final);
}
