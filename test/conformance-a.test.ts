// Conformance tests (part a): rules of the interface specification's sections on resources,
// token and service-account states, conventions, authentication, meta/admin, identity and access
// management and search that no other test file pinned down. Each test names the operation and
// status it checks; fixtures come from the shared helpers.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import type { Deps } from '../src/deps.ts';
import { appendEvent } from '../src/db/events.ts';
import { SYSTEM_ACTOR } from '../src/domain/actor.ts';
import { migrate } from '../src/db/migrate.ts';
import { createSql } from '../src/db/sql.ts';
import { insertToken } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import { purgeTokens } from '../src/workers/token-purge.ts';
import { startTestApp, testConfig, uniq, type TestApp } from './helpers.ts';
import {
  addMember,
  adminGroupId,
  approve,
  createGroup,
  createHuman,
  createServiceAccount,
  scopedTokenFor,
  tokenFor,
  type Human,
} from './iam-fixtures.ts';

let t: TestApp;
let adminId: number;

beforeAll(async () => {
  // Trusting the test client as a proxy lets a test log in from an address of its own.
  t = await startTestApp({ SVC_TRUSTED_PROXIES: '127.0.0.1' });
  const [a] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
  adminId = a!.id;
});
afterAll(async () => {
  await t.close();
});

type Row = Record<string, unknown>;

async function ok(method: string, path: string, body?: unknown, token?: string): Promise<Row> {
  const res = await t.request(method, path, { body, token });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.body as Row;
}

async function newCollection(name = uniq('col')): Promise<number> {
  return (await ok('POST', '/api/v1/collections', { name })).id as number;
}

async function tokenIdOf(token: string): Promise<number> {
  return ((await ok('GET', '/api/v1/iam/me', undefined, token)).token as { id: number }).id;
}

/** A human straight in SQL (no credential approval needed), optionally in another identity scope. */
async function sqlHuman(name: string, opts: { scope?: string; email?: string | null; properName?: string | null } = {}): Promise<number> {
  const [p] = await t.deps.sql<{ id: number }[]>`
    insert into principals (kind, name, identity_scope) values ('human', ${name}, ${opts.scope ?? 'local'}) returning id`;
  await t.deps
    .sql`insert into users (principal_id, email, proper_name) values (${p!.id}, ${opts.email ?? null}, ${opts.properName ?? null})`;
  return p!.id;
}

// ---------------------------------------------------------------------------------------------
// Conventions: paging headers, If-Match lists

describe('conventions', () => {
  it('listGroups 200: limit defaults to 100 and clamps to 250; X-Total-Count unless include_total=false; no X-Next-Cursor on the last page; - sorts descending', async () => {
    const P = uniq('conv');
    for (const n of ['a', 'b', 'c']) await ok('POST', '/api/v1/iam/groups', { name: `${P}-${n}` });
    const list = (query: Record<string, string | number | boolean>) =>
      t.request('GET', '/api/v1/iam/groups', { query: { name__startswith: P, ...query } });

    const plain = await list({});
    expect(plain.status, plain.text).toBe(200);
    expect(plain.headers.get('x-page-limit')).toBe('100');
    expect(plain.headers.get('x-total-count')).toBe('3');
    expect(plain.headers.get('x-next-cursor')).toBeNull();
    expect((await list({ limit: 1000 })).headers.get('x-page-limit')).toBe('250');

    const first = await list({ limit: 2, sort: '-name' });
    expect((first.body as Row[]).map((g) => g.name)).toEqual([`${P}-c`, `${P}-b`]);
    expect(first.headers.get('x-page-limit')).toBe('2');
    expect(first.headers.get('x-total-count')).toBe('3');
    const cursor = first.headers.get('x-next-cursor');
    expect(cursor).toBeTruthy();
    const last = await list({ limit: 2, sort: '-name', cursor: cursor!, include_total: false });
    expect(last.status, last.text).toBe(200);
    expect((last.body as Row[]).map((g) => g.name)).toEqual([`${P}-a`]);
    expect(last.headers.get('x-next-cursor')).toBeNull();
    expect(last.headers.get('x-total-count')).toBeNull();
    expect(((await list({ sort: 'name.desc' })).body as Row[]).map((g) => g.name)).toEqual([`${P}-c`, `${P}-b`, `${P}-a`]);
    // a cursor is taken back unchanged with the same sort; another sort is 400
    expect((await list({ limit: 2, sort: 'name', cursor: cursor! })).status).toBe(400);
  });

  it('updateGroup: If-Match takes *, or a list of up to 8 strong tags (200 when one matches, 412 when none, 400 for 9)', async () => {
    const g = await createGroup(t);
    const tag = (rev: number) => `"svc-v1.group.${Buffer.from(String(g.id)).toString('base64url')}.${rev}"`;
    const patch = (ifMatch: string, description: string) =>
      t.request('PATCH', `/api/v1/iam/groups/${g.id}`, { body: { description }, headers: { 'if-match': ifMatch } });
    const listed = await patch(`${tag(7)}, ${tag(1)}, "other"`, 'one');
    expect(listed.status, listed.text).toBe(200);
    expect(listed.headers.get('etag')).toBe(tag(2));
    expect((await patch('*', 'two')).status).toBe(200);
    const stale = await patch(`${tag(1)}, ${tag(2)}`, 'three');
    expect(stale.status).toBe(412);
    expect(stale.headers.get('etag')).toBe(tag(3));
    const nine = Array.from({ length: 9 }, (_, i) => tag(i + 1)).join(', ');
    expect((await patch(nine, 'four')).status).toBe(400);
    const eight = Array.from({ length: 8 }, (_, i) => tag(i + 1)).join(', ');
    expect((await patch(eight, 'five')).status).toBe(200);
    expect((await ok('GET', `/api/v1/iam/groups/${g.id}`)).description).toBe('five');
  });
});

// ---------------------------------------------------------------------------------------------
// Principals and authorization

