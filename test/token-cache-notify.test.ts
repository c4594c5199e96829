// What the api processes' token caches drop (migrations/0180, 0250 and 0260): the notifications the
// database sends on channel svc_token_cache, for writes through the API and for the directory
// code's own statements: only for a change of what the caches hold, naming whom it concerns. A database of this file's own, so that no other test file's writes are
// heard. Each case sends a marker notification of its own after its writes and waits for it:
// PostgreSQL delivers notifications in commit order, so whatever the writes sent has arrived by then
// (nothing is timed).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { createDatabase, type OwnDatabase } from './db-fixtures.ts';
import { addMember, createGroup, createHuman, createServiceAccount, grant } from './iam-fixtures.ts';
import { TOKEN_CACHE_CHANNEL } from '../src/db/auth-changes.ts';
import { markGroupSynced, updateProviderUser } from '../src/db/directory.ts';
import { withTx } from '../src/db/tx.ts';

let db: OwnDatabase;
let t: TestApp;
beforeAll(async () => {
  db = await createDatabase('svc_token_notify', { migrate: true });
  t = await startTestApp({ SVC_DATABASE_URL: db.url });
});
afterAll(async () => {
  await t?.close();
  await db?.drop();
});

/** The notifications (but the heartbeats) that what `run` committed sent on the token caches' channel. */
async function noticesOf(run: () => Promise<unknown>): Promise<string[]> {
  const sql = t.deps.sql;
  const marker = `t:-${randomBytes(4).readUInt32BE()}`; // drops token -n: none
  const got: string[] = [];
  let arrived!: () => void;
  const markerArrived = new Promise<void>((ok) => (arrived = ok));
  const listening = await sql.listen(TOKEN_CACHE_CHANNEL, (payload) => {
    if (payload === marker) arrived();
    else if (payload !== 'p') got.push(payload);
  });
  try {
    await run();
    await sql`select pg_notify(${TOKEN_CACHE_CHANNEL}, ${marker})`;
    await markerArrived;
  } finally {
    await listening.unlisten();
  }
  return got;
}

const status = async (method: string, path: string, body?: unknown) => (await t.request(method, path, { body })).status;

