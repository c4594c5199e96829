import type { Ctx, HandlerMap } from '../http/contract.ts';
import { authOf, callerOf } from '../http/contract.ts';
import { notFound } from '../domain/errors.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { requireCollectionPermission } from '../db/authz.ts';
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

export const permissionsHandlers = {
  listCollectionPermissions: async (input, ctx) => {
    const db = ctx.deps.sql;
    await requireCollectionPermission(db, authOf(ctx), input.params.collection_id, 'ReadCollection');
    const parsed = parseListQuery(input.query, PERMISSION_ROW_LIST_SPEC);
    const page = await listPermissionRows(db, input.params.collection_id, parsed);
    return listReply(page, page.rows);
  },

  getCollectionGroupPermissions: async (input, ctx) => {
    const db = ctx.deps.sql;
    await requireCollectionPermission(db, authOf(ctx), input.params.collection_id, 'ReadCollection');
    if (!(await findGroup(db, input.params.group_id))) throw notFound('group');
    return { status: 200, body: await groupPermissions(db, input.params.collection_id, input.params.group_id) };
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
    await requireCollectionPermission(db, authOf(ctx), input.params.collection_id, 'ReadCollection');
    if (!(await principalExists(db, input.params.principal_id))) throw notFound('principal');
    const parsed = parseListQuery(input.query, PERMISSION_ROW_LIST_SPEC);
    const page = await listPermissionRows(db, input.params.collection_id, parsed, { principalId: input.params.principal_id });
    return listReply(page, page.rows);
  },

  listEffectiveCollectionPrincipalPermissions: async (input, ctx) => {
    const db = ctx.deps.sql;
    await requireCollectionPermission(db, authOf(ctx), input.params.collection_id, 'ReadCollection');
    if (!(await principalExists(db, input.params.principal_id))) throw notFound('principal');
    const parsed = parseListQuery(input.query, EFFECTIVE_ROW_LIST_SPEC);
    const page = await listEffectivePermissionRows(db, input.params.collection_id, input.params.principal_id, parsed);
    return listReply(page, page.rows);
  },
} satisfies Partial<HandlerMap>;
