// The outbound side of LDAP identity providers (ldapts): password checks by search-then-bind, the
// mapped groups of a user, and the members of a mapped group for the sync worker. Connections are
// always encrypted (ldaps:// or StartTLS). A directory that cannot be reached, times out or answers
// with an error is `unavailable` (503, reason identity_provider_unavailable); only a refused user
// bind is a wrong password. Passwords are never logged.
import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import { Client, InvalidCredentialsError, NoSuchObjectError, SizeLimitExceededError, escapeFilter, type Entry } from 'ldapts';
import type { Config } from '../config.ts';
import { ApiError } from '../domain/errors.ts';
import { resolveSecretAlias, type SecretNamespace } from '../sinks/secrets.ts';
import { MIN_TLS_VERSION, trustContext } from '../outbound/trust.ts';
import {
  membersAreNames,
  normalizeDn,
  type DirectoryGroupMembers,
  type DirectoryUser,
  type LdapGroupMapping,
  type LdapProvider,
} from '../domain/ldap.ts';

/** Where the service account passwords of LDAP providers resolve: SVC_LDAP_SECRET_<ALIAS> or ldap/<alias>. */
export const LDAP_SECRETS: SecretNamespace = { envPrefix: 'SVC_LDAP_SECRET_', fileDir: 'ldap' };

type SecretConfig = Pick<Config, 'SVC_SECRET_SOURCE' | 'SVC_SECRET_FILE_ROOT'>;

/** The 503 of a directory that is down or misbehaving; the cause goes to the log, not the client. */
export function directoryUnavailable(p: LdapProvider): ApiError {
  return new ApiError('unavailable', `the identity provider ${p.scope} is unavailable; try again later`, {
    reason: 'identity_provider_unavailable',
    retryAfterSeconds: 5,
  });
}

