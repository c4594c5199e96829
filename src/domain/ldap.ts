// LDAP identity providers from SVC_LDAP_* settings: SVC_LDAP_PROVIDERS names the identity scopes
// (comma-separated); each scope <S> is configured by SVC_LDAP_<S>_* variables (S upper-cased, `-`
// as `_`). Pure parsing: a bad value throws naming the variable; config.ts reports it at start-up.

export interface LdapGroupMapping {
  /** The directory group's DN as configured. */
  dn: string;
  /** The DN compared case- and spacing-insensitively (see normalizeDn). */
  key: string;
  /** The name of the provider-managed group in the provider's identity scope. */
  group: string;
}

export interface LdapProvider {
  /** The identity scope (and provider name) users give at login. */
  scope: string;
  /** ldaps://host[:port] (TLS from the start) or ldap://host[:port] (always upgraded by StartTLS). */
  url: string;
  startTls: boolean;
  /** PEM file of extra CA certificates trusted for this directory (besides the system's). */
  caFile: string | undefined;
  /** Service account for searches and the group sync; unset = anonymous searches. */
  bindDn: string | undefined;
  /** Secret alias of the service account's password (SVC_LDAP_SECRET_<ALIAS> or ldap/<alias>). */
  bindPasswordAlias: string | undefined;
  userBase: string;
  /** Extra condition every user entry must meet, e.g. (objectClass=inetOrgPerson). */
  userFilter: string;
  /** The attribute holding the login name (uid, sAMAccountName); its stored value is the principal's name. */
  loginAttribute: string;
  emailAttribute: string;
  properNameAttribute: string;
  groupBase: string;
  groupFilter: string;
  /** Attribute of a group entry listing its members: DNs, or login names for memberUid. */
  memberAttribute: string;
  groups: LdapGroupMapping[];
  syncIntervalSeconds: number;
  timeoutMs: number;
}

export interface DirectoryUser {
  dn: string;
  /** The login attribute's stored value: the principal's name. */
  name: string;
  email: string | null;
  properName: string | null;
  /** The mapped groups the user is a direct member of. */
  groups: LdapGroupMapping[];
}

export interface DirectoryGroupMembers {
  /** Normalized member DNs (member, uniqueMember) … */
  dns: Set<string>;
  /** … or login names (memberUid). */
  names: Set<string>;
}

/** `managed_by` of the groups (and the owner of the principals) of a provider. */
export function managedBy(p: Pick<LdapProvider, 'scope'>): string {
  return `ldap:${p.scope}`;
}

/** Whether a member attribute holds login names (posixGroup memberUid) instead of DNs. */
export function membersAreNames(p: Pick<LdapProvider, 'memberAttribute'>): boolean {
  return p.memberAttribute.toLowerCase() === 'memberuid';
}

/** A DN for comparison: lower case, no spaces around the separators (escaped characters kept). */
export function normalizeDn(dn: string): string {
  return dn
    .trim()
    .replace(/\s*(?<!\\)([,=+])\s*/g, '$1')
    .toLowerCase();
}

const SCOPE = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const ATTRIBUTE = /^[A-Za-z][A-Za-z0-9-]*$/;
const ALIAS = /^[A-Za-z0-9_]{1,64}$/;

/** The variable prefix of a scope's settings: SVC_LDAP_<SCOPE>_. */
export function ldapPrefix(scope: string): string {
  return `SVC_LDAP_${scope.toUpperCase().replace(/-/g, '_')}_`;
}

