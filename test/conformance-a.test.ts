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
import { appendEvent, SYSTEM_ACTOR } from '../src/db/events.ts';
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
  });
});
