// Classes: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import { type NewEvent } from '../new-event.ts';
import type { ResponseBody } from '../wire.ts';

export interface ClassRow {
  [key: string]: unknown;
  id: number;
  name: string;
  description: string;
  collection_id: number;
  json_schema: unknown;
  validate_schema: boolean;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/** A class row with its collection's columns (prefixed c_). */
export interface ClassExpandedRow extends ClassRow {
  c_name: string;
  c_description: string;
  c_parent_collection_id: number | null;
  c_created_at: Date;
  c_updated_at: Date;
  c_revision: number;
}

/** The plain class (also the audit snapshot and a class version's data); getClassByName's body without include=collection. */
export function classView(r: ClassRow): ResponseBody<'getClassAsOf', 200>['data'] {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    collection_id: r.collection_id,
    validate_schema: r.validate_schema,
    json_schema: r.json_schema ?? null,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}

export function classCreatedEvent(row: ClassRow): NewEvent {
  return {
    entityType: 'class',
    entityId: row.id,
    entityName: row.name,
    collectionId: row.collection_id,
    action: 'created',
    summary: `class ${row.name} created`,
    after: classView(row),
    afterRevision: row.revision,
  };
}

/** `movedObjects` is null when the class stayed in its collection. */
export function classUpdatedEvent(before: ClassRow, after: ClassRow, schemaChanged: boolean, movedObjects: number | null): NewEvent {
  const moved = movedObjects !== null;
  return {
    entityType: 'class',
    entityId: after.id,
    entityName: after.name,
    collectionId: after.collection_id,
    relatedCollectionIds: moved ? [before.collection_id] : [],
    action: 'updated',
    summary: `class ${after.name} updated`,
    before: classView(before),
    after: classView(after),
    beforeRevision: before.revision,
    afterRevision: after.revision,
    metadata: { schema_changed: schemaChanged, ...(moved ? { moved_objects: movedObjects } : {}) },
  };
}

/** The expanded class: the collection object in place of collection_id. */
export function classExpandedView(r: ClassExpandedRow): ResponseBody<'getClass', 200> {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    collection: {
      id: r.collection_id,
      name: r.c_name,
      description: r.c_description,
      parent_collection_id: r.c_parent_collection_id,
      created_at: r.c_created_at,
      updated_at: r.c_updated_at,
      revision: r.c_revision,
    },
    validate_schema: r.validate_schema,
    json_schema: r.json_schema ?? null,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}
