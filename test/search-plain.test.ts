import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { insertToken, type TokenScopeValue } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';

// Plain-text search and both streams. Collections, classes and objects are created through their
// endpoints; the non-admin user and tokens are inserted into their tables.

let t: TestApp;
let P: string;
let needle: string;
const ids = {} as Record<'alpha' | 'gamma' | 'server' | 'plainClass' | 'obj1' | 'obj2' | 'obj3', number>;
let userToken: string;
let userId: number;

async function api(method: string, path: string, body?: unknown) {
  const res = await t.request(method, path, { body });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.body as Record<string, unknown>;
}

async function tokenFor(principalId: number, scope: TokenScopeValue | null = null): Promise<string> {
  const raw = newRawToken();
  await insertToken(t.deps.sql, { principalId, hash: hashToken(t.deps.tokenKey, raw), expiresAt: new Date(Date.now() + 3600_000), scope });
  return raw;
}

interface PlainBody {
  query: string;
  results: Record<'collections' | 'classes' | 'objects', Record<string, unknown>[]>;
  next: Record<'collections' | 'classes' | 'objects', string | null>;
}

async function plain(query: Record<string, string | number | boolean>, token?: string) {
  return t.request('GET', '/api/v1/search', { query, token });
}

async function plainOk(query: Record<string, string | number | boolean>, token?: string): Promise<PlainBody> {
  const res = await plain(query, token);
  expect(res.status, res.text).toBe(200);
  return res.body as PlainBody;
}

const namesOf = (rows: Record<string, unknown>[]) => rows.map((r) => r.name);

interface SseEvent {
  event: string;
  data: Record<string, unknown>;
}

/** Parses a text/event-stream body: `event:` and one JSON `data:` line per event. */
function parseSse(text: string): SseEvent[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      const event = lines.find((l) => l.startsWith('event: '))!.slice(7);
      const data = lines
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      return { event, data: JSON.parse(data) as Record<string, unknown> };
    });
}

beforeAll(async () => {
  t = await startTestApp();
  P = uniq('plain');
  needle = `${P}-needle`;
  ids.alpha = (await api('POST', '/api/v1/collections', { name: `${P}-alpha`, description: `holds the ${needle}` })).id as number;
  ids.gamma = (await api('POST', '/api/v1/collections', { name: `${P}-gamma` })).id as number;
  ids.server = (
    await api('POST', '/api/v1/classes', {
      name: `${P}-Server-${needle}`,
      collection_id: ids.alpha,
      json_schema: { type: 'object', title: `${P}-schema-marker` },
    })
  ).id as number;
  ids.plainClass = (await api('POST', '/api/v1/classes', { name: `${P}-Plain`, collection_id: ids.gamma })).id as number;
  ids.obj1 = (await api('POST', `/api/v1/classes/${ids.server}/objects`, { name: `${P}-obj1-${needle}`, json_data: { a: 1 } }))
    .id as number;
  ids.obj2 = (
    await api('POST', `/api/v1/classes/${ids.server}/objects`, {
      name: `${P}-obj2`,
      description: `the ${needle.toUpperCase()} in the description`,
      json_data: {},
    })
  ).id as number;
  ids.obj3 = (
    await api('POST', `/api/v1/classes/${ids.plainClass}/objects`, {
      name: `${P}-obj3`,
      json_data: { deep: { list: [1, `x-${P}-datamark-y`] }, n: 42 },
    })
  ).id as number;
  const [p] = await t.deps.sql<{ id: number }[]>`insert into principals (kind, name) values ('human', ${P + '-user'}) returning id`;
  userId = p!.id;
  await t.deps.sql`insert into users (principal_id) values (${userId})`;
  const groupId = (await api('POST', '/api/v1/iam/groups', { name: `${P}-g` })).id as number;
  await api('PUT', `/api/v1/collections/${ids.alpha}/permissions/group/${groupId}`, ['ReadCollection', 'ReadClass', 'ReadObject']);
  await api('POST', `/api/v1/iam/groups/${groupId}/members/${userId}`);
  userToken = await tokenFor(userId);
});

afterAll(async () => {
  await t.close();
});

