import { resolve } from 'node:path';
import { parse } from '../args.ts';
import { command } from '../command.ts';
import { UsageError } from '../errors.ts';
import { interactive } from '../prompt.ts';
import type { RestoreArgs } from '../run/restore.ts';

export function restoreArgs(args: string[]): RestoreArgs {
  const { values } = parse(args, { in: { type: 'string' }, yes: { type: 'boolean' } }, { min: 0, max: 0, names: '' });
  if (values.in === undefined || values.in === '') throw new UsageError('--in FILE is required');
  const yes = values.yes === true;
  if (!yes && !interactive()) throw new UsageError('a restore replaces ALL data: pass --yes (there is no terminal to ask on)');
  return { file: resolve(values.in), yes };
}

export const restoreCommand = command({
  usage: `usage: svc restore --in FILE [--yes]

Replaces ALL data with the backup document FILE, through the API's restore: the document is
validated and staged (POST /api/v1/restores), then applied in one transaction (confirm); every
token is removed and admin keeps its password. Nothing changes when it fails.
  --yes   do not ask; without it the command asks on a terminal and refuses otherwise`,
  parse: restoreArgs,
  run: async (session, args) => (await import('../run/restore.ts')).run(session, args),
});
