import type { HandlerMap } from '../http/contract.ts';
import { callerOf } from '../http/contract.ts';
import { requireHumanUnscoped, presentedApproval } from './gates.ts';
import { forbidden, notFound } from '../domain/errors.ts';
import { etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { consumeApproval } from '../db/approvals.ts';
import { findUser, listUsers, USER_LIST } from '../db/users.ts';
import { userView } from '../domain/views/users.ts';
import { inTx } from '../mutations/context.ts';
import { createUser, deleteUser, updateUser } from '../mutations/users.ts';

const LOCAL_SCOPE = 'local';

export const usersHandlers = {
  listUsers: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    if (!auth.isAdmin) throw forbidden('only administrators can list users');
    const page = await listUsers(ctx.deps.sql, parseListQuery(input.query, USER_LIST));
    return listReply(page, page.rows.map(userView));
  },

  createUser: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    if (!auth.isAdmin) throw forbidden('only administrators can create users');
    const body = input.body;
    const approve = (tx: Parameters<typeof consumeApproval>[0]) =>
      consumeApproval(tx, presentedApproval(ctx, input.headers), { kind: 'create_user', user: input.body });
    const row = await inTx(ctx.deps.sql, callerOf(ctx), (m) =>
      createUser(
        m,
        {
          name: body.name,
          identity_scope: LOCAL_SCOPE,
          email: body.email,
          proper_name: body.proper_name,
          password: { plain: body.password },
        },
        approve,
      ),
    );
    return {
      status: 201,
      body: userView(row),
      headers: { location: `/api/v1/iam/users/${row.id}`, ...etagHeader('user', row.id, row.revision) },
    };
  },

  getUser: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const id = input.params.id;
    if (!auth.isAdmin && auth.principal.id !== id) throw forbidden('only administrators can read other users');
    const row = await findUser(ctx.deps.sql, id);
    if (!row) throw notFound('user');
    return { status: 200, body: userView(row), headers: etagHeader('user', row.id, row.revision) };
  },

  updateUser: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const id = input.params.id;
    if (!auth.isAdmin && auth.principal.id !== id) throw forbidden('only administrators can update other users');
    const body = input.body;
    const approve = (tx: Parameters<typeof consumeApproval>[0]) =>
      consumeApproval(tx, presentedApproval(ctx, input.headers), { kind: 'update_user', user_id: id, user: input.body });
    const changes = {
      email: body.email,
      proper_name: body.proper_name,
      password: body.password === undefined ? undefined : { plain: body.password },
    };
    const { row } = await inTx(ctx.deps.sql, callerOf(ctx), (m) => updateUser(m, id, changes, input.headers['if-match'], approve));
    return { status: 200, body: userView(row), headers: etagHeader('user', row.id, row.revision) };
  },

  deleteUser: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    if (!auth.isAdmin) throw forbidden('only administrators can delete users');
    await inTx(ctx.deps.sql, callerOf(ctx), (m) => deleteUser(m, input.params.id, input.headers['if-match']));
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
