// Objects: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import { type NewEvent } from '../new-event.ts';
import { isoTime, isoTimeJson, type ResponseBody } from '../wire.ts';
import { jsonMember } from '../json-text.ts';

export interface ObjectRow {
  [key: string]: unknown;
  id: number;
  name: string;
  description: string;
  collection_id: number;
  class_id: number;
  json_data: unknown;
  /** A Date, or (objectColsJsonText) the database's UTC text of it: isoTime reads both. */
  created_at: Date | string;
  updated_at: Date | string;
  revision: number;
}

/** The public representation without `computed` (also the audit snapshot). */
export function objectView(r: ObjectRow): ResponseBody<'getObject', 200> {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    collection_id: r.collection_id,
    svc_class_id: r.class_id,
    json_data: r.json_data,
    created_at: isoTime(r.created_at),
    updated_at: isoTime(r.updated_at),
    revision: r.revision,
  };
}

/**
 * JSON.stringify(objectView(r)), with json_data the row's JSON text as the database wrote it
 * (objectColsJsonText), written directly: for a page of 100 objects this took ~140 µs against ~260
 * for building the views, stringifying them and splicing the texts in (domain/json-text.ts; timed
 * alone, 2026-11-28). The members and their order are objectView's: test/object-views.test.ts holds
 * the two to the same text.
 */
export function objectJsonText(r: ObjectRow & { json_data: string }): string {
  return (
    `{"id":${jsonMember(r.id)},"name":${JSON.stringify(r.name)},"description":${JSON.stringify(r.description)},` +
    `"collection_id":${jsonMember(r.collection_id)},"svc_class_id":${jsonMember(r.class_id)},"json_data":${r.json_data},` +
    `"created_at":${isoTimeJson(r.created_at)},"updated_at":${isoTimeJson(r.updated_at)},` +
    `"revision":${jsonMember(r.revision)}}`
  );
}

export function objectCreatedEvent(row: ObjectRow, cls: { id: number; name: string }): NewEvent {
  return {
    entityType: 'object',
    entityId: row.id,
    entityName: row.name,
    collectionId: row.collection_id,
    action: 'created',
    summary: `object ${row.name} created in class ${cls.name}`,
    after: objectView(row),
    afterRevision: row.revision,
    metadata: { class_id: cls.id },
  };
}

/** `how` completes the summary (e.g. " by JSON Patch"). */
export function objectUpdatedEvent(before: ObjectRow, after: ObjectRow, classId: number, dataChanged: boolean, how = ''): NewEvent {
  return {
    entityType: 'object',
    entityId: after.id,
    entityName: after.name,
    collectionId: after.collection_id,
    action: 'updated',
    summary: objectUpdatedSummary(after.name, how),
    before: objectView(before),
    after: objectView(after),
    beforeRevision: before.revision,
    afterRevision: after.revision,
    metadata: { class_id: classId, data_changed: dataChanged },
  };
}

/** The summary of an object's update event. */
function objectUpdatedSummary(name: string, how = ''): string {
  return `object ${name} updated${how}`;
}

/**
 * objectUpdatedEvent as far as it can be built without the object's row, for a statement that reads
 * the row and writes the event itself (updateObjectIfClassUnchanged): the database completes the
 * name (in the summary as the `%s` of PostgreSQL's format()), the snapshots, the revisions and
 * whether json_data changed.
 */
export function objectUpdatedEventDraft(objectId: number, cls: { id: number; collection_id: number }, how = ''): NewEvent {
  return {
    entityType: 'object',
    entityId: objectId,
    collectionId: cls.collection_id,
    action: 'updated',
    summary: objectUpdatedSummary('%s', how.replaceAll('%', '%%')),
    before: {},
    after: {},
    metadata: { class_id: cls.id },
  };
}

/** The event of an object's delete; `relations` counts the object relations deleted with it. */
export function objectDeletedEvent(obj: ObjectRow, cls: { id: number; name: string }, relations: number): NewEvent {
  return {
    entityType: 'object',
    entityId: obj.id,
    entityName: obj.name,
    collectionId: obj.collection_id,
    action: 'deleted',
    summary: objectDeletedSummary(obj.name, cls.name),
    before: objectView(obj),
    beforeRevision: obj.revision,
    metadata: { class_id: cls.id, deleted_object_relations: relations },
  };
}

/** The summary of an object's delete event. */
function objectDeletedSummary(name: string, className: string): string {
  return `object ${name} deleted from class ${className}`;
}

/**
 * objectDeletedEvent, of an object without relations, as far as it can be built without the
 * object's row, for a statement that deletes the row and writes the event itself
 * (deleteObjectIfClassUnchanged): the database completes the name (in the summary as the `%s` of
 * PostgreSQL's format(), the class's name escaped for it), the snapshot and the revision.
 */
export function objectDeletedEventDraft(objectId: number, cls: { id: number; name: string; collection_id: number }): NewEvent {
  return {
    entityType: 'object',
    entityId: objectId,
    collectionId: cls.collection_id,
    action: 'deleted',
    summary: objectDeletedSummary('%s', cls.name.replaceAll('%', '%%')),
    before: {},
    metadata: { class_id: cls.id, deleted_object_relations: 0 },
  };
}
