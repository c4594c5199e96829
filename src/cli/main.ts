// The admin command line (bin/svc, `npx svc`): svc <command> [arguments]. Exit codes: 0 done,
// 1 the command failed, 2 it was called wrongly (the message says how).
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { ApiError } from '../domain/errors.ts';
import { EXIT_FAILURE, EXIT_USAGE, Failure, UsageError } from './errors.ts';
import type { Session } from './session.ts';
import type { Command } from './command.ts';

const COMMANDS: Record<string, () => Promise<Command>> = {
  migrate: async () => (await import('./commands/migrate.ts')).migrateCommand,
  status: async () => (await import('./commands/status.ts')).statusCommand,
  'reset-password': async () => (await import('./commands/reset-password.ts')).resetPasswordCommand,
  'create-token': async () => (await import('./commands/create-token.ts')).createTokenCommand,
  backup: async () => (await import('./commands/backup.ts')).backupCommand,
  restore: async () => (await import('./commands/restore.ts')).restoreCommand,
  import: async () => (await import('./commands/import.ts')).importCommand,
};

const OVERVIEW = `usage: svc <command> [arguments]

Commands:
  migrate [--check]                 apply pending migrations (--check: list them, exit 1 if any)
  status [--json]                   database, migrations, task queues, event fan-out and deliveries
  reset-password <user> [--identity-scope S] [--generate]
                                    set a user's password (stdin, a prompt, or generated) and revoke its tokens
  create-token <principal> [--identity-scope S] [--scope P|kind:id ...] [--lifetime-hours N]
               [--name TEXT] [--description TEXT]
                                    mint a token for a user or service account; printed once
  backup --out FILE [--without-history] [--include-entity-history] [--force]
                                    write a backup document (the backup task of the API)
  restore --in FILE [--yes]         replace ALL data with a backup document
  import FILE [--mode strict|best-effort] [--dry-run]
                                    run an import document (the import task of the API)

The database is SVC_DATABASE_URL, else the embedded PostgreSQL of SVC_DATA_DIR (a server already
running there is used as it is). \`svc <command> --help\` describes one command.
Exit codes: 0 done, 1 failed, 2 wrong usage.`;

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) {
    process.stderr.write(OVERVIEW + '\n');
    return EXIT_USAGE;
  }
  if (name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(OVERVIEW + '\n');
    return 0;
  }
  // own members only: `svc constructor` is an unknown command like any other
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) {
    process.stderr.write(`svc: unknown command ${JSON.stringify(name)}\n\n${OVERVIEW}\n`);
    return EXIT_USAGE;
  }
  const command = await load();
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(command.usage + '\n');
    return 0;
  }
  let parsed: unknown;
  try {
    parsed = command.parse(args);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`svc ${name}: ${err.message}\n${command.usage}\n`);
    return EXIT_USAGE;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`svc ${name}: configuration error: ${err.message}\n`);
    return EXIT_USAGE;
  }
  const { Session: SessionClass } = await import('./session.ts');
  const session: Session = new SessionClass(name, config);
  const interrupt = () => {
    // A half-done command rolls back with its transaction when the connection closes.
    process.stderr.write(`\nsvc ${name}: interrupted\n`);
    void session.close().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  try {
    return await command.run(session, parsed);
  } catch (err) {
    process.stderr.write(`svc ${name}: ${describe(err)}\n`);
    if (err instanceof UsageError) {
      process.stderr.write(command.usage + '\n');
      return EXIT_USAGE;
    }
    if (!(err instanceof Failure || err instanceof ApiError)) session.log.debug({ err }, 'command failed');
    return EXIT_FAILURE;
  } finally {
    await session.close();
  }
}

/** A failure for people: the message, and the details an API error carries. */
function describe(err: unknown): string {
  if (err instanceof ApiError) {
    const details = (err.details ?? []).slice(0, 10).map((d) => `\n  ${d.path}: ${d.message}`);
    return `${err.message}${details.join('')}`;
  }
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Nothing should stay open; if something does, it must not keep the command from ending.
    setTimeout(() => process.exit(code), 3000).unref();
  },
  (err: unknown) => {
    process.stderr.write(`svc: ${describe(err)}\n`);
    process.exitCode = EXIT_FAILURE;
  },
);
