import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './errors.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/** node:util parseArgs in strict mode, its complaints turned into usage errors. */
export function parse<O extends Options>(args: string[], options: O, positionals: { min: number; max: number; names: string }) {
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    const msg = err instanceof Error ? err.message.split('. To specify a positional')[0]! : String(err);
    throw new UsageError(msg);
  }
  const n = parsed.positionals.length;
  if (n < positionals.min) throw new UsageError(`missing ${positionals.names}`);
  if (n > positionals.max) throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[positionals.max])}`);
  return parsed;
}

/** A positive integer option value, at most `max`. */
export function positiveInt(name: string, raw: string, max: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new UsageError(`--${name} must be a positive integer (got ${JSON.stringify(raw)})`);
  const n = Number(raw);
  if (n > max) throw new UsageError(`--${name} may be at most ${max} (got ${n})`);
  return n;
}
