import { resolve } from 'node:path';
import { parse } from '../args.ts';
import { command } from '../command.ts';
import { UsageError } from '../errors.ts';
import type { ImportArgs } from '../run/import.ts';

const MODES = { strict: 'strict', 'best-effort': 'best_effort' } as const;

export function importArgs(args: string[]): ImportArgs {
  const { values, positionals } = parse(
    args,
    { mode: { type: 'string' }, 'dry-run': { type: 'boolean' } },
    { min: 1, max: 1, names: 'the import FILE' },
  );
  const mode = values.mode;
  if (mode !== undefined && !(mode in MODES)) throw new UsageError(`--mode must be strict or best-effort (got ${JSON.stringify(mode)})`);
  return {
    file: resolve(positionals[0]!),
    atomicity: mode === undefined ? undefined : MODES[mode as keyof typeof MODES],
    dryRun: values['dry-run'] === true,
  };
}

export const importCommand = command({
  usage: `usage: svc import FILE [--mode strict|best-effort] [--dry-run]

Runs the import document FILE (the body of POST /api/v1/imports) as an import task: checked as
the API checks a submission, queued, and run here through the task runner with progress. Items
are authorized as the bootstrap administrator "admin", in whose name the task is submitted.
Exit 0 when the import succeeded, 1 when it failed or partially succeeded.
  --mode      overrides the document's mode.atomicity (strict: all or nothing; best-effort)
  --dry-run   do all the work and write nothing (results only)`,
  parse: importArgs,
  run: async (session, args) => (await import('../run/import.ts')).run(session, args),
});