/** An error a directory operation failed with, as logged (never a password). */
export class DirectoryError extends Error {
  readonly provider: string;
  constructor(provider: LdapProvider, cause: unknown) {
    super(`identity provider ${provider.scope}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.provider = provider.scope;
  }
}

/** The connection's TLS options; the provider's CA file as one context shared by its connections (outbound/trust.ts). */
function tlsOptions(p: LdapProvider): ConnectionOptions {
  const host = new URL(p.url).hostname.replace(/^\[|\]$/g, '');
  const opts: ConnectionOptions = { host, minVersion: MIN_TLS_VERSION };
  if (isIP(host) === 0) opts.servername = host;
  const trusted = trustContext(p.caFile);
  if (trusted) opts.secureContext = trusted;
  return opts;
}

/**
 * A client of the provider's directory. ldapts connects with TLS from the start whenever it is
 * given TLS options, so a StartTLS provider gets them only for the upgrade (connect()).
 */
function newClient(p: LdapProvider): Client {
  const base = { url: p.url, timeout: p.timeoutMs, connectTimeout: p.timeoutMs, strictDN: false };
  return new Client(p.startTls ? base : Object.assign({}, base, { tlsOptions: tlsOptions(p) }));
}

/** Opens the connection: ldaps:// is TLS already; ldap:// is upgraded before anything is sent. */
async function connect(client: Client, p: LdapProvider): Promise<void> {
  if (p.startTls) await client.startTLS(tlsOptions(p));
}

function first(entry: Entry, attribute: string): string | null {
  const key = Object.keys(entry).find((k) => k.toLowerCase() === attribute.toLowerCase());
  const v = key === undefined ? undefined : entry[key];
  const one = Array.isArray(v) ? v[0] : v;
  if (one === undefined) return null;
  const s = Buffer.isBuffer(one) ? one.toString('utf8') : one;
  return s === '' ? null : s;
}

function all(entry: Entry, attribute: string): string[] {
  const key = Object.keys(entry).find((k) => k.toLowerCase() === attribute.toLowerCase());
  const v = key === undefined ? [] : entry[key];
  return (Array.isArray(v) ? v : v === undefined ? [] : [v]).map((x) => (Buffer.isBuffer(x) ? x.toString('utf8') : x));
}

/**
 * Runs fn on an encrypted connection, bound as the provider's service account (or anonymous).
 * Any failure but what fn itself decides is a DirectoryError; the whole session has a deadline.
 */
async function session<T>(cfg: SecretConfig, p: LdapProvider, fn: (client: Client) => Promise<T>): Promise<T> {
  let client: Client | undefined;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_ok, fail) => {
    timer = setTimeout(() => fail(new Error(`no answer within ${3 * p.timeoutMs} ms`)), 3 * p.timeoutMs);
  });
  const run = async (): Promise<T> => {
    client = newClient(p); // a CA file that cannot be read fails here, as the directory's error
    await connect(client, p);
    if (p.bindDn) {
      const secret = await resolveSecretAlias(cfg, LDAP_SECRETS, p.bindPasswordAlias ?? '');
      if (!secret.ok) throw new Error(`the secret alias ${p.bindPasswordAlias} of the bind password is not available`);
      await client.bind(p.bindDn, secret.value);
    }
    return fn(client);
  };
  try {
    return await Promise.race([run(), deadline]);
  } catch (err) {
    if (err instanceof ApiError || err instanceof DirectoryError) throw err;
    throw new DirectoryError(p, err);
  } finally {
    clearTimeout(timer);
    await client?.unbind().catch(() => undefined);
  }
}

/**
 * Checks a password by search-then-bind: null when no single user entry matches or the directory
 * refuses the bind (a wrong password), else the user and its mapped groups. An empty password is
 * never sent (an LDAP bind with one is an unauthenticated bind that succeeds).
 */
export async function authenticate(cfg: SecretConfig, p: LdapProvider, name: string, password: string): Promise<DirectoryUser | null> {
  if (name === '' || password === '') return null;
  return session(cfg, p, async (client) => {
    const attribute = p.loginAttribute;
    let entries;
    try {
      const found = await client.search(p.userBase, {
        scope: 'sub',
        filter: `(&${p.userFilter}(${attribute}=${escapeFilter`${name}`}))`,
        attributes: [attribute, p.emailAttribute, p.properNameAttribute],
        sizeLimit: 2,
      });
      entries = found.searchEntries;
    } catch (err) {
      // more than one entry answers to the name: ambiguous, so no one signs in with it
      if (err instanceof SizeLimitExceededError) return null;
      throw err;
    }
    if (entries.length !== 1) return null;
    const entry = entries[0]!;
    const user = newClient(p);
    try {
      await connect(user, p);
      await user.bind(entry.dn, password);
    } catch (err) {
      if (err instanceof InvalidCredentialsError) return null;
      throw err;
    } finally {
      await user.unbind().catch(() => undefined);
    }
    const storedName = first(entry, attribute) ?? name;
    const memberValue = membersAreNames(p) ? storedName : entry.dn;
    const groups = await client.search(p.groupBase, {
      scope: 'sub',
      filter: `(&${p.groupFilter}${memberFilter(p, memberValue)})`,
      attributes: ['1.1'],
    });
    const keys = new Set(groups.searchEntries.map((g) => normalizeDn(g.dn)));
    return {
      dn: entry.dn,
      name: storedName,
      email: first(entry, p.emailAttribute),
      properName: first(entry, p.properNameAttribute),
      groups: p.groups.filter((g) => keys.has(g.key)),
    };
  });
}

function memberFilter(p: LdapProvider, value: string): string {
  return `(${p.memberAttribute}=${escapeFilter`${value}`})`;
}

/** The direct members of a mapped group as the directory lists them now (an absent group has none). */
export async function groupMembers(cfg: SecretConfig, p: LdapProvider, g: LdapGroupMapping): Promise<DirectoryGroupMembers> {
  return session(cfg, p, async (client) => {
    let values: string[] = [];
    try {
      const found = await client.search(g.dn, { scope: 'base', filter: p.groupFilter, attributes: [p.memberAttribute] });
      const entry = found.searchEntries[0];
      if (entry) values = all(entry, p.memberAttribute);
    } catch (err) {
      if (!(err instanceof NoSuchObjectError)) throw err;
    }
    return membersAreNames(p) ? { dns: new Set(), names: new Set(values) } : { dns: new Set(values.map(normalizeDn)), names: new Set() };
  });
}

/**
 * Which of the given user DNs the directory still has as users (the entry exists and meets the
 * user filter, so an Active Directory filter excluding disabled accounts also drops those).
 * Returns the normalized DNs that are present.
 */
export async function presentUsers(cfg: SecretConfig, p: LdapProvider, dns: string[]): Promise<Set<string>> {
  return session(cfg, p, async (client) => {
    const present = new Set<string>();
    for (const dn of dns) {
      try {
        const found = await client.search(dn, { scope: 'base', filter: p.userFilter, attributes: ['1.1'] });
        if (found.searchEntries.length > 0) present.add(normalizeDn(dn));
      } catch (err) {
        if (!(err instanceof NoSuchObjectError)) throw err;
      }
    }
    return present;
  });
}
