import type { HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { badRequest, conflict, notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply, type Fragment } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import { collectionWhere, permissionsFilter, requireCollectionPermission } from '../db/authz.ts';
import {
  ANCESTOR_LIST_SPEC,
  COLLECTION_LIST_SPEC,
  collectionDependents,
  collectionEvent,
  collectionView,
  deleteCollectionRow,
  findCollection,
  insertCollection,
  isSelfOrDescendant,
  listAncestorRows,
  listCollectionRows,
  lockCollection,
  lockCollectionTree,
  setCollectionParent,
  updateCollectionRow,
  type CollectionRow,
} from '../db/collections.ts';
import { findGroup, grantPermissions, groupsWithGrants, revokePermissions } from '../db/permissions.ts';
import { PERMISSIONS, requireRootAuthority } from '../domain/authz.ts';
import type { Db } from '../db/sql.ts';
import type { AuthInfo } from '../http/auth.ts';

const KIND = 'collection';

function ok(status: number, row: CollectionRow, extra: Record<string, string> = {}) {
  return { status, body: collectionView(row), headers: { ...etagHeader(KIND, row.id, row.revision), ...extra } };
}

/** Visibility (ReadCollection) plus the `permissions=` filter, as where-fragments. */
function visibility(db: Db, auth: AuthInfo, permissionsRaw: string | undefined): Fragment[] {
  return [collectionWhere(db, auth, 'ReadCollection'), ...permissionsFilter(permissionsRaw, (p) => collectionWhere(db, auth, p))];
}

/** DelegateCollection on a parent, or administrator authority for the top level (null). */
async function requireDelegation(db: Db, auth: AuthInfo, parentId: number | null): Promise<void> {
  if (parentId === null) requireRootAuthority(auth);
  else await requireCollectionPermission(db, auth, parentId, 'DelegateCollection');
}

export const collectionsHandlers = {
  listCollections: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const parsed = parseListQuery(input.query, COLLECTION_LIST_SPEC);
    const page = await listCollectionRows(db, parsed, visibility(db, auth, parsed.extras.permissions));
    return listReply(page, page.rows.map(collectionView));
  },

  createCollection: async (input, ctx) => {
    const auth = authOf(ctx);
    const { name, description = '', parent_collection_id: parentId = null, group_id: groupId = null } = input.body;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      await requireDelegation(tx, auth, parentId);
      const group = groupId === null ? null : await findGroup(tx, groupId);
      if (groupId !== null && !group) throw notFound('group');
      const created = await insertCollection(tx, { name, description, parentId });
      await appendEvent(tx, actorOf(ctx), collectionEvent(created, 'created', null, [parentId]));
      if (group) {
        await grantPermissions(tx, actorOf(ctx), { collectionId: created.id, collectionName: created.name, group }, PERMISSIONS);
      }
      return created;
    });
    return ok(201, row, { location: `/api/v1/collections/${row.id}` });
  },

  getCollection: async (input, ctx) => {
    const auth = authOf(ctx);
    await requireCollectionPermission(ctx.deps.sql, auth, input.params.collection_id, 'ReadCollection');
    const row = await findCollection(ctx.deps.sql, input.params.collection_id);
    if (!row) throw notFound('collection');
    return ok(200, row);
  },

  updateCollection: async (input, ctx) => {
    const auth = authOf(ctx);
    const id = input.params.collection_id;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      await requireCollectionPermission(tx, auth, id, 'UpdateCollection');
      const before = await lockCollection(tx, id);
      if (!before) throw notFound('collection');
      checkIfMatch(input.headers, KIND, before.id, before.revision);
      const next = { name: input.body.name ?? before.name, description: input.body.description ?? before.description };
      if (next.name === before.name && next.description === before.description) return before;
      const after = await updateCollectionRow(tx, id, next);
      await appendEvent(tx, actorOf(ctx), collectionEvent(after, 'updated', before));
      return after;
    });
    return ok(200, row);
  },

  deleteCollection: async (input, ctx) => {
    const auth = authOf(ctx);
    const id = input.params.collection_id;
    await withTx(ctx.deps.sql, async (tx) => {
      await requireCollectionPermission(tx, auth, id, 'DeleteCollection');
      const before = await lockCollection(tx, id);
      if (!before) throw notFound('collection');
      checkIfMatch(input.headers, KIND, before.id, before.revision);
      const dep = await collectionDependents(tx, id);
      const blocking = [
        dep.children && `${dep.children} child collection(s)`,
        dep.classes && `${dep.classes} class(es)`,
        dep.objects && `${dep.objects} object(s)`,
        dep.remote_targets && `${dep.remote_targets} remote target(s)`,
        dep.export_templates && `${dep.export_templates} export template(s)`,
      ].filter(Boolean);
      if (blocking.length)
        throw conflict(`the collection still has ${blocking.join(', ')}; delete or move them first`, 'collection_not_empty');
      // Its grants go with it; each is recorded as revoked, like any other revocation.
      for (const group of await groupsWithGrants(tx, id)) {
        await revokePermissions(tx, actorOf(ctx), { collectionId: id, collectionName: before.name, group }, null);
      }
      await deleteCollectionRow(tx, id);
      await appendEvent(tx, actorOf(ctx), collectionEvent(before, 'deleted', before, [before.parent_collection_id]));
    });
    return { status: 204 };
  },

  updateCollectionParent: async (input, ctx) => {
    const auth = authOf(ctx);
    const id = input.params.collection_id;
    const newParent = input.body.parent_collection_id ?? null;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      await requireCollectionPermission(tx, auth, id, 'UpdateCollection');
      await lockCollectionTree(tx);
      const before = await lockCollection(tx, id);
      if (!before) throw notFound('collection');
      checkIfMatch(input.headers, KIND, before.id, before.revision);
      if (before.parent_collection_id === newParent) return before;
      await requireDelegation(tx, auth, before.parent_collection_id);
      await requireDelegation(tx, auth, newParent);
      if (newParent !== null && (await isSelfOrDescendant(tx, id, newParent))) {
        throw badRequest('a collection cannot be moved below itself or one of its descendants', [
          { path: 'body.parent_collection_id', message: 'would create a cycle' },
        ]);
      }
      const after = await setCollectionParent(tx, id, newParent);
      await appendEvent(tx, actorOf(ctx), {
        ...collectionEvent(after, 'updated', before, [before.parent_collection_id, newParent]),
        summary: `collection ${after.name} moved`,
        metadata: { from_parent_collection_id: before.parent_collection_id, to_parent_collection_id: newParent },
      });
      return after;
    });
    return ok(200, row);
  },

  listCollectionChildren: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const id = input.params.collection_id;
    await requireCollectionPermission(db, auth, id, 'ReadCollection');
    const parsed = parseListQuery(input.query, COLLECTION_LIST_SPEC);
    const where = [db`c.parent_collection_id = ${id}::int` as Fragment, ...visibility(db, auth, parsed.extras.permissions)];
    const page = await listCollectionRows(db, parsed, where);
    return listReply(page, page.rows.map(collectionView));
  },

  listCollectionAncestors: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const id = input.params.collection_id;
    await requireCollectionPermission(db, auth, id, 'ReadCollection');
    const { limit, cursor, include_total } = input.query;
    const parsed = parseListQuery({ limit, cursor, include_total }, ANCESTOR_LIST_SPEC);
    const page = await listAncestorRows(db, id, parsed, [collectionWhere(db, auth, 'ReadCollection')]);
    return listReply(page, page.rows.map(collectionView));
  },
} satisfies Partial<HandlerMap>;
