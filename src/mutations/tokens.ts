// Tokens: minting and revoking with their audit events, and the checks before a mint. Used by
// the auth, tokens and credential-approvals handlers and the admin command line (who may manage
// tokens: src/handlers/gates.ts).
import { conflict } from '../domain/errors.ts';
import type { Db, TransactionSql } from '../db/sql.ts';
import { reserveId } from '../db/events.ts';
import type { Final } from '../db/tx.ts';
import type { Actor } from '../domain/actor.ts';
import { insertTokenWithEvent, missingScopeResources, revokeTokenWithEvent, type TokenOwner, type TokenScopeValue } from '../db/tokens.ts';
import type { NewEvent } from '../domain/new-event.ts';
import { tokenSnapshot, type TokenRow } from '../domain/views/tokens.ts';
import { hashToken, newRawToken } from '../domain/token-secret.ts';
import { missingResourcesError, validateScopeShape } from '../domain/scope.ts';

/** 409 when tokens cannot be minted for this principal. */
export function assertMintable(owner: TokenOwner): void {
  if (owner.kind === 'service_account' && owner.disabled_at)
    throw conflict('the service account is disabled; no tokens can be minted for it');
}

/** Shape rules and resource existence of a requested scope (400); returns the scope to store. */
export async function validateScope(db: Db, scope: unknown): Promise<TokenScopeValue | null> {
  const s = validateScopeShape(scope);
  if (s?.resources) {
    const missing = await missingScopeResources(db, s.resources);
    if (missing.length) throw missingResourcesError(missing, s);
  }
  return s;
}

/** A token as minted: unlike legacy rows, it always has an expiry. */
export type MintedToken = TokenRow & { expires_at: Date };

export interface TokenMint {
  name: string | null;
  description: string | null;
  expiresAt: Date;
  scope: TokenScopeValue | null;
  renewedFrom?: number;
  /** A renewal's new id, reserved beside the caller's checks (reserveId). */
  reserved?: Promise<{ id: number; now: Date }>;
}

/**
 * Stores a new token and its `token.created` (or `token.renewed`) event, in one statement (`final`:
 * COMMIT goes with it); returns the raw value once. A renewal's event names the new token's id in
 * its summary: its id is reserved first (`t.reserved`: a reservation the caller sent beside its
 * checks).
 */
export async function mintTokenAs(
  tx: TransactionSql,
  tokenKey: Buffer,
  actor: Actor,
  owner: { id: number; name: string },
  t: TokenMint,
  final?: Final,
): Promise<{ raw: string; row: MintedToken }> {
  const raw = newRawToken();
  const renewedFrom = t.renewedFrom ?? null;
  const id = renewedFrom === null ? undefined : (await (t.reserved ?? reserveId(tx, 'tokens'))).id;
  const values = {
    id,
    principalId: owner.id,
    hash: hashToken(tokenKey, raw),
    name: t.name,
    description: t.description,
    expiresAt: t.expiresAt,
    scope: t.scope,
    renewedFrom,
  };
  const event =
    renewedFrom === null
      ? newTokenEvent(values, 'token minted for ' + owner.name, { principal_id: owner.id })
      : newTokenEvent(values, `token ${renewedFrom} renewed as token ${id} for ${owner.name}`, {
          principal_id: owner.id,
          renewed_from_token_id: renewedFrom,
        });
  const row = await insertTokenWithEvent(tx, actor, values, event, final);
  // the insert stored t.expiresAt: a minted token always expires (only legacy rows have no expiry)
  return { raw, row: Object.assign({}, row, { expires_at: row.expires_at ?? t.expiresAt }) };
}

/**
 * The `created` event of a token about to be inserted by insertTokenWithEvent (`renewed` for a
 * renewal), which fills in its id (entity_id and the snapshot's) and issued time.
 */
export function newTokenEvent(
  t: {
    principalId: number;
    name?: string | null;
    description?: string | null;
    expiresAt: Date;
    scope?: TokenScopeValue | null;
    renewedFrom?: number | null;
  },
  summary: string,
  metadata: Record<string, unknown>,
): NewEvent {
  const row: TokenRow = {
    id: 0,
    principal_id: t.principalId,
    name: t.name ?? null,
    description: t.description ?? null,
    issued: new Date(0),
    expires_at: t.expiresAt,
    last_used_at: null,
    revoked_at: null,
    scope: t.scope ?? null,
    renewed_from_token_id: t.renewedFrom ?? null,
    revision: 1,
  };
  return {
    entityType: 'token',
    entityId: 0,
    entityName: row.name,
    action: t.renewedFrom == null ? 'created' : 'renewed',
    summary,
    after: tokenSnapshot(row),
    afterRevision: 1,
    metadata,
  };
}

/**
 * Soft-revokes a (locked) token with its `token.revoked` event, in one statement; false when it was
 * revoked already. `final`: COMMIT goes with it.
 */
export async function revokeTokenAs(tx: TransactionSql, actor: Actor, before: TokenRow, via: string, final?: Final): Promise<boolean> {
  if (before.revoked_at) return false;
  // the revocation's time is the statement's: revokeTokenWithEvent puts it into `after`
  const after: TokenRow = Object.assign({}, before, { revision: before.revision + 1 });
  return revokeTokenWithEvent(
    tx,
    actor,
    before.id,
    {
      entityType: 'token',
      entityId: before.id,
      entityName: before.name,
      action: 'revoked',
      summary: `token revoked (${via})`,
      before: tokenSnapshot(before),
      after: tokenSnapshot(after),
      beforeRevision: before.revision,
      afterRevision: after.revision,
      metadata: { principal_id: before.principal_id, via },
    },
    final,
  );
}
