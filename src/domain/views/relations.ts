// Class and object relations (their wire views are in src/domain/relations.ts): the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import { type NewEvent } from '../new-event.ts';
import { classRelationView, objectRelationView, type ClassRelationRow, type ObjectRelationRow, type RelationEnds } from '../relations.ts';

export const CLASS_RELATION_KIND = 'class_relation';

export const OBJECT_RELATION_KIND = 'object_relation';

// ---- class relations --------------------------------------------------------------------------

/** A class relation with the collections of its two classes (for authorization and events). */
export type ClassRelationWithEnds = ClassRelationRow & RelationEnds;

export function classRelationEvent(r: ClassRelationWithEnds, action: 'created' | 'deleted'): NewEvent {
  const view = classRelationView(r);
  return {
    entityType: CLASS_RELATION_KIND,
    entityId: r.id,
    entityName: null,
    collectionId: r.from_collection_id,
    relatedCollectionIds: [r.to_collection_id],
    action,
    summary: `class relation ${r.id} (class ${r.from_class_id} to class ${r.to_class_id}) ${action}`,
    before: action === 'deleted' ? view : null,
    after: action === 'created' ? view : null,
    beforeRevision: action === 'deleted' ? r.revision : null,
    afterRevision: action === 'created' ? r.revision : null,
    metadata: { from_class_id: r.from_class_id, to_class_id: r.to_class_id },
  };
}

export function objectRelationEvent(r: ObjectRelationRow, ends: RelationEnds, action: 'created' | 'deleted'): NewEvent {
  const view = objectRelationView(r);
  return {
    entityType: OBJECT_RELATION_KIND,
    entityId: r.id,
    entityName: null,
    collectionId: ends.from_collection_id,
    relatedCollectionIds: [ends.to_collection_id],
    action,
    summary: `object relation ${r.id} (object ${r.from_object_id} to object ${r.to_object_id}) ${action}`,
    before: action === 'deleted' ? view : null,
    after: action === 'created' ? view : null,
    beforeRevision: action === 'deleted' ? r.revision : null,
    afterRevision: action === 'created' ? r.revision : null,
    metadata: { class_relation_id: r.class_relation_id, from_object_id: r.from_object_id, to_object_id: r.to_object_id },
  };
}

/** The event of an object relation deleted because one of its objects was (its snapshot is the row). */
export function objectRelationDeletedWithObjectEvent(
  r: ObjectRelationRow,
  ends: RelationEnds,
  objectId: number,
  objectName: string,
): NewEvent {
  return {
    entityType: OBJECT_RELATION_KIND,
    entityId: r.id,
    collectionId: ends.from_collection_id,
    relatedCollectionIds: [ends.to_collection_id],
    action: 'deleted',
    summary: `object relation ${r.id} deleted with object ${objectName}`,
    before: r,
    beforeRevision: r.revision,
    metadata: { object_id: objectId, cause: 'object_deleted' },
  };
}
