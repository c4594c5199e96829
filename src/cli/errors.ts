// Exit codes of the command line: 0 done, 1 the command failed, 2 it was called wrongly.
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** The command line was used wrongly (unknown option, missing argument, bad value): exit 2. */
export class UsageError extends Error {}

/** The command ran and could not do its work: exit 1. */
export class Failure extends Error {}
