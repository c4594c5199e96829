import type { Ctx, HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { notFound } from '../http/errors.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import type { TransactionSql } from '../db/sql.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import { findCollection } from '../db/collections.ts';
import {
  EFFECTIVE_ROW_LIST_SPEC,
  PERMISSION_ROW_LIST_SPEC,
  findGroup,
  grantPermissions,
  groupPermissions,
  listEffectivePermissionRows,
  listPermissionRows,
  lockGrants,
  principalExists,
  revokePermissions,
} from '../db/permissions.ts';
import { sortPermissions, type Permission } from '../domain/authz.ts';

/**
 * One grant change of a group on a collection: DelegateCollection on the collection (404 when it
 * or the group is missing), then `change` in one transaction; returns the resulting set.
 */
async function changeGrants(
  ctx: Ctx,
  collectionId: number,
  groupId: number,
  change: (
    tx: TransactionSql,
    target: { collectionId: number; collectionName: string; group: { id: number; name: string } },
  ) => Promise<void>,
): Promise<Permission[]> {
  const auth = authOf(ctx);
  return withTx(ctx.deps.sql, async (tx) => {
    await requireCollectionPermission(tx, auth, collectionId, 'DelegateCollection');
    const group = await findGroup(tx, groupId);
    if (!group) throw notFound('group');
    const collection = await findCollection(tx, collectionId);
    if (!collection) throw notFound('collection');
    await lockGrants(tx, collectionId, groupId);
    await change(tx, { collectionId, collectionName: collection.name, group });
    return groupPermissions(tx, collectionId, groupId);
  });
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
    const wanted = sortPermissions(input.body);
    const result = await changeGrants(ctx, input.params.collection_id, input.params.group_id, async (tx, target) => {
      const current = await groupPermissions(tx, target.collectionId, target.group.id);
      await revokePermissions(
        tx,
        actorOf(ctx),
        target,
        current.filter((p) => !wanted.includes(p)),
      );
      await grantPermissions(tx, actorOf(ctx), target, wanted);
    });
    return { status: 200, body: result };
  },

  addCollectionGroupPermissions: async (input, ctx) => {
    const wanted = sortPermissions(input.body);
    const result = await changeGrants(ctx, input.params.collection_id, input.params.group_id, async (tx, target) => {
      await grantPermissions(tx, actorOf(ctx), target, wanted);
    });
    return { status: 200, body: result };
  },

  revokeAllCollectionGroupPermissions: async (input, ctx) => {
    await changeGrants(ctx, input.params.collection_id, input.params.group_id, async (tx, target) => {
      await revokePermissions(tx, actorOf(ctx), target, null);
    });
    return { status: 204 };
  },

  grantCollectionGroupPermission: async (input, ctx) => {
    const perm = input.params.permission;
    const result = await changeGrants(ctx, input.params.collection_id, input.params.group_id, async (tx, target) => {
      await grantPermissions(tx, actorOf(ctx), target, [perm]);
    });
    return { status: 200, body: result };
  },

  revokeCollectionGroupPermission: async (input, ctx) => {
    const perm = input.params.permission;
    await changeGrants(ctx, input.params.collection_id, input.params.group_id, async (tx, target) => {
      await revokePermissions(tx, actorOf(ctx), target, [perm]);
    });
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
