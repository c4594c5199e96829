// The request-level authorization gates handlers open with: they take the request's caller (ctx)
// and apply the pure rules of src/domain/authz.ts and the SQL lookups of src/db/authz.ts and
// src/db/tokens.ts. Inventory point checks (requireCollectionPermission, …) take the caller's
// Authority and are called from src/db/authz.ts directly.
import type { Ctx } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import type { AuthInfo } from '../http/auth.ts';
import type { Db } from '../db/sql.ts';
import { findTokenOwner, type TokenOwner } from '../db/tokens.ts';
import type { Approver, PresentedApproval } from '../db/approvals.ts';
import { notFound } from '../domain/errors.ts';
import { assertHumanUnscoped, assertUnscopedAdmin, mayManageTokens, tokenManagementDenied } from '../domain/authz.ts';

/** The request header that names a credential approval. */
export const APPROVAL_HEADER = 'x-svc-credential-approval';

/**
 * The Human/IAM family's two gates, in order, before any admin or self check:
 * (1) the principal must be a human; (2) the token must be unscoped.
 */
export function requireHumanUnscoped(ctx: Ctx): AuthInfo {
  const auth = authOf(ctx);
  assertHumanUnscoped(auth);
  return auth;
}

/** Unscoped administrator required (backups, admin config, meta, sinks, …). */
export function requireUnscopedAdmin(ctx: Ctx): AuthInfo {
  const auth = authOf(ctx);
  assertUnscopedAdmin(auth);
  return auth;
}

/**
 * The Human/IAM gates, then: the principal exists (404), and the caller may manage its tokens:
 * an admin; a human for itself; for a service account a human member of its owner group (403).
 */
export async function authorizeTokenOwner(
  ctx: Ctx,
  db: Db,
  principalId: number,
  lock = false,
): Promise<{ auth: AuthInfo; owner: TokenOwner }> {
  const auth = requireHumanUnscoped(ctx);
  const owner = await findTokenOwner(db, principalId, auth.principal.id, lock);
  if (!owner) throw notFound('principal');
  if (!mayManageTokens(auth, owner)) throw tokenManagementDenied(owner);
  return { auth, owner };
}

/** The caller of a request as the credential-approval records know it. */
export function approverOf(ctx: Ctx): Approver {
  const auth = authOf(ctx);
  return { principalId: auth.principal.id, tokenId: auth.token.id, actor: actorOf(ctx), tokenKey: ctx.deps.tokenKey };
}

/** The credential approval a request presents (header X-Svc-Credential-Approval), for consumeApproval. */
export function presentedApproval(ctx: Ctx, headers: Record<string, string | undefined>): PresentedApproval {
  // onto approverOf's new object, not members after a spread (eslint.config.js)
  return Object.assign(approverOf(ctx), { approvalId: headers[APPROVAL_HEADER] });
}
