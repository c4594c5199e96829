// Directory sign-in against a real OpenLDAP server (test/slapd.ts): an LDAP identity scope, its
// provider-managed users and groups, the group sync worker, the login limiter and a directory
// that is down. Every response is checked against openapi.yaml by the test app.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Attribute, Change, Client } from 'ldapts';
import { eventsOf, startTestApp, uniq, ADMIN_PASSWORD, type TestApp } from './helpers.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { grant } from './iam-fixtures.ts';
import { closedPort, startSlapd, type Slapd } from './slapd.ts';
import { ldapPrefix, parseLdapProviders } from '../src/domain/ldap.ts';
import { ldapSyncLoop, syncProviderGroups, syncProviderUsers } from '../src/workers/ldap-sync.ts';

const SUFFIX = 'dc=example,dc=org';
const PEOPLE = `ou=people,${SUFFIX}`;
const GROUPS = `ou=groups,${SUFFIX}`;
const SERVICE_DN = `cn=inventory,ou=services,${SUFFIX}`;
const dnOf = (uid: string) => `uid=${uid},${PEOPLE}`;

const person = (uid: string, cn: string, password: string) => `dn: ${dnOf(uid)}
objectClass: inetOrgPerson
uid: ${uid}
cn: ${cn}
sn: ${cn.split(' ').pop()}
mail: ${uid}@example.org
userPassword: ${password}
`;

const SEED = [
  `dn: ${SUFFIX}
objectClass: dcObject
objectClass: organization
o: Example
dc: example
`,
  ...['people', 'groups', 'services'].map((ou) => `dn: ou=${ou},${SUFFIX}\nobjectClass: organizationalUnit\nou: ${ou}\n`),
  `dn: ${SERVICE_DN}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: inventory
userPassword: inventory-service-password
`,
  person('alice', 'Alice Liddell', 'alice-directory-password'),
  person('carol', 'Carol Danvers', 'carol-directory-password'),
  person('dave', 'Dave Bowman', 'dave-directory-password'),
  `dn: cn=editors,${GROUPS}
objectClass: groupOfNames
cn: editors
member: ${dnOf('alice')}
member: ${dnOf('carol')}
member: ${dnOf('dave')}
`,
  `dn: cn=viewers,${GROUPS}
objectClass: groupOfNames
cn: viewers
member: ${dnOf('carol')}
`,
  `dn: cn=operators,${GROUPS}
objectClass: posixGroup
cn: operators
gidNumber: 5001
memberUid: alice
memberUid: carol
`,
].join('\n');

