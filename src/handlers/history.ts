// History (#11): every version of the versioned entities, read newest first or as of an instant.
// One generic pair of handlers keyed by entity kind; each version is authorized with the
// attributes stored in it (src/db/history.ts versionVisible).
import type { Ctx, HandlerMap } from '../http/contract.ts';
import { authOf } from '../http/contract.ts';
import { listReply } from '../http/paging.ts';
import { badRequest, forbidden, notFound } from '../domain/errors.ts';
import { isUnscopedAdmin } from '../domain/authz.ts';
import { parseListQuery, parseTimestamp } from '../domain/list-query.ts';
import { HISTORY_LIST_SPEC, historyFacts, listVersions, versionAt } from '../db/history.ts';
import { versionView, type HistoryKind, type VersionView } from '../domain/views/history.ts';
import { classIdByName } from '../db/classes.ts';
import { objectIdByName } from '../db/objects.ts';

const WHAT: Record<HistoryKind, string> = {
  collection: 'collection',
  class: 'class',
  object: 'object',
  class_relation: 'class relation',
  object_relation: 'object relation',
  export_template: 'export template',
  remote_target: 'remote target',
};

/** 404 when the entity never existed (or is not of `classId`, or is deleted and the caller is not an unscoped admin); 403 when no version is visible. */
async function requireHistory(ctx: Ctx, kind: HistoryKind, id: number, classId?: number): Promise<void> {
  const auth = authOf(ctx);
  const facts = await historyFacts(ctx.deps.sql, auth, kind, id);
  if (!facts.exists || (classId !== undefined && facts.classId !== classId)) throw notFound(WHAT[kind]);
  if (facts.deleted && !isUnscopedAdmin(auth)) throw notFound(WHAT[kind]);
  if (!facts.anyVisible) throw forbidden(`you may not read any version of this ${WHAT[kind]}`);
}

// Both return kind K's version view; each handler below checks it against its operation's body.
async function historyList<K extends HistoryKind>(
  ctx: Ctx,
  kind: K,
  id: number,
  query: unknown,
  classId?: number,
): Promise<{ status: 200; body: VersionView<K>[]; headers: Record<string, string> }> {
  const parsed = parseListQuery(query as Record<string, unknown>, HISTORY_LIST_SPEC);
  // The page (only versions the caller may read) goes out beside the check (one round trip); the
  // check's verdict comes first, and the page is dropped when it refuses.
  const checked = requireHistory(ctx, kind, id, classId);
  const paging = listVersions(ctx.deps.sql, authOf(ctx), kind, id, parsed);
  paging.catch(() => undefined); // awaited below, unless the check refuses
  await checked;
  const page = await paging;
  return listReply(
    page,
    page.rows.map((v) => versionView(kind, v)),
  );
}

async function historyAsOf<K extends HistoryKind>(
  ctx: Ctx,
  kind: K,
  id: number,
  at: string,
  classId?: number,
): Promise<{ status: 200; body: VersionView<K> }> {
  const instant = parseTimestamp(at);
  if (instant === undefined) throw badRequest('at must be an RFC 3339 timestamp', [{ path: 'query.at', message: 'not a timestamp' }]);
  // the version beside the check, as in historyList
  const checked = requireHistory(ctx, kind, id, classId);
  const reading = versionAt(ctx.deps.sql, authOf(ctx), kind, id, instant);
  reading.catch(() => undefined); // awaited below, unless the check refuses
  await checked;
  const v = await reading;
  if (!v) throw notFound(`${WHAT[kind]} version at ${at}`);
  if (!v.visible) throw forbidden(`you may not read this ${WHAT[kind]} as it was at ${at}`);
  return { status: 200, body: versionView(kind, v) };
}

async function classIdOf(ctx: Ctx, className: string): Promise<number> {
  const classId = await classIdByName(ctx.deps.sql, className);
  if (classId === undefined) throw notFound('class');
  return classId;
}

async function objectIdOf(ctx: Ctx, className: string, objectName: string): Promise<{ classId: number; objectId: number }> {
  const classId = await classIdOf(ctx, className);
  const objectId = await objectIdByName(ctx.deps.sql, classId, objectName);
  if (objectId === undefined) throw notFound('object');
  return { classId, objectId };
}

export const historyHandlers = {
  listObjectHistory: async (input, ctx) => historyList(ctx, 'object', input.params.object_id, input.query, input.params.class_id),
  getObjectAsOf: async (input, ctx) => historyAsOf(ctx, 'object', input.params.object_id, input.query.at, input.params.class_id),
  listObjectHistoryByName: async (input, ctx) => {
    const { classId, objectId } = await objectIdOf(ctx, input.params.class_name, input.params.object_name);
    return historyList(ctx, 'object', objectId, input.query, classId);
  },
  getObjectAsOfByName: async (input, ctx) => {
    const { classId, objectId } = await objectIdOf(ctx, input.params.class_name, input.params.object_name);
    return historyAsOf(ctx, 'object', objectId, input.query.at, classId);
  },

  listCollectionHistory: async (input, ctx) => historyList(ctx, 'collection', input.params.collection_id, input.query),
  getCollectionAsOf: async (input, ctx) => historyAsOf(ctx, 'collection', input.params.collection_id, input.query.at),
  listClassHistory: async (input, ctx) => historyList(ctx, 'class', input.params.class_id, input.query),
  getClassAsOf: async (input, ctx) => historyAsOf(ctx, 'class', input.params.class_id, input.query.at),
  listClassHistoryByName: async (input, ctx) => historyList(ctx, 'class', await classIdOf(ctx, input.params.class_name), input.query),
  getClassAsOfByName: async (input, ctx) => historyAsOf(ctx, 'class', await classIdOf(ctx, input.params.class_name), input.query.at),
  listClassRelationHistory: async (input, ctx) => historyList(ctx, 'class_relation', input.params.relation_id, input.query),
  getClassRelationAsOf: async (input, ctx) => historyAsOf(ctx, 'class_relation', input.params.relation_id, input.query.at),
  listObjectRelationHistory: async (input, ctx) => historyList(ctx, 'object_relation', input.params.relation_id, input.query),
  getObjectRelationAsOf: async (input, ctx) => historyAsOf(ctx, 'object_relation', input.params.relation_id, input.query.at),
  listExportTemplateHistory: async (input, ctx) => historyList(ctx, 'export_template', input.params.template_id, input.query),
  getExportTemplateAsOf: async (input, ctx) => historyAsOf(ctx, 'export_template', input.params.template_id, input.query.at),
  listRemoteTargetHistory: async (input, ctx) => historyList(ctx, 'remote_target', input.params.target_id, input.query),
  getRemoteTargetAsOf: async (input, ctx) => historyAsOf(ctx, 'remote_target', input.params.target_id, input.query.at),
} satisfies Partial<HandlerMap>;
