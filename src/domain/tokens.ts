// A bearer token as authentication sees it (db/tokens.ts finds it, http/auth.ts turns it into AuthInfo).
import type { Principal } from './principals.ts';
import type { TokenScopeValue } from './scope.ts';

/** A valid token and its principal (the principal's members, with its id as principal_id). */
export interface ValidatedTokenRow extends Omit<Principal, 'id'> {
  token_id: number;
  token_name: string | null;
  token_description: string | null;
  issued: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
  token_revision: number;
  scope: TokenScopeValue | null;
  principal_id: number;
  is_admin: boolean;
}
