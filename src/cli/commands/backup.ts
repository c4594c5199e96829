import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse } from '../args.ts';
import { command } from '../command.ts';
import { UsageError } from '../errors.ts';
import type { BackupArgs } from '../run/backup.ts';

export function backupArgs(args: string[]): BackupArgs {
  const { values } = parse(
    args,
    {
      out: { type: 'string' },
      'without-history': { type: 'boolean' },
      'include-entity-history': { type: 'boolean' },
      force: { type: 'boolean' },
    },
    { min: 0, max: 0, names: '' },
  );
  if (values.out === undefined || values.out === '') throw new UsageError('--out FILE is required');
  const out = resolve(values.out);
  if (existsSync(out) && values.force !== true) throw new UsageError(`${values.out} exists; pass --force to replace it`);
  return { out, includeHistory: values['without-history'] !== true, includeEntityHistory: values['include-entity-history'] === true };
}

export const backupCommand = command({
  usage: `usage: svc backup --out FILE [--without-history] [--include-entity-history] [--force]

Queues a backup task as POST /api/v1/backups does (same cap, refused while a restore is being
applied), runs it here through the task runner (a running service's worker may take it first;
then this command follows it) and writes the format 7 document to FILE (mode 0600).
Prints "<sha256>  FILE" on stdout.
  --without-history          leave out the event history (include_history false)
  --include-entity-history   add the entity versions section (include_entity_history true)
  --force                    replace FILE when it exists`,
  parse: backupArgs,
  run: async (session, args) => (await import('../run/backup.ts')).run(session, args),
});
