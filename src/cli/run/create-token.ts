import { withTx } from '../../db/tx.ts';
import { principalByKey } from '../../db/imports.ts';
import { findTokenOwner, type TokenScopeValue } from '../../db/tokens.ts';
import { resolveExpiry } from '../../domain/token-lifetime.ts';
import { ApiError } from '../../domain/errors.ts';
import { assertMintable, mintTokenAs, validateScope } from '../../mutations/tokens.ts';
import { Failure, UsageError } from '../errors.ts';
import type { Session } from '../session.ts';

/** svc create-token's checked arguments. */
export interface CreateTokenArgs {
  principal: string;
  identityScope: string;
  scope: TokenScopeValue | null;
  lifetimeHours: number | null;
  name: string | null;
  description: string | null;
}

const HOUR_MS = 3600_000;

export async function run(session: Session, args: CreateTokenArgs): Promise<number> {
  const cfg = session.config;
  if (args.lifetimeHours !== null && args.lifetimeHours > cfg.SVC_MAX_TOKEN_LIFETIME_HOURS) {
    throw new UsageError(`--lifetime-hours may be at most ${cfg.SVC_MAX_TOKEN_LIFETIME_HOURS} (SVC_MAX_TOKEN_LIFETIME_HOURS)`);
  }
  const deps = await session.deps();
  const p = await principalByKey(deps.sql, args.principal, args.identityScope);
  if (!p)
    throw new Failure(
      `no user or service account ${JSON.stringify(args.principal)} in identity scope ${JSON.stringify(args.identityScope)}`,
    );
  const { raw, row, owner } = await withTx(deps.sql, async (tx) => {
    const owner = await findTokenOwner(tx, p.id, p.id, true);
    if (!owner) throw new Failure(`${JSON.stringify(args.principal)} was deleted meanwhile`);
    assertMintable(owner);
    let scope: TokenScopeValue | null;
    try {
      scope = await validateScope(tx, args.scope);
    } catch (err) {
      // A resource that does not exist: the argument is wrong.
      if (err instanceof ApiError && err.kind === 'bad_request')
        throw new UsageError(`--scope: ${err.details?.[0]?.message ?? err.message}`);
      throw err;
    }
    const now = new Date();
    const requested = args.lifetimeHours === null ? undefined : new Date(now.getTime() + args.lifetimeHours * HOUR_MS).toISOString();
    const expiresAt = resolveExpiry(requested, now, cfg.SVC_TOKEN_LIFETIME_HOURS, cfg.SVC_MAX_TOKEN_LIFETIME_HOURS);
    const minted = await mintTokenAs(tx, deps.tokenKey, session.actor(), owner, {
      name: args.name,
      description: args.description,
      expiresAt,
      scope,
    });
    return { raw: minted.raw, row: minted.row, owner };
  });
  const what = owner.kind === 'human' ? 'user' : 'service account';
  session.progress.note(
    `token ${row.id} for ${what} ${owner.name} (id ${owner.id}), ${row.scope ? 'scoped' : 'unscoped'}, expires ${row.expires_at?.toISOString()}`,
  );
  process.stdout.write(raw + '\n');
  return 0;
}
