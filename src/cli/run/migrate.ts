import { migrate, migrationStatus } from '../../db/migrate.ts';
import { EXIT_FAILURE } from '../errors.ts';
import type { Session } from '../session.ts';

/** svc migrate's checked arguments. */
export interface MigrateArgs {
  check: boolean;
}

export async function run(session: Session, args: MigrateArgs): Promise<number> {
  const sql = await session.db();
  if (args.check) {
    const { applied, pending } = await migrationStatus(sql);
    for (const name of pending) process.stdout.write(`pending ${name}\n`);
    process.stdout.write(`${applied.length} applied, ${pending.length} pending\n`);
    return pending.length ? EXIT_FAILURE : 0;
  }
  const done = await migrate(sql);
  for (const name of done) process.stdout.write(`applied ${name}\n`);
  const { applied } = await migrationStatus(sql);
  process.stdout.write(
    done.length
      ? `${done.length} applied now, ${applied.length} in all\n`
      : `nothing to apply: all ${applied.length} migrations are applied\n`,
  );
  return 0;
}