describe('searchPlainText', () => {
  it('searchPlainText 200: grouped results on names and descriptions, case-insensitive, with X-Page-Limit', async () => {
    const res = await plain({ q: `  ${needle.toUpperCase()}  ` });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('x-page-limit')).toBe('100');
    const body = res.body as PlainBody;
    expect(body.query).toBe(needle.toUpperCase());
    expect(namesOf(body.results.collections)).toEqual([`${P}-alpha`]);
    expect(namesOf(body.results.classes)).toEqual([`${P}-Server-${needle}`]);
    expect(body.results.classes[0]!.collection).toMatchObject({ id: ids.alpha });
    expect(namesOf(body.results.objects)).toEqual([`${P}-obj1-${needle}`, `${P}-obj2`]);
    expect(body.results.objects[0]).toMatchObject({ svc_class_id: ids.server, json_data: { a: 1 } });
    expect(body.next).toEqual({ collections: null, classes: null, objects: null });
  });

  it('searchPlainText 200: schema text and object data only when opted in', async () => {
    expect((await plainOk({ q: `${P}-schema-marker` })).results.classes).toEqual([]);
    expect(namesOf((await plainOk({ q: `${P}-schema-marker`, search_class_schema: true })).results.classes)).toEqual([
      `${P}-Server-${needle}`,
    ]);
    expect((await plainOk({ q: `${P}-datamark` })).results.objects).toEqual([]);
    expect(namesOf((await plainOk({ q: `${P}-DATAMARK`, search_object_data: true })).results.objects)).toEqual([`${P}-obj3`]);
    // the object as getObject shows it, its json_data passed through as the database's text
    const found = (await plainOk({ q: `${P}-DATAMARK`, search_object_data: true })).results.objects[0];
    const read = await t.request('GET', `/api/v1/classes/${ids.plainClass}/${ids.obj3}`);
    expect(found).toEqual(read.body);
    expect(found!.json_data).toEqual({ deep: { list: [1, `x-${P}-datamark-y`] }, n: 42 });
    // only string values match, not numbers or keys
    const numbers = await plainOk({ q: '42', kinds: 'object', search_object_data: true });
    expect(numbers.results.objects.map((o) => o.id)).not.toContain(ids.obj3);
    const keys = await plainOk({ q: 'deep', kinds: 'object', search_object_data: true });
    expect(keys.results.objects.map((o) => o.id)).not.toContain(ids.obj3);
  });

  it('searchPlainText 200: object data values that JSON text writes escaped (quotes, backslashes, tabs) match as stored', async () => {
    const id = (
      await api('POST', `/api/v1/classes/${ids.plainClass}/objects`, {
        name: `${P}-obj-escapes`,
        json_data: { note: `say "${P}-quoted" at C:\\${P}-dir`, cells: [`${P}-tab\there`], [`${P}-keyonly`]: 1 },
      })
    ).id as number;
    const found = async (q: string) =>
      (await plainOk({ q, kinds: 'object', search_object_data: true })).results.objects.map((o) => o.id).includes(id);
    // the document's text holds these as \" \\ and \t: they match the values, not the text
    expect(await found(`"${P}-QUOTED"`)).toBe(true);
    expect(await found(`C:\\${P}-dir`)).toBe(true);
    expect(await found(`${P}-tab\there`)).toBe(true);
    expect(await found(`${P}-quoted\\`)).toBe(false);
    // without such characters the document's text is tested first, and still only values match
    expect(await found(`${P}-DIR`)).toBe(true);
    expect(await found(`${P}-quoted`)).toBe(true);
    expect(await found(`${P}-keyonly`)).toBe(false);
  });

  it('searchPlainText 200: kinds selects groups; others are empty with null cursors', async () => {
    const body = await plainOk({ q: needle, kinds: 'object,collection' });
    expect(body.results.classes).toEqual([]);
    expect(body.next.classes).toBeNull();
    expect(body.results.collections).toHaveLength(1);
    expect(body.results.objects).toHaveLength(2);
  });

  it('searchPlainText 200: per-kind paging with cursors bound to the query, kind and token', async () => {
    const first = await plain({ q: needle, limit_per_kind: 1 });
    expect(first.headers.get('x-page-limit')).toBe('1');
    const b1 = first.body as PlainBody;
    expect(namesOf(b1.results.objects)).toEqual([`${P}-obj1-${needle}`]);
    expect(b1.next.objects).toBeTruthy();
    expect(b1.next.collections).toBeNull();
    const b2 = await plainOk({ q: needle, limit_per_kind: 1, kinds: 'object', cursor_objects: b1.next.objects! });
    expect(namesOf(b2.results.objects)).toEqual([`${P}-obj2`]);
    expect(b2.next.objects).toBeNull();
    expect((await plain({ q: `${needle}x`, limit_per_kind: 1, cursor_objects: b1.next.objects! })).status).toBe(400);
    expect((await plain({ q: needle, limit_per_kind: 2, cursor_objects: b1.next.objects! })).status).toBe(400);
    expect((await plain({ q: needle, limit_per_kind: 1, cursor_classes: b1.next.objects! })).status).toBe(400);
    expect((await plain({ q: needle, limit_per_kind: 1, cursor_objects: b1.next.objects! }, userToken)).status).toBe(400);
    expect((await plain({ q: needle, limit_per_kind: 1, cursor_objects: 'nonsense' })).status).toBe(400);
  });

  it('searchPlainText 200: only what the caller may read, within the token scope', async () => {
    const all = await plainOk({ q: P }, userToken);
    expect(namesOf(all.results.collections)).toEqual([`${P}-alpha`]);
    expect(namesOf(all.results.classes)).toEqual([`${P}-Server-${needle}`]);
    expect(namesOf(all.results.objects)).toEqual([`${P}-obj1-${needle}`, `${P}-obj2`]);
    const scoped = await tokenFor(userId, { resources: [{ kind: 'object', id: ids.obj2 }] });
    const s = await plainOk({ q: P }, scoped);
    expect(s.results.collections).toEqual([]);
    expect(s.results.classes).toEqual([]);
    expect(namesOf(s.results.objects)).toEqual([`${P}-obj2`]);
  });

  const bad: [string, Record<string, string | number | boolean>][] = [
    ['missing q', {}],
    ['blank q', { q: '   ' }],
    ['q over 256 characters', { q: 'x'.repeat(257) }],
    ['unknown kind', { q: 'x', kinds: 'widget' }],
    ['empty kinds', { q: 'x', kinds: '' }],
    ['unknown parameter', { q: 'x', nope: 1 }],
    ['limit_per_kind 0', { q: 'x', limit_per_kind: 0 }],
    ['non-boolean flag', { q: 'x', search_object_data: 'maybe' }],
  ];
  it.each(bad)('searchPlainText 400: %s', async (_name, query) => {
    const res = await plain(query);
    expect(res.status, res.text).toBe(400);
  });

  it('searchPlainText 400: a repeated parameter; 401 without a token', async () => {
    const res = await t.request('GET', '/api/v1/search', { query: { q: ['a', 'b'] } });
    expect(res.status).toBe(400);
    expect((await plain({ q: 'x' }, null as unknown as string)).status).toBe(401);
  });
});

