import type { Ctx } from './contract.ts';
import { authOf } from './contract.ts';
import type { AuthInfo } from './auth.ts';
import { forbidden } from './errors.ts';

/**
 * The Human/IAM family's two gates, in order, before any admin or self check:
 * (1) the principal must be a human; (2) the token must be unscoped.
 */
export function requireHumanUnscoped(ctx: Ctx): AuthInfo {
  const auth = authOf(ctx);
  if (auth.principal.kind !== 'human') throw forbidden('service accounts cannot use identity management operations');
  if (auth.token.scope !== null) throw forbidden('scoped tokens cannot use identity management operations');
  return auth;
}

/** An admin whose token is unscoped (admin fast paths never apply to scoped tokens). */
export function isUnscopedAdmin(auth: AuthInfo): boolean {
  return auth.isAdmin && auth.token.scope === null;
}

/** Unscoped administrator required (backups, admin config, meta, sinks, …). */
export function requireUnscopedAdmin(ctx: Ctx): AuthInfo {
  const auth = authOf(ctx);
  if (!isUnscopedAdmin(auth)) throw forbidden('an unscoped administrator is required');
  return auth;
}
