// Deleting a class reads and locks the object relations that go with it (src/db/classes.ts
// lockClassObjectRelations). With many relations elsewhere in the database, that read must come from
// the indexes: its conditions ORed over the joins made PostgreSQL join every relation to both its
// objects, and an empty class's delete took ~400 ms at 400,000 relations. A database of this file's
// own, with 30,000 relations between two classes, analyzed; the statements of the deletes, as they
// ran, are explained with their parameters. No timing: the plan is what is checked.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type OwnDatabase } from './db-fixtures.ts';
import { planOfSent, startTestApp, statementsDuring, uniq, type SentStatement, type TestApp } from './helpers.ts';

const OBJECTS = 30_000;
let db: OwnDatabase;
let t: TestApp;
let collectionId: number;
let from: number;
let to: number;

async function ok<T>(method: string, path: string, body?: unknown, status = 201): Promise<T> {
  const res = await t.request(method, path, { body });
  expect(res.status, res.text).toBe(status);
  return res.body as T;
}

const newClass = async () => (await ok<{ id: number }>('POST', '/api/v1/classes', { name: uniq('cls'), collection_id: collectionId })).id;

beforeAll(async () => {
  db = await createDatabase('class_delete_plan', { migrate: true });
  t = await startTestApp({ SVC_DATABASE_URL: db.url });
  collectionId = (await ok<{ id: number }>('POST', '/api/v1/collections', { name: uniq('graph') })).id;
  from = await newClass();
  to = await newClass();
  const rel = await ok<{ id: number }>('POST', '/api/v1/relations/classes', { from_class_id: from, to_class_id: to });
  for (const classId of [from, to])
    await t.deps.sql`
      insert into objects (name, collection_id, class_id, json_data)
      select 'o-' || g, ${collectionId}::int, ${classId}::int, '{}'::jsonb from generate_series(1, ${OBJECTS}::int) g`;
  // object i of the first class related to object i of the second
  await t.deps.sql`
    insert into object_relations (class_relation_id, from_object_id, to_object_id)
    select ${rel.id}::int, f.id, b.id
    from (select id, row_number() over (order by id) n from objects where class_id = ${from}::int) f
    join (select id, row_number() over (order by id) n from objects where class_id = ${to}::int) b using (n)`;
  await t.deps.sql`analyze objects`;
  await t.deps.sql`analyze object_relations`;
  await t.deps.sql`analyze class_relations`;
}, 120_000);

afterAll(async () => {
  await t?.close();
  await db?.drop();
});

/** The plan of the statement that locks the class's object relations, explained with its parameters. */
async function relationsPlan(seen: SentStatement[]): Promise<string> {
  const read = seen.filter((s) => /from object_relations r\b/.test(s.text) && /for update of r/.test(s.text));
  expect(read.length).toBe(1);
  return planOfSent(t.deps.sql, read[0]!);
}

describe('deleting a class in a database of 30,000 object relations', () => {
  it('reads the relations of an empty class from the indexes', async () => {
    const empty = await newClass();
    const { result: res, statements } = await statementsDuring(t.deps.sql, () => t.request('DELETE', `/api/v1/classes/${empty}`));
    expect(res.status, res.text).toBe(204);
    const plan = await relationsPlan(statements);
    expect(plan).not.toMatch(/Seq Scan on object_relations/);
    expect(plan).not.toMatch(/Seq Scan on objects/);
  });

  it('and takes every relation of a class with objects with it', async () => {
    // a third class related to the first, with one object related to one of the first's
    const third = await newClass();
    const rel = await ok<{ id: number }>('POST', '/api/v1/relations/classes', { from_class_id: third, to_class_id: from });
    const obj = await ok<{ id: number }>('POST', `/api/v1/classes/${third}/objects`, { name: 'x', json_data: {} });
    const [target] = await t.deps.sql<{ id: number }[]>`select min(id)::int as id from objects where class_id = ${from}::int`;
    await ok('POST', '/api/v1/relations/objects', { class_relation_id: rel.id, from_object_id: obj.id, to_object_id: target!.id });
    const { result: res, statements } = await statementsDuring(t.deps.sql, () => t.request('DELETE', `/api/v1/classes/${third}`));
    expect(res.status, res.text).toBe(204);
    expect(await relationsPlan(statements)).not.toMatch(/Seq Scan on object_relations/);
    const [left] = await t.deps.sql<{ n: number }[]>`
      select count(*)::int as n from object_relations where class_relation_id = ${rel.id}::int`;
    expect(left!.n).toBe(0);
    const [kept] = await t.deps.sql<{ n: number }[]>`select count(*)::int as n from object_relations`;
    expect(kept!.n).toBe(OBJECTS);
    // each relation deleted with the class is recorded
    const [events] = await t.deps.sql<{ n: number }[]>`
      select count(*)::int as n from events where entity_type = 'object_relation' and action = 'deleted'
        and (after is null and before ->> 'from_object_id' = ${String(obj.id)})`;
    expect(events!.n).toBe(1);
  });
});