describe('principals and authorization', () => {
  it('createUser 201: a name is unique within its identity scope only (409 inside local), and login picks the scope', async () => {
    const name = uniq('twin');
    await sqlHuman(name, { scope: uniq('dir') });
    const body = { name, password: `pw-${uniq()}` };
    const approval = await approve(t, { kind: 'create_user', user: body });
    const created = await t.request('POST', '/api/v1/iam/users', { body, headers: { 'x-svc-credential-approval': approval } });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ name, identity_scope: 'local' });
    const again = await approve(t, { kind: 'create_user', user: body });
    const dup = await t.request('POST', '/api/v1/iam/users', { body, headers: { 'x-svc-credential-approval': again } });
    expect(dup.status).toBe(409);
    expect(typeof (await t.login(name, body.password, 'local'))).toBe('string');
  });

  it('getCollection 403 for a member of a group named like the admin group in another identity scope; 200 once in the real one', async () => {
    const c = await newCollection();
    const h = await createHuman(t);
    const [g] = await t.deps.sql<{ id: number }[]>`
      insert into groups (name, identity_scope) values (${t.deps.config.SVC_ADMIN_GROUPNAME}, ${uniq('dir')}) returning id`;
    await t.deps.sql`insert into group_members (group_id, principal_id) values (${g!.id}, ${h.id})`;
    expect((await t.request('GET', `/api/v1/collections/${c}`, { token: h.token })).status).toBe(403);
    expect((await t.request('GET', '/api/v1/iam/users', { token: h.token })).status).toBe(403);
    expect((await t.request('POST', '/api/v1/collections', { token: h.token, body: { name: uniq('top') } })).status).toBe(403);
    await addMember(t, await adminGroupId(t), h.id);
    expect((await t.request('GET', `/api/v1/collections/${c}`, { token: h.token })).status).toBe(200);
    expect((await t.request('GET', '/api/v1/iam/users', { token: h.token })).status).toBe(200);
  });

  it('getCollection 403 for a service account whose owner group holds the grant: owner_group_id grants nothing; 200 after joining the group', async () => {
    const c = await newCollection();
    const g = await createGroup(t);
    await ok('PUT', `/api/v1/collections/${c}/permissions/group/${g.id}`, ['ReadCollection']);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await t.request('GET', `/api/v1/collections/${c}`, { token: saToken })).status).toBe(403);
    const listed = await t.request('GET', '/api/v1/collections', { token: saToken, query: { id: c } });
    expect(listed.body).toEqual([]);
    await addMember(t, g.id, sa.id);
    expect((await t.request('GET', `/api/v1/collections/${c}`, { token: saToken })).status).toBe(200);
  });

  it('human/IAM family 403 for a scoped token even on the caller itself (scope gate before the self check); the unscoped token passes', async () => {
    const h = await createHuman(t);
    const ownTokenId = await tokenIdOf(h.token);
    const c = await newCollection();
    const scopes = [await scopedTokenFor(t, h.id), await tokenFor(t, h.id, { resources: [{ kind: 'collection', id: c }] })];
    const calls: [string, string, unknown?][] = [
      ['GET', `/api/v1/iam/users/${h.id}`],
      ['PATCH', `/api/v1/iam/users/${h.id}`, { proper_name: 'x' }],
      ['GET', `/api/v1/iam/principals/${h.id}/tokens`],
      ['POST', `/api/v1/iam/principals/${h.id}/tokens`, {}],
      ['GET', `/api/v1/iam/principals/${h.id}/tokens/${ownTokenId}`],
      ['POST', `/api/v1/iam/principals/${h.id}/tokens/${ownTokenId}/renew`, {}],
      ['POST', `/api/v1/iam/principals/${h.id}/tokens/${ownTokenId}/revoke`],
      ['GET', `/api/v1/iam/principals/${h.id}/groups`],
      ['GET', `/api/v1/iam/principals/${h.id}/permissions`],
      ['POST', `/api/v0/auth/logout/uid/${h.id}`],
      ['POST', '/api/v0/auth/logout_all'],
    ];
    for (const token of scopes) {
      for (const [method, path, body] of calls) {
        const res = await t.request(method, path, { token, body });
        expect(res.status, `${method} ${path}`).toBe(403);
      }
    }
    // nothing was revoked, and the same calls work unscoped
    expect((await t.request('GET', '/api/v0/auth/validate', { token: h.token })).status).toBe(200);
    for (const [method, path] of calls.filter(([m]) => m === 'GET')) {
      expect((await t.request(method, path, { token: h.token })).status, `${method} ${path}`).toBe(200);
    }
    // the scope-aware family still accepts the scoped tokens
    for (const token of scopes) expect((await t.request('GET', '/api/v0/auth/validate', { token })).status).toBe(200);
  });

  it('token management 403 for a service account in the admin group, on its own tokens and on anyone else', async () => {
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    await addMember(t, await adminGroupId(t), sa.id);
    const saToken = await tokenFor(t, sa.id);
    const saTokenId = await tokenIdOf(saToken);
    const h = await createHuman(t);
    const hTokenId = await tokenIdOf(h.token);
    for (const [pid, tid] of [
      [sa.id, saTokenId],
      [h.id, hTokenId],
    ] as const) {
      const base = `/api/v1/iam/principals/${pid}/tokens`;
      for (const [method, path] of [
        ['GET', base],
        ['POST', base],
        ['GET', `${base}/${tid}`],
        ['POST', `${base}/${tid}/renew`],
        ['POST', `${base}/${tid}/revoke`],
      ] as const) {
        const res = await t.request(method, path, { token: saToken, body: method === 'POST' ? {} : undefined });
        expect(res.status, `${method} ${path}`).toBe(403);
      }
    }
    expect((await t.request('GET', '/api/v0/auth/validate', { token: saToken })).status).toBe(200);
    expect((await t.request('GET', '/api/v0/auth/validate', { token: h.token })).status).toBe(200);
  });

  it('runtime-wide system operations 403 for a resource-scoped admin token; 200 for the unscoped admin', async () => {
    const c = await newCollection();
    const scoped = await tokenFor(t, adminId, { resources: [{ kind: 'collection', id: c }] });
    const reads = [
      '/api/v0/meta/db',
      '/api/v0/meta/tasks',
      '/api/v0/meta/login-rate-limit',
      '/api/v1/admin/config',
      '/api/v1/event-sinks',
      '/api/v1/system-event-subscriptions',
      '/api/v1/event-deliveries',
    ];
    for (const path of reads) {
      expect((await t.request('GET', path, { token: scoped })).status, path).toBe(403);
      expect((await t.request('GET', path)).status, path).toBe(200);
    }
    expect((await t.request('POST', '/api/v1/backups', { token: scoped, body: {} })).status).toBe(403);
    expect((await t.request('DELETE', '/api/v0/meta/login-rate-limit', { token: scoped })).status).toBe(403);
    // inside its boundary the same token works
    expect((await t.request('GET', `/api/v1/collections/${c}`, { token: scoped })).status).toBe(200);
  });

  it('createImport 403 for each identity, template and integration section by an ordinary principal; 202 for its collection-scoped import', async () => {
    const h = await createHuman(t);
    const g = await createGroup(t);
    await addMember(t, g.id, h.id);
    const c = await newCollection();
    await ok('PUT', `/api/v1/collections/${c}/permissions/group/${g.id}`, ['ReadCollection', 'CreateClass', 'ReadClass']);
    const colName = (await ok('GET', `/api/v1/collections/${c}`)).name as string;
    const base = { collections: [], classes: [], objects: [], class_relations: [], object_relations: [], collection_permissions: [] };
    const col = { ref: 'c', name: colName };
    const sections: Record<string, Row> = {
      groups: { groups: [{ name: uniq('g') }] },
      principals: {
        principals: [{ kind: 'service_account', name: uniq('sa'), owner_group_key: { name: g.name, identity_scope: 'local' } }],
      },
      group_memberships: {
        group_memberships: [
          { principal_key: { name: h.name, identity_scope: 'local' }, group_key: { name: g.name, identity_scope: 'local' } },
        ],
      },
      export_templates: { collections: [col], export_templates: [{ collection_ref: 'c', name: uniq('tpl'), template: 'x' }] },
      remote_targets: {
        collections: [col],
        remote_targets: [
          {
            collection_ref: 'c',
            name: uniq('rt'),
            description: 'd',
            method: 'post',
            url_template: 'https://hooks.example.com/',
            headers_template: {},
            body_template: '{}',
            allowed_subject_types: ['collection'],
          },
        ],
      },
      event_sinks: { event_sinks: [{ name: uniq('sink'), kind: 'webhook', config: {} }] },
      event_subscriptions: {
        collections: [col],
        event_subscriptions: [
          {
            collection_ref: 'c',
            sink_key: { name: uniq('sink') },
            name: uniq('sub'),
            entity_types: ['object'],
            actions: ['created'],
            routing: { url: 'https://hooks.example.com/' },
          },
        ],
      },
    };
    for (const [section, parts] of Object.entries(sections)) {
      const res = await t.request('POST', '/api/v1/imports', { token: h.token, body: { version: 2, graph: { ...base, ...parts } } });
      expect(res.status, `${section}: ${res.text}`).toBe(403);
      expect((res.body as { message: string }).message).toContain(section);
    }
    const allowed = await t.request('POST', '/api/v1/imports', {
      token: h.token,
      body: { version: 2, graph: { ...base, collections: [col], classes: [{ name: uniq('k'), collection_ref: 'c' }] } },
    });
    expect(allowed.status, allowed.text).toBe(202);
    const cancelled = await t.request('POST', `/api/v1/tasks/${(allowed.body as { id: number }).id}/cancel`, { token: h.token });
    expect(cancelled.status, cancelled.text).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// Tokens, login and their settings

describe('tokens and login', () => {
  it('listPrincipalTokens 200: a legacy row without expires_at is active for SVC_TOKEN_LIFETIME_HOURS after issue, then expired', async () => {
    const h = await createHuman(t);
    const fresh = await tokenFor(t, h.id);
    const stale = await tokenFor(t, h.id);
    const freshId = await tokenIdOf(fresh);
    const staleId = await tokenIdOf(stale);
    await t.deps.sql`update tokens set expires_at = null, issued = now() - interval '23 hours' where id = ${freshId}`;
    await t.deps.sql`update tokens set expires_at = null, issued = now() - interval '25 hours' where id = ${staleId}`;
    const base = `/api/v1/iam/principals/${h.id}/tokens`;
    const ids = async (state: string) =>
      ((await t.request('GET', base, { token: h.token, query: { state } })).body as { id: number }[]).map((r) => r.id);
    expect(await ids('active')).toContain(freshId);
    expect(await ids('active')).not.toContain(staleId);
    expect(await ids('expired')).toEqual([staleId]);
    const got = await t.request('GET', `${base}/${staleId}`, { token: h.token });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ expires_at: null, active: false, expired: true, revoked_at: null });
    expect((await t.request('GET', `${base}/${freshId}`, { token: h.token })).body).toMatchObject({
      expires_at: null,
      active: true,
      expired: false,
    });
    // the view and validation follow one rule
    expect((await t.request('GET', '/api/v0/auth/validate', { token: fresh })).status).toBe(200);
    expect((await t.request('GET', '/api/v0/auth/validate', { token: stale })).status).toBe(401);
  });

  it('login 200: only an HMAC-SHA-256 of the raw token is stored, and expires_at is issue + SVC_TOKEN_LIFETIME_HOURS', async () => {
    const h = await createHuman(t);
    const res = await t.request('POST', '/api/v0/auth/login', { token: null, body: { name: h.name, password: h.password } });
    expect(res.status).toBe(200);
    const { token, expires_at } = res.body as { token: string; expires_at: string };
    const id = await tokenIdOf(token);
    const [row] = await t.deps.sql<{ token_hash: Buffer; issued: Date; expires_at: Date; text: string }[]>`
      select token_hash, issued, expires_at, to_jsonb(k)::text as text from tokens k where id = ${id}`;
    expect(row!.token_hash.equals(hashToken(t.deps.tokenKey, token))).toBe(true);
    expect(row!.text).not.toContain(token);
    // issued carries microseconds, expires_at the millisecond it was computed at
    expect(Math.abs(row!.expires_at.getTime() - row!.issued.getTime() - t.deps.config.SVC_TOKEN_LIFETIME_HOURS * 3600_000)).toBeLessThan(
      1000,
    );
    expect(Date.parse(expires_at)).toBe(row!.expires_at.getTime());
    // the raw value is never shown again
    const listed = await t.request('GET', `/api/v1/iam/principals/${h.id}/tokens/${id}`, { token: h.token });
    expect(listed.text).not.toContain(token);
  });

  it('token created, renewed and revoked events never hold the raw token or its hash (purged: see the private database)', async () => {
    const h = await createHuman(t);
    const raw = await t.login(h.name, h.password);
    const id = await tokenIdOf(raw);
    const approval = await approve(t, { kind: 'renew_token', principal_id: h.id, token_id: id, token: {} }, h.token, h.password);
    const renewed = await t.request('POST', `/api/v1/iam/principals/${h.id}/tokens/${id}/renew`, {
      token: h.token,
      body: {},
      headers: { 'x-svc-credential-approval': approval },
    });
    expect(renewed.status, renewed.text).toBe(201);
    const renewedRaw = (renewed.body as { token: string }).token;
    const renewedId = await tokenIdOf(renewedRaw);
    expect((await t.request('POST', '/api/v0/auth/logout', { token: raw })).status).toBe(200);
    expect((await t.request('POST', `/api/v1/iam/principals/${h.id}/tokens/${renewedId}/revoke`, { token: h.token })).status).toBe(204);
    const events = await t.deps.sql<{ action: string; text: string }[]>`
      select action, to_jsonb(e)::text as text from events e
      where entity_type = 'token' and entity_id = any(${[id, renewedId]}::int[]) order by id`;
    expect(events.map((e) => e.action)).toEqual(['created', 'renewed', 'revoked', 'revoked']);
    for (const r of [raw, renewedRaw]) {
      const hash = hashToken(t.deps.tokenKey, r);
      for (const e of events) {
        expect(e.text, e.action).not.toContain(r);
        expect(e.text, e.action).not.toContain(hash.toString('hex'));
        expect(e.text, e.action).not.toContain(hash.toString('base64'));
        expect(e.text, e.action).not.toContain(hash.toString('base64url'));
      }
    }
  });

  it('createCredentialApproval 400 for a renewal expiry in the past or beyond SVC_MAX_TOKEN_LIFETIME_HOURS', async () => {
    const h = await createHuman(t);
    const id = await tokenIdOf(h.token);
    for (const expires_at of [new Date(Date.now() - 60_000).toISOString(), new Date(Date.now() + 8761 * 3600_000).toISOString()]) {
      const res = await t.request('POST', '/api/v1/iam/credential-approvals', {
        token: h.token,
        body: { password: h.password, operation: { kind: 'renew_token', principal_id: h.id, token_id: id, token: { expires_at } } },
      });
      expect(res.status, expires_at).toBe(400);
    }
    const inRange = new Date(Date.now() + 8759 * 3600_000).toISOString();
    const res = await t.request('POST', '/api/v1/iam/credential-approvals', {
      token: h.token,
      body: { password: h.password, operation: { kind: 'renew_token', principal_id: h.id, token_id: id, token: { expires_at: inRange } } },
    });
    expect(res.status, res.text).toBe(201);
  });

  it('login 400 for an identity_scope over 255 characters (255 is a normal 401)', async () => {
    const login = (identity_scope: string) =>
      t.request('POST', '/api/v0/auth/login', {
        token: null,
        body: { name: 'admin', password: 'wrong', identity_scope },
        headers: { 'x-forwarded-for': `10.77.${randomBytes(1)[0]}.${(randomBytes(1)[0]! % 250) + 1}` },
      });
    expect((await login('s'.repeat(256))).status).toBe(400);
    expect((await login('s'.repeat(255))).status).toBe(401);
  });

  it('getLoginRateLimitState 200: q is a case-insensitive substring; scope selects one kind of entry; include=all adds unlocked ones', async () => {
    const ip = `10.88.${randomBytes(1)[0]}.${(randomBytes(1)[0]! % 250) + 1}`;
    const name = uniq('Victim');
    for (let i = 0; i < 5; i++) {
      const res = await t.request('POST', '/api/v0/auth/login', {
        token: null,
        body: { name, password: 'wrong' },
        headers: { 'x-forwarded-for': ip },
      });
      expect(res.status).toBe(401);
    }
    type State = { entries: { scope: string; identifier: string; locked: boolean }[] };
    const state = async (query: Record<string, string>) => {
      const res = await t.request('GET', '/api/v0/meta/login-rate-limit', { query });
      expect(res.status, res.text).toBe(200);
      return (res.body as State).entries;
    };
    const locked = await state({ q: name.toUpperCase() });
    expect(locked.map((e) => [e.scope, e.identifier, e.locked])).toEqual([['user_ip', `${name}@${ip}`, true]]);
    expect(await state({ q: ip })).toHaveLength(1); // the address alone is tracked but not locked
    const all = await state({ q: ip, include: 'all' });
    expect(all.map((e) => e.scope).sort()).toEqual(['ip', 'user_ip']);
    expect((await state({ q: ip, include: 'all', scope: 'ip' })).map((e) => [e.scope, e.identifier, e.locked])).toEqual([
      ['ip', ip, false],
    ]);
    expect(await state({ q: ip, include: 'all', scope: 'subnet' })).toEqual([]);
  });

  it('token settings: defaults of the specification and the purge batch minimum of 10', () => {
    const cfg = loadConfig({});
    expect(cfg).toMatchObject({
      SVC_TOKEN_LIFETIME_HOURS: 24,
      SVC_MAX_TOKEN_LIFETIME_HOURS: 8760,
      SVC_TOKEN_RETENTION_DAYS: 30,
      SVC_TOKEN_RETENTION_PURGE_ENABLED: true,
      SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE: 1000,
      SVC_TOKEN_RETENTION_PURGE_INTERVAL_SECONDS: 3600,
      SVC_REMOTE_CALL_TIMEOUT_MS: 10000,
    });
    expect(loadConfig({ SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE: '10' }).SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE).toBe(10);
    expect(() => loadConfig({ SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE: '9' })).toThrow(/SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE/);
  });

  it('database statements are bounded by SVC_DB_STATEMENT_TIMEOUT_MS', async () => {
    const sql = createSql(inject('dbUrl'), { SVC_DB_POOL_MAX: 1, SVC_DB_STATEMENT_TIMEOUT_MS: 200, SVC_DB_POOL_ACQUIRE_TIMEOUT_MS: 1000 });
    try {
      const [row] = await sql<{ statement_timeout: string }[]>`show statement_timeout`;
      expect(row!.statement_timeout).toBe('200ms');
      await expect(sql`select pg_sleep(2)`).rejects.toMatchObject({ code: '57014' });
    } finally {
      await sql.end();
    }
  });

  it('getPublicConfig 200 reports the configured page limits', async () => {
    const res = await t.request('GET', '/api/v1/config', { token: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      authentication: { default_token_lifetime_hours: 24, max_token_lifetime_hours: 8760 },
      pagination: { default_page_limit: 100, max_page_limit: 250 },
    });
  });
});

