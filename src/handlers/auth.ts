import type { HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { ApiError, badRequest, notFound } from '../domain/errors.ts';
import { isUnscopedAdmin } from '../domain/authz.ts';
import { requireHumanUnscoped, authorizeTokenOwner } from './gates.ts';
import { finalFor, withTx } from '../db/tx.ts';
import { findLoginCandidate } from '../db/principals.ts';
import { insertTokenWithEvent, lockToken, lockTokenByHash, lockUnrevokedTokens } from '../db/tokens.ts';
import { newTokenEvent } from '../mutations/tokens.ts';
import { verifyPassword } from '../domain/passwords.ts';
import { hashToken, newRawToken } from '../domain/token-secret.ts';
import { loginLimiter, underLoginLimit } from '../services/login-limiter.ts';
import { revokeWithEvent } from './token-access.ts';
import { authenticate, DirectoryError, directoryUnavailable } from '../identity/ldap.ts';
import type { DirectoryUser } from '../domain/ldap.ts';
import { signInDirectoryUser } from '../mutations/directory.ts';

const loginFailed = () => new ApiError('unauthorized', 'login failed: invalid credentials');

export const authHandlers = {
  login: async (input, ctx) => {
    const { name, password } = input.body;
    const scope = input.body.identity_scope ?? 'local';
    // Unicode characters, not UTF-16 units: checked before any rate-limit bookkeeping, lookup or password work.
    if ([...name].length > 255 || [...scope].length > 255 || [...password].length > 4096) {
      throw badRequest('name and identity_scope are limited to 255 characters and password to 4096');
    }
    const cfg = ctx.deps.config;
    const provider = cfg.ldapProviders.find((p) => p.scope === scope);
    let candidate: Awaited<ReturnType<typeof findLoginCandidate>>;
    let directoryUser = null as DirectoryUser | null;
    // Directories match names case-insensitively: Carol and carol are one account to the limiter.
    const limitKey = provider ? name.toLowerCase() : name;
    const ok = await underLoginLimit(loginLimiter(ctx.deps), limitKey, ctx.clientIp, async () => {
      if (provider) {
        try {
          directoryUser = await authenticate(cfg, provider, name, password);
        } catch (err) {
          if (!(err instanceof DirectoryError)) throw err;
          ctx.deps.log.warn({ err, identity_scope: scope }, 'identity provider unavailable at login');
          throw directoryUnavailable(provider);
        }
        return directoryUser !== null;
      }
      candidate = await findLoginCandidate(ctx.deps.sql, scope, name);
      const verified = await verifyPassword(candidate?.kind === 'human' ? candidate.password_hash : null, password);
      return verified && candidate?.kind === 'human';
    });
    if (!ok) throw loginFailed();
    const raw = newRawToken();
    const expiresAt = new Date(Date.now() + cfg.SVC_TOKEN_LIFETIME_HOURS * 3600_000);
    const token = await withTx(ctx.deps.sql, async (tx) => {
      const principal: { id: number; name: string } | undefined =
        provider && directoryUser ? await signInDirectoryUser(tx, actorOf(ctx), provider, directoryUser) : candidate;
      if (!principal) throw loginFailed();
      // the token and its event in one statement, with COMMIT
      const values = { principalId: principal.id, hash: hashToken(ctx.deps.tokenKey, raw), name: 'login', expiresAt };
      // as the new token's principal: onto actorOf's new object, not members after a spread (eslint.config.js)
      const t = await insertTokenWithEvent(
        tx,
        Object.assign(actorOf(ctx), { principalId: principal.id, principalName: principal.name }),
        values,
        newTokenEvent(values, 'token issued by password login', { principal_id: principal.id, via: 'login' }),
        finalFor(ctx.deps.sql, tx),
      );
      return t;
    });
    return { status: 200, body: { token: raw, expires_at: token.expires_at ?? expiresAt }, headers: { 'cache-control': 'no-store' } };
  },

  validateToken: async () => ({ status: 200, body: { message: 'token is valid' } }),

  logout: async (_input, ctx) => {
    const auth = authOf(ctx);
    await withTx(ctx.deps.sql, async (tx) => {
      const row = await lockToken(tx, auth.token.id, ctx.deps.config.SVC_TOKEN_LIFETIME_HOURS);
      if (row) await revokeWithEvent(tx, ctx, row, 'logout', finalFor(ctx.deps.sql, tx)); // COMMIT goes with it
    });
    return { status: 200, body: { message: 'logged out: the token is revoked' } };
  },

  logoutToken: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const raw = input.body.token;
    if (raw.length === 0 || raw.length > 512) throw notFound('token');
    await withTx(ctx.deps.sql, async (tx) => {
      const row = await lockTokenByHash(tx, hashToken(ctx.deps.tokenKey, raw), ctx.deps.config.SVC_TOKEN_LIFETIME_HOURS);
      // Another principal's token is "not found" for non-admins: the answer must not reveal it exists.
      if (!row || (row.principal_id !== auth.principal.id && !isUnscopedAdmin(auth))) throw notFound('token');
      await revokeWithEvent(tx, ctx, row, 'logout_token', finalFor(ctx.deps.sql, tx)); // COMMIT goes with it
    });
    return { status: 200, body: { message: 'the token is revoked' } };
  },

  logoutUser: async (input, ctx) => {
    const principalId = input.params.user_id;
    const n = await withTx(ctx.deps.sql, async (tx) => {
      const { owner } = await authorizeTokenOwner(ctx, tx, principalId, true);
      let count = 0;
      for (const row of await lockUnrevokedTokens(tx, owner.id)) if (await revokeWithEvent(tx, ctx, row, 'logout_user')) count++;
      return count;
    });
    return { status: 200, body: { message: `revoked ${n} token${n === 1 ? '' : 's'} of principal ${principalId}` } };
  },

  logoutAll: async (_input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    const n = await withTx(ctx.deps.sql, async (tx) => {
      let count = 0;
      for (const row of await lockUnrevokedTokens(tx, auth.principal.id)) if (await revokeWithEvent(tx, ctx, row, 'logout_all')) count++;
      return count;
    });
    return { status: 200, body: { message: `revoked ${n} token${n === 1 ? '' : 's'}` } };
  },

  // The built-in local scope and every configured directory (LDAP) scope accept password logins.
  listAuthProviders: async (_input, ctx) => ({
    status: 200,
    body: { providers: ['local', ...ctx.deps.config.ldapProviders.map((p) => p.scope)] },
  }),
} satisfies Partial<HandlerMap>;
