import { parse } from '../args.ts';
import { command } from '../command.ts';
import type { MigrateArgs } from '../run/migrate.ts';

export function migrateArgs(args: string[]): MigrateArgs {
  const { values } = parse(args, { check: { type: 'boolean' } }, { min: 0, max: 0, names: '' });
  return { check: values.check === true };
}

export const migrateCommand = command({
  usage: `usage: svc migrate [--check]

Applies the pending migrations (under the same advisory lock as the service) and exits.
  --check   apply nothing: list the pending migrations; exit 1 when there are any, 0 when none`,
  parse: migrateArgs,
  run: async (session, args) => (await import('../run/migrate.ts')).run(session, args),
});
