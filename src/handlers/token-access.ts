// Shared by the auth, tokens and credential-approvals handlers: minting and revoking as the
// request's actor (the write paths: src/mutations/tokens.ts).
import type { Ctx } from '../http/contract.ts';
import { actorOf } from '../http/contract.ts';
import type { TransactionSql } from '../db/sql.ts';
import { finalFor, type Final } from '../db/tx.ts';
import type { TokenRow } from '../domain/views/tokens.ts';
import { mintTokenAs, revokeTokenAs, type MintedToken, type TokenMint } from '../mutations/tokens.ts';

/**
 * Stores a new token and its `token.created` (or `token.renewed`) event; returns the raw value once.
 * As the transaction's last statement: COMMIT goes with it.
 */
export async function mintToken(
  tx: TransactionSql,
  ctx: Ctx,
  owner: { id: number; name: string },
  t: TokenMint,
): Promise<{ raw: string; row: MintedToken }> {
  return mintTokenAs(tx, ctx.deps.tokenKey, actorOf(ctx), owner, t, finalFor(ctx.deps.sql, tx));
}

/**
 * Soft-revokes a (locked) token and appends `token.revoked`; false when it was revoked already.
 * `final`: the transaction's last statement (COMMIT goes with it).
 */
export async function revokeWithEvent(tx: TransactionSql, ctx: Ctx, before: TokenRow, via: string, final?: Final): Promise<boolean> {
  return revokeTokenAs(tx, actorOf(ctx), before, via, final);
}
