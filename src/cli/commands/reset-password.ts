import { parse } from '../args.ts';
import { command } from '../command.ts';
import { UsageError } from '../errors.ts';
import type { ResetPasswordArgs } from '../run/reset-password.ts';

export function resetPasswordArgs(args: string[]): ResetPasswordArgs {
  const { values, positionals } = parse(
    args,
    { 'identity-scope': { type: 'string' }, generate: { type: 'boolean' } },
    { min: 1, max: 1, names: 'the user name' },
  );
  const user = positionals[0]!;
  const scope = values['identity-scope'] ?? 'local';
  if (user.trim() === '') throw new UsageError('the user name is empty');
  if (scope.trim() === '') throw new UsageError('--identity-scope is empty');
  return { user, scope, generate: values.generate === true };
}

export const resetPasswordCommand = command({
  usage: `usage: svc reset-password <user> [--identity-scope SCOPE] [--generate]

Sets the password of the human user <user> (identity scope SCOPE, default local) and revokes all
of its tokens. The new password is read from stdin when piped, asked for (twice, not echoed) on
a terminal, or with --generate made up and printed once on stdout. Writes the user.updated
(password_changed) and token.revoked audit events the API writes, as the system actor.`,
  parse: resetPasswordArgs,
  run: async (session, args) => (await import('../run/reset-password.ts')).run(session, args),
});
