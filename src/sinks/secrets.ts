// Secret aliases resolve through the configured secret source, shared by remote targets and event
// sinks: with SVC_SECRET_SOURCE=env the alias <alias> maps to the variable <envPrefix><ALIAS_UPPERCASE>;
// with SVC_SECRET_SOURCE=file it is the file <SVC_SECRET_FILE_ROOT>/<fileDir>/<alias>, which holds
// only the value (one trailing newline is ignored). An unknown alias, an empty value or an
// unreadable file is "not available". Values are never logged.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config.ts';
import { parseApprovedOrigins, SECRET_ALIAS } from '../domain/remote-targets.ts';

export type SecretLookup = { ok: true; value: string } | { ok: false };

export interface SecretNamespace {
  /** Environment variable prefix, e.g. SVC_EVENT_SINK_SECRET_. */
  envPrefix: string;
  /** Directory under SVC_SECRET_FILE_ROOT, e.g. event-sink. */
  fileDir: string;
  /**
   * Environment variable prefix of the origins approved for an alias (remote targets). A prefix of
   * its own, not a suffix of the secret's variable: no alias can name another alias's origin list.
   */
  originsEnvPrefix?: string;
}

export const EVENT_SINK_SECRETS: SecretNamespace = { envPrefix: 'SVC_EVENT_SINK_SECRET_', fileDir: 'event-sink' };
export const REMOTE_TARGET_SECRETS: SecretNamespace = {
  envPrefix: 'SVC_REMOTE_TARGET_SECRET_',
  fileDir: 'remote-target',
  originsEnvPrefix: 'SVC_REMOTE_TARGET_ORIGINS_',
};

/** The file beside a secret that lists the origins approved for it (one per line). */
export const ORIGINS_FILE_SUFFIX = '.origins';

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

/**
 * The origins an operator approved for a secret alias, configured beside its value: with
 * SVC_SECRET_SOURCE=env the variable <originsEnvPrefix><ALIAS_UPPERCASE> (comma-separated), with
 * SVC_SECRET_FILE_ROOT the file <fileDir>/<alias>.origins (one per line). `known` is false when
 * neither exists on this process (a secret with no approved origins is never sent).
 */
export async function approvedOrigins(
  config: Pick<Config, 'SVC_SECRET_SOURCE' | 'SVC_SECRET_FILE_ROOT'>,
  ns: SecretNamespace,
  alias: string,
): Promise<{ known: boolean; origins: string[] }> {
  const none = { known: false, origins: [] };
  if (!ns.originsEnvPrefix || !SECRET_ALIAS.test(alias)) return none;
  if (config.SVC_SECRET_SOURCE === 'file') {
    const root = config.SVC_SECRET_FILE_ROOT;
    if (!root) return none;
    try {
      return {
        known: true,
        origins: parseApprovedOrigins(await readFile(join(root, ns.fileDir, `${alias}${ORIGINS_FILE_SUFFIX}`), 'utf8')),
      };
    } catch {
      return none;
    }
  }
  const value = process.env[`${ns.originsEnvPrefix}${alias.toUpperCase()}`];
  return value === undefined ? none : { known: true, origins: parseApprovedOrigins(value) };
}

/** The origins approved for a remote-target secret alias. */
export function approvedRemoteTargetOrigins(
  config: Pick<Config, 'SVC_SECRET_SOURCE' | 'SVC_SECRET_FILE_ROOT'>,
  alias: string,
): Promise<{ known: boolean; origins: string[] }> {
  return approvedOrigins(config, REMOTE_TARGET_SECRETS, alias);
}