describe('LDAP identity provider (OpenLDAP slapd)', () => {
  let slapd: Slapd;
  let t: TestApp;
  const scope = uniq('dir');
  const downScope = uniq('down');
  const posixScope = uniq('posix');
  const noCaScope = uniq('noca');
  const alias = `ldaptest_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    slapd = await startSlapd(SUFFIX, SEED);
    process.env[`SVC_LDAP_SECRET_${alias.toUpperCase()}`] = 'inventory-service-password';
    const p = ldapPrefix(scope);
    const d = ldapPrefix(downScope);
    const x = ldapPrefix(posixScope);
    const n = ldapPrefix(noCaScope);
    const ldapProviders = parseLdapProviders({
      SVC_LDAP_PROVIDERS: `${scope},${downScope},${posixScope},${noCaScope}`,
      [`${p}URL`]: slapd.url, // ldap:// is always upgraded with StartTLS
      [`${p}CA_FILE`]: slapd.caFile,
      [`${p}BIND_DN`]: SERVICE_DN,
      [`${p}BIND_PASSWORD_ALIAS`]: alias,
      [`${p}USER_BASE`]: PEOPLE,
      [`${p}USER_FILTER`]: '(objectClass=inetOrgPerson)',
      [`${p}GROUP_BASE`]: GROUPS,
      [`${p}GROUP_FILTER`]: '(objectClass=groupOfNames)',
      [`${p}GROUP_MAP`]: `cn=editors,${GROUPS}=>editors; cn=viewers,${GROUPS}=>viewers`,
      [`${d}URL`]: `ldap://127.0.0.1:${await closedPort()}`,
      [`${d}TIMEOUT_MS`]: '2000',
      [`${d}USER_BASE`]: PEOPLE,
      [`${d}GROUP_BASE`]: GROUPS,
      [`${d}GROUP_MAP`]: `cn=editors,${GROUPS}=>editors`,
      // ldaps://, anonymous searches, posixGroup members by login name
      [`${x}URL`]: slapd.ldapsUrl,
      [`${x}CA_FILE`]: slapd.caFile,
      [`${x}USER_BASE`]: PEOPLE,
      [`${x}GROUP_BASE`]: GROUPS,
      [`${x}GROUP_FILTER`]: '(objectClass=posixGroup)',
      [`${x}GROUP_MEMBER_ATTRIBUTE`]: 'memberUid',
      [`${x}GROUP_MAP`]: `cn=operators,${GROUPS}=>operators`,
      // the directory is up, its CA file is not there
      [`${n}URL`]: slapd.ldapsUrl,
      [`${n}CA_FILE`]: `${slapd.caFile}.missing`,
      [`${n}USER_BASE`]: PEOPLE,
      [`${n}GROUP_BASE`]: GROUPS,
      [`${n}GROUP_MAP`]: `cn=operators,${GROUPS}=>operators`,
    });
    t = await startTestApp({ ldapProviders, SVC_TRUSTED_PROXIES: '127.0.0.1' });
  }, 300_000);

  afterAll(async () => {
    await t?.close();
    await slapd?.stop();
  });

  const login = (name: string, password: string, identityScope: string, ip = '203.0.113.7') =>
    t.request('POST', '/api/v0/auth/login', {
      token: null,
      body: { name, password, identity_scope: identityScope },
      headers: { 'x-forwarded-for': ip },
    });

  async function groupOf(name: string, inScope = scope) {
    const res = await t.request('GET', '/api/v1/iam/groups', { query: { identity_scope: inScope, name } });
    expect(res.status, res.text).toBe(200);
    const [g] = res.body as { id: number; name: string; managed_by: string | null; external_key: string | null }[];
    return g!;
  }

  async function syncGroups() {
    await ldapSyncLoop.tick(t.deps, new AbortController().signal);
  }

  it('listAuthProviders 200 lists local and every configured directory scope', async () => {
    const res = await t.request('GET', '/api/v0/auth/providers', { token: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ providers: ['local', scope, downScope, posixScope, noCaScope] });
  });

  it('login 200 as a directory user: provider-managed user, mapped groups, their permissions', async () => {
    const collection = await t.request('POST', '/api/v1/collections', { body: { name: uniq('dir-col') } });
    expect(collection.status, collection.text).toBe(201);
    const cid = (collection.body as { id: number }).id;

    const res = await login('alice', 'alice-directory-password', scope);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const token = (res.body as { token: string }).token;

    const me = await t.request('GET', '/api/v1/iam/me', { token });
    expect(me.status).toBe(200);
    const principal = (me.body as { principal: { id: number; name: string; identity_scope: string } }).principal;
    expect(principal).toMatchObject({ name: 'alice', identity_scope: scope });

    const user = await t.request('GET', `/api/v1/iam/users/${principal.id}`);
    expect(user.status).toBe(200);
    expect(user.body).toMatchObject({ email: 'alice@example.org', proper_name: 'Alice Liddell', identity_scope: scope });

    // alice is in editors only; the mapped groups exist in the scope, owned by the provider
    const editors = await groupOf('editors');
    expect(editors).toMatchObject({ managed_by: `ldap:${scope}`, external_key: `cn=editors,${GROUPS}` });
    const groups = await t.request('GET', `/api/v1/iam/principals/${principal.id}/groups`);
    expect(groups.status).toBe(200);
    expect((groups.body as { name: string }[]).map((g) => g.name)).toEqual(['editors']);

    const before = await t.request('GET', `/api/v1/collections/${cid}`, { token });
    expect(before.status).not.toBe(200);
    await grant(t, cid, editors.id, ['ReadCollection']);
    expect((await t.request('GET', `/api/v1/collections/${cid}`, { token })).status).toBe(200);

    // A second sign-in finds the same principal
    const again = await login('alice', 'alice-directory-password', scope);
    expect(again.status).toBe(200);
    const me2 = await t.request('GET', '/api/v1/iam/me', { token: (again.body as { token: string }).token });
    expect((me2.body as { principal: { id: number } }).principal.id).toBe(principal.id);
  });

  it('updateUser, deleteUser, updateGroup, deleteGroup, addGroupMember, removeGroupMember 403 on provider-managed identities', async () => {
    const res = await login('alice', 'alice-directory-password', scope);
    expect(res.status).toBe(200);
    const me = await t.request('GET', '/api/v1/iam/me', { token: (res.body as { token: string }).token });
    const aliceId = (me.body as { principal: { id: number } }).principal.id;
    const editors = await groupOf('editors');
    const adminMe = await t.request('GET', '/api/v1/iam/me');
    const adminId = (adminMe.body as { principal: { id: number } }).principal.id;

    const refused = [
      await t.request('PATCH', `/api/v1/iam/users/${aliceId}`, { body: { email: 'elsewhere@example.org' } }),
      await t.request('DELETE', `/api/v1/iam/users/${aliceId}`),
      await t.request('PATCH', `/api/v1/iam/groups/${editors.id}`, { body: { description: 'local change' } }),
      await t.request('DELETE', `/api/v1/iam/groups/${editors.id}`),
      await t.request('POST', `/api/v1/iam/groups/${editors.id}/members/${adminId}`),
      await t.request('DELETE', `/api/v1/iam/groups/${editors.id}/members/${aliceId}`),
    ];
    for (const r of refused) expect(r.status, r.text).toBe(403);
    expect((await t.request('GET', `/api/v1/iam/users/${aliceId}`)).body).toMatchObject({ email: 'alice@example.org' });
  });

  it('the group sync removes a membership the directory dropped: the user loses the access it gave', async () => {
    const collection = await t.request('POST', '/api/v1/collections', { body: { name: uniq('dir-col') } });
    const cid = (collection.body as { id: number }).id;
    const res = await login('carol', 'carol-directory-password', scope);
    expect(res.status, res.text).toBe(200);
    const token = (res.body as { token: string }).token;
    const group = await groupOf('viewers');
    await grant(t, cid, group.id, ['ReadCollection']);
    expect((await t.request('GET', `/api/v1/collections/${cid}`, { token })).status).toBe(200);

    // carol leaves viewers in the directory; her token still works until the sync runs
    const admin = new Client({ url: slapd.url });
    await admin.startTLS({ ca: [readFileSync(slapd.caFile)], host: '127.0.0.1' });
    await admin.bind(slapd.rootDn, slapd.rootPassword);
    await admin.modify(
      `cn=viewers,${GROUPS}`,
      new Change({ operation: 'replace', modification: new Attribute({ type: 'member', values: [slapd.rootDn] }) }),
    );
    await admin.unbind();

    await syncGroups();
    const synced = await t.request('GET', `/api/v1/iam/groups/${group.id}`);
    expect(synced.status).toBe(200);
    const row = synced.body as { last_sync_attempted_at: string | null; last_sync_success_at: string | null };
    expect(row.last_sync_attempted_at).not.toBeNull();
    expect(row.last_sync_success_at).not.toBeNull();
    const members = await t.request('GET', `/api/v1/iam/groups/${group.id}/members`);
    expect((members.body as { name: string }[]).map((m) => m.name)).not.toContain('carol');
    expect((await t.request('GET', `/api/v1/collections/${cid}`, { token })).status).not.toBe(200);

    // editors still lists carol: that membership stays
    const editors = await groupOf('editors');
    const editorMembers = await t.request('GET', `/api/v1/iam/groups/${editors.id}/members`);
    expect((editorMembers.body as { name: string }[]).map((m) => m.name)).toContain('carol');
  });

  it('login 401 for a wrong directory password, an unknown directory user and an empty password; failures count against the limiter (429)', async () => {
    const ip = '198.51.100.23';
    expect((await login('nobody', 'whatever', scope, ip)).status).toBe(401);
    expect((await login('alice', '', scope, '198.51.100.99')).status).toBe(401);
    for (let i = 0; i < 4; i++) {
      // the directory matches names case-insensitively, and so does the limiter for its scope
      const r = await login(i % 2 === 0 ? 'carol' : 'Carol', 'wrong-password', scope, ip);
      expect(r.status, r.text).toBe(401);
      expect(r.body).toMatchObject({ error: 'Unauthorized' });
    }
    const last = await login('carol', 'wrong-password', scope, ip);
    expect(last.status).toBe(401);
    const locked = await login('carol', 'carol-directory-password', scope, ip);
    expect(locked.status).toBe(429);
    expect(locked.body).toMatchObject({ reason: 'login_rate_limited' });
    // another address signs in, in any case: the principal's name is the directory's
    const other = await login('CAROL', 'carol-directory-password', scope, '198.51.100.24');
    expect(other.status).toBe(200);
    const me = await t.request('GET', '/api/v1/iam/me', { token: (other.body as { token: string }).token });
    expect((me.body as { principal: { name: string } }).principal.name).toBe('carol');
  });

  it('login 503 when the directory is down; local users still sign in', async () => {
    const res = await login('alice', 'alice-directory-password', downScope, '192.0.2.50');
    expect(res.status, res.text).toBe(503);
    expect(res.body).toMatchObject({ reason: 'identity_provider_unavailable' });
    expect(res.headers.get('retry-after')).toBe('5');
    const local = await login('admin', ADMIN_PASSWORD, 'local', '192.0.2.50');
    expect(local.status).toBe(200);
    // the failed directory attempts were not counted as wrong passwords
    for (let i = 0; i < 5; i++) expect((await login('alice', 'x', downScope, '192.0.2.51')).status).toBe(503);
  });

  it('login 503 when the CA file of the directory cannot be read', async () => {
    const res = await login('alice', 'alice-directory-password', noCaScope, '192.0.2.52');
    expect(res.status, res.text).toBe(503);
    expect(res.body).toMatchObject({ reason: 'identity_provider_unavailable' });
  });

  it('the group sync of a directory that is down records the attempt, not a success, and keeps memberships', async () => {
    const down = t.deps.config.ldapProviders.find((p) => p.scope === downScope)!;
    const results = await syncProviderGroups(t.deps, down, true);
    expect(results).toEqual([{ group: 'editors', ok: false, added: 0, removed: 0 }]);
    const res = await t.request('GET', '/api/v1/iam/groups', { query: { identity_scope: downScope } });
    const [g] = res.body as { last_sync_attempted_at: string | null; last_sync_success_at: string | null }[];
    expect(g!.last_sync_attempted_at).not.toBeNull();
    expect(g!.last_sync_success_at).toBeNull();
  });

  it('login 200 over ldaps:// with anonymous searches and posixGroup memberUid; audit events; the sync drops a removed memberUid', async () => {
    const res = await login('alice', 'alice-directory-password', posixScope, '192.0.2.80');
    expect(res.status, res.text).toBe(200);
    const me = await t.request('GET', '/api/v1/iam/me', { token: (res.body as { token: string }).token });
    const id = (me.body as { principal: { id: number; identity_scope: string } }).principal.id;
    const operators = await groupOf('operators', posixScope);
    expect(operators).toMatchObject({ managed_by: `ldap:${posixScope}`, external_key: `cn=operators,${GROUPS}` });

    const userEvents = await eventsOf(t, 'user', id);
    expect(userEvents.map((e) => e.action)).toEqual(['created']);
    expect(userEvents[0]!.metadata).toMatchObject({
      password_set: false,
      managed_by: `ldap:${posixScope}`,
      external_subject: dnOf('alice'),
    });
    const memberships = await eventsOf(t, 'group_membership', operators.id);
    expect(memberships.map((e) => [e.action, e.metadata.principal_id])).toEqual([['added', id]]);

    const admin = new Client({ url: slapd.url });
    await admin.startTLS({ ca: [readFileSync(slapd.caFile)], host: '127.0.0.1' });
    await admin.bind(slapd.rootDn, slapd.rootPassword);
    await admin.modify(
      `cn=operators,${GROUPS}`,
      new Change({ operation: 'delete', modification: new Attribute({ type: 'memberUid', values: ['alice'] }) }),
    );
    await admin.unbind();
    const posix = t.deps.config.ldapProviders.find((p) => p.scope === posixScope)!;
    expect(await syncProviderGroups(t.deps, posix, true)).toEqual([{ group: 'operators', ok: true, added: 0, removed: 1 }]);
    const groups = await t.request('GET', `/api/v1/iam/principals/${id}/groups`);
    expect(groups.body).toEqual([]);
    const after = await eventsOf(t, 'group_membership', operators.id);
    expect(after.map((e) => e.action)).toEqual(['added', 'removed']);
  });

  it('the user sync retires a user deleted in the directory: memberships removed, tokens revoked (401)', async () => {
    const res = await login('dave', 'dave-directory-password', scope, '192.0.2.90');
    expect(res.status, res.text).toBe(200);
    const token = (res.body as { token: string }).token;
    const me = await t.request('GET', '/api/v1/iam/me', { token });
    const id = (me.body as { principal: { id: number } }).principal.id;
    const provider = t.deps.config.ldapProviders.find((p) => p.scope === scope)!;

    // still in the directory: nothing happens
    expect(await syncProviderUsers(t.deps, provider, true)).toMatchObject({ ok: true, retired: [] });
    expect((await t.request('GET', '/api/v0/auth/validate', { token })).status).toBe(200);

    const admin = new Client({ url: slapd.url });
    await admin.startTLS({ ca: [readFileSync(slapd.caFile)], host: '127.0.0.1' });
    await admin.bind(slapd.rootDn, slapd.rootPassword);
    await admin.modify(
      `cn=editors,${GROUPS}`,
      new Change({ operation: 'delete', modification: new Attribute({ type: 'member', values: [dnOf('dave')] }) }),
    );
    await admin.del(dnOf('dave'));
    await admin.unbind();

    const result = await syncProviderUsers(t.deps, provider, true);
    expect(result.ok).toBe(true);
    expect(result.retired).toEqual(['dave']);
    expect((await t.request('GET', '/api/v0/auth/validate', { token })).status).toBe(401);
    const groups = await t.request('GET', `/api/v1/iam/principals/${id}/groups`);
    expect(groups.body).toEqual([]);
    // the principal itself is kept as it was (its only event is its creation)
    expect((await eventsOf(t, 'user', id)).map((e) => e.action)).toEqual(['created']);
    expect((await login('dave', 'dave-directory-password', scope, '192.0.2.90')).status).toBe(401);
  });
});

