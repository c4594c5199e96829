import { unauthorized } from '../domain/errors.ts';
import type { Principal } from '../domain/principals.ts';
import type { ValidatedTokenRow } from '../domain/tokens.ts';
import type { TokenScopeValue } from '../domain/scope.ts';
import { tokenValidations } from '../metrics.ts';
import type { GrantSets } from '../domain/authz.ts';

/** The authenticated caller of a request: its principal and the bearer token it presented. */
export interface AuthInfo {
  principal: Principal;
  /** Member of the configured admin group in the configured identity scope. */
  isAdmin: boolean;
  token: {
    id: number;
    name: string | null;
    description: string | null;
    issued: Date;
    expires_at: Date | null;
    last_used_at: Date | null;
    revision: number;
    /** null = unscoped. */
    scope: TokenScopeValue | null;
  };
  /** The principal's grants when known (domain/authz.ts Authority.grants; set by the app for reads). */
  grants?: GrantSets;
}

/**
 * Finds the live token presented as this raw bearer token and its principal: the token cache
 * (services/token-cache.ts, passed in by the app wiring: the transport resolves bearer tokens
 * without knowing SQL), which answers at once when it keeps the token, else a promise (it reads the
 * token by its hash, db/tokens.ts validateTokenHash).
 */
export type TokenLookup = (raw: string) => ValidatedTokenRow | undefined | Promise<ValidatedTokenRow | undefined>;

const BEARER = /^Bearer ([A-Za-z0-9_\-.~+/]+=*)$/;

/**
 * Resolves the bearer token of a request, or throws the generic 401: at once when the lookup
 * answers at once (a token the cache keeps), else a promise.
 */
export function authenticate(authorization: string | undefined, lookup: TokenLookup): AuthInfo | Promise<AuthInfo> {
  const m = authorization ? BEARER.exec(authorization.trim()) : null;
  if (!m || m[1]!.length > 512) {
    tokenValidations.observe('malformed');
    throw unauthorized();
  }
  const found = lookup(m[1]!);
  return found instanceof Promise ? found.then(authInfo) : authInfo(found);
}

function authInfo(row: ValidatedTokenRow | undefined): AuthInfo {
  tokenValidations.observe(row ? 'valid' : 'invalid');
  if (!row) throw unauthorized();
  return {
    principal: {
      id: row.principal_id,
      kind: row.kind,
      name: row.name,
      identity_scope: row.identity_scope,
      created_at: row.created_at,
      updated_at: row.updated_at,
      revision: row.revision,
    },
    isAdmin: row.is_admin,
    token: {
      id: row.token_id,
      name: row.token_name,
      description: row.token_description,
      issued: row.issued,
      expires_at: row.expires_at,
      last_used_at: row.last_used_at,
      revision: row.token_revision,
      scope: row.scope,
    },
  };
}
