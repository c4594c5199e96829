import type { Ctx, HandlerMap } from '../http/contract.ts';
import { authOf, callerOf } from '../http/contract.ts';
import { notFound } from '../domain/errors.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { readUnderCollection } from '../db/authz.ts';
import {
  EFFECTIVE_ROW_LIST_SPEC,
  PERMISSION_ROW_LIST_SPEC,
  findGroup,
  groupPermissions,
  listEffectivePermissionRows,
  listPermissionRows,
  principalExists,
} from '../db/permissions.ts';
import { sortPermissions } from '../domain/authz.ts';
import { inTx, type MutationContext } from '../mutations/context.ts';
import { grantCollectionPermissions, revokeCollectionPermissions, type GrantChange } from '../mutations/permissions.ts';

/** Runs one grant change of the request in its own transaction. */
function changeGrants(ctx: Ctx, change: (m: MutationContext) => Promise<GrantChange>): Promise<GrantChange> {
  return inTx(ctx.deps.sql, callerOf(ctx), change);
}

/**
 * A list of the collection's grants that names a principal (readUnderCollection): rows (grants
 * through the principal's groups) show that both exist; otherwise the collection's check, then the
 * principal's 404.
 */
function principalGrants<T extends { rows: unknown[] }>(ctx: Ctx, collectionId: number, principalId: number, read: () => Promise<T>) {
  const db = ctx.deps.sql;
  return readUnderCollection(db, authOf(ctx), collectionId, 'ReadCollection', read, async () => {
    if (!(await principalExists(db, principalId))) throw notFound('principal');
  });
}

export const permissionsHandlers = {
  listCollectionPermissions: async (input, ctx) => {
    const db = ctx.deps.sql;
    const id = input.params.collection_id;
    const page = await readUnderCollection(db, authOf(ctx), id, 'ReadCollection', () =>
      listPermissionRows(db, id, parseListQuery(input.query, PERMISSION_ROW_LIST_SPEC)),
    );
    return listReply(page, page.rows);
  },

  getCollectionGroupPermissions: async (input, ctx) => {
    const db = ctx.deps.sql;
    const { collection_id: collectionId, group_id: groupId } = input.params;
    // a grant of the group on the collection shows that both exist
    const { rows } = await readUnderCollection(
      db,
      authOf(ctx),
      collectionId,
      'ReadCollection',
      async () => ({ rows: await groupPermissions(db, collectionId, groupId) }),
      async () => {
        if (!(await findGroup(db, groupId))) throw notFound('group');
      },
    );
    return { status: 200, body: rows };
  },

  replaceCollectionGroupPermissions: async (input, ctx) => {
    const { collection_id: collectionId, group_id: groupId } = input.params;
    const wanted = sortPermissions(input.body);
    const { after } = await changeGrants(ctx, (m) => grantCollectionPermissions(m, collectionId, groupId, wanted, { replace: true }));
    return { status: 200, body: after };
  },

  addCollectionGroupPermissions: async (input, ctx) => {
    const { collection_id: collectionId, group_id: groupId } = input.params;
    const wanted = sortPermissions(input.body);
    const { after } = await changeGrants(ctx, (m) => grantCollectionPermissions(m, collectionId, groupId, wanted));
    return { status: 200, body: after };
  },

  revokeAllCollectionGroupPermissions: async (input, ctx) => {
    const { collection_id: collectionId, group_id: groupId } = input.params;
    await changeGrants(ctx, (m) => revokeCollectionPermissions(m, collectionId, groupId, null));
    return { status: 204 };
  },

  grantCollectionGroupPermission: async (input, ctx) => {
    const { collection_id: collectionId, group_id: groupId, permission } = input.params;
    const { after } = await changeGrants(ctx, (m) => grantCollectionPermissions(m, collectionId, groupId, [permission]));
    return { status: 200, body: after };
  },

  revokeCollectionGroupPermission: async (input, ctx) => {
    const { collection_id: collectionId, group_id: groupId, permission } = input.params;
    await changeGrants(ctx, (m) => revokeCollectionPermissions(m, collectionId, groupId, [permission]));
    return { status: 204 };
  },

  listCollectionPrincipalPermissions: async (input, ctx) => {
    const db = ctx.deps.sql;
    const { collection_id: collectionId, principal_id: principalId } = input.params;
    const page = await principalGrants(ctx, collectionId, principalId, () =>
      listPermissionRows(db, collectionId, parseListQuery(input.query, PERMISSION_ROW_LIST_SPEC), { principalId }),
    );
    return listReply(page, page.rows);
  },

  listEffectiveCollectionPrincipalPermissions: async (input, ctx) => {
    const db = ctx.deps.sql;
    const { collection_id: collectionId, principal_id: principalId } = input.params;
    const page = await principalGrants(ctx, collectionId, principalId, () =>
      listEffectivePermissionRows(db, collectionId, principalId, parseListQuery(input.query, EFFECTIVE_ROW_LIST_SPEC)),
    );
    return listReply(page, page.rows);
  },
} satisfies Partial<HandlerMap>;
