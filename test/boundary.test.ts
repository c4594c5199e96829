// Hostile but ordinary input is refused once, at the HTTP boundary, with the contract's error body:
// NUL characters anywhere, malformed percent-encoding in paths, JSON nested too deep, bodies that
// are not UTF-8. Also: repeated list filters combine with AND, and X-Correlation-ID is echoed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_DEPTH, jsonDepthExceeds } from '../src/http/input.ts';
import { MAX_JSON_DEPTH } from '../src/domain/json-patch.ts';
import { parserErrorStatus } from '../src/http/server.ts';
import { checkResponse, type CheckedResponse } from './contract-check.ts';
import { startTestApp, uniq, type TestApp } from './helpers.ts';

let t: TestApp;
let collectionId: number;
let classId: number;
let className: string;

beforeAll(async () => {
  t = await startTestApp();
  const col = await t.request('POST', '/api/v1/collections', { body: { name: uniq('bd') } });
  collectionId = (col.body as { id: number }).id;
  className = uniq('bdclass');
  const cls = await t.request('POST', '/api/v1/classes', { body: { name: className, collection_id: collectionId } });
  classId = (cls.body as { id: number }).id;
});

afterAll(async () => {
  await t.close();
});

/** A request with a path sent exactly as written (no URL normalisation) and optional raw bytes. */
async function raw(
  method: string,
  path: string,
  body?: Uint8Array | string,
  headers: Record<string, string> = {},
): Promise<CheckedResponse> {
  const res = await t.app.fetch(
    new Request(`http://test.local${path}`, {
      method,
      body: typeof body === 'string' || body === undefined ? body : new Uint8Array(body),
      headers: {
        authorization: `Bearer ${t.adminToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
    }),
  );
  return checkResponse(method, path.split('?')[0]!, res.status, res.headers, await res.text());
}

function detailPaths(res: CheckedResponse): string[] {
  return ((res.body as { details?: { path: string }[] }).details ?? []).map((d) => d.path);
}

const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);

describe('NUL characters are 400 naming the member, before any handler', () => {
  it('in body members at any depth and in member names', async () => {
    const name = uniq('nul');
    const cases: [string, unknown, string][] = [
      ['/api/v1/collections', { name: `${name}\u0000` }, 'body.name'],
      ['/api/v1/collections', { name, description: 'a\u0000' }, 'body.description'],
      [`/api/v1/classes/${classId}/objects`, { name, json_data: { a: { b: ['x', 'y\u0000z'] } } }, 'body.json_data.a.b.1'],
      [`/api/v1/classes/${classId}/objects`, { name, json_data: { 'k\u0000': 1 } }, 'body.json_data.k\\u0000'],
      ['/api/v1/iam/groups', { name: '\u0000' }, 'body.name'],
      ['/api/v1/export-templates', { collection_id: collectionId, name, template: '{{ x }}\u0000' }, 'body.template'],
    ];
    for (const [path, body, member] of cases) {
      const res = await t.request('POST', path, { body });
      expect(res.status, `${path} ${member}`).toBe(400);
      expect(detailPaths(res), res.text).toEqual([member]);
      expect((res.body as { message: string }).message).toContain('NUL');
    }
    const stored = await t.deps.sql`select 1 from collections where name like ${name + '%'}
      union all select 1 from objects where name = ${name} union all select 1 from export_templates where name = ${name}`;
    expect(stored.length).toBe(0);
  });

  it('in query values and names, declared parameters and list filters alike', async () => {
    for (const [query, member] of [
      ['name=%00', 'query.name'],
      ['name__contains=a%00', 'query.name__contains'],
      ['description__not_equals=x&description__not_equals=%00', 'query.description__not_equals'],
      ['a%00b=1', 'query.a\\u0000b'],
    ]) {
      const res = await raw('GET', `/api/v1/collections?${query}`);
      expect(res.status, query).toBe(400);
      expect(detailPaths(res), query).toEqual([member]);
    }
    for (const [query, member] of [
      ['entity_type=a%00', 'query.entity_type'],
      ['action=%00', 'query.action'],
    ]) {
      const res = await raw('GET', `/api/v1/events?${query}`);
      expect(res.status, query).toBe(400);
      expect(detailPaths(res)).toEqual([member]);
    }
  });

  it('in path parameters', async () => {
    const res = await raw('GET', `/api/v1/classes/by-name/a%00b`);
    expect(res.status).toBe(400);
    expect(detailPaths(res)).toEqual(['path.class_name']);
    const obj = await raw('GET', `/api/v1/classes/by-name/${className}/objects/by-name/%00`);
    expect(obj.status).toBe(400);
    expect(detailPaths(obj)).toEqual(['path.object_name']);
  });
});

describe('unpaired surrogates (JSON escapes UTF-8 cannot encode) are 400 naming the member', () => {
  it('in text members (they were stored as U+FFFD) and in JSON data (a 400 without the member)', async () => {
    const name = uniq('sur');
    const cases: [string, string, string][] = [
      ['/api/v1/collections', `{"name":"${name}\\ud800"}`, 'body.name'],
      [`/api/v1/classes/${classId}/objects`, `{"name":"${name}","json_data":{"a":["\\udc00x"]}}`, 'body.json_data.a.0'],
      [`/api/v1/classes/${classId}/objects`, `{"name":"${name}","json_data":{"\\ud83d":1}}`, 'body.json_data.\\ud83d'],
    ];
    for (const [path, body, member] of cases) {
      const res = await raw('POST', path, body);
      expect(res.status, member).toBe(400);
      expect(detailPaths(res), res.text).toEqual([member]);
    }
    expect((await t.deps.sql`select 1 from collections where name like ${name + '%'}`).length).toBe(0);
    const pair = await raw('POST', '/api/v1/collections', `{"name":"${name}\\ud83d\\ude00"}`);
    expect(pair.status).toBe(201);
    expect((pair.body as { name: string }).name).toBe(`${name}😀`);
  });
});

describe('NUL characters that only appear after decoding', () => {
  const forge = (cursor: string, value: string) => {
    const c = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { v: unknown[] };
    c.v = c.v.map((v) => (typeof v === 'string' ? value : v));
    return Buffer.from(JSON.stringify(c)).toString('base64url');
  };

  it('in a list or aggregate cursor (its signature can be recomputed by a client) are 400', async () => {
    for (let i = 0; i < 2; i++)
      await t.request('POST', `/api/v1/classes/${classId}/objects`, { body: { name: uniq('cur'), json_data: {} } });
    const page = await t.request('GET', `/api/v1/classes/${classId}/objects`, { query: { limit: 1, sort: 'name' } });
    const cursor = forge(page.headers.get('x-next-cursor')!, 'a\u0000');
    const res = await t.request('GET', `/api/v1/classes/${classId}/objects`, { query: { limit: 1, sort: 'name', cursor } });
    expect(res.status, res.text).toBe(400);
    expect(detailPaths(res)).toEqual(['query.cursor']);
    const agg = await t.request('GET', `/api/v1/classes/${classId}/object-aggregates`, { query: { group_by: 'name', limit: 1 } });
    const aggCursor = forge(agg.headers.get('x-next-cursor')!, 'a\u0000');
    const next = await t.request('GET', `/api/v1/classes/${classId}/object-aggregates`, {
      query: { group_by: 'name', limit: 1, cursor: aggCursor },
    });
    expect(next.status, next.text).toBe(400);
  });

  it('in an export query string (%00) are 400 at submission', async () => {
    const res = await t.request('POST', '/api/v1/exports', { body: { scope: { kind: 'collections' }, query: 'name=a%00' } });
    expect(res.status, res.text).toBe(400);
    expect(detailPaths(res)).toEqual(['body.query']);
    const tpl = await t.request('POST', '/api/v1/export-templates', {
      body: { collection_id: collectionId, name: uniq('tpl'), template: 'x', default_query: '%00=1' },
    });
    expect(tpl.status, tpl.text).toBe(400);
  });
});

describe('malformed percent-encoding in a path segment', () => {
  it('is 400 naming the parameter; a well-formed name that does not exist stays 404', async () => {
    for (const seg of ['%', '%zz', '%C3%28', '%E0%A4%A', 'ok%']) {
      const res = await raw('GET', `/api/v1/classes/by-name/${seg}`);
      expect(res.status, seg).toBe(400);
      expect(detailPaths(res), seg).toEqual(['path.class_name']);
    }
    for (const path of [
      `/api/v1/classes/by-name/${className}/objects/by-name/%`,
      `/api/v1/classes/%zz`,
      `/api/v1/collections/%/children`,
    ]) {
      expect((await raw('GET', path)).status, path).toBe(400);
    }
    expect((await raw('PATCH', `/api/v1/classes/by-name/${className}/objects/by-name/%zz`, '{}')).status).toBe(400);
    expect((await raw('DELETE', `/api/v1/classes/by-name/${className}/objects/by-name/%`)).status).toBe(400);
    expect((await raw('GET', `/api/v1/classes/by-name/${encodeURIComponent('no such ü')}`)).status).toBe(404);
    expect((await raw('GET', `/api/v1/classes/by-name/${encodeURIComponent('ü'.repeat(4000))}`)).status).toBe(404);
    expect((await raw('GET', `/api/v1/classes/by-name/${encodeURIComponent('😀'.repeat(1000))}`)).status).toBe(404);
    expect((await raw('GET', `/api/v1/classes/by-name/${encodeURIComponent(className)}`)).status).toBe(200);
  });
});

describe('JSON nesting depth of request bodies', () => {
  it(`one limit for every JSON body: ${MAX_BODY_DEPTH} nested arrays and objects pass the boundary, more are 400`, async () => {
    expect(MAX_BODY_DEPTH).toBeGreaterThan(MAX_JSON_DEPTH);
    const objects = `/api/v1/classes/${classId}/objects`;
    const deep = (n: number) => `{"name":"${uniq('deep')}","json_data":${nest(n - 1)}}`;
    const ok = await raw('POST', objects, deep(MAX_BODY_DEPTH));
    expect(ok.status, ok.text).toBe(201);
    for (const n of [MAX_BODY_DEPTH + 1, 5000]) {
      const res = await raw('POST', objects, deep(n));
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ reason: 'limit_exceeded' });
    }
    const schema = await raw(
      'POST',
      '/api/v1/classes',
      `{"name":"${uniq('deep')}","collection_id":${collectionId},"json_schema":${'{"items":'.repeat(5000)}{}${'}'.repeat(5000)}}`,
    );
    expect(schema.status).toBe(400);
    expect(schema.body).toMatchObject({ reason: 'limit_exceeded' });
    const graph = await raw('POST', '/api/v1/imports', `{"version":2,"graph":{"objects":[{"ref":"a","json_data":${nest(5000)}}]}}`);
    expect(graph.status).toBe(400);
    expect(graph.body).toMatchObject({ reason: 'limit_exceeded' });
    const patch = await raw('PATCH', '/api/v1/iam/me/settings', nest(5000), { 'content-type': 'application/json-patch+json' });
    expect(patch.status).toBe(400);
  });

  it('brackets inside strings do not count', async () => {
    const s = '['.repeat(5000) + '\\"{' + '\\\\';
    const res = await raw('POST', `/api/v1/classes/${classId}/objects`, `{"name":"${uniq('str')}","json_data":{"s":"${s}"}}`);
    expect(res.status, res.text).toBe(201);
    expect(jsonDepthExceeds('["]]]]"]', 1)).toBe(false);
    expect(jsonDepthExceeds('[["\\\\"]]', 1)).toBe(true);
  });
});

describe('bodies that are not UTF-8', () => {
  it('are 400 and nothing is stored (they were stored with U+FFFD)', async () => {
    const name = uniq('utf');
    for (const bad of [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xc0, 0xaf]]) {
      const body = Buffer.concat([Buffer.from(`{"name":"${name}`), Buffer.from(bad), Buffer.from('","json_data":{}}')]);
      const res = await raw('POST', `/api/v1/classes/${classId}/objects`, body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ reason: 'invalid_encoding' });
    }
    expect((await t.deps.sql`select 1 from objects where name like ${name + '%'}`).length).toBe(0);
    const ok = await raw('POST', `/api/v1/classes/${classId}/objects`, Buffer.from(`{"name":"${name}-ü😀","json_data":{}}`));
    expect(ok.status).toBe(201);
    expect((ok.body as { name: string }).name).toBe(`${name}-ü😀`);
  });
});

