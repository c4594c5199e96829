// Writes that send several statements in one round trip send them in the order their rules need
// (src/db/tx.ts, "Pipelines"): the lock first, then what must read the locked state. Shown by the
// race each order closes: a row added by a transaction that holds up the write's lock, committed
// while the write waits, is taken into account by the write (deleted with it and recorded, or
// revoked), not overlooked by a read that went out before the lock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, startTestApp, uniq, type TestApp } from './helpers.ts';
import { graphFixtures } from './graph-fixtures.ts';
import { principalWith } from './class-fixtures.ts';
import type { TransactionSql } from '../src/db/sql.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const { collection, klass, object, classRelation } = graphFixtures(() => t);

/**
 * Runs `hold` in a transaction of its own and keeps it open while `write` starts and until that
 * write waits for a lock (the one `hold` holds); then runs `thenInHolder` in it, commits it and
 * returns what `write` answered.
 */
async function whileHeld<T>(
  hold: (tx: TransactionSql) => Promise<unknown>,
  write: () => Promise<T>,
  thenInHolder?: (tx: TransactionSql) => Promise<unknown>,
): Promise<T> {
  let held!: () => void;
  let release!: () => void;
  const isHeld = new Promise<void>((ok) => (held = ok));
  const released = new Promise<void>((ok) => (release = ok));
  const holding = t.deps.sql.begin(async (tx) => {
    await hold(tx);
    held();
    await released;
    await thenInHolder?.(tx);
  });
  await isHeld;
  const writing = write();
  try {
    for (let i = 0; ; i++) {
      const [row] = await t.deps.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
      if (row!.n > 0) break;
      if (i > 500) throw new Error('the write never waited for the held lock');
      await new Promise((ok) => setTimeout(ok, 10));
    }
  } finally {
    release();
    await holding;
  }
  return writing;
}

/** Two classes related by a class relation, and an object of each (x of class a, y of class b). */
async function relatable() {
  const c = await collection();
  const a = await klass(c);
  const b = await klass(c);
  return { a, cr: await classRelation(a.id, b.id), x: await object(a.id, c), y: await object(b.id, c) };
}

