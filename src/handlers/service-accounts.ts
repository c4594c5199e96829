import type { HandlerMap } from '../http/contract.ts';
import { actorOf, type Ctx } from '../http/contract.ts';
import { requireHumanUnscoped } from '../http/gates.ts';
import { forbidden, notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import type { AuthInfo } from '../http/auth.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import type { TransactionSql } from '../db/sql.ts';
import { appendEvent } from '../db/events.ts';
import { isMember, shareLockGroup } from '../db/groups.ts';
import { deletePrincipal, principalGroupIds } from '../db/users.ts';
import {
  disableServiceAccount,
  serviceAccountEvent,
  findServiceAccount,
  insertServiceAccount,
  listServiceAccounts,
  lockServiceAccount,
  serviceAccountView,
  SERVICE_ACCOUNT_LIST,
  updateServiceAccountRow,
  type ServiceAccountRow,
} from '../db/service-accounts.ts';

const LOCAL_SCOPE = 'local';

const reply = (status: number, row: ServiceAccountRow) => ({
  status,
  body: serviceAccountView(row),
  headers: etagHeader('service_account', row.id, row.revision),
});

/**
 * Gates, existence (404), then management authority: an admin, or a human member of the
 * account's owner group (403). A service account never gets here (gate 1), so it never manages itself.
 */
async function authorizeManage(ctx: Ctx, tx: TransactionSql | null, id: number): Promise<{ auth: AuthInfo; account: ServiceAccountRow }> {
  const auth = requireHumanUnscoped(ctx);
  const account = tx ? await lockServiceAccount(tx, id) : await findServiceAccount(ctx.deps.sql, id);
  if (!account) throw notFound('service account');
  if (!auth.isAdmin && !(await isMember(tx ?? ctx.deps.sql, account.owner_group_id, auth.principal.id))) {
    throw forbidden("only an administrator or a member of the service account's owner group may manage it");
  }
  return { auth, account };
}

/** The owner group exists (404) and a non-admin caller belongs to it (403); locked against deletion. */
async function requireOwnerGroup(tx: TransactionSql, auth: AuthInfo, groupId: number): Promise<void> {
  const group = await shareLockGroup(tx, groupId);
  if (!group) throw notFound('owner group');
  if (!auth.isAdmin && !(await isMember(tx, groupId, auth.principal.id))) {
    throw forbidden('a service account can be owned only by a group you belong to');
  }
}

export const serviceAccountsHandlers = {
  listServiceAccounts: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const parsed = parseListQuery(input.query, SERVICE_ACCOUNT_LIST);
    const page = await listServiceAccounts(ctx.deps.sql, parsed, auth.isAdmin ? null : auth.principal.id);
    return listReply(page, page.rows.map(serviceAccountView));
  },

  createServiceAccount: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const body = input.body;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      await requireOwnerGroup(tx, auth, body.owner_group_id);
      const created = await insertServiceAccount(tx, {
        name: body.name,
        identityScope: LOCAL_SCOPE,
        description: body.description ?? '',
        ownerGroupId: body.owner_group_id,
        createdBy: auth.principal.id,
      });
      await appendEvent(tx, actorOf(ctx), serviceAccountEvent('created', created, null));
      return created;
    });
    const r = reply(201, row);
    return { ...r, headers: { ...r.headers, location: `/api/v1/iam/service-accounts/${row.id}` } };
  },

  getServiceAccount: async (input, ctx) => {
    const { account } = await authorizeManage(ctx, null, input.params.id);
    return reply(200, account);
  },

  updateServiceAccount: async (input, ctx) => {
    const id = input.params.id;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const { auth, account: before } = await authorizeManage(ctx, tx, id);
      checkIfMatch(input.headers, 'service_account', id, before.revision);
      const description = input.body.description === undefined ? before.description : (input.body.description ?? '');
      const ownerGroupId = input.body.owner_group_id ?? before.owner_group_id;
      if (ownerGroupId !== before.owner_group_id) await requireOwnerGroup(tx, auth, ownerGroupId);
      if (description === before.description && ownerGroupId === before.owner_group_id) return before;
      const after = await updateServiceAccountRow(tx, id, { description, ownerGroupId });
      await appendEvent(tx, actorOf(ctx), serviceAccountEvent('updated', after, before));
      return after;
    });
    return reply(200, row);
  },

  disableServiceAccount: async (input, ctx) => {
    const id = input.params.id;
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const { account: before } = await authorizeManage(ctx, tx, id);
      checkIfMatch(input.headers, 'service_account', id, before.revision);
      if (before.disabled_at !== null) return before;
      return disableServiceAccount(tx, actorOf(ctx), before);
    });
    return reply(200, row);
  },

  deleteServiceAccount: async (input, ctx) => {
    const id = input.params.id;
    await withTx(ctx.deps.sql, async (tx) => {
      const { account: before } = await authorizeManage(ctx, tx, id);
      checkIfMatch(input.headers, 'service_account', id, before.revision);
      const groupIds = await principalGroupIds(tx, id);
      await deletePrincipal(tx, id);
      await appendEvent(tx, actorOf(ctx), {
        entityType: 'service_account',
        entityId: id,
        entityName: before.name,
        action: 'deleted',
        summary: `service account ${before.name} deleted`,
        before: serviceAccountView(before),
        beforeRevision: before.revision,
        metadata: { owner_group_id: before.owner_group_id, removed_from_group_ids: groupIds },
      });
    });
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
