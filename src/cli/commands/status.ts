import { parse } from '../args.ts';
import { command } from '../command.ts';
import type { StatusArgs } from '../run/status.ts';

export function statusArgs(args: string[]): StatusArgs {
  const { values } = parse(args, { json: { type: 'boolean' } }, { min: 0, max: 0, names: '' });
  return { json: values.json === true };
}

export const statusCommand = command({
  usage: `usage: svc status [--json]

Shows whether the database is reachable, the migrations applied and pending, tasks by kind and
status, the event fan-out lag and the delivery backlog and dead deliveries by sink kind.
Exit 0 when the database is reachable and fully migrated, 1 otherwise.
  --json    one JSON document on stdout instead of text`,
  parse: statusArgs,
  run: async (session, args) => (await import('../run/status.ts')).run(session, args),
});
