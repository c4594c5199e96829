import type { Ctx, HandlerMap } from '../http/contract.ts';
import { authOf } from '../http/contract.ts';
import { notFound } from '../domain/errors.ts';
import { requireUnscopedAdmin } from './gates.ts';
import { parseListQuery } from '../domain/list-query.ts';
import type { Fragment } from '../db/list.ts';
import { listReply } from '../http/paging.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import { EVENT_LIST_SPEC, attachedTo, entityIs, groupExists, humanUserExists, listEventRows, requireAuditOf } from '../db/audit.ts';
import { eventJsonText, type eventWire } from '../domain/audit.ts';
import { JsonTexts } from '../domain/json-text.ts';
import { WRAPPER_ENTITY_TYPES, applyTimeWindow } from '../domain/audit.ts';
import { tokenCache } from '../services/token-cache.ts';

/** A wrapper route's fixed conditions: `oneEntity` when they name one entity (entityIs). */
interface Within {
  where: (db: Ctx['deps']['sql']) => Fragment[];
  oneEntity?: boolean;
}

/** The events of one entity (of one of `types`, `id`): a wrapper route's. */
const ofEntity = (types: readonly string[], id: number): Within => ({ where: (db) => [entityIs(db, types, id)], oneEntity: true });

/** The audit list with the caller's visibility, the query's filters and a wrapper's fixed conditions. */
async function eventPage(query: Record<string, unknown>, ctx: Ctx, within?: Within) {
  const auth = authOf(ctx);
  const db = ctx.deps.sql;
  const parsed = applyTimeWindow(parseListQuery(query, EVENT_LIST_SPEC));
  const page = await listEventRows(db, auth, parsed, within?.where(db) ?? [], {
    jsonText: true,
    auditCollections: (read) => tokenCache(ctx.deps).collectionsWith(auth.token.id, 'ReadAudit', read),
    oneEntity: within?.oneEntity,
  });
  // The page's JSON written directly (eventJsonText), one text for the whole array.
  const texts = new JsonTexts();
  const all = texts.addArray<ReturnType<typeof eventWire>>(page.rows.map(eventJsonText));
  return { ...listReply(page, all), jsonTexts: texts.texts };
}

export const eventsHandlers = {
  listEvents: async (input, ctx) => eventPage(input.query, ctx),

  listCollectionEvents: async (input, ctx) => {
    const id = input.params.collection_id;
    await requireCollectionPermission(ctx.deps.sql, authOf(ctx), id, 'ReadAudit');
    return eventPage(input.query, ctx, { where: (db) => [attachedTo(db, id)] });
  },

  listClassEvents: async (input, ctx) => {
    const id = input.params.class_id;
    await requireAuditOf(ctx.deps.sql, authOf(ctx), 'class', id);
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.class, id));
  },

  listObjectEvents: async (input, ctx) => {
    const { class_id: classId, object_id: objectId } = input.params;
    await requireAuditOf(ctx.deps.sql, authOf(ctx), 'object', objectId, classId);
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.object, objectId));
  },

  listUserEvents: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const id = input.params.user_id;
    if (!(await humanUserExists(ctx.deps.sql, id))) throw notFound('user');
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.user, id));
  },

  listGroupEvents: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const id = input.params.group_id;
    if (!(await groupExists(ctx.deps.sql, id))) throw notFound('group');
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.group, id));
  },

  listRemoteTargetEvents: async (input, ctx) => {
    const id = input.params.target_id;
    await requireAuditOf(ctx.deps.sql, authOf(ctx), 'remote_target', id);
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.remoteTarget, id));
  },

  listExportTemplateEvents: async (input, ctx) => {
    const id = input.params.template_id;
    await requireAuditOf(ctx.deps.sql, authOf(ctx), 'export_template', id);
    return eventPage(input.query, ctx, ofEntity(['export_template'], id));
  },
} satisfies Partial<HandlerMap>;
