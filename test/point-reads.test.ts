// A point read and its authorization are one statement (issue 14, item 3): the row is read with the
// grant test of its collection as a column (db/authz.ts readInCollectionAs, grantColumn), for an
// administrator, for a reader whose grants the token cache keeps (tested as values) and for one whose
// grants are read in SQL (an instance with the cache off). A refusal (403) and a missing row (404)
// are decided on the same statement. The audit routes of one entity check it in one statement beside
// their page. Which callers get which status is the authorization matrix's (authz-matrix.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listPoolOf } from '../src/db/sql.ts';
import { withProxiedApp } from './holding-proxy.ts';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { userWith } from './iam-fixtures.ts';
import { PERMISSIONS } from '../src/domain/authz.ts';
import { tokenCache } from '../src/services/token-cache.ts';

/** The test apps have their token cache off (test/helpers.ts); `cached` has it on. */
let plain: TestApp;
let cached: TestApp;
let reads: { path: string; perm: string }[];
let missing: string[];
let audits: string[];
let collection: number;

beforeAll(async () => {
  plain = await startTestApp();
  cached = await startTestApp({ SVC_TOKEN_CACHE_SIZE: 10000 });
  const ok = async (path: string, body: unknown) => {
    const res = await plain.request('POST', path, { body });
    expect(res.status, res.text).toBe(201);
    return res.body as { id: number };
  };
  collection = (await ok('/api/v1/collections', { name: uniq('pr') })).id;
  const kName = uniq('pr-k');
  const k = (await ok('/api/v1/classes', { name: kName, collection_id: collection })).id;
  const o1Name = uniq('pr-o');
  const o1 = (await ok(`/api/v1/classes/${k}/objects`, { name: o1Name, json_data: {} })).id;
  const o2 = (await ok(`/api/v1/classes/${k}/objects`, { name: uniq('pr-o'), json_data: {} })).id;
  const cr = (await ok('/api/v1/relations/classes', { from_class_id: k, to_class_id: k })).id;
  const or = (await ok('/api/v1/relations/objects', { class_relation_id: cr, from_object_id: o1, to_object_id: o2 })).id;
  const rt = (
    await ok('/api/v1/remote-targets', {
      collection_id: collection,
      name: uniq('pr-rt'),
      description: 'point reads',
      method: 'post',
      url_template: 'https://hooks.example.com/x',
      allowed_subject_types: ['collection'],
    })
  ).id;
  const [tpl] = await plain.deps.sql<{ id: number }[]>`
    insert into export_templates (collection_id, name, template) values (${collection}, ${uniq('pr-tpl')}, 'hello') returning id`;
  reads = [
    { path: `/api/v1/collections/${collection}`, perm: 'ReadCollection' },
    { path: `/api/v1/classes/${k}`, perm: 'ReadClass' },
    { path: `/api/v1/classes/by-name/${kName}`, perm: 'ReadClass' },
    { path: `/api/v1/classes/${k}/${o1}`, perm: 'ReadObject' },
    { path: `/api/v1/classes/by-name/${kName}/objects/by-name/${o1Name}`, perm: 'ReadObject' },
    { path: `/api/v1/relations/classes/${cr}`, perm: 'ReadClassRelation' },
    { path: `/api/v1/relations/objects/${or}`, perm: 'ReadObjectRelation' },
    { path: `/api/v1/remote-targets/${rt}`, perm: 'ReadRemoteTarget' },
    { path: `/api/v1/export-templates/${tpl!.id}`, perm: 'ReadTemplate' },
  ];
  missing = [
    '/api/v1/collections/2147483647',
    '/api/v1/classes/2147483647',
    `/api/v1/classes/by-name/${uniq('pr-none')}`,
    '/api/v1/relations/classes/2147483647',
    '/api/v1/relations/objects/2147483647',
    '/api/v1/remote-targets/2147483647',
    '/api/v1/export-templates/2147483647',
  ];
  audits = [
    `/api/v1/classes/${k}/events`,
    `/api/v1/classes/${k}/${o1}/events`,
    `/api/v1/remote-targets/${rt}/events`,
    `/api/v1/export-templates/${tpl!.id}/events`,
  ];
});
afterAll(async () => {
  await plain.close();
  await cached.close();
});

/**
 * The status of GET `path` and the statements its request ran (both pools of `t`), but for the
 * token's own (db/tokens.ts: with the cache off every request reads its token) and the token
 * cache's (the batched last_used_at write, the heartbeat NOTIFY of db/auth-changes.ts, and a
 * principal's grants, with its groups, read again when a change elsewhere, such as another
 * fixture's group, dropped them), and the driver's read of the array types on a connection it has
 * just opened.
 */
