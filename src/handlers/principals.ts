import type { HandlerMap } from '../http/contract.ts';
import type { Ctx } from '../http/contract.ts';
import { requireHumanUnscoped } from './gates.ts';
import { forbidden, notFound } from '../domain/errors.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { findPrincipalAccess, principalPermissionRows, type PrincipalAccess } from '../db/principals.ts';
import { listPrincipalGroups, PRINCIPAL_GROUP_LIST } from '../db/groups.ts';
import { groupView } from '../domain/views/groups.ts';
import type { Permission } from '../domain/authz.ts';

/**
 * Gates, then existence (404), then: a human principal is readable by itself or an admin; a
 * service account by an admin or a human member of its owner group (403 otherwise).
 */
async function authorizePrincipal(ctx: Ctx, id: number): Promise<PrincipalAccess> {
  const auth = requireHumanUnscoped(ctx);
  const p = await findPrincipalAccess(ctx.deps.sql, id, auth.principal.id);
  if (!p) throw notFound('principal');
  if (auth.isAdmin) return p;
  if (p.kind === 'human' ? p.id !== auth.principal.id : !p.caller_in_owner_group) {
    throw forbidden(
      p.kind === 'human'
        ? 'only the user itself or an administrator may read this'
        : "only an administrator or a member of the service account's owner group may read this",
    );
  }
  return p;
}

export const principalsHandlers = {
  listPrincipalGroups: async (input, ctx) => {
    const p = await authorizePrincipal(ctx, input.params.principal_id);
    const page = await listPrincipalGroups(ctx.deps.sql, p.id, parseListQuery(input.query, PRINCIPAL_GROUP_LIST));
    return listReply(page, page.rows.map(groupView));
  },

  listPrincipalPermissions: async (input, ctx) => {
    const p = await authorizePrincipal(ctx, input.params.principal_id);
    const rows = await principalPermissionRows(ctx.deps.sql, p.id);
    const byGroup = new Map<
      number,
      { group: { id: number; name: string; identity_scope: string }; permissions: { collection_id: number; permission: Permission }[] }
    >();
    for (const r of rows) {
      let entry = byGroup.get(r.group_id);
      if (!entry) {
        entry = { group: { id: r.group_id, name: r.group_name, identity_scope: r.group_identity_scope }, permissions: [] };
        byGroup.set(r.group_id, entry);
      }
      entry.permissions.push({ collection_id: r.collection_id, permission: r.permission });
    }
    return { status: 200, body: [...byGroup.values()] };
  },
} satisfies Partial<HandlerMap>;