describe('token purge in a database of its own', () => {
  // The purge deletes every eligible token of its database and a trigger here refuses events, so
  // this runs in a private database that no other test file can reach.
  let adminUrl: string;
  let dbName: string;
  let deps: Deps;

  beforeAll(async () => {
    const base = new URL(inject('dbUrl'));
    adminUrl = base.toString();
    dbName = `svc_conformance_a_${Date.now()}_${randomBytes(3).toString('hex')}`;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${dbName}`);
    await admin.end();
    base.pathname = `/${dbName}`;
    const config = testConfig();
    deps = { config, sql: createSql(base.toString(), config), log: pino({ level: 'silent' }), tokenKey: Buffer.alloc(32), services: {} };
    await migrate(deps.sql);
  });

  afterAll(async () => {
    await deps.sql.end();
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  });

  it('purgeTokens: when the token.purged event cannot be written, the deletion rolls back; the event holds the exact scope and no secret', async () => {
    const sql = deps.sql;
    const [p] = await sql<{ id: number }[]>`insert into principals (kind, name) values ('human', ${uniq('u')}) returning id`;
    await sql`insert into users (principal_id) values (${p!.id})`;
    const scope = { permissions: ['ReadClass'] };
    const raw = newRawToken();
    const hash = hashToken(deps.tokenKey, raw);
    const tok = await insertToken(sql, {
      principalId: p!.id,
      hash,
      expiresAt: new Date(Date.now() + 3600_000),
      scope,
    });
    await sql`update tokens set issued = now() - interval '90 days', revoked_at = now() - interval '60 days' where id = ${tok.id}`;
    await sql.unsafe(`
      create function refuse_purged() returns trigger language plpgsql as $$
      begin
        if new.action = 'purged' then raise exception 'event store refuses the write'; end if;
        return new;
      end $$;
      create trigger refuse_purged before insert on events for each row execute function refuse_purged();`);
    await expect(purgeTokens(deps)).rejects.toThrow(/refuses/);
    expect(await sql`select 1 from tokens where id = ${tok.id}`).toHaveLength(1);
    await sql.unsafe('drop trigger refuse_purged on events; drop function refuse_purged();');
    expect(await purgeTokens(deps)).toBe(1);
    expect(await sql`select 1 from tokens where id = ${tok.id}`).toHaveLength(0);
    const events = await sql<{ actor_kind: string; before: { scope: unknown }; text: string }[]>`
      select actor_kind, before, to_jsonb(e)::text as text from events e
      where entity_type = 'token' and entity_id = ${tok.id} and action = 'purged'`;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ actor_kind: 'system', before: { scope } });
    for (const secret of [raw, hash.toString('hex'), hash.toString('base64'), hash.toString('base64url')]) {
      expect(events[0]!.text).not.toContain(secret);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Settings

describe('settings', () => {
  const ME = '/api/v1/iam/me/settings';
  const patch = (h: Human, rawBody: string) =>
    t.request('PATCH', ME, { token: h.token, rawBody, contentType: 'application/json-patch+json' });

  it('patchMySettings: test compares objects recursively regardless of member order and numbers by value (200 no-op); arrays keep order (409)', async () => {
    const h = await createHuman(t);
    expect((await t.request('PUT', ME, { token: h.token, body: { o: { a: 1, b: { c: [1, 2] } }, n: 100, f: 1.5 } })).status).toBe(200);
    const same = await patch(
      h,
      '[{"op":"test","path":"/o","value":{"b":{"c":[1,2]},"a":1}},{"op":"test","path":"/n","value":1e2},{"op":"test","path":"/n","value":100.0},{"op":"test","path":"/f","value":15e-1}]',
    );
    expect(same.status, same.text).toBe(200);
    expect(same.body).toMatchObject({ revision: 2 });
    const order = await patch(h, '[{"op":"test","path":"/o/b/c","value":[2,1]}]');
    expect(order.status).toBe(409);
    const type = await patch(h, '[{"op":"test","path":"/n","value":"100"}]');
    expect(type.status).toBe(409);
    const extra = await patch(h, '[{"op":"test","path":"/o","value":{"a":1,"b":{"c":[1,2]},"d":null}}]');
    expect(extra.status).toBe(409);
  });

  it('getServiceAccount, listUsers and getUser 200 never carry the settings document', async () => {
    const h = await createHuman(t);
    await t.request('PUT', ME, { token: h.token, body: { marker: 'settings-marker' } });
    const g = await createGroup(t);
    const sa = await createServiceAccount(t, g.id);
    const saToken = await tokenFor(t, sa.id);
    expect((await t.request('PUT', ME, { token: saToken, body: { marker: 'settings-marker' } })).status).toBe(200);
    for (const [path, token] of [
      [`/api/v1/iam/service-accounts/${sa.id}`, undefined],
      [`/api/v1/iam/users/${h.id}`, undefined],
      ['/api/v1/iam/users', undefined],
      ['/api/v1/iam/service-accounts', undefined],
      ['/api/v1/iam/me', saToken],
    ] as const) {
      const res = await t.request('GET', path, { token, query: path.endsWith('users') || path.endsWith('accounts') ? { limit: 250 } : {} });
      expect(res.status, path).toBe(200);
      expect(res.text, path).not.toContain('settings-marker');
      expect(res.text, path).not.toContain('"settings"');
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Search

interface SearchBody {
  results: { kind: string; resource: Row }[];
  next: string | null;
  total: number | null;
}

const field = (f: string, operator: string, value?: unknown, path?: string) => ({
  op: 'field',
  predicate: { field: f, operator, ...(value === undefined ? {} : { value }), ...(path ? { path } : {}) },
});

function parseSse(text: string): { event: string; data: Row }[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      const event = lines.find((l) => l.startsWith('event: '))!.slice(7);
      const data = lines
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      return { event, data: JSON.parse(data) as Row };
    });
}

describe('search', () => {
  let S: string;
  const ids = {} as Record<'col' | 'server' | 'room' | 'srv' | 'room1' | 'ann' | 'bob' | 'cid' | 'group' | 'sa', number>;
  const search = (body: unknown, token?: string) => t.request('POST', '/api/v1/search', { body, token });
  async function names(body: unknown, token?: string): Promise<string[]> {
    const res = await search(body, token);
    expect(res.status, res.text).toBe(200);
    return (res.body as SearchBody).results.map((r) => (r.resource.name ?? r.resource.entity_name) as string);
  }

  beforeAll(async () => {
    S = uniq('cfa');
    ids.col = await newCollection(`${S}-col`);
    const cls = async (name: string) => {
      const [k] = await t.deps.sql<{ id: number }[]>`
        insert into classes (name, collection_id) values (${name}, ${ids.col}) returning id`;
      return k!.id;
    };
    const obj = async (name: string, classId: number, data: unknown) => {
      const [o] = await t.deps.sql<{ id: number }[]>`
        insert into objects (name, collection_id, class_id, json_data)
        values (${name}, ${ids.col}, ${classId}, ${t.deps.sql.json(data as never)}) returning id`;
      return o!.id;
    };
    ids.server = await cls(`${S}-Server`);
    ids.room = await cls(`${S}-Room`);
    ids.srv = await obj(`${S}-srv`, ids.server, { cpu: 4 });
    ids.room1 = await obj(`${S}-room1`, ids.room, { status: 'open' });
    const [cr] = await t.deps.sql<{ id: number }[]>`
      insert into class_relations (from_class_id, to_class_id) values (${ids.server}, ${ids.room}) returning id`;
    await t.deps
      .sql`insert into object_relations (class_relation_id, from_object_id, to_object_id) values (${cr!.id}, ${ids.srv}, ${ids.room1})`;
    ids.ann = await sqlHuman(`${S}-ann`, { email: 'ann@x.org', properName: 'Ann Lee' });
    ids.bob = await sqlHuman(`${S}-bob`, { email: null, properName: null });
    ids.cid = await sqlHuman(`${S}-cid`, { email: 'CID@X.ORG', properName: 'Cid' });
    ids.group = (await ok('POST', '/api/v1/iam/groups', { name: `${S}-group`, description: 'grp' })).id as number;
    ids.sa = (await createServiceAccount(t, ids.group, t.adminToken, `${S}-sa`)).id;
  });

  const objects = (filter: unknown) => ({ version: 1, target: { kind: 'object', class: { id: ids.server } }, filter });
  const related = (filters: unknown[]) => ({ op: 'related', predicate: { class: { id: ids.room }, filters } });
  const users = (filter: unknown) => ({
    version: 1,
    target: { kind: 'user' },
    filter: { op: 'and', args: [field('name', 'startswith', S), filter] },
  });

  it('searchStructured 400 for unknown members in and, or, not, field and related expressions, related predicates and class selectors', async () => {
    const leaf = field('id', 'gt', 0);
    const bodies = [
      { version: 1, target: { kind: 'collection' }, filter: { op: 'and', args: [leaf, leaf], x: 1 } },
      { version: 1, target: { kind: 'collection' }, filter: { op: 'or', args: [leaf, leaf], x: 1 } },
      { version: 1, target: { kind: 'collection' }, filter: { op: 'not', arg: leaf, args: [] } },
      { version: 1, target: { kind: 'collection' }, filter: { ...leaf, extra: true } },
      objects({ op: 'related', predicate: { class: { id: ids.room }, filters: [], x: 1 } }),
      objects({ op: 'related', predicate: { class: { id: ids.room } }, x: 1 }),
      objects({ op: 'related', predicate: { class: { id: ids.room, x: 1 } } }),
      { version: 1, target: { kind: 'object', class: { id: ids.server, x: 1 } } },
      { version: 1, target: { kind: 'collection' }, filter: { op: 'xor', args: [leaf, leaf] } },
    ];
    for (const body of bodies) {
      const res = await search(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect(await names(objects(related([])))).toEqual([`${S}-srv`]);
  });

  it('searchStructured 400 for more than 16 related filters, and related filters count toward the 32 field predicates', async () => {
    const f = (i: number) => ({ field: 'id', operator: 'gt', value: -i });
    const filters = (n: number) => Array.from({ length: n }, (_, i) => f(i));
    const preds = (n: number) => Array.from({ length: n }, (_, i) => field('id', 'gt', -i));
    expect(await names(objects(related(filters(16))))).toEqual([`${S}-srv`]);
    expect((await search(objects(related(filters(17))))).status).toBe(400);
    expect(await names(objects({ op: 'and', args: [...preds(16), related(filters(16))] }))).toEqual([`${S}-srv`]);
    const over = await search(objects({ op: 'and', args: [...preds(17), related(filters(16))] }));
    expect(over.status).toBe(400);
    expect((over.body as { message: string }).message).toMatch(/32 field predicates/);
  });

  it('searchStructured 400 for an empty value array, three between bounds, and fields that are not searchable (snapshots, settings, passwords)', async () => {
    const bodies = [
      { version: 1, target: { kind: 'collection' }, filter: field('id', 'in', []) },
      { version: 1, target: { kind: 'collection' }, filter: field('id', 'between', [1, 2, 3]) },
      { version: 1, target: { kind: 'audit_event' }, filter: field('before', 'equals', 'x', 'a') },
      { version: 1, target: { kind: 'audit_event' }, filter: field('after', 'equals', 'x', 'a') },
      users(field('settings', 'equals', 'x', 'a')),
      users(field('password', 'equals', 'x')),
      { version: 1, target: { kind: 'user' }, filter: field('description', 'equals', 'x') },
      { version: 1, target: { kind: 'collection' }, filter: field('id', 'gt', 1), sort: [{ field: 'id', direction: 'up' }] },
    ];
    for (const body of bodies) expect((await search(body)).status, JSON.stringify(body)).toBe(400);
  });

  it('searchStructured: sort fields per target (group and service_account restrict them, user sorts on every field)', async () => {
    const sorted = (kind: string, sortField: string) =>
      search({ version: 1, target: { kind }, filter: field('name', 'startswith', S), sort: [{ field: sortField }] });
    for (const f of ['identity_scope', 'managed_by', 'external_key', 'last_sync_attempted_at'])
      expect((await sorted('group', f)).status, f).toBe(400);
    for (const f of ['description', 'created_at', 'updated_at', 'revision', 'name', 'id'])
      expect((await sorted('group', f)).status, f).toBe(200);
    for (const f of ['description', 'owner_group_id', 'created_by', 'disabled_at'])
      expect((await sorted('service_account', f)).status, f).toBe(400);
    for (const f of ['identity_scope', 'name', 'revision']) expect((await sorted('service_account', f)).status, f).toBe(200);
    for (const f of ['id', 'name', 'identity_scope', 'proper_name', 'email', 'created_at', 'updated_at', 'revision'])
      expect((await sorted('user', f)).status, f).toBe(200);
    const byEmail = async (direction: string) =>
      names({ version: 1, target: { kind: 'user' }, filter: field('name', 'startswith', S), sort: [{ field: 'email', direction }] });
    const asc = await byEmail('asc');
    expect([...asc].sort()).toEqual([`${S}-ann`, `${S}-bob`, `${S}-cid`]);
    expect(await byEmail('desc')).toEqual([...asc].reverse());
  });

  it('searchStructured 200: text operators, and null columns never match a positive predicate while not() is their exact complement', async () => {
    expect(await names(users(field('email', 'contains', 'x.org')))).toEqual([`${S}-ann`]);
    expect(await names(users(field('email', 'icontains', 'x.org')))).toEqual([`${S}-ann`, `${S}-cid`]);
    expect(await names(users(field('email', 'equals', 'cid@x.org')))).toEqual([]);
    expect(await names(users(field('email', 'iequals', 'cid@x.org')))).toEqual([`${S}-cid`]);
    expect(await names(users(field('email', 'like', '%@x.org')))).toEqual([`${S}-ann`]);
    expect(await names(users(field('email', 'endswith', '.ORG')))).toEqual([`${S}-cid`]);
    expect(await names(users(field('email', 'iendswith', '.org')))).toEqual([`${S}-ann`, `${S}-cid`]);
    expect(await names(users(field('proper_name', 'istartswith', 'ann')))).toEqual([`${S}-ann`]);
    expect(await names(users(field('email', 'in', ['ann@x.org', 'nobody'])))).toEqual([`${S}-ann`]);
    expect(await names(users(field('email', 'regex', '.*')))).toEqual([`${S}-ann`, `${S}-cid`]);
    expect(await names(users(field('email', 'is_null')))).toEqual([`${S}-bob`]);
    expect(await names(users({ op: 'not', arg: field('email', 'is_null') }))).toEqual([`${S}-ann`, `${S}-cid`]);
    expect(await names(users({ op: 'not', arg: field('email', 'contains', 'x') }))).toEqual([`${S}-bob`, `${S}-cid`]);
    expect(await names(users({ op: 'not', arg: field('proper_name', 'regex', '.*') }))).toEqual([`${S}-bob`]);
    expect(await names(users(field('identity_scope', 'equals', 'local')))).toEqual([`${S}-ann`, `${S}-bob`, `${S}-cid`]);
  });

  it('searchStructured 200: network operators on JSON paths; unconvertible stored values never match', async () => {
    const ev = (name: string, metadata: Row) =>
      appendEvent(t.deps.sql, SYSTEM_ACTOR, {
        entityType: 'conformance_probe',
        entityId: null,
        entityName: `${S}-${name}`,
        action: 'probed',
        metadata,
      });
    await ev('net16', { net: '10.1.0.0/16', ip: '10.1.2.3' });
    await ev('v6', { net: '2001:db8::/32', ip: '2001:db8::1' });
    await ev('junk', { net: 'not-a-network', ip: 42 });
    const audit = (filter: unknown) => ({
      version: 1,
      target: { kind: 'audit_event' },
      filter: { op: 'and', args: [field('entity_name', 'startswith', S), field('entity_type', 'equals', 'conformance_probe'), filter] },
      sort: [{ field: 'id', direction: 'asc' }],
    });
    const n = (filter: unknown) => names(audit(filter));
    expect(await n(field('metadata', 'contains_network', '10.1.2.0/24', 'net'))).toEqual([`${S}-net16`]);
    expect(await n(field('metadata', 'overlaps_network', '10.0.0.0/8', 'net'))).toEqual([`${S}-net16`]);
    expect(await n(field('metadata', 'overlaps_network', '2001:db8:1::/48', 'net'))).toEqual([`${S}-v6`]);
    expect(await n(field('metadata', 'within_network', '2001:db8::/32', 'ip'))).toEqual([`${S}-v6`]);
    expect(await n(field('metadata', 'contains_ip', '10.1.255.255', 'net'))).toEqual([`${S}-net16`]);
    expect(await n(field('metadata', 'inet_equals', '10.1.2.3', 'ip'))).toEqual([`${S}-net16`]);
    expect(await n({ op: 'not', arg: field('metadata', 'within_network', '10.0.0.0/8', 'ip') })).toEqual([`${S}-v6`, `${S}-junk`]);
    expect(await n(field('metadata', 'overlaps_network', '0.0.0.0/0', 'missing'))).toEqual([]);
  });

  it('searchStructured 200: each result resource is the representation of its list endpoint; default order id ascending', async () => {
    const one = async (kind: string, id: number, extra: Row = {}) => {
      const res = await search({ version: 1, target: { kind, ...extra }, filter: field('id', 'equals', id) });
      expect(res.status, res.text).toBe(200);
      const { results } = res.body as SearchBody;
      expect(results).toHaveLength(1);
      expect(results[0]!.kind).toBe(kind);
      return results[0]!.resource;
    };
    const listed = async (path: string, id: number) => {
      const res = await t.request('GET', path, { query: { id } });
      expect(res.status, res.text).toBe(200);
      return (res.body as Row[])[0];
    };
    expect(await one('user', ids.ann)).toEqual(await listed('/api/v1/iam/users', ids.ann));
    expect(await one('group', ids.group)).toEqual(await listed('/api/v1/iam/groups', ids.group));
    expect(await one('service_account', ids.sa)).toEqual(await listed('/api/v1/iam/service-accounts', ids.sa));
    expect(await one('collection', ids.col)).toEqual(await listed('/api/v1/collections', ids.col));
    expect(await one('class', ids.server)).toEqual(await listed('/api/v1/classes', ids.server));
    expect(await one('object', ids.srv, { class: { id: ids.server } })).toEqual(
      await listed(`/api/v1/classes/${ids.server}/objects`, ids.srv),
    );

    const res = await search({ version: 1, target: { kind: 'user' }, filter: field('name', 'startswith', S) });
    expect(res.headers.get('x-page-limit')).toBe('100');
    expect(res.headers.get('x-total-count')).toBeNull();
    expect((res.body as SearchBody).total).toBeNull();
    expect((res.body as SearchBody).results.map((r) => r.resource.id)).toEqual([ids.ann, ids.bob, ids.cid]);
  });

  it('searchStructured 400: a cursor is bound to the resolved class, so a class selector by name that now names another class refuses it', async () => {
    const [a] = await t.deps.sql<{ id: number }[]>`
      insert into classes (name, collection_id) values (${`${S}-Swap`}, ${ids.col}) returning id`;
    for (const n of ['x1', 'x2']) {
      await t.deps.sql`insert into objects (name, collection_id, class_id, json_data) values (${`${S}-${n}`}, ${ids.col}, ${a!.id}, '{}')`;
    }
    const body = { version: 1, target: { kind: 'object', class: { name: `${S}-Swap` } }, limit: 1 };
    const first = await search(body);
    const next = (first.body as SearchBody).next;
    expect(next).toBeTruthy();
    expect((await search({ ...body, cursor: next })).status).toBe(200);
    await t.deps.sql`update classes set name = ${`${S}-Swapped`} where id = ${a!.id}`;
    await t.deps.sql`insert into classes (name, collection_id) values (${`${S}-Swap`}, ${ids.col})`;
    const reused = await search({ ...body, cursor: next });
    expect(reused.status, reused.text).toBe(400);
    expect((reused.body as { message: string }).message).toMatch(/cursor/);
  });

  it('searchStructured: a body of exactly 64 KiB is accepted, one byte more is 413', async () => {
    const base = JSON.stringify({ version: 1, target: { kind: 'collection' }, filter: field('name', 'equals', '') });
    const sized = (n: number) => base.replace('"value":""', `"value":"${'x'.repeat(n - base.length)}"`);
    expect(Buffer.byteLength(sized(65536))).toBe(65536);
    const exact = await t.request('POST', '/api/v1/search', { rawBody: sized(65536) });
    expect(exact.status, exact.text).toBe(200);
    expect((await t.request('POST', '/api/v1/search', { rawBody: sized(65537) })).status).toBe(413);
    expect((await t.request('POST', '/api/v1/search/stream', { rawBody: sized(65537) })).status).toBe(413);
  });

  it('searchPlainText 200 clamps limit_per_kind to 250', async () => {
    const res = await t.request('GET', '/api/v1/search', { query: { q: S, limit_per_kind: 1000 } });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('x-page-limit')).toBe('250');
  });

  it('searchPlainTextStream 200: an error event replaces done when a batch fails', async () => {
    // The objects batch cannot read its table (locked for the whole request) and times out. (A NUL
    // in q used to fail it in PostgreSQL; the HTTP boundary now refuses that with 400 up front.)
    const bounded = await startTestApp({ SVC_DB_STATEMENT_TIMEOUT_MS: 200 });
    let res!: Awaited<ReturnType<TestApp['request']>>;
    try {
      await t.deps.sql.begin(async (tx) => {
        await tx`lock table objects in access exclusive mode`;
        res = await bounded.request('GET', '/api/v1/search/stream', { query: { q: S, kinds: 'object' } });
      });
    } finally {
      await bounded.close();
    }
    expect(res.status, res.text).toBe(200);
    const events = parseSse(res.text);
    expect(events[0]!.event).toBe('started');
    expect(events.at(-1)!.event).toBe('error');
    expect(events.map((e) => e.event)).not.toContain('done');
    expect(typeof events.at(-1)!.data.message).toBe('string');
  });
});
