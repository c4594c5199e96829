// The query string as the app reads it (src/http/request.ts queryRecord): what URLSearchParams
// gives, a repeated name as an array in order, `constructor` and `__proto__` names like any other,
// at most MAX_QUERY_PARAMETERS; and through the app: such names and too many parameters are 400s
// with the error body, never a 500.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_QUERY_PARAMETERS, queryRecord } from '../src/http/request.ts';
import { checkResponse } from './contract-check.ts';
import { openapiDocument } from '../src/http/openapi.ts';
import { startTestApp, uniq, type TestApp } from './helpers.ts';

/** The reference: URLSearchParams's pairs, gathered by own name. */
function reference(query: string): Map<string, string | string[]> {
  const out = new Map<string, string | string[]>();
  for (const [k, v] of new URLSearchParams(query)) {
    const prev = out.get(k);
    out.set(k, prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v]);
  }
  return out;
}

const asMap = (record: Record<string, string | string[]>) => new Map(Object.entries(record));

describe('queryRecord', () => {
  it('gives what URLSearchParams gives, for plain queries and for those it decodes', () => {
    const cases = [
      '',
      'a=1',
      'limit=100&include_total=false&entity_type=object&entity_id=5',
      'a=1&a=2&a=3&b=',
      'a&b=&=c&&&d=e=f',
      '&&a=1&',
      '=',
      'a==',
      '?a=1',
      '??a=1',
      'a=%41%zz%&b=x+y&c%3D=1',
      'name=caf%C3%A9&q=%E2%82%AC+1',
      'a=é&b=€',
      'a=%ff%fe',
      'constructor=x&toString=y&hasOwnProperty=z',
      '__proto__=x',
      '__proto__=x&__proto__=y',
      'sort=-name,id&json_data__equals=env=prod',
    ];
    for (const q of cases) expect(asMap(queryRecord(q)), q).toEqual(reference(q));
  });

  it('agrees with URLSearchParams on random queries', () => {
    const alphabet = ['a', 'b', '_', '=', '&', '%', '2', 'F', '+', '?', ' ', 'é', '€', '%C3', '%A9', '__proto__', 'constructor'];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (let i = 0; i < 2000; i++) {
      const n = next() % 12;
      let q = '';
      for (let j = 0; j < n; j++) q += alphabet[next() % alphabet.length];
      expect(asMap(queryRecord(q)), q).toEqual(reference(q));
    }
  });

  it('keeps a `__proto__` parameter as an own member, leaving the prototype alone', () => {
    const r = queryRecord('__proto__=x&__proto__=y&a=1');
    expect(Object.getPrototypeOf(r)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(r, '__proto__')?.value).toEqual(['x', 'y']);
    expect(Object.keys(r)).toEqual(['__proto__', 'a']);
  });

  it(`refuses more than ${MAX_QUERY_PARAMETERS} parameters, plain or decoded`, () => {
    const many = (n: number, sep = '') => Array.from({ length: n }, (_, i) => `p${i}=${sep}${i}`).join('&');
    expect(Object.keys(queryRecord(many(MAX_QUERY_PARAMETERS)))).toHaveLength(MAX_QUERY_PARAMETERS);
    expect(() => queryRecord(many(MAX_QUERY_PARAMETERS + 1))).toThrow(/too many query parameters/);
    expect(() => queryRecord(many(MAX_QUERY_PARAMETERS + 1, '%41'))).toThrow(/too many query parameters/);
    // empty pieces between `&` are no parameters
    expect(Object.keys(queryRecord(`${many(MAX_QUERY_PARAMETERS)}&&&`))).toHaveLength(MAX_QUERY_PARAMETERS);
  });
});

describe('query names through the app', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t.close();
  });
  const get = async (path: string) => {
    const res = await t.app.fetch(new Request(`http://test.local${path}`, { headers: { authorization: `Bearer ${t.adminToken}` } }));
    // a stream that was answered runs until it is left: its status is what is checked
    if (res.status === 200 && res.headers.get('content-type')?.includes('text/event-stream')) {
      await res.body?.cancel();
      return { status: res.status, text: '', body: undefined };
    }
    return checkResponse('GET', path.split('?')[0]!, res.status, res.headers, await res.text());
  };

  // Names of Object.prototype as parameter names, sort fields and repeated names: every list once
  // answered `?sort=constructor` with a 500 (its field was looked up on the prototype).
  const HOSTILE = [
    'constructor=x',
    'toString=x',
    'hasOwnProperty=1',
    'valueOf=1&valueOf=2',
    '__proto__=x',
    '__proto__=x&__proto__=y',
    'sort=constructor',
    'sort=-toString',
    'sort=__proto__',
    'constructor__not_equals=1',
    'filter=constructor%3Dx',
    'filter=__proto__%3Dx',
  ];

  it('answers every GET of the contract with such names as a client error or an answer, never a 500', async () => {
    const col = await t.request('POST', '/api/v1/collections', { body: { name: uniq('qr') } });
    const collectionId = (col.body as { id: number }).id;
    const cls = await t.request('POST', '/api/v1/classes', { body: { name: uniq('qrc'), collection_id: collectionId } });
    const classId = (cls.body as { id: number }).id;
    const obj = await t.request('POST', `/api/v1/classes/${classId}/objects`, { body: { name: uniq('qro'), json_data: {} } });
    const objectId = (obj.body as { id: number }).id;
    const ids: Record<string, number> = { collection_id: collectionId, class_id: classId, object_id: objectId };
    const doc = openapiDocument() as { paths: Record<string, { get?: unknown }> };
    const paths = Object.keys(doc.paths)
      .filter((p) => doc.paths[p]!.get)
      .map((p) => p.replace(/\{([^}]+)\}/g, (_, name: string) => String(ids[name] ?? 1)));
    expect(paths.length).toBeGreaterThan(40);
    const lists: string[] = [];
    for (const path of paths)
      for (const q of HOSTILE) {
        const res = await get(`${path}?${q}`);
        expect(res.status, `${path}?${q}`).toBeLessThan(500);
        if (q === 'sort=constructor' && res.status === 400 && /sort field/.test(res.text)) lists.push(path);
      }
    // the lists refuse the name as a field with their own message (the case that was a 500)
    expect(lists.length).toBeGreaterThan(20);
  });

  it('refuses such a name as an unknown filter of a list, sent as itself or through `filter`', async () => {
    for (const [q, name] of [
      ['__proto__=x', '__proto__'],
      ['constructor=x', 'constructor'],
      ['filter=__proto__%3Dx', '__proto__'],
      ['filter=constructor%3Dx&filter=constructor%3Dy', 'constructor'],
      ['toString__startswith=x', 'toString'],
    ]) {
      const res = await get(`/api/v1/collections?${q}`);
      expect(res.status, q).toBe(400);
      expect((res.body as { message: string }).message, q).toBe(`unknown filter or sort field "${name}"`);
    }
  });

  it(`answers 400 with the error body to more than ${MAX_QUERY_PARAMETERS} parameters`, async () => {
    const q = Array.from({ length: MAX_QUERY_PARAMETERS + 1 }, (_, i) => `limit=${i + 1}`).join('&');
    const res = await get(`/api/v1/collections?${q}`);
    expect(res.status).toBe(400);
    expect((res.body as { message: string }).message).toMatch(/too many query parameters/);
  });
});
