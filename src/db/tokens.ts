import type { Db } from './sql.ts';

export interface TokenScopeValue {
  permissions?: string[];
  resources?: { kind: 'collection' | 'class' | 'object'; id: number }[];
}

export interface ValidatedTokenRow {
  token_id: number;
  token_name: string | null;
  token_description: string | null;
  issued: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
  token_revision: number;
  scope: TokenScopeValue | null;
  principal_id: number;
  kind: 'human' | 'service_account';
  name: string;
  identity_scope: string;
  created_at: Date;
  updated_at: Date;
  revision: number;
  is_admin: boolean;
}

/**
 * Finds the token with this hash and, in the same statement, checks every validation rule
 * (not revoked; unexpired, or for a legacy row without expires_at issued within the default
 * lifetime; owner not a disabled service account) and advances last_used_at.
 */
export async function validateTokenHash(
  db: Db,
  hash: Buffer,
  legacyLifetimeHours: number,
  admin: { group: string; scope: string },
): Promise<ValidatedTokenRow | undefined> {
  const [row] = await db<ValidatedTokenRow[]>`
    with t as (
      update tokens set last_used_at = now()
      where token_hash = ${hash}
        and revoked_at is null
        and coalesce(expires_at, issued + make_interval(hours => ${legacyLifetimeHours})) > now()
        and not exists (
          select 1 from service_accounts sa where sa.principal_id = tokens.principal_id and sa.disabled_at is not null)
      returning id, principal_id, name, description, issued, expires_at, last_used_at, revision, scope
    )
    select t.id as token_id, t.name as token_name, t.description as token_description, t.issued, t.expires_at,
      t.last_used_at, t.revision as token_revision, t.scope,
      p.id as principal_id, p.kind, p.name, p.identity_scope, p.created_at, p.updated_at, p.revision,
      exists (select 1 from group_members gm join groups g on g.id = gm.group_id
              where gm.principal_id = p.id and g.name = ${admin.group} and g.identity_scope = ${admin.scope}) as is_admin
    from t join principals p on p.id = t.principal_id`;
  return row;
}

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

export async function insertToken(
  db: Db,
  t: {
    principalId: number;
    hash: Buffer;
    name?: string | null;
    description?: string | null;
    expiresAt: Date;
    scope?: TokenScopeValue | null;
    renewedFrom?: number | null;
  },
): Promise<TokenRow> {
  const [row] = await db<TokenRow[]>`
    insert into tokens (principal_id, token_hash, name, description, expires_at, scope, renewed_from_token_id)
    values (${t.principalId}, ${t.hash}, ${t.name ?? null}, ${t.description ?? null}, ${t.expiresAt},
      ${t.scope ? db.json(t.scope as never) : null}, ${t.renewedFrom ?? null})
    returning id, principal_id, name, description, issued, expires_at, last_used_at, revoked_at, scope,
      renewed_from_token_id, revision`;
  return row!;
}

/** The audit snapshot of a token: never the raw token or its hash. */
export function tokenSnapshot(t: TokenRow): Record<string, unknown> {
  return {
    id: t.id,
    principal_id: t.principal_id,
    name: t.name,
    description: t.description,
    issued: t.issued,
    expires_at: t.expires_at,
    revoked_at: t.revoked_at,
    scope: t.scope,
    renewed_from_token_id: t.renewed_from_token_id,
    revision: t.revision,
  };
}