describe('token cache invalidation: only a change of what the caches hold, naming whom it concerns', () => {
  it("a membership added or removed: the member's; added again or removed when absent, nothing", async () => {
    const g = await createGroup(t);
    const h = await createHuman(t);
    const path = `/api/v1/iam/groups/${g.id}/members/${h.id}`;
    expect(await noticesOf(async () => expect(await status('POST', path)).toBe(201))).toEqual([`u:${h.id}`]);
    expect(await noticesOf(async () => expect(await status('POST', path)).toBe(201))).toEqual([]);
    expect(await noticesOf(async () => expect(await status('DELETE', path)).toBe(204))).toEqual([`u:${h.id}`]);
    expect(await noticesOf(async () => expect(await status('DELETE', path)).toBe(204))).toEqual([]);
  });

  it("a permission granted or revoked: the group's grants", async () => {
    const c = await t.request('POST', '/api/v1/collections', { body: { name: uniq('c') } });
    expect(c.status, c.text).toBe(201);
    const cid = (c.body as { id: number }).id;
    const g = await createGroup(t);
    expect(await noticesOf(() => grant(t, cid, g.id, ['ReadCollection', 'ReadObject']))).toEqual([`G:${g.id}`]);
    const revoke = `/api/v1/collections/${cid}/permissions/group/${g.id}/ReadCollection`;
    expect(await noticesOf(async () => expect(await status('DELETE', revoke)).toBeLessThan(300))).toEqual([`G:${g.id}`]);
  });

  it("a user's settings saved: nothing; the user renamed or updated, or a service account disabled: theirs", async () => {
    const h = await createHuman(t);
    const saved = await noticesOf(async () => {
      const res = await t.request('PUT', '/api/v1/iam/me/settings', { token: h.token, body: { theme: 'dark' } });
      expect(res.status, res.text).toBe(200);
    });
    expect(saved).toEqual([]);
    const renamed = await noticesOf(() => t.deps.sql`update principals set name = ${uniq('renamed')} where id = ${h.id}`);
    expect(renamed).toEqual([`u:${h.id}`]);
    const updated = await noticesOf(async () => {
      const res = await t.request('PATCH', `/api/v1/iam/users/${h.id}`, { body: { email: `${uniq('m')}@example.org` } });
      expect(res.status, res.text).toBe(200);
    });
    expect(updated).toEqual([`u:${h.id}`]);
    const sa = await createServiceAccount(t, (await createGroup(t)).id);
    const disabled = await noticesOf(async () => {
      const res = await t.request('POST', `/api/v1/iam/service-accounts/${sa.id}/disable`);
      expect(res.status, res.text).toBeLessThan(300);
    });
    expect(disabled).toContain(`u:${sa.id}`);
    expect(disabled).not.toContain('g');
  });

  it("a group renamed: its members' (its name decides who is an administrator); its description: nothing; deleted: its members' and its grants'", async () => {
    const g = await createGroup(t);
    const h = await createHuman(t);
    await addMember(t, g.id, h.id);
    const c = await t.request('POST', '/api/v1/collections', { body: { name: uniq('c') } });
    const cid = (c.body as { id: number }).id;
    await grant(t, cid, g.id, ['ReadCollection']);
    const described = await noticesOf(async () => {
      const res = await t.request('PATCH', `/api/v1/iam/groups/${g.id}`, { body: { description: uniq('d') } });
      expect(res.status, res.text).toBe(200);
    });
    expect(described).toEqual([]);
    const renamed = await noticesOf(async () => {
      const res = await t.request('PATCH', `/api/v1/iam/groups/${g.id}`, { body: { name: uniq('g') } });
      expect(res.status, res.text).toBe(200);
    });
    expect(renamed).toEqual([`u:${h.id}`]);
    const empty = await createGroup(t);
    const emptyRenamed = await noticesOf(async () => {
      const res = await t.request('PATCH', `/api/v1/iam/groups/${empty.id}`, { body: { name: uniq('g') } });
      expect(res.status, res.text).toBe(200);
    });
    expect(emptyRenamed).toEqual([]);
    const deleted = await noticesOf(async () => expect(await status('DELETE', `/api/v1/iam/groups/${g.id}`)).toBe(204));
    expect(deleted.sort()).toEqual([`G:${g.id}`, `u:${h.id}`]);
  });

  it('the collection tree: the collection whose holders are concerned (a new root, a rename: nothing)', async () => {
    const make = async (parent?: number) => {
      const res = await t.request('POST', '/api/v1/collections', {
        body: { name: uniq('c'), ...(parent === undefined ? {} : { parent_collection_id: parent }) },
      });
      expect(res.status, res.text).toBe(201);
      return (res.body as { id: number }).id;
    };
    let root = 0;
    expect(await noticesOf(async () => (root = await make()))).toEqual([]);
    let child = 0;
    expect(await noticesOf(async () => (child = await make(root)))).toEqual([`c:${root}`]);
    const other = await make();
    const renamed = await noticesOf(async () => {
      const res = await t.request('PATCH', `/api/v1/collections/${child}`, { body: { name: uniq('renamed') } });
      expect(res.status, res.text).toBe(200);
    });
    expect(renamed).toEqual([]);
    const move = (parent: number | null) => async () => {
      const res = await t.request('PUT', `/api/v1/collections/${child}/parent`, { body: { parent_collection_id: parent } });
      expect(res.status, res.text).toBe(200);
    };
    expect((await noticesOf(move(other))).sort()).toEqual([`c:${child}`, `c:${other}`].sort());
    expect(await noticesOf(move(null))).toEqual([`c:${child}`]);
    expect(await noticesOf(async () => expect(await status('DELETE', `/api/v1/collections/${child}`)).toBe(204))).toEqual([`c:${child}`]);
  });

  it("a user deleted: theirs and their tokens'", async () => {
    const h = await createHuman(t);
    const deleted = await noticesOf(async () => expect(await status('DELETE', `/api/v1/iam/users/${h.id}`)).toBe(204));
    expect(deleted).toContain(`u:${h.id}`);
    expect(deleted.every((n) => n === `u:${h.id}` || n.startsWith('t:'))).toBe(true);
  });

  it('a directory sign-in of a known, unchanged user and a group sync that changes nothing: nothing', async () => {
    const h = await createHuman(t);
    const g = await createGroup(t);
    await addMember(t, g.id, h.id);
    const stamped = await noticesOf(() =>
      withTx(t.deps.sql, async (tx) => {
        // what signInDirectoryUser and applyGroupSync write when the directory changed nothing
        await updateProviderUser(tx, h.id, {
          subject: `uid=${h.name},ou=people,dc=example,dc=org`,
          email: null,
          properName: null,
          changed: false,
        });
        await tx`insert into group_members (group_id, principal_id) values (${g.id}, ${h.id}) on conflict do nothing`;
        await markGroupSynced(tx, g.id);
      }),
    );
    expect(stamped).toEqual([]);
    // a change the caches hold still empties them
    const changed = await noticesOf(() => t.deps.sql`update groups set name = ${uniq('g')} where id = ${g.id}`);
    expect(changed).toEqual([`u:${h.id}`]);
  });
});
