// Collections: the row as the database returns it, its wire view, and the audit event a change of it
// appends. Pure functions (no SQL); src/db reads and writes the rows.
import type { NewEvent } from '../new-event.ts';
import type { ResponseBody } from '../wire.ts';

export interface CollectionRow {
  [key: string]: unknown;
  id: number;
  name: string;
  description: string;
  parent_collection_id: number | null;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/** The public representation (also the audit snapshot: collections hold no secrets). */
export function collectionView(r: CollectionRow): ResponseBody<'getCollection', 200> {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    parent_collection_id: r.parent_collection_id,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}

/** The audit event of a collection change (`related`: other collections involved, nulls skipped). */
export function collectionEvent(
  row: CollectionRow,
  action: string,
  before: CollectionRow | null,
  related: (number | null)[] = [],
): NewEvent {
  return {
    entityType: 'collection',
    entityId: row.id,
    entityName: row.name,
    collectionId: row.id,
    relatedCollectionIds: related.filter((r): r is number => r !== null),
    action,
    summary: `collection ${row.name} ${action}`,
    before: before ? collectionView(before) : null,
    after: action === 'deleted' ? null : collectionView(row),
    beforeRevision: before?.revision ?? null,
    afterRevision: action === 'deleted' ? null : row.revision,
  };
}
