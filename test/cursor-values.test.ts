// A list cursor's signature is no secret (a hash of the filters and sort), so a client can craft
// its values: each must be of its sort key's kind (src/domain/list-query.ts cursorValueFits) or
// the request is the cursor's 400, never a statement the database refuses (a boolean bound where
// an integer or a time was expected was a 500 on every list).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';

let t: TestApp;
let classId: number;

beforeAll(async () => {
  t = await startTestApp();
  const col = await t.request('POST', '/api/v1/collections', { body: { name: uniq('cv') } });
  const collectionId = (col.body as { id: number }).id;
  for (let i = 0; i < 2; i++) await t.request('POST', '/api/v1/collections', { body: { name: uniq('cv') } });
  const cls = await t.request('POST', '/api/v1/classes', { body: { name: uniq('cvk'), collection_id: collectionId } });
  classId = (cls.body as { id: number }).id;
  for (let i = 0; i < 3; i++)
    await t.request('POST', `/api/v1/classes/${classId}/objects`, { body: { name: uniq('cvo'), json_data: { n: i } } });
});
afterAll(async () => {
  await t.close();
});

const get = (path: string) => t.request('GET', path);

/** The list's first page's cursor with every value replaced by `value`. */
async function crafted(path: string, value: unknown): Promise<string> {
  const first = await get(path);
  expect(first.status, path).toBe(200);
  const next = first.headers.get('x-next-cursor');
  expect(next, path).toBeTruthy();
  const c = JSON.parse(Buffer.from(next!, 'base64url').toString()) as { v: unknown[]; s: string };
  return Buffer.from(JSON.stringify({ v: c.v.map(() => value), s: c.s })).toString('base64url');
}

describe('crafted cursor values', () => {
  const lists = () => [
    '/api/v1/collections?limit=1', // id (integer)
    '/api/v1/collections?limit=1&sort=name', // text, then id
    '/api/v1/collections?limit=1&sort=-created_at', // time, then id
    `/api/v1/classes/${classId}/objects?limit=1&sort=updated_at`,
    '/api/v1/events?limit=1', // bigint id
    '/api/v1/events?limit=1&sort=occurred_at',
  ];

  it('of another kind than their sort key are the 400 of an invalid cursor', async () => {
    for (const path of lists())
      for (const value of [true, false, 1.5, 2 ** 60, { a: 1 }, [1], 'a\u0000b']) {
        const res = await get(`${path}&cursor=${await crafted(path, value)}`);
        expect(res.status, `${path} ${JSON.stringify(value)}`).toBe(400);
        expect((res.body as { message: string }).message).toMatch(/^invalid cursor/);
      }
  });

  it('of their key kind but no value the database can read are a 400 too, never a 500', async () => {
    for (const path of lists())
      for (const value of ['abc', '2020-13-45', '9'.repeat(30), 99999999999, '']) {
        const res = await get(`${path}&cursor=${await crafted(path, value)}`);
        expect(res.status, `${path} ${JSON.stringify(value)}`).toBeLessThan(500);
      }
  });

  it('passed back unchanged still page', async () => {
    for (const path of lists()) {
      const first = await get(path);
      const res = await get(`${path}&cursor=${first.headers.get('x-next-cursor')}`);
      expect(res.status, path).toBe(200);
    }
  });
});
