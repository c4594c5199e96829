// Objects: create (with and without an enforced class schema), get, a filtered and sorted list
// page over a large class, keyset paging deep into it, and a JSON Patch of object data.
import { createClass, seedObjects, type Bench } from './setup.ts';
import { timeCase, type TimedRow } from './harness.ts';

const AREA = 'objects';

export const SERVER_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  required: ['hostname', 'env', 'metrics'],
  additionalProperties: false,
  properties: {
    hostname: { type: 'string', minLength: 1, maxLength: 253 },
    env: { enum: ['prod', 'staging', 'dev'] },
    metrics: {
      type: 'object',
      required: ['cpu', 'mem_gb'],
      properties: { cpu: { type: 'integer', minimum: 1 }, mem_gb: { type: 'number', minimum: 0 } },
    },
    ip: { type: 'string', format: 'ipv4' },
    tags: { type: 'array', items: { type: 'string' }, maxItems: 32 },
    counter: { type: 'integer' },
  },
};

export function serverData(i: number) {
  return {
    hostname: `new-${i}.example.net`,
    env: ['prod', 'staging', 'dev'][i % 3],
    metrics: { cpu: 1 + (i % 16), mem_gb: 8 },
    ip: `10.200.${(i >> 8) & 255}.${i & 255}`,
    tags: ['rack-1', 'new'],
    counter: 0,
  };
}

/** The large seeded class the list, search and export cases share. */
export interface SeededClass {
  collectionId: number;
  classId: number;
  size: number;
  firstObjectId: number;
}

export async function seedLargeClass(b: Bench, collectionId: number, size: number): Promise<SeededClass> {
  const classId = await createClass(b, collectionId, { description: 'bench servers' });
  await seedObjects(b, collectionId, classId, size);
  const [first] = await b.sql<{ id: number }[]>`select min(id) as id from objects where class_id = ${classId}`;
  return { collectionId, classId, size, firstObjectId: first!.id };
}

export async function benchObjects(b: Bench, big: SeededClass): Promise<void> {
  const token = b.adminToken;
  const plain = await createClass(b, big.collectionId);
  const strict = await createClass(b, big.collectionId, { json_schema: SERVER_SCHEMA, validate_schema: true });
  let seq = 0;
  const create = (classId: number) => async () => {
    const i = seq++;
    await b.expect(201, 'POST', `/api/v1/classes/${classId}/objects`, { token, body: { name: `obj-${i}`, json_data: serverData(i) } });
  };
  await timeCase(AREA, 'create object (class without schema)', 1, create(plain));
  await timeCase(AREA, 'create object (class schema enforced)', 1, create(strict), 'ajv validation of json_data');

  const objPath = `/api/v1/classes/${big.classId}/${big.firstObjectId}`;
  await timeCase(AREA, 'get object', 1, async () => void (await b.expect(200, 'GET', objPath, { token })));

  const [obj] = await b.sql<{ h: string }[]>`select json_data->>'hostname' as h from objects where id = ${big.firstObjectId}`;
  let counter = 0;
  await timeCase(AREA, 'JSON Patch object data (test + replace)', 1, async () => {
    counter++;
    await b.expect(200, 'PATCH', `${objPath}/data`, {
      token,
      contentType: 'application/json-patch+json',
      body: [
        { op: 'test', path: '/hostname', value: obj!.h },
        { op: 'replace', path: '/counter', value: counter },
        { op: 'add', path: '/tags/-', value: `t${counter % 3}` },
        { op: 'remove', path: '/tags/2' },
      ],
    });
  });

  // A list page of 100 over the large class: JSON-path filter (cpu >= 4, about 81% match), sort by name.
  const listPath = `/api/v1/classes/${big.classId}/objects`;
  const filter = { limit: 100, sort: 'name', json_data__gte: 'metrics,cpu=4' };
  const total = Number(
    (await b.expect(200, 'GET', listPath, { token, query: { ...filter, include_total: true } })).headers.get('x-total-count'),
  );
  await timeCase(
    AREA,
    `list page 1 (limit 100, json filter, sort name, with total)`,
    0.2,
    async () => void (await b.expect(200, 'GET', listPath, { token, query: filter })),
    `${big.size} objects, ${total} match`,
  );

  // Keyset paging without the total: page 1 against pages deep in the list, same query and cursor format.
  const pageQuery = { ...filter, include_total: false };
  const cursors = new Map<number, string>();
  const wanted = [50, 150];
  let cursor: string | null = null;
  for (let page = 1; page < Math.max(...wanted); page++) {
    const res = await b.expect(200, 'GET', listPath, { token, query: cursor ? { ...pageQuery, cursor } : pageQuery });
    cursor = res.headers.get('x-next-cursor');
    if (!cursor) break;
    if (wanted.includes(page + 1)) cursors.set(page + 1, cursor);
  }
  const first = await timeCase(
    AREA,
    'list page 1 (same query, no total)',
    0.3,
    async () => void (await b.expect(200, 'GET', listPath, { token, query: pageQuery })),
  );
  const ratio = (r: TimedRow) => r.median / r.baseline;
  for (const page of wanted) {
    const c = cursors.get(page);
    if (!c) continue;
    const row = await timeCase(
      AREA,
      `list page ${page} via keyset cursor (no total)`,
      0.3,
      async () => void (await b.expect(200, 'GET', listPath, { token, query: { ...pageQuery, cursor: c } })),
    );
    // Keyset paging should cost the same at any depth: compare the baseline-relative cost with page 1.
    row.note = `rows ${(page - 1) * 100 + 1}..${page * 100}; ${(ratio(row) / ratio(first)).toFixed(2)}x page 1`;
  }
}
