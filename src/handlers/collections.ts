import type { HandlerMap } from '../http/contract.ts';
import { authOf, callerOf } from '../http/contract.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import type { Fragment } from '../db/list.ts';
import { listReply } from '../http/paging.ts';
import { collectionWhere, permissionsFilter, readCollectionAs, readUnderCollection } from '../db/authz.ts';
import {
  ANCESTOR_LIST_SPEC,
  COLLECTION_LIST_SPEC,
  childOfWhere,
  collectionCols,
  listAncestorRows,
  listCollectionRows,
} from '../db/collections.ts';
import { collectionView, type CollectionRow } from '../domain/views/collections.ts';
import type { Db } from '../db/sql.ts';
import type { AuthInfo } from '../http/auth.ts';
import { inTx } from '../mutations/context.ts';
import { createCollection, deleteCollection, moveCollection, updateCollection } from '../mutations/collections.ts';

const KIND = 'collection';

function ok<S extends number>(status: S, row: CollectionRow, extra: Record<string, string> = {}) {
  return { status, body: collectionView(row), headers: etagHeader(KIND, row.id, row.revision, extra) };
}

/** Visibility (ReadCollection) plus the `permissions=` filter, as where-fragments. */
function visibility(db: Db, auth: AuthInfo, permissionsRaw: string | undefined): Fragment[] {
  return [collectionWhere(db, auth, 'ReadCollection'), ...permissionsFilter(permissionsRaw, (p) => collectionWhere(db, auth, p))];
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
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) => createCollection(m, input.body));
    return ok(201, row, { location: `/api/v1/collections/${row.id}` });
  },

  getCollection: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    return ok(200, await readCollectionAs<CollectionRow>(db, auth, input.params.collection_id, 'ReadCollection', collectionCols(db)));
  },

  updateCollection: async (input, ctx) => {
    const id = input.params.collection_id;
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) => updateCollection(m, id, input.body, input.headers['if-match']));
    return ok(200, row);
  },

  deleteCollection: async (input, ctx) => {
    const id = input.params.collection_id;
    await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteCollection(m, id, input.headers['if-match']));
    return { status: 204 };
  },

  updateCollectionParent: async (input, ctx) => {
    const id = input.params.collection_id;
    const parentId = input.body.parent_collection_id ?? null;
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) => moveCollection(m, id, parentId, input.headers['if-match']));
    return ok(200, row);
  },

  listCollectionChildren: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const id = input.params.collection_id;
    const page = await readUnderCollection(db, auth, id, 'ReadCollection', () => {
      const parsed = parseListQuery(input.query, COLLECTION_LIST_SPEC);
      return listCollectionRows(db, parsed, [childOfWhere(db, id), ...visibility(db, auth, parsed.extras.permissions)]);
    });
    return listReply(page, page.rows.map(collectionView));
  },

  listCollectionAncestors: async (input, ctx) => {
    const auth = authOf(ctx);
    const db = ctx.deps.sql;
    const id = input.params.collection_id;
    const { limit, cursor, include_total } = input.query;
    const page = await readUnderCollection(db, auth, id, 'ReadCollection', () => {
      const parsed = parseListQuery({ limit, cursor, include_total }, ANCESTOR_LIST_SPEC);
      return listAncestorRows(db, id, parsed, [collectionWhere(db, auth, 'ReadCollection')]);
    });
    return listReply(page, page.rows.map(collectionView));
  },
} satisfies Partial<HandlerMap>;
