import type { HandlerMap } from '../http/contract.ts';
import { actorOf } from '../http/contract.ts';
import { requireHumanUnscoped } from '../http/gates.ts';
import { forbidden, notFound } from '../http/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import { consumeApproval } from '../db/approvals.ts';
import { hashPassword } from '../domain/passwords.ts';
import {
  deletePrincipal,
  findUser,
  principalGroupIds,
  insertUser,
  listUsers,
  lockUser,
  updateUserRow,
  userCreatedEvent,
  userUpdatedEvent,
  userView,
  USER_LIST,
} from '../db/users.ts';

const LOCAL_SCOPE = 'local';
const providerManaged = () => forbidden('this user is managed by an identity provider and is read-only here');

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
    const row = await withTx(ctx.deps.sql, async (tx) => {
      await consumeApproval(tx, ctx, input.headers, { kind: 'create_user', user: input.body });
      const created = await insertUser(tx, {
        name: body.name,
        identityScope: LOCAL_SCOPE,
        passwordHash: await hashPassword(body.password),
        email: body.email ?? null,
        properName: body.proper_name ?? null,
      });
      await appendEvent(tx, actorOf(ctx), userCreatedEvent(created));
      return created;
    });
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
    const row = await withTx(ctx.deps.sql, async (tx) => {
      const before = await lockUser(tx, id);
      if (!before) throw notFound('user');
      if (before.provider_managed) throw providerManaged();
      checkIfMatch(input.headers, 'user', id, before.revision);
      let passwordHash: string | null = null;
      if (body.password !== undefined) {
        await consumeApproval(tx, ctx, input.headers, { kind: 'update_user', user_id: id, user: input.body });
        passwordHash = await hashPassword(body.password);
      }
      const email = body.email === undefined ? before.email : body.email;
      const properName = body.proper_name === undefined ? before.proper_name : body.proper_name;
      if (passwordHash === null && email === before.email && properName === before.proper_name) return before;
      const after = await updateUserRow(tx, id, { email, properName, passwordHash });
      await appendEvent(tx, actorOf(ctx), userUpdatedEvent(before, after, passwordHash !== null));
      return after;
    });
    return { status: 200, body: userView(row), headers: etagHeader('user', row.id, row.revision) };
  },

  deleteUser: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    if (!auth.isAdmin) throw forbidden('only administrators can delete users');
    const id = input.params.id;
    await withTx(ctx.deps.sql, async (tx) => {
      const before = await lockUser(tx, id);
      if (!before) throw notFound('user');
      if (before.provider_managed) throw providerManaged();
      checkIfMatch(input.headers, 'user', id, before.revision);
      const groupIds = await principalGroupIds(tx, id);
      await deletePrincipal(tx, id);
      await appendEvent(tx, actorOf(ctx), {
        entityType: 'user',
        entityId: id,
        entityName: before.name,
        action: 'deleted',
        summary: `user ${before.name} deleted`,
        before: userView(before),
        beforeRevision: before.revision,
        metadata: { removed_from_group_ids: groupIds },
      });
    });
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