export function parseLdapProviders(env: Record<string, string | undefined>): LdapProvider[] {
  const list = (env.SVC_LDAP_PROVIDERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const seen = new Set<string>();
  return list.map((scope) => {
    if (!SCOPE.test(scope) || scope === 'local') {
      throw new Error(`SVC_LDAP_PROVIDERS: "${scope}" must be lower-case letters, digits, - and _ (at most 63), and not local`);
    }
    const prefix = ldapPrefix(scope);
    if (seen.has(prefix)) throw new Error(`SVC_LDAP_PROVIDERS: "${scope}" is configured twice`);
    seen.add(prefix);
    return parseProvider(scope, prefix, env);
  });
}

function parseProvider(scope: string, prefix: string, env: Record<string, string | undefined>): LdapProvider {
  const get = (name: string): string | undefined => {
    const v = env[prefix + name]?.trim();
    return v === undefined || v === '' ? undefined : v;
  };
  const fail = (name: string, why: string): never => {
    throw new Error(`${prefix}${name} ${why}`);
  };
  const required = (name: string): string => get(name) ?? fail(name, 'is required');
  const filter = (name: string, fallback: string): string => {
    const v = get(name) ?? fallback;
    if (!/^\(.*\)$/s.test(v)) fail(name, `must be an LDAP filter in parentheses, got "${v}"`);
    return v;
  };
  const attribute = (name: string, fallback: string): string => {
    const v = get(name) ?? fallback;
    if (!ATTRIBUTE.test(v)) fail(name, `must be an attribute name, got "${v}"`);
    return v;
  };
  const int = (name: string, fallback: number, min: number): number => {
    const raw = get(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min) fail(name, `must be an integer >= ${min}, got "${raw}"`);
    return n;
  };

  const url = required('URL');
  const m = /^(ldaps?):\/\/(\[[^\]]+\]|[^:/?#]+)(:\d{1,5})?\/?$/i.exec(url);
  if (!m) fail('URL', `must be ldaps://host[:port] or ldap://host[:port] (StartTLS), got "${url}"`);
  const startTls = m![1]!.toLowerCase() === 'ldap';

  const bindDn = get('BIND_DN');
  const bindPasswordAlias = get('BIND_PASSWORD_ALIAS');
  if (bindPasswordAlias !== undefined && !ALIAS.test(bindPasswordAlias)) fail('BIND_PASSWORD_ALIAS', 'has only letters, digits and _');
  if (bindDn !== undefined && bindPasswordAlias === undefined) fail('BIND_PASSWORD_ALIAS', `is required with ${prefix}BIND_DN`);

  const groups: LdapGroupMapping[] = [];
  for (const entry of required('GROUP_MAP').split(';')) {
    if (entry.trim() === '') continue;
    const at = entry.indexOf('=>');
    const dn = at < 0 ? '' : entry.slice(0, at).trim();
    const group = at < 0 ? '' : entry.slice(at + 2).trim();
    if (dn === '' || !dn.includes('=') || group === '' || [...group].length > 255) {
      fail('GROUP_MAP', `entries are "<group DN>=><local group name>" separated by ";", got "${entry.trim()}"`);
    }
    const key = normalizeDn(dn);
    if (groups.some((g) => g.key === key || g.group === group)) fail('GROUP_MAP', `maps "${dn}" or "${group}" twice`);
    groups.push({ dn, key, group });
  }
  if (groups.length === 0) fail('GROUP_MAP', 'maps no group');

  return {
    scope,
    url,
    startTls,
    caFile: get('CA_FILE'),
    bindDn,
    bindPasswordAlias,
    userBase: required('USER_BASE'),
    userFilter: filter('USER_FILTER', '(objectClass=*)'),
    loginAttribute: attribute('LOGIN_ATTRIBUTE', 'uid'),
    emailAttribute: attribute('EMAIL_ATTRIBUTE', 'mail'),
    properNameAttribute: attribute('PROPER_NAME_ATTRIBUTE', 'cn'),
    groupBase: required('GROUP_BASE'),
    groupFilter: filter('GROUP_FILTER', '(objectClass=*)'),
    memberAttribute: attribute('GROUP_MEMBER_ATTRIBUTE', 'member'),
    groups,
    syncIntervalSeconds: int('SYNC_INTERVAL_SECONDS', 900, 10),
    timeoutMs: int('TIMEOUT_MS', 5000, 100),
  };
}
