// The token cache (src/services/token-cache.ts) on two app instances sharing one database, as two
// api processes do: a change made through one instance takes effect there at once (before its
// response), and on the other as soon as the NOTIFY of the change arrives (polled, never timed).
// Each token is first used on both instances, so both hold it in their caches. (Other test files
// run with the cache off: test/helpers.ts.)
import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { addMember, adminGroupId, createGroup, createHuman, createServiceAccount, grant, tokenFor, userWith } from './iam-fixtures.ts';
import { insertToken } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import { tokenCacheDrops, tokenCacheLookups } from '../src/metrics.ts';
import { TOKEN_CACHE_CHANNEL } from '../src/db/auth-changes.ts';
import { GRANT_SETS_MAX_IDS, TREE_CHANGES_MAX, tokenCache } from '../src/services/token-cache.ts';

let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await startTestApp({ SVC_TOKEN_CACHE_SIZE: 10000 });
  b = await startTestApp({ SVC_TOKEN_CACHE_SIZE: 10000 });
});
afterAll(async () => {
  await a.close();
  await b.close();
});

const validate = (t: TestApp, token: string) => t.request('GET', '/api/v0/auth/validate', { token });

/** svc_token_cache_drops_total{kind} of this test process (both instances together). */
async function drops(kind: string): Promise<number> {
  const m = await tokenCacheDrops.get();
  return m.values.filter((v) => v.labels.kind === kind).reduce((s, v) => s + v.value, 0);
}

async function hits(): Promise<number> {
  const m = await tokenCacheLookups.get();
  return m.values.filter((v) => v.labels.outcome === 'hit').reduce((s, v) => s + v.value, 0);
}

/** Uses `token` twice on each instance (the second use of each is answered from its cache). */
async function warm(token: string, path = '/api/v0/auth/validate'): Promise<void> {
  for (const t of [a, b, a, b]) expect((await t.request('GET', path, { token })).status).toBe(200);
}

/** Polls until `token` is refused on `t` (the other instance learns of a change by NOTIFY). */
async function refusedOn(t: TestApp, token: string, path = '/api/v0/auth/validate', status = 401): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if ((await t.request('GET', path, { token })).status === status) return;
    await new Promise((ok) => setTimeout(ok, 10));
  }
  throw new Error(`${path} was not refused with ${status} on the other instance`);
}

async function tokenIdOf(token: string): Promise<number> {
  const me = await a.request('GET', '/api/v1/iam/me', { token });
  return (me.body as { token: { id: number } }).token.id;
}

