import type { HandlerMap } from '../http/contract.ts';
import { actorOf } from '../http/contract.ts';
import { requireHumanUnscoped } from '../http/gates.ts';
import { ApiError, forbidden, notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import type { AuthInfo } from '../http/auth.ts';
import type { Ctx } from '../http/contract.ts';
import {
  deleteGroupRow,
  deleteMembership,
  findGroup,
  findPrincipalForMembership,
  groupEvent,
  groupView,
  GROUP_LIST,
  insertGroup,
  insertMembership,
  isMember,
  listGroups,
  listMembers,
  lockGroup,
  memberView,
  membershipEvent,
  MEMBER_LIST,
  ownedServiceAccounts,
  shareLockGroup,
  updateGroupRow,
} from '../db/groups.ts';

const LOCAL_SCOPE = 'local';

function requireAdmin(ctx: Ctx, what: string): AuthInfo {
  const auth = requireHumanUnscoped(ctx);
  if (!auth.isAdmin) throw forbidden(`only administrators can ${what}`);
  return auth;
}

const providerManaged = () => forbidden('this group is managed by an identity provider and is read-only here');

export const groupsHandlers = {
  listGroups: async (input, ctx) => {
    requireHumanUnscoped(ctx);
    const page = await listGroups(ctx.deps.sql, parseListQuery(input.query, GROUP_LIST));
    return listReply(page, page.rows.map(groupView));
  },

  createGroup: async (input, ctx) => {
    requireAdmin(ctx, 'create groups');
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const g = await insertGroup(tx, { name: input.body.name, description: input.body.description ?? '', identityScope: LOCAL_SCOPE });
      await appendEvent(tx, actorOf(ctx), groupEvent('created', g, null));
      return g;
    });
    return {
      status: 201,
      body: groupView(row),
      headers: { location: `/api/v1/iam/groups/${row.id}`, ...etagHeader('group', row.id, row.revision) },
    };
  },

  getGroup: async (input, ctx) => {
    requireHumanUnscoped(ctx);
    const row = await findGroup(ctx.deps.sql, input.params.group_id);
    if (!row) throw notFound('group');
    return { status: 200, body: groupView(row), headers: etagHeader('group', row.id, row.revision) };
  },

  updateGroup: async (input, ctx) => {
    requireAdmin(ctx, 'update groups');
    const id = input.params.group_id;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const before = await lockGroup(tx, id);
      if (!before) throw notFound('group');
      if (before.managed_by !== null) throw providerManaged();
      checkIfMatch(input.headers, 'group', id, before.revision);
      const name = input.body.name ?? before.name;
      const description = input.body.description === undefined ? before.description : (input.body.description ?? '');
      if (name === before.name && description === before.description) return before;
      const after = await updateGroupRow(tx, id, { name, description });
      await appendEvent(tx, actorOf(ctx), groupEvent('updated', after, before));
      return after;
    });
    return { status: 200, body: groupView(row), headers: etagHeader('group', row.id, row.revision) };
  },

  deleteGroup: async (input, ctx) => {
    requireAdmin(ctx, 'delete groups');
    const id = input.params.group_id;
    await withTx(ctx.deps.sql, async (tx) => {
      const before = await lockGroup(tx, id);
      if (!before) throw notFound('group');
      if (before.managed_by !== null) throw providerManaged();
      checkIfMatch(input.headers, 'group', id, before.revision);
      const owned = await ownedServiceAccounts(tx, id);
      if (owned.length > 0) {
        throw new ApiError(409, `group ${before.name} owns service accounts: ${owned.map((s) => s.name).join(', ')}`, {
          reason: 'group_owns_service_accounts',
          guidance: 'move the service accounts to another owner group or delete them first',
          details: owned.map((s) => ({ path: `service_accounts/${s.id}`, message: s.name })),
        });
      }
      const members = await tx<
        { principal_id: number }[]
      >`select principal_id from group_members where group_id = ${id} order by principal_id`;
      await deleteGroupRow(tx, id);
      await appendEvent(tx, actorOf(ctx), {
        entityType: 'group',
        entityId: id,
        entityName: before.name,
        action: 'deleted',
        summary: `group ${before.name} deleted`,
        before: groupView(before),
        beforeRevision: before.revision,
        metadata: { removed_member_ids: members.map((m) => m.principal_id) },
      });
    });
    return { status: 204 };
  },

  listGroupMembers: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const id = input.params.group_id;
    const group = await findGroup(ctx.deps.sql, id);
    if (!group) throw notFound('group');
    if (!auth.isAdmin && !(await isMember(ctx.deps.sql, id, auth.principal.id))) {
      throw forbidden('only administrators and members of the group can list its members');
    }
    const page = await listMembers(ctx.deps.sql, id, parseListQuery(input.query, MEMBER_LIST));
    return listReply(page, page.rows.map(memberView));
  },

  addGroupMember: async (input, ctx) => {
    requireAdmin(ctx, 'change group memberships');
    const { group_id: groupId, principal_id: principalId } = input.params;
    const member = await withTx(ctx.deps.sql, async (tx) => {
      const group = await shareLockGroup(tx, groupId);
      if (!group) throw notFound('group');
      if (group.managed_by !== null) throw providerManaged();
      const principal = await findPrincipalForMembership(tx, principalId);
      if (!principal) throw notFound('principal');
      if (await insertMembership(tx, groupId, principalId)) {
        await appendEvent(tx, actorOf(ctx), membershipEvent('added', group, principal));
      }
      return principal;
    });
    return {
      status: 201,
      body: memberView(member),
      headers: { location: `/api/v1/iam/groups/${groupId}/members/${principalId}` },
    };
  },

  removeGroupMember: async (input, ctx) => {
    requireAdmin(ctx, 'change group memberships');
    const { group_id: groupId, principal_id: principalId } = input.params;
    await withTx(ctx.deps.sql, async (tx) => {
      const group = await shareLockGroup(tx, groupId);
      if (!group) throw notFound('group');
      if (group.managed_by !== null) throw providerManaged();
      const principal = await findPrincipalForMembership(tx, principalId);
      if (!principal) throw notFound('principal');
      if (await deleteMembership(tx, groupId, principalId)) {
        await appendEvent(tx, actorOf(ctx), membershipEvent('removed', group, principal));
      }
    });
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
