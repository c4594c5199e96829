// Audit reads: pure rules (no SQL). The SQL half is src/db/audit.ts.
//
// Visibility of one event (interface spec, "Audit read visibility"):
//   full      = ReadAudit on the event's own collection (collection_id, inherited grants count),
//               or the event is collection-less and the caller is an unscoped administrator;
//   redacted  = ReadAudit on one of metadata.related_collection_ids (the related_collection_ids
//               column) but not full: identity, actor, summary, metadata and schema version are
//               shown, before/after are null;
//   otherwise the event is invisible (filtered out in SQL, so totals count only visible events).
// Scoped tokens: ReadAudit goes through src/db/authz.ts like every permission, so the scope
// filter runs first. ReadAudit is not a valid scope permission name, so a token with a permission
// scope holds no ReadAudit anywhere and sees no collection events; a resource-scoped token needs an
// explicit {kind: collection} entry for the collection (audit is a collection-level feature).
// Collection-less events need an unscoped administrator, so no scoped token ever sees them.
import { badRequest } from './errors.ts';
import type { Filter, ParsedList } from './list-query.ts';
import { isUnscoped, type Authority } from './authz.ts';
import { isoTime, isoTimeJson, type ResponseBody } from './wire.ts';
import { jsonMember, type JsonTexts } from './json-text.ts';

/** Collection-less events are for unscoped administrators only. */
export function readsCollectionlessEvents(auth: Authority): boolean {
  return auth.isAdmin && isUnscoped(auth);
}

/** Entity types each audit wrapper route is fixed to. */
export const WRAPPER_ENTITY_TYPES = {
  class: ['class', 'class_schema'],
  object: ['object', 'object_validation'],
  user: ['user', 'principal'],
  group: ['group', 'group_membership'],
  remoteTarget: ['remote_target'],
} as const;

/**
 * The time-window parameters occurred_after / occurred_before are list fields over occurred_at
 * that take one timestamp (RFC 3339 or YYYY-MM-DD) and compare strictly: after → `>`, before → `<`.
 * Any operator suffix on them is 400 (use occurred_at__<op> for other comparisons).
 */
export function applyTimeWindow(parsed: ParsedList): ParsedList {
  const filters = parsed.filters.map((f): Filter => {
    if (f.field !== 'occurred_after' && f.field !== 'occurred_before') return f;
    if (f.op !== 'equals' || f.negate) {
      throw badRequest(`${f.field} takes one timestamp and no operator; use occurred_at__<op> for other comparisons`, [
        { path: `query.${f.field}`, message: 'no operator allowed' },
      ]);
    }
    return Object.assign({}, f, { op: f.field === 'occurred_after' ? ('gt' as const) : ('lt' as const) });
  });
  return Object.assign({}, parsed, { filters });
}

type AuditEventBody = ResponseBody<'listEvents', 200>[number];

/** An audit event as stored (the columns the event views read). */
export interface EventRow {
  [key: string]: unknown;
  id: number;
  event_id: string;
  /** (listEventRows with jsonText: the database's UTC text of it, which isoTime reads as well.) */
  occurred_at: Date;
  entity_type: string;
  entity_id: number | null;
  entity_name: string | null;
  collection_id: number | null;
  action: string;
  actor_kind: 'user' | 'worker' | 'system';
  actor_user_id: number | null;
  initiator_user_id: number | null;
  task_id: number | null;
  /** Who caused the event, as recorded by appendEvent (db/events.ts). */
  provenance: AuditEventBody['provenance'];
  request_id: string | null;
  correlation_id: string | null;
  summary: string | null;
  before: unknown;
  after: unknown;
  before_revision: number | null;
  after_revision: number | null;
  metadata: Record<string, unknown>;
  schema_version: AuditEventBody['schema_version'];
}

/**
 * The AuditEvent wire shape (components.schemas.AuditEvent). With `texts`, the row's provenance,
 * before, after and metadata are the database's JSON texts (listEventRows with jsonText), passed
 * through (src/domain/json-text.ts).
 */
export function eventWire(r: EventRow, texts?: JsonTexts): ResponseBody<'listEvents', 200>[number] {
  const text = (v: unknown) => (v === null || v === undefined ? null : texts!.add(v as string));
  return {
    id: r.id,
    event_id: r.event_id,
    occurred_at: isoTime(r.occurred_at),
    entity_type: r.entity_type,
    entity_id: r.entity_id,
    entity_name: r.entity_name,
    collection_id: r.collection_id,
    action: r.action,
    actor_kind: r.actor_kind,
    actor_user_id: r.actor_user_id,
    initiator_user_id: r.initiator_user_id,
    task_id: r.task_id,
    provenance: texts ? (text(r.provenance) as unknown as EventRow['provenance']) : r.provenance,
    request_id: r.request_id,
    correlation_id: r.correlation_id,
    summary: r.summary,
    before: texts ? text(r.before) : (r.before ?? null),
    after: texts ? text(r.after) : (r.after ?? null),
    before_revision: r.before_revision,
    after_revision: r.after_revision,
    metadata: texts ? (text(r.metadata ?? '{}') as unknown as EventRow['metadata']) : (r.metadata ?? {}),
    schema_version: r.schema_version,
  };
}

/**
 * JSON.stringify(eventWire(r, texts)) with its texts spliced in, written directly, for a row of
 * listEventRows with jsonText (provenance, before, after and metadata the database's JSON texts,
 * occurred_at its UTC text): an audit page's JSON without building a view per row, stringifying it
 * and splicing each row's four texts in (as objectJsonText does for an object page). The members and
 * their order are eventWire's: test/object-views.test.ts holds the two to the same text.
 */
export function eventJsonText(r: EventRow): string {
  const text = (v: unknown) => (v === null || v === undefined ? 'null' : (v as string));
  return (
    `{"id":${jsonMember(r.id)},"event_id":${jsonMember(r.event_id)},"occurred_at":${isoTimeJson(r.occurred_at)},` +
    `"entity_type":${jsonMember(r.entity_type)},"entity_id":${jsonMember(r.entity_id)},"entity_name":${jsonMember(r.entity_name)},` +
    `"collection_id":${jsonMember(r.collection_id)},"action":${jsonMember(r.action)},"actor_kind":${jsonMember(r.actor_kind)},` +
    `"actor_user_id":${jsonMember(r.actor_user_id)},"initiator_user_id":${jsonMember(r.initiator_user_id)},"task_id":${jsonMember(r.task_id)},` +
    `"provenance":${text(r.provenance)},"request_id":${jsonMember(r.request_id)},"correlation_id":${jsonMember(r.correlation_id)},` +
    `"summary":${jsonMember(r.summary)},"before":${text(r.before)},"after":${text(r.after)},` +
    `"before_revision":${jsonMember(r.before_revision)},"after_revision":${jsonMember(r.after_revision)},` +
    `"metadata":${text(r.metadata ?? '{}')},"schema_version":${jsonMember(r.schema_version)}}`
  );
}
