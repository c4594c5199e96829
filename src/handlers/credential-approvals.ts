import type { HandlerMap, Ctx } from '../http/contract.ts';
import { ApiError, conflict, notFound } from '../domain/errors.ts';
import { requireHumanUnscoped, authorizeTokenOwner, approverOf } from './gates.ts';
import { findApproval, findUserPasswordHash, insertApproval, userExists } from '../db/approvals.ts';
import { approvalRecordWire } from '../domain/views/approvals.ts';
import { getTokenOfPrincipal } from '../db/tokens.ts';
import { APPROVAL_ID, type ApprovalOperation } from '../domain/credential-approval.ts';
import { resolveExpiry } from '../domain/token-lifetime.ts';
import { verifyPassword } from '../domain/passwords.ts';
import { newRawToken } from '../domain/token-secret.ts';
import { loginLimiter, underLoginLimit } from '../services/login-limiter.ts';
import { assertMintable, validateScope } from '../mutations/tokens.ts';

/**
 * Checks that the approved operation can run (ids exist, the caller may do it, its body is valid)
 * and resolves the token expiry of create_token and renew_token. Authorization is checked again
 * when the approved request runs.
 */
async function precheck(ctx: Ctx, op: ApprovalOperation): Promise<Date | null> {
  const db = ctx.deps.sql;
  const cfg = ctx.deps.config;
  switch (op.kind) {
    case 'create_token': {
      const { owner } = await authorizeTokenOwner(ctx, db, op.principal_id as number);
      assertMintable(owner);
      const body = op.token as { expires_at?: string; scope?: unknown };
      await validateScope(db, body.scope);
      return resolveExpiry(body.expires_at, new Date(), cfg.SVC_TOKEN_LIFETIME_HOURS, cfg.SVC_MAX_TOKEN_LIFETIME_HOURS);
    }
    case 'renew_token': {
      const { owner } = await authorizeTokenOwner(ctx, db, op.principal_id as number);
      const token = await getTokenOfPrincipal(db, owner.id, op.token_id as number, cfg.SVC_TOKEN_LIFETIME_HOURS);
      if (!token) throw notFound('token');
      if (token.revoked_at) throw conflict('a revoked token cannot be renewed');
      assertMintable(owner);
      const body = op.token as { expires_at?: string };
      return resolveExpiry(body.expires_at, new Date(), cfg.SVC_TOKEN_LIFETIME_HOURS, cfg.SVC_MAX_TOKEN_LIFETIME_HOURS);
    }
    case 'update_user':
      if (!(await userExists(db, op.user_id as number))) throw notFound('user');
      return null;
    default:
      return null;
  }
}

export const credentialApprovalsHandlers = {
  createCredentialApproval: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const op = input.body.operation as ApprovalOperation;
    const tokenExpiresAt = await precheck(ctx, op);
    // A wrong password counts against the caller's login rate limit (name + client address).
    const ok = await underLoginLimit(loginLimiter(ctx.deps), auth.principal.name, ctx.clientIp, async () =>
      verifyPassword(await findUserPasswordHash(ctx.deps.sql, auth.principal.id), input.body.password),
    );
    if (!ok) {
      throw new ApiError('forbidden', 'the password is not correct; the approval was not granted', { reason: 'reauthentication_failed' });
    }
    const raw = newRawToken();
    const row = await insertApproval(ctx.deps.sql, approverOf(ctx), { raw, operation: op, tokenExpiresAt });
    return {
      status: 201,
      body: { approval: raw, record: approvalRecordWire(raw, row), token_expires_at: row.token_expires_at },
      headers: { location: `/api/v1/iam/credential-approvals/${raw}`, 'cache-control': 'no-store' },
    };
  },

  getCredentialApproval: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const raw = input.params.approval_id;
    if (!APPROVAL_ID.test(raw)) throw notFound('credential approval');
    const row = await findApproval(ctx.deps.sql, ctx.deps.tokenKey, raw, auth.principal.id);
    if (!row) throw notFound('credential approval');
    return { status: 200, body: approvalRecordWire(raw, row), headers: { 'cache-control': 'no-store' } };
  },
} satisfies Partial<HandlerMap>;
