// Entity history versions (what get<Kind>AsOf answers): the row as the database returns it and its wire view. Pure functions (no SQL).
import type { ResponseBody } from '../wire.ts';
import { classRelationView, objectRelationView, type ClassRelationRow, type ObjectRelationRow } from '../relations.ts';
import { collectionView, type CollectionRow } from './collections.ts';
import { classView, type ClassRow } from './classes.ts';
import { objectView, type ObjectRow } from './objects.ts';
import { exportTemplateView, type ExportTemplateRow } from './export-templates.ts';
import { remoteTargetView, type RemoteTargetRow } from './remote-targets.ts';

export const HISTORY_KINDS = [
  'collection',
  'class',
  'object',
  'class_relation',
  'object_relation',
  'export_template',
  'remote_target',
] as const;

export type HistoryKind = (typeof HISTORY_KINDS)[number];

export interface VersionRow {
  [key: string]: unknown;
  revision: number;
  operation: 'insert' | 'update' | 'delete';
  data: Record<string, unknown>;
  valid_from: Date;
  valid_to: Date | null;
  actor_kind: 'user' | 'worker' | 'system';
  actor_principal_id: number | null;
  initiator_principal_id: number | null;
  task_id: number | null;
}

/** What `data` of a version of each kind holds: the contract's get<Kind>AsOf body's data (the live view). */
export interface VersionData {
  collection: ResponseBody<'getCollectionAsOf', 200>['data'];
  class: ResponseBody<'getClassAsOf', 200>['data'];
  object: ResponseBody<'getObjectAsOf', 200>['data'];
  class_relation: ResponseBody<'getClassRelationAsOf', 200>['data'];
  object_relation: ResponseBody<'getObjectRelationAsOf', 200>['data'];
  export_template: ResponseBody<'getExportTemplateAsOf', 200>['data'];
  remote_target: ResponseBody<'getRemoteTargetAsOf', 200>['data'];
}

// The stored `data` is the row as the history trigger encoded it (to_jsonb of the entity's row), so
// it is read back as that kind's row type: the one cast here, of a payload the database wrote.
export const VERSION_DATA: { [K in HistoryKind]: (r: Record<string, unknown>) => VersionData[K] } = {
  collection: (r) => collectionView(r as unknown as CollectionRow),
  class: (r) => classView(r as unknown as ClassRow),
  object: (r) => objectView(r as unknown as ObjectRow),
  class_relation: (r) => classRelationView(r as unknown as ClassRelationRow),
  object_relation: (r) => objectRelationView(r as unknown as ObjectRelationRow),
  export_template: (r) => exportTemplateView(r as unknown as ExportTemplateRow),
  remote_target: (r) => remoteTargetView(r as unknown as RemoteTargetRow),
};

/** The entity's public representation as stored in a version (timestamps as the live views give them). */
export function versionData<K extends HistoryKind>(kind: K, data: Record<string, unknown>): VersionData[K] {
  const r = Object.assign({}, data, { created_at: new Date(String(data.created_at)), updated_at: new Date(String(data.updated_at)) });
  return VERSION_DATA[kind](r);
}

/** A version on the wire (components.schemas.*Version): what get<Kind>AsOf answers for kind K. */
export interface VersionView<K extends HistoryKind> {
  revision: number;
  operation: VersionRow['operation'];
  valid_from: Date;
  valid_to: Date | null;
  actor: {
    kind: VersionRow['actor_kind'];
    principal_id: number | null;
    initiator_principal_id: number | null;
    task_id: number | null;
  };
  data: VersionData[K];
}

export function versionView<K extends HistoryKind>(kind: K, v: VersionRow): VersionView<K> {
  return {
    revision: v.revision,
    operation: v.operation,
    valid_from: v.valid_from,
    valid_to: v.valid_to,
    actor: {
      kind: v.actor_kind,
      principal_id: v.actor_principal_id,
      initiator_principal_id: v.initiator_principal_id,
      task_id: v.task_id,
    },
    data: versionData(kind, v.data),
  };
}
