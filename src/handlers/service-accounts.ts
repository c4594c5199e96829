import type { HandlerMap } from '../http/contract.ts';
import { callerOf } from '../http/contract.ts';
import { requireHumanUnscoped } from './gates.ts';
import { notFound } from '../domain/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { findServiceAccount, listServiceAccounts, SERVICE_ACCOUNT_LIST } from '../db/service-accounts.ts';
import { serviceAccountView, type ServiceAccountRow } from '../domain/views/service-accounts.ts';
import { inTx } from '../mutations/context.ts';
import {
  createServiceAccount,
  deleteServiceAccount,
  disableServiceAccount,
  requireAccountManager,
  updateServiceAccount,
} from '../mutations/service-accounts.ts';

const LOCAL_SCOPE = 'local';

const reply = <S extends number>(status: S, row: ServiceAccountRow, extra?: Record<string, string>) => ({
  status,
  body: serviceAccountView(row),
  headers: etagHeader('service_account', row.id, row.revision, extra),
});

// Every operation passes the Human/IAM gates first, so a service account never manages itself;
// who manages an account (an admin, or a human member of its owner group) is its write path's rule.
export const serviceAccountsHandlers = {
  listServiceAccounts: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const parsed = parseListQuery(input.query, SERVICE_ACCOUNT_LIST);
    const page = await listServiceAccounts(ctx.deps.sql, parsed, auth.isAdmin ? null : auth.principal.id);
    return listReply(page, page.rows.map(serviceAccountView));
  },

  createServiceAccount: async (input, ctx) => {
    requireHumanUnscoped(ctx);
    const body = input.body;
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      createServiceAccount(m, {
        name: body.name,
        identity_scope: LOCAL_SCOPE,
        description: body.description,
        owner_group_id: body.owner_group_id,
      }),
    );
    return reply(201, row, { location: `/api/v1/iam/service-accounts/${row.id}` });
  },

  getServiceAccount: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const account = await findServiceAccount(ctx.deps.sql, input.params.id);
    if (!account) throw notFound('service account');
    await requireAccountManager(ctx.deps.sql, auth, account);
    return reply(200, account);
  },

  updateServiceAccount: async (input, ctx) => {
    requireHumanUnscoped(ctx);
    const changes = { description: input.body.description, owner_group_id: input.body.owner_group_id };
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      updateServiceAccount(m, input.params.id, changes, input.headers['if-match']),
    );
    return reply(200, row);
  },

  disableServiceAccount: async (input, ctx) => {
    requireHumanUnscoped(ctx);
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) => disableServiceAccount(m, input.params.id, input.headers['if-match']));
    return reply(200, row);
  },

  deleteServiceAccount: async (input, ctx) => {
    requireHumanUnscoped(ctx);
    await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteServiceAccount(m, input.params.id, input.headers['if-match']));
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
