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

/**
 * A wrapper route's entity or collection: the conditions its events meet, `oneEntity` when they name
 * one entity (entityIs), and the route's check (404 when the entity is missing, 403 when refused).
 */
interface Within {
  where: (db: Ctx['deps']['sql']) => Fragment[];
  check: () => Promise<unknown>;
  oneEntity?: boolean;
}

/** The events of one entity (of one of `types`, `id`), checked by `check`: a wrapper route's. */
const ofEntity = (types: readonly string[], id: number, check: () => Promise<unknown>): Within => ({
  where: (db) => [entityIs(db, types, id)],
  check,
  oneEntity: true,
});

/**
 * The audit list with the caller's visibility, the query's filters and a wrapper's conditions. A
 * wrapper's check and the page go out together (two statements on two connections: one wait
 * instead of two); the check's verdict comes first, so a refused caller gets its 404 or 403, before
 * a bad query's 400, and the page (which shows only what the caller may see anyway) is dropped.
 */
async function eventPage(query: Record<string, unknown>, ctx: Ctx, within?: Within) {
  const auth = authOf(ctx);
  const db = ctx.deps.sql;
  const checked = within?.check();
  checked?.catch(() => undefined); // awaited below, before the page
  const reading = (async () => {
    const parsed = applyTimeWindow(parseListQuery(query, EVENT_LIST_SPEC));
    return listEventRows(db, auth, parsed, within?.where(db) ?? [], {
      jsonText: true,
      auditCollections: (read) =>
        tokenCache(ctx.deps).collectionsWith({ tokenId: auth.token.id, principalId: auth.principal.id }, 'ReadAudit', read),
      oneEntity: within?.oneEntity,
    });
  })();
  reading.catch(() => undefined); // awaited below
  await checked;
  const page = await reading;
  // The page's JSON written directly (eventJsonText), one text for the whole array.
  const texts = new JsonTexts();
  const all = texts.addArray<ReturnType<typeof eventWire>>(page.rows.map(eventJsonText));
  return listReply(page, all, texts.texts);
}

export const eventsHandlers = {
  listEvents: async (input, ctx) => eventPage(input.query, ctx),

  listCollectionEvents: async (input, ctx) => {
    const id = input.params.collection_id;
    const check = () => requireCollectionPermission(ctx.deps.sql, authOf(ctx), id, 'ReadAudit');
    return eventPage(input.query, ctx, { where: (db) => [attachedTo(db, id)], check });
  },

  listClassEvents: async (input, ctx) => {
    const id = input.params.class_id;
    const check = () => requireAuditOf(ctx.deps.sql, authOf(ctx), 'class', id);
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.class, id, check));
  },

  listObjectEvents: async (input, ctx) => {
    const { class_id: classId, object_id: objectId } = input.params;
    const check = () => requireAuditOf(ctx.deps.sql, authOf(ctx), 'object', objectId, classId);
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.object, objectId, check));
  },

  listUserEvents: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const id = input.params.user_id;
    const check = async () => {
      if (!(await humanUserExists(ctx.deps.sql, id))) throw notFound('user');
    };
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.user, id, check));
  },

  listGroupEvents: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const id = input.params.group_id;
    const check = async () => {
      if (!(await groupExists(ctx.deps.sql, id))) throw notFound('group');
    };
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.group, id, check));
  },

  listRemoteTargetEvents: async (input, ctx) => {
    const id = input.params.target_id;
    const check = () => requireAuditOf(ctx.deps.sql, authOf(ctx), 'remote_target', id);
    return eventPage(input.query, ctx, ofEntity(WRAPPER_ENTITY_TYPES.remoteTarget, id, check));
  },

  listExportTemplateEvents: async (input, ctx) => {
    const id = input.params.template_id;
    const check = () => requireAuditOf(ctx.deps.sql, authOf(ctx), 'export_template', id);
    return eventPage(input.query, ctx, ofEntity(['export_template'], id, check));
  },
} satisfies Partial<HandlerMap>;