describe('SVC_LDAP_* settings', () => {
  const base = {
    SVC_LDAP_PROVIDERS: 'corp',
    SVC_LDAP_CORP_URL: 'ldaps://ldap.example.org',
    SVC_LDAP_CORP_USER_BASE: PEOPLE,
    SVC_LDAP_CORP_GROUP_BASE: GROUPS,
    SVC_LDAP_CORP_GROUP_MAP: `cn=editors,${GROUPS}=>editors`,
  };

  it('a bad or missing provider setting stops start-up naming the variable', () => {
    expect(loadConfig(base).ldapProviders.map((p) => [p.scope, p.startTls, p.loginAttribute])).toEqual([['corp', false, 'uid']]);
    expect(() => loadConfig({ ...base, SVC_LDAP_CORP_URL: undefined })).toThrow(/SVC_LDAP_CORP_URL is required/);
    expect(() => loadConfig({ ...base, SVC_LDAP_CORP_URL: 'http://ldap.example.org' })).toThrow(/SVC_LDAP_CORP_URL/);
    expect(() => loadConfig({ ...base, SVC_LDAP_CORP_GROUP_MAP: 'editors' })).toThrow(/SVC_LDAP_CORP_GROUP_MAP/);
    expect(() => loadConfig({ ...base, SVC_LDAP_CORP_BIND_DN: SERVICE_DN })).toThrow(/SVC_LDAP_CORP_BIND_PASSWORD_ALIAS/);
    expect(() => loadConfig({ ...base, SVC_LDAP_CORP_USER_FILTER: 'uid=x' })).toThrow(/SVC_LDAP_CORP_USER_FILTER/);
    expect(() => loadConfig({ ...base, SVC_LDAP_PROVIDERS: 'local' })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, SVC_LDAP_PROVIDERS: 'corp,corp' })).toThrow(/twice/);
  });
});
