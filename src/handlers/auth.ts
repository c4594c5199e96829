import { pending } from './not-implemented.ts';
import type { HandlerMap } from '../http/contract.ts';
import { actorOf } from '../http/contract.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import { findLoginCandidate } from '../db/principals.ts';
import { insertToken, tokenSnapshot } from '../db/tokens.ts';
import { verifyPassword } from '../domain/passwords.ts';
import { hashToken, newRawToken } from '../domain/token-secret.ts';

const loginFailed = () => new ApiError(401, 'login failed: invalid credentials');

export const authHandlers = {
  login: async (input, ctx) => {
    const { name, password } = input.body;
    const scope = input.body.identity_scope ?? 'local';
    // Unicode characters, not UTF-16 units: checked before any lookup or password work.
    if ([...name].length > 255 || [...scope].length > 255 || [...password].length > 4096) {
      throw badRequest('name and identity_scope are limited to 255 characters and password to 4096');
    }
    const cfg = ctx.deps.config;
    const candidate = await findLoginCandidate(ctx.deps.sql, scope, name);
    const ok = await verifyPassword(candidate?.kind === 'human' ? candidate.password_hash : null, password);
    if (!candidate || candidate.kind !== 'human' || !ok) throw loginFailed();
    const raw = newRawToken();
    const expiresAt = new Date(Date.now() + cfg.SVC_TOKEN_LIFETIME_HOURS * 3600_000);
    const token = await withTx(ctx.deps.sql, async (tx) => {
      const t = await insertToken(tx, { principalId: candidate.id, hash: hashToken(ctx.deps.tokenKey, raw), name: 'login', expiresAt });
      await appendEvent(
        tx,
        { ...actorOf(ctx), principalId: candidate.id, principalName: candidate.name },
        {
          entityType: 'token',
          entityId: t.id,
          entityName: t.name,
          action: 'created',
          summary: 'token issued by password login',
          after: tokenSnapshot(t),
          afterRevision: t.revision,
          metadata: { principal_id: candidate.id, via: 'login' },
        },
      );
      return t;
    });
    return { status: 200, body: { token: raw, expires_at: token.expires_at }, headers: { 'cache-control': 'no-store' } };
  },

  validateToken: async () => ({ status: 200, body: { message: 'token is valid' } }),
  logout: pending('logout'),
  logoutToken: pending('logoutToken'),
  logoutUser: pending('logoutUser'),
  logoutAll: pending('logoutAll'),
  listAuthProviders: pending('listAuthProviders'),
} satisfies Partial<HandlerMap>;
