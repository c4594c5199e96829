import type { HandlerMap } from '../http/contract.ts';
import { badRequest, conflict, notFound } from '../domain/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { finalFor, withTx } from '../db/tx.ts';
import { reserveId } from '../db/events.ts';
import { consumeApproval } from '../db/approvals.ts';
import { TOKEN_LIST_SPEC, TOKEN_STATES, getTokenOfPrincipal, listTokensOfPrincipal, type TokenState } from '../db/tokens.ts';
import { checkExpiry, resolveExpiry } from '../domain/token-lifetime.ts';
import { mintToken, revokeWithEvent } from './token-access.ts';
import { tokenWire } from '../domain/views/tokens.ts';
import { assertMintable, validateScope, type MintedToken } from '../mutations/tokens.ts';
import { authorizeTokenOwner, presentedApproval } from './gates.ts';
import { flushTokenUses } from '../services/token-cache.ts';

/** The expiry a mint or renewal uses: the one resolved at approval, still in the future and within the maximum. */
function approvedExpiry(
  resolved: Date | null,
  requested: string | undefined,
  cfg: { SVC_TOKEN_LIFETIME_HOURS: number; SVC_MAX_TOKEN_LIFETIME_HOURS: number },
): Date {
  const now = new Date();
  if (!resolved) return resolveExpiry(requested, now, cfg.SVC_TOKEN_LIFETIME_HOURS, cfg.SVC_MAX_TOKEN_LIFETIME_HOURS);
  checkExpiry(resolved, now, cfg.SVC_MAX_TOKEN_LIFETIME_HOURS);
  return resolved;
}

/** The reply of a mint or renewal: the raw token, once, never cached. */
function minted(raw: string, row: MintedToken) {
  return {
    status: 201 as const,
    body: { token: raw, expires_at: row.expires_at },
    headers: {
      location: `/api/v1/iam/principals/${row.principal_id}/tokens/${row.id}`,
      'cache-control': 'no-store',
      ...etagHeader('token', row.id, row.revision),
    },
  };
}

export const tokensHandlers = {
  listPrincipalTokens: async (input, ctx) => {
    const db = ctx.deps.sql;
    const { owner } = await authorizeTokenOwner(ctx, db, input.params.principal_id);
    const parsed = parseListQuery(input.query, TOKEN_LIST_SPEC);
    const state = parsed.extras.state ?? 'active';
    if (!(TOKEN_STATES as readonly string[]).includes(state)) throw badRequest('state must be active, expired, revoked or all');
    const legacy = ctx.deps.config.SVC_TOKEN_LIFETIME_HOURS;
    await flushTokenUses(ctx.deps); // last_used_at shows this process's cached uses
    const page = await listTokensOfPrincipal(db, owner.id, state as TokenState, legacy, parsed);
    return listReply(page, page.rows.map(tokenWire));
  },

  createPrincipalToken: async (input, ctx) => {
    const cfg = ctx.deps.config;
    const body = input.body;
    const { raw, row } = await withTx(ctx.deps.sql, async (tx) => {
      // the owner's check and the approval's consumption go out together (one round trip); the
      // check decides first, and a refused request rolls the consumption back
      const authorized = authorizeTokenOwner(ctx, tx, input.params.principal_id, true);
      const consumed = consumeApproval(tx, presentedApproval(ctx, input.headers), {
        kind: 'create_token',
        principal_id: input.params.principal_id,
        token: body,
      });
      consumed.catch(() => undefined); // awaited below, after the check
      const { owner } = await authorized;
      const approval = await consumed;
      assertMintable(owner);
      const scope = await validateScope(tx, body.scope);
      const expiresAt = approvedExpiry(approval.token_expires_at, body.expires_at, cfg);
      return mintToken(tx, ctx, owner, { name: body.name ?? null, description: body.description ?? null, expiresAt, scope });
    });
    return minted(raw, row);
  },

  getPrincipalToken: async (input, ctx) => {
    const db = ctx.deps.sql;
    const { owner } = await authorizeTokenOwner(ctx, db, input.params.principal_id);
    await flushTokenUses(ctx.deps); // last_used_at shows this process's cached uses
    const token = await getTokenOfPrincipal(db, owner.id, input.params.token_id, ctx.deps.config.SVC_TOKEN_LIFETIME_HOURS);
    if (!token) throw notFound('token');
    return { status: 200, body: tokenWire(token), headers: etagHeader('token', token.id, token.revision) };
  },

  renewPrincipalToken: async (input, ctx) => {
    const cfg = ctx.deps.config;
    const body = (input.body ?? {}) as { expires_at?: string };
    const { raw, row } = await withTx(ctx.deps.sql, async (tx) => {
      // the owner's check, the token's lock, the approval's consumption and the new token's id go
      // out together (one round trip); they decide in that order, and a refused request rolls the
      // consumption back
      const { principal_id: principalId, token_id: tokenId } = input.params;
      const authorized = authorizeTokenOwner(ctx, tx, principalId, true);
      const locking = getTokenOfPrincipal(tx, principalId, tokenId, cfg.SVC_TOKEN_LIFETIME_HOURS, true);
      const consumed = consumeApproval(tx, presentedApproval(ctx, input.headers), {
        kind: 'renew_token',
        principal_id: principalId,
        token_id: tokenId,
        token: body,
      });
      const reserved = reserveId(tx, 'tokens');
      for (const p of [locking, consumed, reserved]) p.catch(() => undefined); // awaited below, after the check
      const { owner } = await authorized;
      const original = await locking;
      if (!original) throw notFound('token');
      const approval = await consumed;
      if (original.revoked_at) throw conflict('a revoked token cannot be renewed');
      assertMintable(owner);
      const expiresAt = approvedExpiry(approval.token_expires_at, body.expires_at, cfg);
      return mintToken(tx, ctx, owner, {
        name: original.name,
        description: original.description,
        expiresAt,
        scope: original.scope,
        renewedFrom: original.id,
        reserved,
      });
    });
    return minted(raw, row);
  },

  revokePrincipalToken: async (input, ctx) => {
    await withTx(ctx.deps.sql, async (tx) => {
      // the owner's check and the token's lock go out together (one round trip); the check decides first
      const { principal_id: principalId, token_id: tokenId } = input.params;
      const authorized = authorizeTokenOwner(ctx, tx, principalId, true);
      const locking = getTokenOfPrincipal(tx, principalId, tokenId, ctx.deps.config.SVC_TOKEN_LIFETIME_HOURS, true);
      locking.catch(() => undefined); // awaited below, after the check
      await authorized;
      const token = await locking;
      if (!token) throw notFound('token');
      checkIfMatch(input.headers, 'token', token.id, token.revision);
      await revokeWithEvent(tx, ctx, token, 'revoke', finalFor(ctx.deps.sql, tx)); // COMMIT goes with it
    });
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