const background = (text: string) =>
  /\bupdate tokens\b/.test(text) ||
  /^\s*select (set_config\('synchronous_commit', 'off', true\), )?pg_notify\(/.test(text) ||
  text.includes('with recursive svc_granted (id, permission)') ||
  text.includes('select group_id from group_members where principal_id =') ||
  text.includes('from pg_catalog.pg_type a');

async function run(t: TestApp, token: string, path: string): Promise<{ status: number; body: unknown; statements: string[] }> {
  const pools = [t.deps.sql, listPoolOf(t.deps.sql)].flatMap((p) => (p ? [p.options as unknown as { debug: unknown }] : []));
  const statements: string[] = [];
  for (const o of pools)
    o.debug = (_c: number, text: string) => {
      if (!background(text)) statements.push(text);
    };
  try {
    const res = await t.request('GET', path, { token });
    return { status: res.status, body: res.body, statements };
  } finally {
    for (const o of pools) o.debug = false;
  }
}

/**
 * GET `path` twice (the token, and on `cached` the grants, are then known) and the second's
 * statements, with `kept`: whether the token cache kept the collection of the class `path` names by
 * id before the second (services/class-access.ts: a refusal is then decided without a statement).
 */
async function settled(t: TestApp, token: string, path: string) {
  await t.request('GET', path, { token });
  const classId = /^\/api\/v1\/classes\/(\d+)$/.exec(path)?.[1];
  const kept = classId !== undefined && tokenCache(t.deps).classCollection(Number(classId)) !== undefined;
  return { ...(await run(t, token, path)), kept };
}

describe.each([
  ['token cache off', () => plain],
  ['token cache on', () => cached],
])('point reads are one statement (%s)', (_mode, app) => {
  it('for an administrator, a reader holding the permission, one holding every other, and a missing row', async () => {
    const t = app();
    const everything = await userWith(plain, [[collection, [...PERMISSIONS]]]);
    for (const { path, perm } of reads) {
      const admin = await settled(t, t.adminToken, path);
      expect([path, admin.status, admin.statements.length], admin.statements.join('\n')).toEqual([path, 200, 1]);
      const reader = await userWith(plain, [[collection, [perm]]]);
      const granted = await settled(t, reader.token, path);
      expect([path, granted.status, granted.statements.length], granted.statements.join('\n')).toEqual([path, 200, 1]);
      const others = await userWith(plain, [[collection, PERMISSIONS.filter((p) => p !== perm)]]);
      const refused = await settled(t, others.token, path);
      const expected = refused.kept ? 0 : 1;
      expect([path, refused.status, refused.statements.length], refused.statements.join('\n')).toEqual([path, 403, expected]);
      const all = await settled(t, everything.token, path);
      expect([path, all.status, all.statements.length], all.statements.join('\n')).toEqual([path, 200, 1]);
    }
    for (const path of missing) {
      const none = await settled(t, everything.token, path);
      expect([path, none.status, none.statements.length], none.statements.join('\n')).toEqual([path, 404, 1]);
    }
  });

  it('an object named in an unknown class: 404 for the class (a second statement tells which name is unknown)', async () => {
    const t = app();
    const res = await t.request('GET', `/api/v1/classes/by-name/${uniq('pr-none')}/objects/by-name/${uniq('pr-none')}`);
    expect([res.status, (res.body as { message: string }).message]).toEqual([404, 'class not found']);
    const known = reads.find((r) => r.path.includes('/objects/by-name/'))!.path.replace(/[^/]+$/, uniq('pr-none'));
    const unknownObject = await t.request('GET', known);
    expect([unknownObject.status, (unknownObject.body as { message: string }).message]).toEqual([404, 'object not found']);
  });

  it("the audit routes of one entity check it in one statement beside the page's", async () => {
    const t = app();
    const auditor = await userWith(plain, [[collection, ['ReadAudit']]]);
    const others = await userWith(plain, [[collection, PERMISSIONS.filter((p) => p !== 'ReadAudit')]]);
    // beside the page (and its count, and with the cache off a non-administrator's ReadAudit
    // collections, which the page's visibility reads: db/audit.ts listEventRows); a refused caller's
    // page, read beside the check, is dropped
    const page = (s: string) => /from events e\b/.test(s) || /^\s*select array\(/.test(s);
    for (const path of audits) {
      for (const token of [t.adminToken, auditor.token]) {
        const res = await settled(t, token, path);
        expect([path, res.status]).toEqual([path, 200]);
        expect([path, res.statements.filter((s) => !page(s)).length], res.statements.join('\n')).toEqual([path, 1]);
      }
      const refused = await settled(t, others.token, path);
      expect([path, refused.status, refused.statements.filter((s) => !page(s)).length], refused.statements.join('\n')).toEqual([
        path,
        403,
        1,
      ]);
    }
  });
});

/**
 * A parent collection with a child, another collection beside them, and a reader holding
 * ReadCollection on the parent (inherited by the child).
 */
async function collectionTree(prefix: string) {
  const made = async (body: Record<string, unknown>) => {
    const res = await plain.request('POST', '/api/v1/collections', { body: { name: uniq(prefix), ...body } });
    expect(res.status, res.text).toBe(201);
    return (res.body as { id: number }).id;
  };
  const parent = await made({});
  const child = await made({ parent_collection_id: parent });
  const other = await made({});
  const reader = await userWith(plain, [[parent, ['ReadCollection']]]);
  return { parent, child, other, reader };
}

/** The request's statements but the token's and the token cache's, without the count of a total. */
const counted = (r: { statements: string[] }) => r.statements.filter((s) => !/^\s*select count\(/.test(s)).length;

// A collection's children and ancestors (db/authz.ts readUnderCollection): where the caller's grants
// tell without a statement (an administrator; a reader whose grants the token cache keeps), the page
// alone when it has rows, which show that the collection exists; the check's statement too when the
// page is empty or the query bad (404 and 403 still come first). Otherwise the check, then the page.
describe("a collection's children and ancestors", () => {
  let parent: number;
  let child: number;
  let other: number;
  let reader: Awaited<ReturnType<typeof userWith>>;
  beforeAll(async () => {
    ({ parent, child, other, reader } = await collectionTree('pr-tree'));
  });
  const children = (c: number) => `/api/v1/collections/${c}/children`;
  const ancestors = (c: number) => `/api/v1/collections/${c}/ancestors`;

  it('decided from the grants: the page alone when it has rows, the check too when it is empty', async () => {
    for (const token of [cached.adminToken, reader.token]) {
      for (const path of [children(parent), ancestors(child)]) {
        const res = await settled(cached, token, path);
        expect([path, res.status, counted(res)], res.statements.join('\n')).toEqual([path, 200, 1]);
        expect(res.body as unknown[]).toHaveLength(1);
      }
      for (const path of [children(child), ancestors(parent)]) {
        const res = await settled(cached, token, path);
        expect([path, res.status, counted(res)], res.statements.join('\n')).toEqual([path, 200, 2]);
        expect(res.body as unknown[]).toHaveLength(0);
      }
    }
  });

  it('404 for a missing collection (before a bad query), 403 without ReadCollection, with the cache on and off', async () => {
    for (const t of [cached, plain]) {
      for (const token of [t.adminToken, reader.token]) {
        for (const path of [children(2147483647), ancestors(2147483647)]) {
          expect((await settled(t, token, path)).status).toBe(404);
          expect((await t.request('GET', path, { token, query: { cursor: 'not-a-cursor' } })).status).toBe(404);
        }
      }
      for (const path of [children(other), ancestors(other)]) {
        expect((await settled(t, reader.token, path)).status).toBe(403);
        expect((await t.request('GET', path, { token: reader.token, query: { cursor: 'not-a-cursor' } })).status).toBe(403);
      }
      expect((await t.request('GET', children(parent), { token: reader.token, query: { cursor: 'not-a-cursor' } })).status).toBe(400);
    }
  });

  it('with the cache off a reader gets the check, then the page', async () => {
    const res = await settled(plain, reader.token, children(parent));
    expect([res.status, counted(res)], res.statements.join('\n')).toEqual([200, 2]);
  });
});

// A collection's grants (by collection, group or principal, and effective) read the same way: rows
// show that the collection and the group or principal they name exist; an empty list or a bad query
// also asks, the collection's 404 or 403 first, then the group's or principal's 404.
describe("a collection's grants", () => {
  let parent: number;
  let child: number;
  let other: number;
  let reader: Awaited<ReturnType<typeof userWith>>;
  let bystander: Awaited<ReturnType<typeof userWith>>;
  beforeAll(async () => {
    ({ parent, child, other, reader } = await collectionTree('pr-grants'));
    bystander = await userWith(plain, []);
  });
  const grants = (c: number) => `/api/v1/collections/${c}/permissions`;
  const ofGroup = (c: number, g: number) => `/api/v1/collections/${c}/permissions/group/${g}`;
  const ofPrincipal = (c: number, p: number) => `/api/v1/collections/${c}/permissions/principal/${p}`;
  const effective = (c: number, p: number) => `/api/v1/collections/${c}/permissions/effective/principal/${p}`;

  it('decided from the grants: the read alone when it has rows; the checks too when it has none', async () => {
    for (const token of [cached.adminToken, reader.token]) {
      const found = [grants(parent), ofGroup(parent, reader.groupId), ofPrincipal(parent, reader.id), effective(child, reader.id)];
      for (const path of found) {
        const res = await settled(cached, token, path);
        expect([path, res.status, counted(res)], res.statements.join('\n')).toEqual([path, 200, 1]);
        expect(res.body as unknown[]).toHaveLength(1);
      }
      const empty: [string, number][] = [
        [grants(child), 2],
        [ofGroup(parent, bystander.groupId), 3],
        [ofPrincipal(parent, bystander.id), 3],
        [effective(parent, bystander.id), 3],
      ];
      for (const [path, statements] of empty) {
        const res = await settled(cached, token, path);
        expect([path, res.status, counted(res)], res.statements.join('\n')).toEqual([path, 200, statements]);
        expect(res.body as unknown[]).toHaveLength(0);
      }
    }
  });

  it("404 for a missing collection, then for a missing group or principal, before a bad query's 400; 403 first", async () => {
    const missing = 2147483647;
    const message = async (t: TestApp, token: string, path: string, query: Record<string, string> = {}) => {
      const res = await t.request('GET', path, { token, query });
      return [res.status, (res.body as { message?: string }).message ?? null];
    };
    const bad = { cursor: 'not-a-cursor' };
    for (const t of [cached, plain]) {
      for (const token of [t.adminToken, reader.token]) {
        for (const path of [
          grants(missing),
          ofGroup(missing, reader.groupId),
          ofPrincipal(missing, reader.id),
          effective(missing, reader.id),
        ]) {
          expect(await message(t, token, path)).toEqual([404, 'collection not found']);
          if (!path.includes('/group/')) expect(await message(t, token, path, bad)).toEqual([404, 'collection not found']);
        }
        expect(await message(t, token, ofGroup(parent, missing))).toEqual([404, 'group not found']);
        for (const path of [ofPrincipal(parent, missing), effective(parent, missing)]) {
          expect(await message(t, token, path)).toEqual([404, 'principal not found']);
          expect(await message(t, token, path, bad)).toEqual([404, 'principal not found']);
        }
        expect((await t.request('GET', grants(parent), { token, query: bad })).status).toBe(400);
      }
      for (const path of [grants(other), ofGroup(other, missing), ofPrincipal(other, missing), effective(other, missing)])
        expect((await t.request('GET', path, { token: reader.token })).status).toBe(403);
    }
  });

  it('with the cache off a reader gets the checks, then the read', async () => {
    const res = await settled(plain, reader.token, ofPrincipal(parent, reader.id));
    expect([res.status, counted(res)], res.statements.join('\n')).toEqual([200, 3]);
  });
});

describe("an audit route's check", () => {
  it('goes out beside its page: both are on the wire before any answer comes back', async () => {
    // through a proxy that can hold PostgreSQL's answers
    await withProxiedApp(plain, async ({ proxy, get }) => {
      expect((await get('/api/v1/iam/me')).status).toBe(200);
      // two connections open (a connection's start-up waits for answers), neither with the route's
      // statements prepared, so that their texts go on the wire
      const opened = await Promise.all([get(`/api/v1/collections/${collection}`), get('/api/v1/collections')]);
      expect(opened.map((r) => r.status)).toEqual([200, 200]);
      const path = audits.find((p) => /\/classes\/\d+\/\d+\/events$/.test(p))!;
      proxy.hold();
      const reply = get(path);
      // Every answer is held: the page can only be on the wire now if it did not wait for the check.
      await proxy.until(['svc_granted', 'from events e']);
      proxy.release();
      expect((await reply).status).toBe(200);
    });
  });

  it("decides before the page's own errors: 404 for a missing object, 403 without ReadAudit, even with a bad query", async () => {
    const others = await userWith(plain, [[collection, PERMISSIONS.filter((p) => p !== 'ReadAudit')]]);
    const path = audits.find((p) => /\/classes\/\d+\/\d+\/events$/.test(p))!;
    const missing = path.replace(/\/\d+\/events$/, '/2147483647/events');
    for (const query of [{}, { cursor: 'not-a-cursor' }, { sort: 'nope' }] as Record<string, string>[]) {
      expect((await plain.request('GET', missing, { query })).status).toBe(404);
      expect((await plain.request('GET', path, { token: others.token, query })).status).toBe(403);
    }
    expect((await plain.request('GET', path, { query: { cursor: 'not-a-cursor' } })).status).toBe(400);
  });
});
