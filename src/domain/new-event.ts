// Moved from src/db/events.ts: rows → wire views and audit events (pure; no SQL).

export interface NewEvent {
  entityType: string;
  entityId: number | null;
  entityName?: string | null;
  collectionId?: number | null;
  relatedCollectionIds?: number[];
  action: string;
  summary?: string | null;
  before?: unknown;
  after?: unknown;
  beforeRevision?: number | null;
  afterRevision?: number | null;
  metadata?: Record<string, unknown>;
}
