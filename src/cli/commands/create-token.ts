import type { TokenScopeValue } from '../../db/tokens.ts';
import { validateScopeShape } from '../../domain/scope.ts';
import { ApiError } from '../../domain/errors.ts';
import { parse, positiveInt } from '../args.ts';
import { command } from '../command.ts';
import { UsageError } from '../errors.ts';
import type { CreateTokenArgs } from '../run/create-token.ts';

const RESOURCE = /^(collection|class|object):(\d+)$/;

/** --scope values: permission names and kind:id resources, repeated or comma-separated. */
function scopeOf(values: string[]): TokenScopeValue | null {
  if (values.length === 0) return null;
  const permissions: string[] = [];
  const resources: { kind: string; id: number }[] = [];
  for (const part of values.flatMap((v) => v.split(',')).map((v) => v.trim())) {
    if (part === '') throw new UsageError('--scope has an empty entry');
    const m = RESOURCE.exec(part);
    if (m) resources.push({ kind: m[1]!, id: Number(m[2]) });
    else if (part.includes(':'))
      throw new UsageError(`--scope ${JSON.stringify(part)}: a resource is collection:ID, class:ID or object:ID`);
    else permissions.push(part);
  }
  const scope: { permissions?: string[]; resources?: { kind: string; id: number }[] } = {};
  if (permissions.length) scope.permissions = permissions;
  if (resources.length) scope.resources = resources;
  try {
    // The API's shape rules (names, duplicates, at most 1,000 resources).
    return validateScopeShape(scope);
  } catch (err) {
    if (err instanceof ApiError) throw new UsageError(`--scope: ${err.details?.[0]?.message ?? err.message}`);
    throw err;
  }
}

export function createTokenArgs(args: string[]): CreateTokenArgs {
  const { values, positionals } = parse(
    args,
    {
      'identity-scope': { type: 'string' },
      scope: { type: 'string', multiple: true },
      'lifetime-hours': { type: 'string' },
      name: { type: 'string' },
      description: { type: 'string' },
    },
    { min: 1, max: 1, names: 'the principal name' },
  );
  const principal = positionals[0]!;
  if (principal.trim() === '') throw new UsageError('the principal name is empty');
  const identityScope = values['identity-scope'] ?? 'local';
  if (identityScope.trim() === '') throw new UsageError('--identity-scope is empty');
  const lifetime = values['lifetime-hours'];
  return {
    principal,
    identityScope,
    scope: scopeOf(values.scope ?? []),
    // The upper bound comes from the configuration, checked when it is loaded.
    lifetimeHours: lifetime === undefined ? null : positiveInt('lifetime-hours', lifetime, Number.MAX_SAFE_INTEGER),
    name: values.name ?? null,
    description: values.description ?? null,
  };
}

export const createTokenCommand = command({
  usage: `usage: svc create-token <principal> [--identity-scope SCOPE] [--scope ENTRY]... [--lifetime-hours N]
                        [--name TEXT] [--description TEXT]

Mints a token for the user or service account <principal> (identity scope SCOPE, default local)
with the API's rules (no tokens for a disabled service account; scope names and resources must
exist; lifetime at most SVC_MAX_TOKEN_LIFETIME_HOURS) and prints it once on stdout. Records
token.created as the system actor.
  --scope ENTRY        a permission name (ReadObject, …) or a resource collection:ID, class:ID,
                       object:ID; repeat it or separate entries with commas; none = unscoped
  --lifetime-hours N   default SVC_TOKEN_LIFETIME_HOURS`,
  parse: createTokenArgs,
  run: async (session, args) => (await import('../run/create-token.ts')).run(session, args),
});