describe('searchPlainTextStream', () => {
  it('searchPlainTextStream 200: started, one batch per kind, then done', async () => {
    const res = await t.request('GET', '/api/v1/search/stream', { query: { q: needle, limit_per_kind: 1 } });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const events = parseSse(res.text);
    expect(events[0]).toEqual({ event: 'started', data: { query: needle } });
    expect(events.at(-1)).toEqual({ event: 'done', data: { query: needle } });
    const batches = events.slice(1, -1);
    expect(batches.map((b) => b.event)).toEqual(['batch', 'batch', 'batch']);
    expect(batches.map((b) => b.data.kind).sort()).toEqual(['classes', 'collections', 'objects']);
    const objects = batches.find((b) => b.data.kind === 'objects')!.data;
    expect(objects.collections).toEqual([]);
    expect(objects.classes).toEqual([]);
    expect(namesOf(objects.objects as Record<string, unknown>[])).toEqual([`${P}-obj1-${needle}`]);
    expect(typeof objects.next).toBe('string');
    const more = await plainOk({ q: needle, limit_per_kind: 1, kinds: 'object', cursor_objects: objects.next as string });
    expect(namesOf(more.results.objects)).toEqual([`${P}-obj2`]);
  });

  it("searchPlainTextStream 200: an object's json_data as the JSON reply has it (the database's text), one data line per event", async () => {
    const name = uniq('sse-json');
    const json_data = { s: 'line 1\nline 2\r\u2028 "quoted" \\ back', n: 1.5, a: [1, { b: null }, 'é'], e: {} };
    // in a class of its own, so that the other tests' results stay as they are; `n` then set to
    // 1.50 in SQL, which the database keeps (numeric) and a value parsed in JavaScript would not
    const k = await api('POST', '/api/v1/classes', { name: uniq('sse-json-k'), collection_id: ids.gamma });
    const created = await t.request('POST', `/api/v1/classes/${k.id as number}/objects`, { body: { name, json_data } });
    expect(created.status, created.text).toBe(201);
    await t.deps
      .sql`update objects set json_data = jsonb_set(json_data, '{n}', '1.50'::jsonb) where id = ${(created.body as { id: number }).id}`;
    const res = await t.request('GET', '/api/v1/search/stream', { query: { q: name, kinds: 'object' } });
    expect(res.status, res.text).toBe(200);
    // every event is its event line and one data line
    for (const block of res.text.split('\n\n').filter((b) => b.trim() !== '')) expect(block.split('\n')).toHaveLength(2);
    const batch = parseSse(res.text).find((e) => e.event === 'batch')!.data;
    const replied = await plain({ q: name, kinds: 'object' });
    expect(batch.objects).toEqual((replied.body as PlainBody).results.objects);
    expect((batch.objects as Record<string, unknown>[]).map((r) => [r.id, r.json_data])).toEqual([
      [(created.body as { id: number }).id, json_data],
    ]);
    for (const text of [res.text, replied.text]) expect(text).toContain('"n": 1.50');
  });

  it('searchPlainTextStream 200: only the requested kinds', async () => {
    const res = await t.request('GET', '/api/v1/search/stream', { query: { q: needle, kinds: 'class' } });
    const events = parseSse(res.text);
    expect(events.map((e) => e.event)).toEqual(['started', 'batch', 'done']);
    expect(events[1]!.data.kind).toBe('classes');
    expect(events[1]!.data.next).toBeNull();
  });

  it('searchPlainTextStream 400: invalid input is a JSON error before the stream', async () => {
    const res = await t.request('GET', '/api/v1/search/stream', { query: { q: '' } });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/json');
  });
});