describe('repeated list filters (contract §3: all filters combine with AND)', () => {
  it('listCollections 200 with description__not_equals given twice excludes both', async () => {
    const parent = await t.request('POST', '/api/v1/collections', { body: { name: uniq('rep') } });
    const pid = (parent.body as { id: number }).id;
    for (const description of ['a', 'b', 'c']) {
      await t.request('POST', '/api/v1/collections', { body: { name: uniq('rep'), description, parent_collection_id: pid } });
    }
    const res = await t.request('GET', '/api/v1/collections', {
      query: { parent_collection_id: pid, description__not_equals: ['a', 'b'] },
    });
    expect(res.status, res.text).toBe(200);
    expect((res.body as { description: string }[]).map((c) => c.description)).toEqual(['c']);
    const none = await t.request('GET', '/api/v1/collections', { query: { parent_collection_id: pid, description: ['a', 'b'] } });
    expect(none.body).toEqual([]);
  });
});

describe('X-Correlation-ID (contract §6)', () => {
  it('a valid one is echoed on success and error responses and recorded in the event; an invalid one is neither', async () => {
    const id = `corr-${uniq()}`;
    const created = await t.request('POST', '/api/v1/collections', { body: { name: uniq('corr') }, headers: { 'x-correlation-id': id } });
    expect(created.status).toBe(201);
    expect(created.headers.get('x-correlation-id')).toBe(id);
    const events = await t.deps
      .sql`select correlation_id from events where entity_type = 'collection' and entity_id = ${(created.body as { id: number }).id}`;
    expect(events.map((e) => e.correlation_id)).toEqual([id]);
    const missing = await t.request('GET', '/api/v1/collections/2147483647', { headers: { 'x-correlation-id': id } });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-correlation-id')).toBe(id);
    const unauthenticated = await t.request('GET', '/api/v1/collections', { token: null, headers: { 'x-correlation-id': id } });
    expect(unauthenticated.headers.get('x-correlation-id')).toBe(id);
    const invalid = await t.request('GET', '/healthz', { headers: { 'x-correlation-id': 'not valid!' } });
    expect(invalid.headers.get('x-correlation-id')).toBeNull();
  });
});

describe("Node's HTTP parser errors", () => {
  it('get their status: 414 when the request line alone overflows, 431 for header fields, 400 otherwise', () => {
    const packet = (s: string) => ({ rawPacket: Buffer.from(s), bytesParsed: s.length });
    expect(parserErrorStatus({ code: 'HPE_HEADER_OVERFLOW', ...packet(`GET /${'a'.repeat(100)}`) })[0]).toBe(414);
    expect(parserErrorStatus({ code: 'HPE_HEADER_OVERFLOW', ...packet(`GET / HTTP/1.1\r\nX-A: ${'a'.repeat(100)}`) })[0]).toBe(431);
    expect(parserErrorStatus({ code: 'HPE_INVALID_METHOD' })[0]).toBe(400);
    expect(parserErrorStatus({ code: 'ERR_HTTP_REQUEST_TIMEOUT' })[0]).toBe(408);
  });
});
