// Tokens: minting and revoking with their audit events, and the checks before a mint. Used by
// the auth, tokens and credential-approvals handlers and the admin command line (who may manage
// tokens: src/handlers/gates.ts).
import { conflict } from '../domain/errors.ts';
import type { Db, TransactionSql } from '../db/sql.ts';
import { appendEvent } from '../db/events.ts';
import type { Final } from '../db/tx.ts';
import type { Actor } from '../domain/actor.ts';
import {
  insertToken,
  insertTokenWithEvent,
  missingScopeResources,
  revokeTokenWithEvent,
  type TokenOwner,
  type TokenScopeValue,
} from '../db/tokens.ts';
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
}

/**
 * Stores a new token and its `token.created` (or `token.renewed`) event; returns the raw value once.
 * A new token and its event are one statement (`final`: COMMIT goes with it); a renewal, whose
 * event names the new token's id in its summary, takes two.
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
  const values = {
    principalId: owner.id,
    hash: hashToken(tokenKey, raw),
    name: t.name,
    description: t.description,
    expiresAt: t.expiresAt,
    scope: t.scope,
  };
  let row: TokenRow;
  if (t.renewedFrom === undefined) {
    row = await insertTokenWithEvent(
      tx,
      actor,
      values,
      newTokenEvent(values, 'token minted for ' + owner.name, { principal_id: owner.id }),
      final,
    );
  } else {
    row = await insertToken(tx, { ...values, renewedFrom: t.renewedFrom });
    await appendEvent(
      tx,
      actor,
      {
        entityType: 'token',
        entityId: row.id,
        entityName: row.name,
        action: 'renewed',
        summary: `token ${t.renewedFrom} renewed as token ${row.id} for ${owner.name}`,
        after: tokenSnapshot(row),
        afterRevision: row.revision,
        metadata: { principal_id: owner.id, renewed_from_token_id: t.renewedFrom },
      },
      final,
    );
  }
  // insertToken stored t.expiresAt: a minted token always expires (only legacy rows have no expiry)
  return { raw, row: { ...row, expires_at: row.expires_at ?? t.expiresAt } };
}

/**
 * The `created` event of a token about to be inserted by insertTokenWithEvent, which fills in its
 * id (entity_id and the snapshot's) and issued time.
 */
export function newTokenEvent(
  t: { principalId: number; name?: string | null; description?: string | null; expiresAt: Date; scope?: TokenScopeValue | null },
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
    renewed_from_token_id: null,
    revision: 1,
  };
  return {
    entityType: 'token',
    entityId: 0,
    entityName: row.name,
    action: 'created',
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
  const after: TokenRow = { ...before, revision: before.revision + 1 };
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