/** A new collection (under `parent`), made through `a`. */
async function newCollection(parent?: number): Promise<number> {
  const res = await a.request('POST', '/api/v1/collections', {
    body: { name: uniq('c'), ...(parent ? { parent_collection_id: parent } : {}) },
  });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

/** A new class in collection `c`, made through `a`: its `created` event is of `c` alone (no related collection). */
async function newClass(c: number): Promise<number> {
  const res = await a.request('POST', '/api/v1/classes', { body: { name: uniq('k'), collection_id: c } });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

/** The statements (text and parameters) of `t`'s pool while `fn` runs. */
async function statementsOf(t: TestApp, fn: () => Promise<unknown>): Promise<{ text: string; params: unknown[] }[]> {
  const seen: { text: string; params: unknown[] }[] = [];
  const opts = t.deps.sql.options as unknown as { debug: unknown };
  opts.debug = (_c: number, text: string, params: unknown[]) => seen.push({ text, params });
  try {
    await fn();
  } finally {
    opts.debug = false;
  }
  return seen;
}

/** Statements that read a principal's grants for the token cache (db/authz.ts readGrantSets). */
const readsGrants = (st: { text: string }) => st.text.includes('with recursive svc_granted (id, permission)');

/**
 * Waits until `t`'s token cache has heard every notification committed before now: a marker sent
 * after them arrives after them on the same LISTEN connection, whose listeners are called in turn.
 * A process hears its own changes' notifications too, a little after it dropped the same at commit;
 * a read under way when they arrive is not kept (it could be older than the change), so a count of
 * the statements a request makes right after a change waits for them first.
 */
async function heardAll(t: TestApp): Promise<void> {
  const marker = `t:-${randomInt(1, 2 ** 31)}`; // drops token -n: none
  let arrived!: () => void;
  const heard = new Promise<void>((ok) => (arrived = ok));
  const sub = await t.deps.sql.listen(TOKEN_CACHE_CHANNEL, (payload) => payload === marker && arrived());
  try {
    await t.deps.sql`select pg_notify(${TOKEN_CACHE_CHANNEL}, ${marker})`;
    await heard;
  } finally {
    await sub.unlisten();
  }
}

/** Polls `probe` until it answers `want` (the other instance learns of a change by NOTIFY). */
async function pollUntil(what: string, probe: () => Promise<string | number>, want: string | number): Promise<void> {
  let got: string | number = '';
  for (let i = 0; i < 500; i++) {
    got = await probe();
    if (got === want) return;
    await new Promise((ok) => setTimeout(ok, 10));
  }
  throw new Error(`${what}: ${got} instead of ${want}`);
}

describe('token cache', () => {
  it('answers repeated uses from memory', async () => {
    const h = await createHuman(a);
    const before = await hits();
    await warm(h.token);
    expect(await hits()).toBeGreaterThanOrEqual(before + 2);
  });

  it('logout: refused at once on the same instance, and on the other after its NOTIFY', async () => {
    const h = await createHuman(a);
    await warm(h.token);
    expect((await a.request('POST', '/api/v0/auth/logout', { token: h.token })).status).toBe(200);
    expect((await validate(a, h.token)).status).toBe(401);
    await refusedOn(b, h.token);
  });

  it('revoke through the tokens API', async () => {
    const h = await createHuman(a);
    const id = await tokenIdOf(h.token);
    await warm(h.token);
    expect((await a.request('POST', `/api/v1/iam/principals/${h.id}/tokens/${id}/revoke`)).status).toBe(204);
    expect((await validate(a, h.token)).status).toBe(401);
    await refusedOn(b, h.token);
  });

  it('deleting the user', async () => {
    const h = await createHuman(a);
    await warm(h.token);
    expect((await a.request('DELETE', `/api/v1/iam/users/${h.id}`)).status).toBe(204);
    expect((await validate(a, h.token)).status).toBe(401);
    await refusedOn(b, h.token);
  });

  it('disabling a service account', async () => {
    const g = await createGroup(a);
    const sa = await createServiceAccount(a, g.id);
    const token = await tokenFor(a, sa.id);
    await warm(token);
    expect((await a.request('POST', `/api/v1/iam/service-accounts/${sa.id}/disable`)).status).toBe(200);
    expect((await validate(a, token)).status).toBe(401);
    await refusedOn(b, token);
  });

  it('removal from the admin group ends admin rights', async () => {
    const h = await createHuman(a);
    const admins = await adminGroupId(a);
    await addMember(a, admins, h.id);
    await warm(h.token, '/api/v1/iam/users');
    expect((await a.request('DELETE', `/api/v1/iam/groups/${admins}/members/${h.id}`)).status).toBe(204);
    expect((await a.request('GET', '/api/v1/iam/users', { token: h.token })).status).toBe(403);
    await refusedOn(b, h.token, '/api/v1/iam/users', 403);
  });

  it('the admin group renamed (in SQL) ends admin rights on both instances after its NOTIFY; renamed back, they return', async () => {
    const h = await createHuman(a);
    const admins = await adminGroupId(a);
    await addMember(a, admins, h.id);
    await warm(h.token, '/api/v1/iam/users');
    const [row] = await a.deps.sql<{ name: string }[]>`select name from groups where id = ${admins}`;
    const name = row!.name;
    await a.deps.sql`update groups set name = ${uniq('not-admins')} where id = ${admins}`;
    try {
      for (const t of [a, b]) await refusedOn(t, h.token, '/api/v1/iam/users', 403);
    } finally {
      await a.deps.sql`update groups set name = ${name} where id = ${admins}`;
    }
    for (const t of [a, b]) await refusedOn(t, h.token, '/api/v1/iam/users', 200);
  });

  it('revoking a collection permission', async () => {
    const c = await a.request('POST', '/api/v1/collections', { body: { name: uniq('c') } });
    expect(c.status, c.text).toBe(201);
    const cid = (c.body as { id: number }).id;
    const h = await createHuman(a);
    const g = await createGroup(a);
    await addMember(a, g.id, h.id);
    await grant(a, cid, g.id, ['ReadCollection']);
    await warm(h.token, `/api/v1/collections/${cid}`);
    const res = await a.request('DELETE', `/api/v1/collections/${cid}/permissions/group/${g.id}/ReadCollection`);
    expect(res.status, res.text).toBeLessThan(300);
    const after = await a.request('GET', `/api/v1/collections/${cid}`, { token: h.token });
    expect([403, 404]).toContain(after.status);
    await refusedOn(b, h.token, `/api/v1/collections/${cid}`, after.status);
  });

  it('a change made in the database directly reaches both instances by NOTIFY', async () => {
    const h = await createHuman(a);
    await warm(h.token);
    await a.deps.sql`update tokens set revoked_at = now() where id = ${await tokenIdOf(h.token)}`;
    await refusedOn(a, h.token);
    await refusedOn(b, h.token);
  });

  it('a lost LISTEN connection fails closed: a change it missed still ends the cached token', async () => {
    const h = await createHuman(a);
    await warm(h.token);
    // Drop every LISTEN connection of the channel, then revoke while they reconnect: the NOTIFY may
    // reach no one, so only the reconnect (which empties the cache) or the heartbeat window (which
    // bypasses it) can refuse the token within the poll, long before SVC_TOKEN_CACHE_MAX_AGE_MS.
    await a.deps
      .sql`select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and query ilike 'listen%svc_token_cache%'`;
    await a.deps.sql`update tokens set revoked_at = now() where id = ${await tokenIdOf(h.token)}`;
    await refusedOn(a, h.token);
    await refusedOn(b, h.token);
    // and the cache works again once notifications are heard
    const other = await createHuman(a);
    for (let i = 0; i < 500; i++) {
      const before = await hits();
      await warm(other.token);
      if ((await hits()) > before) return;
      await new Promise((ok) => setTimeout(ok, 10));
    }
    throw new Error('the cache did not resume');
  });

  it('expiry is checked against the cached token on every use', async () => {
    const h = await createHuman(a);
    const raw = newRawToken();
    await insertToken(a.deps.sql, {
      principalId: h.id,
      hash: hashToken(a.deps.tokenKey, raw),
      expiresAt: new Date(Date.now() + 1500),
    });
    // no change is notified: only the cached expiry can refuse it
    const first = await validate(a, raw);
    if (first.status === 200) await refusedOn(a, raw);
    await refusedOn(b, raw);
  });

  it('last_used_at of cached uses shows on a token read', async () => {
    const h = await createHuman(a);
    await a.request('GET', '/api/v1/iam/me', { token: h.token });
    const me = await a.request('GET', '/api/v1/iam/me', { token: h.token });
    const { id, last_used_at: used } = (me.body as { token: { id: number; last_used_at: string } }).token;
    const read = await a.request('GET', `/api/v1/iam/principals/${h.id}/tokens/${id}`);
    expect(read.status).toBe(200);
    const shown = (read.body as { last_used_at: string }).last_used_at;
    expect(new Date(shown).getTime()).toBeGreaterThanOrEqual(new Date(used).getTime());
    const list = await a.request('GET', `/api/v1/iam/principals/${h.id}/tokens`);
    const listed = (list.body as { id: number; last_used_at: string }[]).find((x) => x.id === id)!;
    expect(new Date(listed.last_used_at).getTime()).toBeGreaterThanOrEqual(new Date(used).getTime());
  });
});

describe('the ReadAudit collections kept with a token', () => {
  type Ev = { entity_type: string; entity_id: number };
  /** The ids of the classes whose `created` events `token` sees in the audit list of `t`. */
  const seen = async (t: TestApp, token: string, ids: number[]): Promise<number[]> => {
    const res = await t.request('GET', '/api/v1/events', {
      token,
      query: { entity_type: 'class', entity_id__in: ids.join(','), action: 'created', include_total: 'false' },
    });
    expect(res.status, res.text).toBe(200);
    return (res.body as Ev[]).map((e) => e.entity_id).sort((x, y) => x - y);
  };
  /** Polls until `token` sees exactly `want` on `t`. */
  const seesOn = (t: TestApp, token: string, ids: number[], want: number[]) =>
    pollUntil('saw', async () => (await seen(t, token, ids)).join(), want.join());
  /**
   * Statements of `t`'s pool that read a caller's ReadAudit collections, or all its grants (a read
   * request's Authority.grants, from which the audit list takes them), while `fn` runs.
   */
  const auditReads = async (t: TestApp, fn: () => Promise<unknown>): Promise<number> =>
    (await statementsOf(t, fn)).filter(
      (st) =>
        (st.text.startsWith('select array(select svc_c.id from collections svc_c') && st.params.includes('ReadAudit')) || readsGrants(st),
    ).length;

  it('read once per token; a grant revoked takes them away at once here and after its NOTIFY there', async () => {
    const c = await newCollection();
    const k = await newClass(c);
    const h = await userWith(a, [[c, ['ReadAudit']]]);
    // the NOTIFYs of the grant made just now, heard before anything is kept (one heard later drops
    // what was kept, and the next request reads again)
    await heardAll(a);
    for (const t of [a, b]) expect(await seen(t, h.token, [k])).toEqual([k]);
    expect(await auditReads(a, () => seen(a, h.token, [k]))).toBe(0);
    const res = await a.request('DELETE', `/api/v1/collections/${c}/permissions/group/${h.groupId}/ReadAudit`);
    expect(res.status, res.text).toBeLessThan(300);
    expect(await seen(a, h.token, [k])).toEqual([]);
    // once the NOTIFY of the change is heard here too (it drops them again), they are kept again
    await heardAll(a);
    expect(await seen(a, h.token, [k])).toEqual([]);
    expect(await auditReads(a, async () => expect(await seen(a, h.token, [k])).toEqual([]))).toBe(0);
    await seesOn(b, h.token, [k], []);
  });

  it('grants reach down the tree: a collection created under, moved out of or (in SQL) put back under a granted one', async () => {
    const top = await newCollection();
    const inTop = await newClass(top);
    const h = await userWith(a, [[top, ['ReadAudit']]]);
    for (const t of [a, b]) expect(await seen(t, h.token, [inTop])).toEqual([inTop]);
    // a collection created under it: its events are seen at once here, and there once the NOTIFY
    // arrives (the class is made after the collection, so each instance had the old set cached)
    const child = await newCollection(top);
    const inChild = await newClass(child);
    const both = () => [inTop, inChild].sort((x, y) => x - y);
    expect(await seen(a, h.token, both())).toEqual(both());
    await seesOn(b, h.token, both(), both());
    // moved to the top level: gone at once here, and there after the NOTIFY
    const moved = await a.request('PUT', `/api/v1/collections/${child}/parent`, { body: { parent_collection_id: null } });
    expect(moved.status, moved.text).toBe(200);
    expect(await seen(a, h.token, both())).toEqual([inTop]);
    await seesOn(b, h.token, both(), [inTop]);
    // put back by plain SQL (no event, no API): the trigger's NOTIFY reaches both instances
    await a.deps.sql`update collections set parent_collection_id = ${top} where id = ${child}`;
    await seesOn(a, h.token, both(), both());
    await seesOn(b, h.token, both(), both());
  });
});

describe("a principal's grants kept for its read requests (Authority.grants)", () => {
  /** An object in a new class of collection `c`: the path of its getObject. */
  const objectIn = async (c: number): Promise<string> => {
    const kid = await newClass(c);
    const o = await a.request('POST', `/api/v1/classes/${kid}/objects`, { body: { name: uniq('grants-o'), json_data: {} } });
    expect(o.status, o.text).toBe(201);
    return `/api/v1/classes/${kid}/${(o.body as { id: number }).id}`;
  };
  /** The statements' texts of `t`'s pool while `fn` runs. */
  const statements = async (t: TestApp, fn: () => Promise<unknown>): Promise<string[]> => (await statementsOf(t, fn)).map((st) => st.text);
  const grantReads = (texts: string[]) => texts.filter((text) => readsGrants({ text })).length;
  const status = async (t: TestApp, token: string, path: string) => (await t.request('GET', path, { token })).status;
  /** [token reads (by its hash), grant reads] among `t`'s statements while `u` reads `path` (200). */
  const readsOn = async (t: TestApp, u: { token: string }, path: string) => {
    const texts = await statements(t, async () => expect(await status(t, u.token, path)).toBe(200));
    return [texts.filter((x) => x.includes('where token_hash =')).length, grantReads(texts)];
  };
  /** Two readers of `path` through grants on collection `c` (each in a group of its own), known to both instances. */
  const twoReaders = async (c: number, path: string) => {
    const p = await userWith(a, [[c, ['ReadClass', 'ReadObject']]]);
    const q = await userWith(a, [[c, ['ReadClass', 'ReadObject']]]);
    // the grants' NOTIFYs heard before anything is kept (one heard later drops what was kept)
    for (const t of [a, b]) await heardAll(t);
    for (const t of [a, b]) for (const u of [p, q]) for (let i = 0; i < 2; i++) expect(await status(t, u.token, path)).toBe(200);
    return { p, q, readsFor: (t: TestApp, u: { token: string }) => readsOn(t, u, path) };
  };
  /** Polls until `token` gets `want` for GET `path` on `t`. */
  const getsOn = (t: TestApp, token: string, path: string, want: number) => pollUntil(`GET ${path}`, () => status(t, token, path), want);

  it('read once per principal and tested as values; a grant revoked takes effect at once here and after its NOTIFY there', async () => {
    const c = await newCollection();
    const path = await objectIn(c);
    const h = await userWith(a, [[c, ['ReadClass', 'ReadObject']]]);
    await heardAll(a);
    const again = await a.request('POST', '/api/v0/auth/login', { body: { name: h.name, password: h.password } });
    expect(again.status, again.text).toBe(200);
    const second = (again.body as { token: string }).token;
    for (const t of [a, b]) expect(await status(t, h.token, path)).toBe(200);
    // cached: the point read tests the object's collection against the ids, no grant is read
    const texts = await statements(a, async () => expect(await status(a, h.token, path)).toBe(200));
    expect(grantReads(texts)).toBe(0);
    expect(texts.some((x) => x.includes('o.collection_id = any($2::int[]) as svc_granted'))).toBe(true);
    expect(texts.some((x) => x.includes('collection_ancestors'))).toBe(false);
    // the principal's other token uses the same grants
    expect(grantReads(await statements(a, async () => expect(await status(a, second, path)).toBe(200)))).toBe(0);
    // a login (a token created) empties nothing: the first token is still answered from memory
    const third = await a.request('POST', '/api/v0/auth/login', { body: { name: h.name, password: h.password } });
    expect(third.status, third.text).toBe(200);
    const hitsBefore = await hits();
    expect(grantReads(await statements(a, async () => expect(await status(a, h.token, path)).toBe(200)))).toBe(0);
    expect(await hits()).toBe(hitsBefore + 1);
    const res = await a.request('DELETE', `/api/v1/collections/${c}/permissions/group/${h.groupId}/ReadObject`);
    expect(res.status, res.text).toBeLessThan(300);
    expect(grantReads(await statements(a, async () => expect(await status(a, h.token, path)).toBe(403)))).toBe(1);
    await getsOn(b, h.token, path, 403);
    // granted again, in SQL (no API): the trigger's NOTIFY reaches both instances
    await a.deps.sql`insert into collection_permissions (collection_id, group_id, permission) values (${c}, ${h.groupId}, 'ReadObject')`;
    await getsOn(a, h.token, path, 200);
    await getsOn(b, h.token, path, 200);
  });

  it('a collection created under a granted one: its objects are readable at once here, and there after the NOTIFY', async () => {
    const top = await newCollection();
    const h = await userWith(a, [[top, ['ReadClass', 'ReadObject']]]);
    const inTop = await objectIn(top);
    for (const t of [a, b]) expect(await status(t, h.token, inTop)).toBe(200);
    const child = await newCollection(top);
    const inChild = await objectIn(child);
    expect(await status(a, h.token, inChild)).toBe(200);
    await getsOn(b, h.token, inChild, 200);
    // and the class list of the child collection's class: the list page tests the ids too
    const classId = inChild.split('/')[4];
    const list = await b.request('GET', `/api/v1/classes/${classId}/objects`, { token: h.token });
    expect(list.status, list.text).toBe(200);
    expect(list.body as unknown[]).toHaveLength(1);
    // moved out from under the grant: refused at once here, there after the NOTIFY
    const moved = await a.request('PUT', `/api/v1/collections/${child}/parent`, { body: { parent_collection_id: null } });
    expect(moved.status, moved.text).toBe(200);
    expect(await status(a, h.token, inChild)).toBe(403);
    await getsOn(b, h.token, inChild, 403);
  });

  it("one principal's membership changed: its token and grants are read again, here at once and there after the NOTIFY; another's stay kept", async () => {
    const c = await newCollection();
    const path = await objectIn(c);
    const { p, q, readsFor } = await twoReaders(c, path);
    for (const t of [a, b]) for (const u of [p, q]) expect(await readsFor(t, u)).toEqual([0, 0]);
    const group = (await createGroup(a)).id;
    for (const t of [a, b]) await heardAll(t);
    const [principalDrops, everythingDrops] = [await drops('principal'), await drops('everything')];
    await addMember(a, group, p.id);
    // here at once; the NOTIFY of the change, heard here too, may drop p's once more
    expect(await readsFor(a, q)).toEqual([0, 0]);
    expect((await readsFor(a, p))[0]).toBe(1);
    await heardAll(a);
    await readsFor(a, p);
    expect(await readsFor(a, p)).toEqual([0, 0]);
    expect(await readsFor(a, q)).toEqual([0, 0]);
    // there once the NOTIFY is heard: p's read again once, q's kept
    await heardAll(b);
    expect(await readsFor(b, q)).toEqual([0, 0]);
    expect(await readsFor(b, p)).toEqual([1, 1]);
    expect(await readsFor(b, p)).toEqual([0, 0]);
    // counted once per instance, as what it dropped
    expect(await drops('principal')).toBe(principalDrops + 2);
    expect(await drops('everything')).toBe(everythingDrops);
  });

  it("a group renamed, then deleted: its members' tokens and grants are read again, here at once and there after the NOTIFY; another's stay kept", async () => {
    const c = await newCollection();
    const path = await objectIn(c);
    const { p, q, readsFor } = await twoReaders(c, path);
    const group = (await createGroup(a)).id;
    await addMember(a, group, p.id);
    for (const t of [a, b]) {
      await heardAll(t);
      for (const u of [p, q]) await readsFor(t, u);
      for (const u of [p, q]) expect(await readsFor(t, u)).toEqual([0, 0]);
    }
    const everythingDrops = await drops('everything');
    const changes: [string, () => Promise<unknown>][] = [
      [
        'renamed',
        async () => expect((await a.request('PATCH', `/api/v1/iam/groups/${group}`, { body: { name: uniq('renamed') } })).status).toBe(200),
      ],
      ['deleted', async () => expect((await a.request('DELETE', `/api/v1/iam/groups/${group}`)).status).toBe(204)],
    ];
    for (const [what, change] of changes) {
      await change();
      // here at once (the NOTIFY of the change, heard here too, may drop p's once more)
      expect(await readsFor(a, q), what).toEqual([0, 0]);
      expect(await readsFor(a, p), what).toEqual([1, 1]);
      // there once the NOTIFY is heard
      await heardAll(b);
      expect(await readsFor(b, q), what).toEqual([0, 0]);
      expect(await readsFor(b, p), what).toEqual([1, 1]);
      for (const t of [a, b]) {
        await heardAll(t);
        await readsFor(t, p);
        expect(await readsFor(t, p), what).toEqual([0, 0]);
      }
    }
    // the events name the members
    const events = await a.request('GET', '/api/v1/events', {
      query: { entity_type: 'group', entity_id: String(group), include_total: 'false' },
    });
    expect(events.status, events.text).toBe(200);
    const metadata = (action: string) =>
      (events.body as { action: string; metadata: unknown }[]).find((e) => e.action === action)?.metadata;
    expect(metadata('updated')).toEqual({ member_ids: [p.id] });
    expect(metadata('deleted')).toEqual({ removed_member_ids: [p.id] });
    expect(await drops('everything')).toBe(everythingDrops);
  });

  it("a group's grant changed: its members' grants are read again, no token is, and others' grants stay kept", async () => {
    const c = await newCollection();
    const path = await objectIn(c);
    const { p, q, readsFor } = await twoReaders(c, path);
    for (const t of [a, b]) for (const u of [p, q]) expect(await readsFor(t, u)).toEqual([0, 0]);
    await grant(a, c, p.groupId, ['ReadAudit']);
    expect(await readsFor(a, q)).toEqual([0, 0]);
    expect(await readsFor(a, p)).toEqual([0, 1]);
    await heardAll(b);
    expect(await readsFor(b, q)).toEqual([0, 0]);
    expect(await readsFor(b, p)).toEqual([0, 1]);
    for (const t of [a, b]) {
      await heardAll(t);
      await status(t, p.token, path); // grants read again when the NOTIFY dropped them since
      expect(await readsFor(t, p)).toEqual([0, 0]);
      expect(await readsFor(t, q)).toEqual([0, 0]);
    }
    // a member added to p's group takes its grants at once (its own grants are read again)
    const r = await createHuman(a);
    for (const t of [a, b]) for (let i = 0; i < 2; i++) expect(await status(t, r.token, path)).toBe(403);
    await addMember(a, p.groupId, r.id);
    expect(await status(a, r.token, path)).toBe(200);
    await heardAll(b);
    expect(await status(b, r.token, path)).toBe(200);
  });

  it('a collection created or moved: only the grants that hold where it happened are read again', async () => {
    const x = await newCollection();
    const y = await newCollection();
    const [inX, inY] = [await objectIn(x), await objectIn(y)];
    const p = await userWith(a, [[x, ['ReadClass', 'ReadObject']]]);
    const q = await userWith(a, [[y, ['ReadClass', 'ReadObject']]]);
    const grantReadsFor = async (t: TestApp, u: { token: string }, path: string) => (await readsOn(t, u, path))[1];
    for (const t of [a, b])
      for (const [u, path] of [
        [p, inX],
        [q, inY],
      ] as const)
        await grantReadsFor(t, u, path);
    for (const t of [a, b]) {
      await heardAll(t);
      expect(await grantReadsFor(t, p, inX)).toBeLessThanOrEqual(1);
      expect(await grantReadsFor(t, q, inY)).toBeLessThanOrEqual(1);
      expect([await grantReadsFor(t, p, inX), await grantReadsFor(t, q, inY)]).toEqual([0, 0]);
    }
    // a collection created under x: p's grants are read again (it gains it), q's stay kept
    const child = await newCollection(x);
    for (const t of [a, b]) {
      await heardAll(t);
      expect(await grantReadsFor(t, q, inY)).toBe(0);
    }
    expect(await grantReadsFor(b, p, inX)).toBe(1);
    // moved under y: q's are read again, and q reads the objects there
    const inChild = await objectIn(child);
    const moved = await a.request('PUT', `/api/v1/collections/${child}/parent`, { body: { parent_collection_id: y } });
    expect(moved.status, moved.text).toBe(200);
    await heardAll(b);
    expect(await grantReadsFor(b, q, inChild)).toBe(1);
    expect(await status(b, p.token, inChild)).toBe(403);
  });

  it(`more than ${TREE_CHANGES_MAX} tree changes heard together (a large import) drop every kept grant`, async () => {
    const x = await newCollection();
    const path = await objectIn(x);
    const q = await userWith(a, [[x, ['ReadClass', 'ReadObject']]]);
    const grantReadsOf = async () => grantReads(await statements(b, async () => expect(await status(b, q.token, path)).toBe(200)));
    await status(b, q.token, path);
    await heardAll(b);
    await status(b, q.token, path);
    expect(await grantReadsOf()).toBe(0);
    // a few changes elsewhere: q's grants stay kept
    await b.deps.sql`select pg_notify(${TOKEN_CACHE_CHANNEL}, 'c:' || -g) from generate_series(1, 3) g`;
    await heardAll(b);
    expect(await grantReadsOf()).toBe(0);
    // thousands elsewhere, in one transaction: every grant goes (each batch of them is past the bound)
    await b.deps.sql`select pg_notify(${TOKEN_CACHE_CHANNEL}, 'c:' || -g) from generate_series(1, 5000) g`;
    await heardAll(b);
    expect(await grantReadsOf()).toBe(1);
    expect(await grantReadsOf()).toBe(0);
  });

  it(`grants of more than ${GRANT_SETS_MAX_IDS} collections are not kept: the statements read them`, async () => {
    const top = await newCollection();
    const path = await objectIn(top);
    await a.deps.sql`
      insert into collections (name, parent_collection_id)
      select ${uniq('many')} || '-' || g, ${top}::int from generate_series(1, ${GRANT_SETS_MAX_IDS}) g`;
    const h = await userWith(a, [[top, ['ReadClass', 'ReadObject']]]);
    for (let i = 0; i < 2; i++) {
      const texts = await statements(a, async () => expect(await status(a, h.token, path)).toBe(200));
      expect(texts.some((x) => x.includes('collection_ancestors(o.collection_id)'))).toBe(true);
      expect(texts.some((x) => x.includes('= any($2::int[]) as svc_granted'))).toBe(false);
    }
  });
});

describe("each class's collection kept for the lists of its objects", () => {
  const list = (t: TestApp, token: string | undefined, k: number) =>
    t.request('GET', `/api/v1/classes/${k}/objects`, { token, query: { include_total: 'false' } });
  /** Statements of `t`'s pool that read class `k` for its permission check, while `fn` runs. */
  const classReads = async (t: TestApp, k: number, fn: () => Promise<unknown>): Promise<number> =>
    (await statementsOf(t, fn)).filter(
      (st) => st.text.includes('from classes k where k.id = $') && st.params.map(String).includes(String(k)),
    ).length;
  const listsOn = (t: TestApp, token: string | undefined, k: number, want: number) =>
    pollUntil(`GET /api/v1/classes/${k}/objects`, async () => (await list(t, token, k)).status, want);

  it('read once, then decided without a statement, for an administrator and for a reader whose grants are known', async () => {
    const c = await newCollection();
    const k = await newClass(c);
    const h = await userWith(a, [[c, ['ReadClass', 'ReadObject']]]);
    const other = await userWith(a, [[c, ['ReadObject']]]);
    for (const token of [undefined, h.token]) {
      expect((await list(a, token, k)).status).toBe(200);
      expect(await classReads(a, k, async () => expect((await list(a, token, k)).status).toBe(200))).toBe(0);
    }
    // without ReadClass: still refused, from the kept collection
    expect(await classReads(a, k, async () => expect((await list(a, other.token, k)).status).toBe(403))).toBe(0);
    // and a class that does not exist is 404 (read each time: nothing is kept of it)
    expect((await list(a, h.token, 2_000_000_000)).status).toBe(404);
  });

  it('getClass, its computed fields and a search naming it by id decide from the kept collection too', async () => {
    const c = await newCollection();
    const k = await newClass(c);
    const h = await userWith(a, [[c, ['ReadClass', 'ReadObject']]]);
    const other = await userWith(a, [[c, ['ReadObject']]]);
    const search = (token?: string) =>
      a.request('POST', '/api/v1/search', { token, body: { version: 1, target: { kind: 'object', class: { id: k } } } });
    expect((await list(a, undefined, k)).status).toBe(200); // kept from here on
    for (const token of [undefined, h.token]) {
      const reads = await classReads(a, k, async () => {
        expect((await a.request('GET', `/api/v1/classes/${k}`, { token })).status).toBe(200);
        expect((await a.request('GET', `/api/v1/classes/${k}/computed-fields`, { token })).status).toBe(200);
      });
      expect(reads).toBe(0);
    }
    // a search's class selector by id too (a structured search writes nothing: a reader's grants are
    // known there, and its statements test them as values); by name it is read, with its check
    for (const token of [undefined, h.token]) {
      expect(await classReads(a, k, async () => expect((await search(token)).status).toBe(200))).toBe(0);
    }
    const [row] = await a.deps.sql<{ name: string }[]>`select name from classes where id = ${k}`;
    const name = row!.name;
    const byName = await statementsOf(a, async () => {
      const res = await a.request('POST', '/api/v1/search', {
        token: h.token,
        body: { version: 1, target: { kind: 'object', class: { name } } },
      });
      expect(res.status, res.text).toBe(200);
    });
    expect(byName.filter((st) => st.text.includes('from classes k') && st.params.map(String).includes(name))).toHaveLength(1);
    const texts = (await statementsOf(a, async () => expect((await search(h.token)).status).toBe(200))).map((st) => st.text);
    expect(texts.some((x) => x.includes('svc_granted'))).toBe(false);
    expect(texts.some((x) => x.includes('"o"."collection_id" = any($'))).toBe(true);
    expect(
      await classReads(a, k, async () => expect((await a.request('GET', `/api/v1/classes/${k}`, { token: other.token })).status).toBe(403)),
    ).toBe(0);
  });

  it('a class moved to another collection: the permission follows it at once here, and there after the NOTIFY', async () => {
    const c1 = await newCollection();
    const c2 = await newCollection();
    const k = await newClass(c1);
    const h = await userWith(a, [[c1, ['ReadClass', 'ReadObject']]]);
    for (const t of [a, b]) for (let i = 0; i < 2; i++) expect((await list(t, h.token, k)).status).toBe(200);
    const moved = await a.request('PATCH', `/api/v1/classes/${k}`, { body: { collection_id: c2 } });
    expect(moved.status, moved.text).toBe(200);
    expect((await list(a, h.token, k)).status).toBe(403);
    await listsOn(b, h.token, k, 403);
    // moved back in SQL (no API): the trigger's NOTIFY reaches both instances
    await a.deps.sql`update classes set collection_id = ${c1} where id = ${k}`;
    await listsOn(a, h.token, k, 200);
    await listsOn(b, h.token, k, 200);
  });

  it('a class deleted: 404 at once here, and there after the NOTIFY', async () => {
    const c = await newCollection();
    const k = await newClass(c);
    for (const t of [a, b]) for (let i = 0; i < 2; i++) expect((await list(t, undefined, k)).status).toBe(200);
    expect((await a.request('DELETE', `/api/v1/classes/${k}`)).status).toBe(204);
    expect((await list(a, undefined, k)).status).toBe(404);
    await listsOn(b, undefined, k, 404);
  });
});

describe('the grants kept, all together, within SVC_TOKEN_CACHE_GRANT_IDS', () => {
  let small: TestApp;
  beforeAll(async () => {
    small = await startTestApp({ SVC_TOKEN_CACHE_SIZE: 10000, SVC_TOKEN_CACHE_GRANT_IDS: 5 });
  });
  afterAll(async () => {
    await small.close();
  });
  const grantReadsOf = async (fn: () => Promise<unknown>): Promise<number> => (await statementsOf(small, fn)).filter(readsGrants).length;

  it('the oldest principal goes when the pairs would exceed it; grants beyond it alone are read each time', async () => {
    const c = { id: await newCollection() };
    const three = ['ReadCollection', 'ReadClass', 'ReadObject'];
    const p1 = await userWith(a, [[c.id, three]]);
    const p2 = await userWith(a, [[c.id, three]]);
    const p6 = await userWith(a, [[c.id, [...three, 'ReadAudit', 'UpdateObject', 'CreateObject']]]);
    const get = (token: string) => small.request('GET', `/api/v1/collections/${c.id}`, { token });
    // each principal's first read reads its grants; the second is answered from memory
    expect(await grantReadsOf(async () => expect((await get(p1.token)).status).toBe(200))).toBe(1);
    expect(await grantReadsOf(async () => expect((await get(p1.token)).status).toBe(200))).toBe(0);
    expect(tokenCache(small.deps).grantsHeld()).toEqual({ principals: 1, ids: 3 });
    // p2's 3 pairs and p1's 3 exceed 5: p1's go
    expect(await grantReadsOf(async () => expect((await get(p2.token)).status).toBe(200))).toBe(1);
    expect(tokenCache(small.deps).grantsHeld()).toEqual({ principals: 1, ids: 3 });
    expect(await grantReadsOf(async () => expect((await get(p1.token)).status).toBe(200))).toBe(1);
    // 6 pairs alone exceed 5: read at every request, nothing else dropped for them
    for (let i = 0; i < 2; i++) expect(await grantReadsOf(async () => expect((await get(p6.token)).status).toBe(200))).toBe(1);
    expect(tokenCache(small.deps).grantsHeld()).toEqual({ principals: 1, ids: 3 });
  });
});