describe('searchStructuredStream', () => {
  const body = (extra: Record<string, unknown> = {}) => ({
    version: 1,
    target: { kind: 'object', class: { id: ids.server } },
    sort: [{ field: 'name', direction: 'desc' }],
    limit: 1,
    include_total: true,
    ...extra,
  });

  it('searchStructuredStream 200: started, results in sort order, done with next, total and page_limit', async () => {
    const res = await t.request('POST', '/api/v1/search/stream', { body: body() });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const events = parseSse(res.text);
    expect(events.map((e) => e.event)).toEqual(['started', 'result', 'done']);
    expect(events[0]!.data).toEqual({ version: 1, kind: 'object' });
    expect(events[1]!.data).toMatchObject({ kind: 'object', resource: { id: ids.obj2, name: `${P}-obj2` } });
    const done = events[2]!.data;
    expect(done).toMatchObject({ version: 1, kind: 'object', total: 2, page_limit: 1 });
    expect(typeof done.next).toBe('string');
    // the cursor is the same as the JSON operation's: it continues there
    const second = await t.request('POST', '/api/v1/search', { body: body({ cursor: done.next }) });
    expect(second.status, second.text).toBe(200);
    expect((second.body as { results: { resource: { id: number } }[] }).results[0]!.resource.id).toBe(ids.obj1);
    const streamed = parseSse((await t.request('POST', '/api/v1/search/stream', { body: body({ cursor: done.next }) })).text);
    expect(streamed.map((e) => e.event)).toEqual(['started', 'result', 'done']);
    expect(streamed[2]!.data).toMatchObject({ next: null, total: 2 });
  });

  it('searchStructuredStream 200: zero results; total null without include_total', async () => {
    const res = await t.request('POST', '/api/v1/search/stream', {
      body: {
        version: 1,
        target: { kind: 'collection' },
        filter: { op: 'field', predicate: { field: 'name', operator: 'equals', value: uniq() } },
      },
    });
    const events = parseSse(res.text);
    expect(events.map((e) => e.event)).toEqual(['started', 'done']);
    expect(events[1]!.data).toEqual({ version: 1, kind: 'collection', next: null, total: null, page_limit: 100 });
  });

  it('searchStructuredStream: failures detectable beforehand are JSON errors', async () => {
    const v2 = await t.request('POST', '/api/v1/search/stream', { body: { version: 2, target: { kind: 'collection' } } });
    expect(v2.status).toBe(400);
    expect(v2.headers.get('content-type')).toBe('application/json');
    const malformed = await t.request('POST', '/api/v1/search/stream', { rawBody: '{', contentType: 'application/json' });
    expect(malformed.status).toBe(400);
    const wrongType = await t.request('POST', '/api/v1/search/stream', {
      rawBody: JSON.stringify({ version: 1, target: { kind: 'collection' } }),
      contentType: 'text/plain',
    });
    expect(wrongType.status).toBe(415);
    const big = await t.request('POST', '/api/v1/search/stream', {
      body: {
        version: 1,
        target: { kind: 'collection' },
        filter: { op: 'field', predicate: { field: 'name', operator: 'equals', value: 'x'.repeat(70_000) } },
      },
    });
    expect(big.status).toBe(413);
    expect(
      (await t.request('POST', '/api/v1/search/stream', { body: { version: 1, target: { kind: 'user' } }, token: userToken })).status,
    ).toBe(403);
    expect((await t.request('POST', '/api/v1/search/stream', { body: body({ cursor: 'x.y' }) })).status).toBe(400);
  });

  it('searchStructuredStream 200: an execution failure after the start is an error event instead of results and done', async () => {
    const res = await t.request('POST', '/api/v1/search/stream', {
      body: {
        version: 1,
        target: { kind: 'collection' },
        filter: { op: 'field', predicate: { field: 'name', operator: 'regex', value: '(' } },
      },
    });
    expect(res.status).toBe(200);
    const events = parseSse(res.text);
    expect(events.map((e) => e.event)).toEqual(['started', 'error']);
    expect(events[1]!.data).toEqual({ version: 1, kind: 'collection', message: expect.stringMatching(/regular expression/) });
  });
});
