// Tokens: the row as the database returns it, its wire view and its audit snapshot. Neither ever
// holds the raw token or its hash. Pure functions (no SQL); src/db reads and writes the rows.
import type { TokenScopeValue } from '../scope.ts';
import type { ResponseBody } from '../wire.ts';

export interface TokenRow {
  id: number;
  principal_id: number;
  name: string | null;
  description: string | null;
  issued: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
  scope: TokenScopeValue | null;
  renewed_from_token_id: number | null;
  revision: number;
}

/** A token as the API shows it: the row plus the derived `active` and `expired`. */
export interface TokenView extends TokenRow {
  active: boolean;
  expired: boolean;
}

/** What the wire view and the audit snapshot both show. */
function tokenCore(t: TokenRow) {
  return {
    id: t.id,
    principal_id: t.principal_id,
    name: t.name,
    description: t.description,
    issued: t.issued,
    expires_at: t.expires_at,
    revoked_at: t.revoked_at,
    scope: t.scope,
    revision: t.revision,
  };
}

/** The audit snapshot of a token (not its last use: using a token is not a change of it). */
export function tokenSnapshot(t: TokenRow): Record<string, unknown> {
  // Object.assign onto tokenCore's new object, not members after a spread (eslint.config.js)
  return Object.assign(tokenCore(t), { renewed_from_token_id: t.renewed_from_token_id });
}

/** The public representation (components.schemas.Token). */
export function tokenWire(t: TokenView): ResponseBody<'listPrincipalTokens', 200>[number] {
  return Object.assign(tokenCore(t), { last_used_at: t.last_used_at, active: t.active, expired: t.expired });
}
