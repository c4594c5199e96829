// Configuration writes racing each other through the API for a few seconds, as several admin
// clients would: grant changes beside collection and group deletes, class moves beside class
// deletes, updates, object creates. Whatever interleaving happens, no request fails with a 5xx or a
// deadlock ("changed concurrently", PostgreSQL's 40P01), and the audit record still matches the
// data: per collection, group and permission, the grants recorded minus the revocations recorded is
// what is held now; every object recorded as created is recorded as deleted exactly when it is gone.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const PERMS = ['ReadCollection', 'ReadObject', 'CreateObject', 'UpdateObject', 'ReadClass', 'DeleteObject', 'ReadAudit'];
const SECONDS = 10;
const CLIENTS = 8;
const pick = <T>(a: T[]): T => a[Math.floor(Math.random() * a.length)]!;

async function created(method: string, path: string, body: unknown): Promise<number> {
  const res = await t.request(method, path, { body });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

it('racing configuration writes: no 5xx, no deadlock, and the audit record matches the data', async () => {
  const root = await created('POST', '/api/v1/collections', { name: uniq('root') });
  const groups: number[] = [];
  for (let i = 0; i < 3; i++) groups.push(await created('POST', '/api/v1/iam/groups', { name: uniq('g') }));
  const cols: number[] = [];
  // every collection this test makes (the test run's database is shared with the other test files)
  const ours: number[] = [];
  for (let i = 0; i < 4; i++)
    cols.push(await created('POST', '/api/v1/collections', { name: uniq('c'), parent_collection_id: root, group_id: groups[0] }));
  const classes: number[] = [];
  ours.push(...cols);
  for (const c of cols) classes.push(await created('POST', '/api/v1/classes', { name: uniq('k'), collection_id: c }));

  const seen = new Map<string, number>();
  const note = (op: string, res: { status: number; body: unknown }) => {
    const message = res.status >= 409 ? ` ${(res.body as { message?: string } | null)?.message ?? ''}` : '';
    const key = `${op} ${res.status}${message}`;
    seen.set(key, (seen.get(key) ?? 0) + 1);
  };
  const end = Date.now() + SECONDS * 1000;
  const client = async () => {
    while (Date.now() < end) {
      const r = Math.random();
      if (r < 0.25) {
        const body = PERMS.filter(() => Math.random() < 0.5);
        note('replace grants', await t.request('PUT', `/api/v1/collections/${pick(cols)}/permissions/group/${pick(groups)}`, { body }));
      } else if (r < 0.4) {
        // a new collection with every permission for a group, then a grant change beside its delete
        const id = await created('POST', '/api/v1/collections', {
          name: uniq('e'),
          parent_collection_id: pick(cols),
          group_id: pick(groups),
        });
        ours.push(id);
        const [grant, del] = await Promise.all([
          t.request('PUT', `/api/v1/collections/${id}/permissions/group/${pick(groups)}`, { body: ['ReadAudit'] }),
          t.request('DELETE', `/api/v1/collections/${id}`),
        ]);
        note('grant beside a collection delete', grant);
        note('collection delete beside a grant', del);
      } else if (r < 0.55) {
        // a new group with a grant, then another grant change beside its delete
        const id = await created('POST', '/api/v1/iam/groups', { name: uniq('tg') });
        note('grant', await t.request('PUT', `/api/v1/collections/${pick(cols)}/permissions/group/${id}`, { body: ['ReadCollection'] }));
        const [grant, del] = await Promise.all([
          t.request('PUT', `/api/v1/collections/${pick(cols)}/permissions/group/${id}`, { body: ['ReadObject'] }),
          t.request('DELETE', `/api/v1/iam/groups/${id}`),
        ]);
        note('grant beside a group delete', grant);
        note('group delete beside a grant', del);
      } else if (r < 0.7) {
        // a new class with an object, then a move beside its delete
        const id = await created('POST', '/api/v1/classes', { name: uniq('tk'), collection_id: pick(cols) });
        await created('POST', `/api/v1/classes/${id}/objects`, { name: uniq('o'), json_data: {} });
        const [move, del] = await Promise.all([
          t.request('PATCH', `/api/v1/classes/${id}`, { body: { collection_id: pick(cols) } }),
          t.request('DELETE', `/api/v1/classes/${id}`),
        ]);
        note('class move beside a delete', move);
        note('class delete beside a move', del);
      } else if (r < 0.8) {
        note(
          'class update',
          await t.request('PATCH', `/api/v1/classes/${pick(classes)}`, { body: { description: uniq('d'), collection_id: pick(cols) } }),
        );
      } else if (r < 0.9) {
        note('collection update', await t.request('PATCH', `/api/v1/collections/${pick(cols)}`, { body: { description: uniq('d') } }));
      } else {
        note(
          'object create',
          await t.request('POST', `/api/v1/classes/${pick(classes)}/objects`, { body: { name: uniq('o'), json_data: {} } }),
        );
      }
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));

  const outcomes = [...seen.keys()].sort();
  expect(outcomes.filter((k) => / 5\d\d/.test(k) || /concurrently/.test(k))).toEqual([]);
  // every outcome is one a client of the API expects: done, or gone (404) because the other request won
  expect(outcomes.filter((k) => !/ (200|201|204|404)$/.test(k))).toEqual([]);

  const grantsOff = await t.deps.sql`
    with recorded as (
      select collection_id, entity_id as group_id, entity_name as permission,
        sum(case action when 'granted' then 1 when 'revoked' then -1 else 0 end) as n
      from events where entity_type = 'permission' and collection_id = any(${ours}::int[]) group by 1, 2, 3
    )
    select r.* from recorded r
    left join collection_permissions cp on cp.collection_id = r.collection_id and cp.group_id = r.group_id and cp.permission = r.permission
    where r.n <> (case when cp.permission is null then 0 else 1 end)`;
  expect(grantsOff).toEqual([]);
  const objectsOff = await t.deps.sql`
    with recorded as (
      select entity_id, bool_or(action = 'created') as created, bool_or(action = 'deleted') as deleted
      from events where entity_type = 'object' and collection_id = any(${ours}::int[]) group by 1
    )
    select r.* from recorded r left join objects o on o.id = r.entity_id
    where r.created and r.deleted = (o.id is not null)`;
  expect(objectsOff).toEqual([]);
}, 60_000);
