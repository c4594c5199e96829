import type { HandlerMap } from '../http/contract.ts';
import { callerOf } from '../http/contract.ts';
import { requireHumanUnscoped } from './gates.ts';
import { forbidden, notFound } from '../domain/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import type { AuthInfo } from '../http/auth.ts';
import type { Ctx } from '../http/contract.ts';
import { findGroup, GROUP_LIST, isMember, listGroups, listMembers, MEMBER_LIST } from '../db/groups.ts';
import { groupView, memberView } from '../domain/views/groups.ts';
import { inTx } from '../mutations/context.ts';
import { addGroupMember, createGroup, deleteGroup, removeGroupMember, updateGroup } from '../mutations/groups.ts';

const LOCAL_SCOPE = 'local';

function requireAdmin(ctx: Ctx, what: string): AuthInfo {
  const auth = requireHumanUnscoped(ctx);
  if (!auth.isAdmin) throw forbidden(`only administrators can ${what}`);
  return auth;
}

export const groupsHandlers = {
  listGroups: async (input, ctx) => {
    requireHumanUnscoped(ctx);
    const page = await listGroups(ctx.deps.sql, parseListQuery(input.query, GROUP_LIST));
    return listReply(page, page.rows.map(groupView));
  },

  createGroup: async (input, ctx) => {
    requireAdmin(ctx, 'create groups');
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      createGroup(m, { name: input.body.name, description: input.body.description, identity_scope: LOCAL_SCOPE }),
    );
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
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      updateGroup(m, input.params.group_id, input.body, input.headers['if-match']),
    );
    return { status: 200, body: groupView(row), headers: etagHeader('group', row.id, row.revision) };
  },

  deleteGroup: async (input, ctx) => {
    requireAdmin(ctx, 'delete groups');
    await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteGroup(m, input.params.group_id, input.headers['if-match']));
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
    const { row: member } = await inTx(ctx.deps.sql, callerOf(ctx), (m) => addGroupMember(m, groupId, principalId));
    return {
      status: 201,
      body: memberView(member),
      headers: { location: `/api/v1/iam/groups/${groupId}/members/${principalId}` },
    };
  },

  removeGroupMember: async (input, ctx) => {
    requireAdmin(ctx, 'change group memberships');
    const { group_id: groupId, principal_id: principalId } = input.params;
    await inTx(ctx.deps.sql, callerOf(ctx), (m) => removeGroupMember(m, groupId, principalId));
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