describe('a write waiting for its lock reads what the holder committed', () => {
  it('deleteObject: a relation added meanwhile is deleted with the object and recorded', async () => {
    const { a, cr, x, y } = await relatable();
    let relationId = 0;
    const res = await whileHeld(
      async (tx) => {
        // the insert's foreign key check holds x (key share), which the delete's lock waits for
        const [r] = await tx<{ id: number }[]>`
          insert into object_relations (class_relation_id, from_object_id, to_object_id) values (${cr}, ${x}, ${y}) returning id`;
        relationId = r!.id;
      },
      () => t.request('DELETE', `/api/v1/classes/${a.id}/${x}`),
    );
    expect(res.status, res.text).toBe(204);
    expect(await t.deps.sql`select 1 from object_relations where id = ${relationId}`).toHaveLength(0);
    expect((await eventsOf(t, 'object_relation', relationId)).map((e) => e.action)).toEqual(['deleted']);
    const [deleted] = await eventsOf(t, 'object', x);
    expect(deleted!.metadata).toMatchObject({ deleted_object_relations: 1 });
  });

  it('createObjectRelation: an end deleted while the create waits for its lock is 404, not a foreign-key conflict', async () => {
    const { cr, x, y } = await relatable();
    const res = await whileHeld(
      // the end's delete holds its row; the create read it before and now waits for its lock
      (tx) => tx`delete from objects where id = ${y}`,
      () => t.request('POST', '/api/v1/relations/objects', { body: { class_relation_id: cr, from_object_id: x, to_object_id: y } }),
    );
    expect(res.status, res.text).toBe(404);
    expect((res.body as { message: string }).message).toContain('to_object_id');
  });

  it('createObjectRelation: a relation added by the holder of an end counts against the maximum (409)', async () => {
    const { cr, x, y } = await relatable();
    await t.deps.sql`update class_relations set from_max_relations = 1 where id = ${cr}`;
    const c = await collection();
    const [b] = await t.deps.sql<{ to_class_id: number }[]>`select to_class_id from class_relations where id = ${cr}`;
    const other = await object(b!.to_class_id, c);
    const res = await whileHeld(
      // x held as the create's end lock takes it, and a relation of x added under the same class relation
      async (tx) => {
        await tx`select id from objects where id = ${x} for no key update`;
        await tx`insert into object_relations (class_relation_id, from_object_id, to_object_id) values (${cr}, ${x}, ${other})`;
      },
      () => t.request('POST', '/api/v1/relations/objects', { body: { class_relation_id: cr, from_object_id: x, to_object_id: y } }),
    );
    expect(res.status, res.text).toBe(409);
    expect((res.body as { reason: string }).reason).toBe('max_relations_exceeded');
    expect(await t.deps.sql`select 1 from object_relations where from_object_id = ${x}`).toHaveLength(1);
  });

  it('deleteCollection: a grant added meanwhile is recorded as revoked', async () => {
    const c = await collection();
    const [g] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
    const res = await whileHeld(
      (tx) => tx`insert into collection_permissions (collection_id, group_id, permission) values (${c}, ${g!.id}, 'ReadAudit')`,
      () => t.request('DELETE', `/api/v1/collections/${c}`),
    );
    expect(res.status, res.text).toBe(204);
    const revoked = await t.deps.sql<{ entity_name: string }[]>`
      select entity_name from events where entity_type = 'permission' and action = 'revoked' and collection_id = ${c}`;
    expect(revoked.map((e) => e.entity_name)).toEqual(['ReadAudit']);
  });

  it('updateClass: a class moved meanwhile is judged in its new collection (403 without UpdateClass there)', async () => {
    const from = await collection();
    const to = await collection();
    const k = await klass(from);
    const editor = await principalWith(t, [
      [from, ['ReadClass', 'UpdateClass']],
      [to, ['ReadClass']],
    ]);
    const res = await whileHeld(
      (tx) => tx`update classes set collection_id = ${to} where id = ${k.id}`,
      () => t.request('PATCH', `/api/v1/classes/${k.id}`, { token: editor.token, body: { description: 'edited' } }),
    );
    expect(res.status, res.text).toBe(403);
    const [row] = await t.deps.sql<{ description: string }[]>`select description from classes where id = ${k.id}`;
    expect(row!.description).toBe('');
  });

  it('updateCollection: a collection moved meanwhile is judged under its new parent (403 without UpdateCollection there)', async () => {
    const from = await collection();
    const to = await collection();
    const [c] = await t.deps.sql<{ id: number }[]>`
      insert into collections (name, parent_collection_id) values (${uniq('col')}, ${from}) returning id`;
    const editor = await principalWith(t, [
      [from, ['ReadCollection', 'UpdateCollection']],
      [to, ['ReadCollection']],
    ]);
    const res = await whileHeld(
      (tx) => tx`update collections set parent_collection_id = ${to} where id = ${c!.id}`,
      () => t.request('PATCH', `/api/v1/collections/${c!.id}`, { token: editor.token, body: { description: 'edited' } }),
    );
    expect(res.status, res.text).toBe(403);
    const [row] = await t.deps.sql<{ description: string }[]>`select description from collections where id = ${c!.id}`;
    expect(row!.description).toBe('');
  });

  it('deleteGroup: a member added meanwhile is among the removed members it records', async () => {
    const [g] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
    const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values ('human', ${uniq('u')}) returning id`;
    const res = await whileHeld(
      (tx) => tx`insert into group_members (group_id, principal_id) values (${g!.id}, ${p!.id})`,
      () => t.request('DELETE', `/api/v1/iam/groups/${g!.id}`),
    );
    expect(res.status, res.text).toBe(204);
    const [deleted] = await eventsOf(t, 'group', g!.id);
    expect(deleted).toMatchObject({ action: 'deleted', metadata: { removed_member_ids: [p!.id] } });
  });

  it('replaceCollectionGroupPermissions: a grant added meanwhile under the same lock is revoked', async () => {
    const c = await collection();
    const [g] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
    const res = await whileHeld(
      async (tx) => {
        // another change of the group's grants on the collection, holding their lock (lockGrants)
        await tx`select pg_advisory_xact_lock(${727011}::int, hashtext(${`${c}:${g!.id}`}))`;
        await tx`insert into collection_permissions (collection_id, group_id, permission) values (${c}, ${g!.id}, 'ReadAudit')`;
      },
      () => t.request('PUT', `/api/v1/collections/${c}/permissions/group/${g!.id}`, { body: ['ReadCollection'] }),
    );
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(['ReadCollection']);
    const left = await t.deps.sql<{ permission: string }[]>`
      select permission from collection_permissions where collection_id = ${c} and group_id = ${g!.id}`;
    expect(left.map((r) => r.permission)).toEqual(['ReadCollection']);
    const changes = await t.deps.sql<{ action: string; entity_name: string }[]>`
      select action, entity_name from events where entity_type = 'permission' and collection_id = ${c} order by id`;
    expect(changes).toEqual([
      { action: 'revoked', entity_name: 'ReadAudit' },
      { action: 'granted', entity_name: 'ReadCollection' },
    ]);
  });

  it('replaceCollectionGroupPermissions beside a collection delete: the grant change waits for the collection, no deadlock', async () => {
    const c = await collection();
    const [g] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
    await t.deps.sql`insert into collection_permissions (collection_id, group_id, permission) values (${c}, ${g!.id}, 'ReadAudit')`;
    const res = await whileHeld(
      // a collection delete's first steps: the collection locked for update, then its grants
      (tx) => tx`select 1 from collections where id = ${c} for update`,
      () => t.request('PUT', `/api/v1/collections/${c}/permissions/group/${g!.id}`, { body: ['ReadCollection'] }),
      (tx) => tx`select 1 from collection_permissions where collection_id = ${c} for update`,
    );
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(['ReadCollection']);
  });
});
