import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { insertToken, type TokenScopeValue } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import {
  classWhere,
  collectionWhere,
  effectiveCollectionPermissions,
  hasCollectionPermission,
  objectWhere,
  permissionsFilter,
  requireClassPermission,
  requireCollectionPermission,
  requireObjectPermission,
  readGrantSets,
  readObjectByIdAs,
  visibleCollectionIds,
} from '../src/db/authz.ts';
import { ApiError } from '../src/domain/errors.ts';
import {
  PERMISSIONS,
  decide,
  parsePermissionList,
  requireRootAuthority,
  type Authority,
  type GrantSets,
  type Permission,
} from '../src/domain/authz.ts';

// Fixtures straight in SQL: this file tests the authorization module, not the IAM endpoints.
let t: TestApp;
let adminId: number;

async function group(perms: [number, Permission[]][] = []): Promise<number> {
  const [g] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
  for (const [cid, ps] of perms) {
    await t.deps.sql`insert into collection_permissions (collection_id, group_id, permission)
      select ${cid}, ${g!.id}, p from unnest(${ps}::text[]) p`;
  }
  return g!.id;
}

async function principal(groups: number[], kind: 'human' | 'service_account' = 'human'): Promise<number> {
  const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values (${kind}, ${uniq('p')}) returning id`;
  if (kind === 'human') await t.deps.sql`insert into users (principal_id) values (${p!.id})`;
  else await t.deps.sql`insert into service_accounts (principal_id, owner_group_id) values (${p!.id}, ${groups[0]!})`;
  for (const g of groups) await t.deps.sql`insert into group_members (group_id, principal_id) values (${g}, ${p!.id})`;
  return p!.id;
}

async function token(principalId: number, scope: TokenScopeValue | null = null): Promise<string> {
  const raw = newRawToken();
  await insertToken(t.deps.sql, { principalId, hash: hashToken(t.deps.tokenKey, raw), expiresAt: new Date(Date.now() + 3600_000), scope });
  return raw;
}

async function collection(parent: number | null = null): Promise<number> {
  const [c] = await t.deps.sql<{ id: number }[]>`
    insert into collections (name, parent_collection_id) values (${uniq('c')}, ${parent}) returning id`;
  return c!.id;
}

async function klass(collectionId: number): Promise<number> {
  const [k] = await t.deps.sql<{ id: number }[]>`
    insert into classes (name, collection_id) values (${uniq('k')}, ${collectionId}) returning id`;
  return k!.id;
}

async function object(classId: number, collectionId: number): Promise<number> {
  const [o] = await t.deps.sql<{ id: number }[]>`
    insert into objects (name, class_id, collection_id, json_data) values (${uniq('o')}, ${classId}, ${collectionId}, '{}') returning id`;
  return o!.id;
}

/** Each principal's grants (readGrantSets) while the tests run with grants known; null: read in SQL. */
let knownGrants: Map<number, GrantSets> | null = null;

function who(id: number, isAdmin = false, scope: TokenScopeValue | null = null): Authority {
  const grants = !isAdmin && knownGrants ? knownGrants.get(id) : undefined;
  return { principal: { id }, isAdmin, token: { scope }, ...(grants && { grants }) };
}

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (e) {
    if (e instanceof ApiError) return e.status;
    throw e;
  }
}

// The tree: root R > C > G, and an unrelated top-level O. Classes K, K2 in C; X of K, Y of K2 (both in C).
let R: number, C: number, G: number, O: number, K: number, K2: number, X: number, Y: number;
let member: number, noPerm: number, parentMember: number, serviceAccount: number;
const READ: Permission[] = ['ReadCollection', 'ReadClass', 'ReadObject'];

beforeAll(async () => {
  t = await startTestApp();
  const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
  adminId = admin!.id;
  R = await collection();
  C = await collection(R);
  G = await collection(C);
  O = await collection();
  K = await klass(C);
  K2 = await klass(C);
  X = await object(K, C);
  Y = await object(K2, C);
  const gMember = await group([[C, READ]]);
  const gNone = await group([[O, ['ReadCollection']]]);
  const gParent = await group([[R, ['ReadCollection', 'UpdateCollection']]]);
  member = await principal([gMember]);
  noPerm = await principal([gNone]);
  parentMember = await principal([gParent]);
  serviceAccount = await principal([gMember], 'service_account');
});
afterAll(async () => {
  await t.close();
});

// The point checks, scopes and list fragments, once with the grants read in SQL (a write, a
// worker, a process without its token cache) and once with them known as values (a read request
// with the token cache: Authority.grants); both must decide the same.
describe.each([
  ['grants read in SQL', false],
  ['grants known (Authority.grants)', true],
])('%s', (_mode, known) => {
  beforeAll(async () => {
    if (!known) return;
    knownGrants = new Map();
    for (const id of [member, noPerm, parentMember, serviceAccount, adminId]) knownGrants.set(id, (await readGrantSets(t.deps.sql, id))!);
  });
  afterAll(() => {
    knownGrants = null;
  });

  it('each caller is as the mode says', async () => {
    expect(who(member).grants !== undefined).toBe(known);
    // readGrantSets: every permission's collections down the tree, or null beyond `max` pairs
    const grants = (await readGrantSets(t.deps.sql, parentMember))!;
    expect(grants.get('ReadCollection')).toEqual([R, C, G].sort((a, b) => a - b));
    expect(grants.get('UpdateCollection')).toEqual([R, C, G].sort((a, b) => a - b));
    expect(grants.has('ReadObject')).toBe(false);
    expect(await readGrantSets(t.deps.sql, parentMember, 6)).not.toBeNull();
    expect(await readGrantSets(t.deps.sql, parentMember, 5)).toBeNull();
  });

  describe('point checks', () => {
    it('anonymous requests never reach authorization: getCollection 401', async () => {
      const res = await t.request('GET', `/api/v1/collections/${C}`, { token: null });
      expect(res.status).toBe(401);
    });

    it('an unscoped admin holds every permission on every collection', async () => {
      const admin = who(adminId, true);
      for (const p of PERMISSIONS) expect(await hasCollectionPermission(t.deps.sql, admin, G, p)).toBe(true);
      expect(await status(requireClassPermission(t.deps.sql, admin, K, 'DeleteClass'))).toBe(200);
      expect(await status(requireObjectPermission(t.deps.sql, admin, X, 'UpdateObject'))).toBe(200);
      expect(await effectiveCollectionPermissions(t.deps.sql, admin, C)).toEqual([...PERMISSIONS]);
    });

    it('404 for a missing resource before any permission decision, 403 when it exists', async () => {
      const nobody = who(noPerm);
      expect(await status(requireCollectionPermission(t.deps.sql, nobody, 2_000_000_000, 'ReadCollection'))).toBe(404);
      expect(await status(requireClassPermission(t.deps.sql, nobody, 2_000_000_000, 'ReadClass'))).toBe(404);
      expect(await status(requireObjectPermission(t.deps.sql, nobody, 2_000_000_000, 'ReadObject'))).toBe(404);
      expect(await status(requireCollectionPermission(t.deps.sql, nobody, C, 'ReadCollection'))).toBe(403);
      expect(await status(requireClassPermission(t.deps.sql, nobody, K, 'ReadClass'))).toBe(403);
      expect(await status(requireObjectPermission(t.deps.sql, nobody, X, 'ReadObject'))).toBe(403);
    });

    it('a member with the permission is allowed; with another permission only, forbidden', async () => {
      const m = who(member);
      expect(await status(requireCollectionPermission(t.deps.sql, m, C, 'ReadCollection'))).toBe(200);
      expect(await status(requireClassPermission(t.deps.sql, m, K, 'ReadClass'))).toBe(200);
      expect(await status(requireObjectPermission(t.deps.sql, m, X, 'ReadObject'))).toBe(200);
      expect(await status(requireCollectionPermission(t.deps.sql, m, C, 'UpdateCollection'))).toBe(403);
      expect(await status(requireClassPermission(t.deps.sql, m, K, 'DeleteClass'))).toBe(403);
      expect(await status(requireObjectPermission(t.deps.sql, m, X, 'UpdateObject'))).toBe(403);
      // The grant is on C: it covers C's descendants, never its ancestors or unrelated collections.
      expect(await status(requireCollectionPermission(t.deps.sql, m, G, 'ReadCollection'))).toBe(200);
      expect(await status(requireCollectionPermission(t.deps.sql, m, R, 'ReadCollection'))).toBe(403);
      expect(await status(requireCollectionPermission(t.deps.sql, m, O, 'ReadCollection'))).toBe(403);
      expect(await effectiveCollectionPermissions(t.deps.sql, m, G)).toEqual(READ);
    });

    it('a member of a parent collection group inherits the grant on every descendant', async () => {
      const p = who(parentMember);
      for (const cid of [R, C, G]) {
        expect(await status(requireCollectionPermission(t.deps.sql, p, cid, 'UpdateCollection'))).toBe(200);
      }
      expect(await status(requireCollectionPermission(t.deps.sql, p, O, 'ReadCollection'))).toBe(403);
      expect(await status(requireCollectionPermission(t.deps.sql, p, G, 'DeleteCollection'))).toBe(403);
    });

    it("getObject's point read (readObjectByIdAs) decides as requireObjectPermission", async () => {
      const read = (a: Authority, perm: Permission, classId = K) =>
        status(readObjectByIdAs(t.deps.sql, a, X, perm, classId, 'o.id, o.name'));
      expect(await read(who(member), 'ReadObject')).toBe(200);
      expect(await read(who(parentMember), 'ReadObject')).toBe(403);
      expect(await read(who(member), 'UpdateObject')).toBe(403);
      expect(await read(who(noPerm), 'ReadObject')).toBe(403);
      expect(await read(who(serviceAccount), 'ReadObject')).toBe(200);
      expect(await read(who(member, false, { resources: [{ kind: 'collection', id: O }] }), 'ReadObject')).toBe(403);
      expect(await read(who(member, false, { resources: [{ kind: 'object', id: X }] }), 'ReadObject')).toBe(200);
      expect(await read(who(member), 'ReadObject', K2)).toBe(404);
      expect(await read(who(adminId, true), 'DeleteObject')).toBe(200);
    });

    it('a service account gets exactly the authority of its groups', async () => {
      const s = who(serviceAccount);
      expect(await status(requireObjectPermission(t.deps.sql, s, X, 'ReadObject'))).toBe(200);
      expect(await status(requireObjectPermission(t.deps.sql, s, X, 'DeleteObject'))).toBe(403);
    });

    it('the tree functions are inlined into the statement that calls them (no function scan)', async () => {
      // migrations/0210: a STRICT set-returning SQL function is never inlined, and ran as a function
      // scan that planned its recursive body again at every execution of every point check.
      for (const fn of ['collection_ancestors', 'collection_descendants']) {
        const plan = (
          await t.deps.sql.unsafe(`explain select exists (select 1 from ${fn}(c.id) a) from collections c where c.id = $1`, [G])
        )
          .map((r) => String(r['QUERY PLAN']))
          .join('\n');
        expect(plan).toContain('Recursive Union');
        expect(plan).not.toContain('Function Scan');
      }
      // and give the same rows as before (a null id: none, as STRICT did)
      const up = await t.deps.sql<{ ancestor_id: number; depth: number }[]>`select * from collection_ancestors(${G}::int) order by depth`;
      expect(up.map((r) => [r.ancestor_id, r.depth])).toEqual([
        [G, 0],
        [C, 1],
        [R, 2],
      ]);
      const down = await t.deps.sql<
        { descendant_id: number }[]
      >`select descendant_id from collection_descendants(${R}::int) order by depth`;
      expect(down.map((r) => r.descendant_id)).toEqual([R, C, G]);
      expect(await t.deps.sql`select * from collection_ancestors(null)`).toHaveLength(0);
      expect(await t.deps.sql`select * from collection_descendants(null)`).toHaveLength(0);
    });

    it('requireObjectPermission 404 when the object is not of the route class', async () => {
      expect(await status(requireObjectPermission(t.deps.sql, who(adminId, true), X, 'ReadObject', { classId: K2 }))).toBe(404);
    });
  });

  describe('token scopes', () => {
    it('a token scoped to another collection is 403 on this one, even with grants', async () => {
      const scoped = who(member, false, { resources: [{ kind: 'collection', id: O }] });
      expect(await status(requireCollectionPermission(t.deps.sql, scoped, C, 'ReadCollection'))).toBe(403);
      expect(await status(requireObjectPermission(t.deps.sql, scoped, X, 'ReadObject'))).toBe(403);
      // and a scope is never a grant: O is in scope, but the member holds nothing there
      expect(await status(requireCollectionPermission(t.deps.sql, scoped, O, 'ReadCollection'))).toBe(403);
    });

    it('the permission dimension intersects the grants', async () => {
      const scoped = who(member, false, { permissions: ['ReadObject'] });
      expect(await status(requireObjectPermission(t.deps.sql, scoped, X, 'ReadObject'))).toBe(200);
      expect(await status(requireCollectionPermission(t.deps.sql, scoped, C, 'ReadCollection'))).toBe(403);
      expect(await effectiveCollectionPermissions(t.deps.sql, scoped, C)).toEqual(['ReadObject']);
    });

    it('a scoped admin cannot exceed the scope; inside it the admin rule applies', async () => {
      const scoped = who(adminId, true, { resources: [{ kind: 'collection', id: O }], permissions: ['ReadCollection'] });
      expect(await status(requireCollectionPermission(t.deps.sql, scoped, O, 'ReadCollection'))).toBe(200);
      expect(await status(requireCollectionPermission(t.deps.sql, scoped, O, 'UpdateCollection'))).toBe(403);
      expect(await status(requireCollectionPermission(t.deps.sql, scoped, C, 'ReadCollection'))).toBe(403);
      expect(() => requireRootAuthority(scoped)).toThrow(ApiError);
      expect(() => requireRootAuthority(who(adminId, true))).not.toThrow();
      expect(() => requireRootAuthority(who(adminId, true, { permissions: ['ReadCollection'] }))).toThrow(ApiError);
      expect(() => requireRootAuthority(who(member))).toThrow(ApiError);
    });

    it('collection, class and object entries cover what the specification says', async () => {
      const admin = (scope: TokenScopeValue) => who(adminId, true, scope);
      const byCollection = admin({ resources: [{ kind: 'collection', id: C }] });
      expect(await status(requireCollectionPermission(t.deps.sql, byCollection, C, 'ReadCollection'))).toBe(200);
      expect(await status(requireClassPermission(t.deps.sql, byCollection, K2, 'ReadClass'))).toBe(200);
      expect(await status(requireObjectPermission(t.deps.sql, byCollection, Y, 'ReadObject'))).toBe(200);
      expect(await status(requireCollectionPermission(t.deps.sql, byCollection, G, 'ReadCollection'))).toBe(403);

      const byClass = admin({ resources: [{ kind: 'class', id: K }] });
      expect(await status(requireClassPermission(t.deps.sql, byClass, K, 'ReadClass'))).toBe(200);
      expect(await status(requireObjectPermission(t.deps.sql, byClass, X, 'ReadObject'))).toBe(200);
      expect(await status(requireCollectionPermission(t.deps.sql, byClass, C, 'ReadCollection'))).toBe(403);
      expect(await status(requireClassPermission(t.deps.sql, byClass, K2, 'ReadClass'))).toBe(403);
      expect(await status(requireObjectPermission(t.deps.sql, byClass, Y, 'ReadObject'))).toBe(403);

      const byObject = admin({ resources: [{ kind: 'object', id: X }] });
      expect(await status(requireObjectPermission(t.deps.sql, byObject, X, 'ReadObject'))).toBe(200);
      expect(await status(requireClassPermission(t.deps.sql, byObject, K, 'ReadClass'))).toBe(403);
      expect(await status(requireObjectPermission(t.deps.sql, byObject, Y, 'ReadObject'))).toBe(403);
    });

    it('a dimension present but empty denies everything', () => {
      const empty = who(adminId, true, { permissions: [] });
      expect(decide(empty, 'ReadCollection', { kind: 'collection', id: C }, true)).toBe('scoped_out');
      const noResources = who(adminId, true, { resources: [] });
      expect(decide(noResources, 'ReadCollection', { kind: 'collection', id: C }, true)).toBe('scoped_out');
    });
  });

  describe('list visibility fragments', () => {
    async function ids(table: 'collections' | 'classes' | 'objects', where: ReturnType<typeof collectionWhere>): Promise<number[]> {
      const sql = t.deps.sql;
      const alias = { collections: 'c', classes: 'k', objects: 'o' }[table];
      // ids of different tables overlap: only this test's rows of this table are candidates
      const candidates = { collections: [R, C, G, O], classes: [K, K2], objects: [X, Y] }[table];
      const rows = await sql<{ id: number }[]>`
        select ${sql(alias + '.id')} as id from ${sql(table)} ${sql(alias)}
        where ${sql(alias + '.id')} = any(${candidates}::int[]) and ${where} order by 1`;
      return rows.map((r) => r.id);
    }

    it('collections: grants with inheritance, scope, admin', async () => {
      const sql = t.deps.sql;
      expect(await ids('collections', collectionWhere(sql, who(member), 'ReadCollection'))).toEqual([C, G]);
      expect(await ids('collections', collectionWhere(sql, who(parentMember), 'ReadCollection'))).toEqual([R, C, G]);
      expect(await ids('collections', collectionWhere(sql, who(noPerm), 'ReadCollection'))).toEqual([O]);
      expect(await ids('collections', collectionWhere(sql, who(adminId, true), 'ReadCollection'))).toEqual([R, C, G, O]);
      expect(
        await ids(
          'collections',
          collectionWhere(sql, who(adminId, true, { resources: [{ kind: 'collection', id: G }] }), 'ReadCollection'),
        ),
      ).toEqual([G]);
      expect(await ids('collections', collectionWhere(sql, who(member, false, { permissions: ['ReadObject'] }), 'ReadCollection'))).toEqual(
        [],
      );
      const viaSubquery = await sql<{ id: number }[]>`
        select id from collections where id in (${visibleCollectionIds(sql, who(member), 'ReadCollection')}) and id = any(${[R, C, G, O]}::int[])
        order by id`;
      expect(viaSubquery.map((r) => r.id)).toEqual([C, G]);
    });

    it('classes and objects follow their collections and the resource scope', async () => {
      const sql = t.deps.sql;
      expect(await ids('classes', classWhere(sql, who(member), 'ReadClass'))).toEqual([K, K2]);
      expect(await ids('classes', classWhere(sql, who(noPerm), 'ReadClass'))).toEqual([]);
      expect(await ids('objects', objectWhere(sql, who(serviceAccount), 'ReadObject'))).toEqual([X, Y]);
      const byClass = who(member, false, { resources: [{ kind: 'class', id: K }] });
      expect(await ids('classes', classWhere(sql, byClass, 'ReadClass'))).toEqual([K]);
      expect(await ids('objects', objectWhere(sql, byClass, 'ReadObject'))).toEqual([X]);
      const byObject = who(adminId, true, { resources: [{ kind: 'object', id: Y }] });
      expect(await ids('objects', objectWhere(sql, byObject, 'ReadObject'))).toEqual([Y]);
      expect(await ids('classes', classWhere(sql, byObject, 'ReadClass'))).toEqual([]);
    });

    it('permissionsFilter: one fragment per named permission; unknown names are 400', async () => {
      const sql = t.deps.sql;
      const m = who(parentMember);
      const frags = permissionsFilter('ReadCollection,UpdateCollection', (p) => collectionWhere(sql, m, p));
      expect(frags).toHaveLength(2);
      expect(permissionsFilter(undefined, (p) => collectionWhere(sql, m, p))).toEqual([]);
      expect(() => parsePermissionList('ReadCollection,Fly')).toThrow(ApiError);
      expect(() => parsePermissionList('')).toThrow(ApiError);
    });
  });
});

describe('through HTTP', () => {
  it('getCollection 200 for a member, 403 for a non-member, 403 for a token scoped elsewhere', async () => {
    expect((await t.request('GET', `/api/v1/collections/${C}`, { token: await token(member) })).status).toBe(200);
    expect((await t.request('GET', `/api/v1/collections/${C}`, { token: await token(noPerm) })).status).toBe(403);
    const elsewhere = await token(member, { resources: [{ kind: 'collection', id: O }] });
    expect((await t.request('GET', `/api/v1/collections/${C}`, { token: elsewhere })).status).toBe(403);
    const sa = await token(serviceAccount);
    expect((await t.request('GET', `/api/v1/collections/${G}`, { token: sa })).status).toBe(200);
  });
});
