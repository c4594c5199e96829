// Secret aliases resolve through the configured secret source, shared by remote targets and event
// sinks: with SVC_SECRET_SOURCE=env the alias <alias> maps to the variable <envPrefix><ALIAS_UPPERCASE>;
// with SVC_SECRET_SOURCE=file it is the file <SVC_SECRET_FILE_ROOT>/<fileDir>/<alias>, which holds
// only the value (one trailing newline is ignored). An unknown alias, an empty value or an
// unreadable file is "not available". Values are never logged.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config.ts';
import { SECRET_ALIAS } from '../domain/remote-targets.ts';

export type SecretLookup = { ok: true; value: string } | { ok: false };

export interface SecretNamespace {
  /** Environment variable prefix, e.g. SVC_EVENT_SINK_SECRET_. */
  envPrefix: string;
  /** Directory under SVC_SECRET_FILE_ROOT, e.g. event-sink. */
  fileDir: string;
}

export const EVENT_SINK_SECRETS: SecretNamespace = { envPrefix: 'SVC_EVENT_SINK_SECRET_', fileDir: 'event-sink' };
export const REMOTE_TARGET_SECRETS: SecretNamespace = { envPrefix: 'SVC_REMOTE_TARGET_SECRET_', fileDir: 'remote-target' };

export async function resolveSecretAlias(
  config: Pick<Config, 'SVC_SECRET_SOURCE' | 'SVC_SECRET_FILE_ROOT'>,
  ns: SecretNamespace,
  alias: string,
): Promise<SecretLookup> {
  if (!SECRET_ALIAS.test(alias)) return { ok: false };
  if (config.SVC_SECRET_SOURCE === 'file') {
    const root = config.SVC_SECRET_FILE_ROOT;
    if (!root) return { ok: false };
    try {
      const value = (await readFile(join(root, ns.fileDir, alias), 'utf8')).replace(/\r?\n$/, '');
      return value === '' ? { ok: false } : { ok: true, value };
    } catch {
      return { ok: false };
    }
  }
  const value = process.env[`${ns.envPrefix}${alias.toUpperCase()}`];
  return value === undefined || value === '' ? { ok: false } : { ok: true, value };
}

export function resolveEventSinkSecret(
  config: Pick<Config, 'SVC_SECRET_SOURCE' | 'SVC_SECRET_FILE_ROOT'>,
  alias: string,
): Promise<SecretLookup> {
  return resolveSecretAlias(config, EVENT_SINK_SECRETS, alias);
}
