// A command is split in two: commands/<name>.ts holds its usage and argument checks, run/<name>.ts
// its work, imported only when it runs (a usage error answers without loading the database and
// service modules; each start of the command line counts).
import type { Session } from './session.ts';

/** One command: its usage text, its argument check (UsageError: exit 2) and its run (the exit code). */
export interface Command<A = unknown> {
  usage: string;
  parse(args: string[]): A;
  run(session: Session, args: A): Promise<number>;
}

/** Declares a command with typed arguments. */
export function command<A>(c: Command<A>): Command {
  return c as Command;
}
