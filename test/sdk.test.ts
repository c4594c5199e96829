// The shipped TypeScript SDK (clients/typescript) against the app over a real socket: login sets the
// bearer, typed calls by operationId, filtered lists paged with the iterator (X-Next-Cursor), the
// structured search paged through `next`, the streamed searches as typed events, audit events, and
// non-2xx answers thrown as ApiRequestError with the typed error body. Every response is checked
// against openapi.yaml (test/http-fixtures.ts).
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  ApiRequestError,
  createClient,
  isApiRequestError,
  PAGED_OPERATIONS,
  type PagedOperationId,
  type InventoryClient,
  type ListOperationId,
  type PageItem,
  type Schemas,
  readServerSentEvents,
} from '../clients/typescript/index.ts';
import { ADMIN_PASSWORD, startTestApp, uniq, type TestApp } from './helpers.ts';
import { serveOverHttp, type HttpServer } from './http-fixtures.ts';

let t: TestApp;
let http: HttpServer;
let sdk: InventoryClient;

beforeAll(async () => {
  t = await startTestApp();
  http = await serveOverHttp(t);
  sdk = createClient({ baseUrl: http.baseUrl });
  await sdk.login('admin', ADMIN_PASSWORD);
});

afterAll(async () => {
  await http?.close();
  await t?.close();
});

/** A thrown ApiRequestError (fails the test when the call succeeded or threw anything else). */
async function rejection(p: Promise<unknown>): Promise<ApiRequestError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof ApiRequestError)) throw new Error(`expected an ApiRequestError, got ${String(e)}`);
  return e;
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe('types', () => {
  it('pages exactly the list operations and types their items', () => {
    expectTypeOf<'listObjects'>().toExtend<ListOperationId>();
    expectTypeOf<'listCollectionEvents'>().toExtend<ListOperationId>();
    expectTypeOf<'createObject'>().not.toExtend<ListOperationId>();
    expectTypeOf<'getCollection'>().not.toExtend<ListOperationId>();
    // The operations the iterator takes (derived from the types) are exactly those whose success
    // response declares X-Next-Cursor in openapi.yaml (listed by codegen), and the plain-text search.
    expectTypeOf<Exclude<PagedOperationId, 'searchPlainText'>>().toEqualTypeOf<(typeof PAGED_OPERATIONS)[number]>();
    expect(PAGED_OPERATIONS).toContain('searchStructured');
    expectTypeOf<PageItem<'listObjects'>>().toEqualTypeOf<Schemas['InventoryObject']>();
    expectTypeOf<PageItem<'searchStructured'>>().toEqualTypeOf<Schemas['SearchResult']>();
    // Members with a documented default are optional: a login needs no identity_scope.
    expectTypeOf<{ name: string; password: string }>().toExtend<Schemas['LoginRequest']>();
  });
});

describe('the SDK against a running server', () => {
  let collectionId: number;
  let serverClass: { id: number; name: string };
  let rackClass: { id: number; name: string };
  const servers: Schemas['InventoryObject'][] = [];
  let rack: Schemas['InventoryObject'];
  /** In the descriptions of the collection, both classes and the servers, for the plain-text search. */
  const tag = uniq('sdktag');

  beforeAll(async () => {
    const col = await sdk.call('createCollection', { body: { name: uniq('sdk'), description: tag } });
    collectionId = col.id;
    serverClass = await sdk.call('createClass', {
      body: {
        name: uniq('Server'),
        description: tag,
        collection_id: collectionId,
        json_schema: {
          type: 'object',
          required: ['rack', 'n'],
          properties: { rack: { type: 'string' }, n: { type: 'integer' } },
        },
        validate_schema: true,
      },
    });
    rackClass = await sdk.call('createClass', { body: { name: uniq('Rack'), description: tag, collection_id: collectionId } });
    for (let n = 0; n < 7; n++) {
      const name = n < 5 ? `web-${n}` : `db-${n}`;
      servers.push(
        await sdk.call('createObject', {
          params: { path: { class_id: serverClass.id } },
          body: { name, description: tag, json_data: { rack: n % 2 === 0 ? 'r1' : 'r2', n } },
        }),
      );
    }
    rack = await sdk.call('createObject', { params: { path: { class_id: rackClass.id } }, body: { name: 'r1', json_data: {} } });
  });

  it('login set the bearer: a client without a token is refused with the typed 401', async () => {
    expect(sdk.token).toMatch(/.+/);
    const anonymous = createClient({ baseUrl: http.baseUrl });
    const e = await rejection(anonymous.call('getCollection', { params: { path: { collection_id: collectionId } } }));
    expect(e.status).toBe(401);
    expect(e.body?.message).toBeTruthy();
    expect(e.requestId).toBeTruthy();
  });

  it('creates a relation between two objects and reads it back', async () => {
    const rel = await sdk.call('createClassRelation', { body: { from_class_id: serverClass.id, to_class_id: rackClass.id } });
    const link = await sdk.call('createObjectRelation', {
      body: { class_relation_id: rel.id, from_object_id: servers[0]!.id, to_object_id: rack.id },
    });
    const related = await collect(
      sdk.paginate('listRelatedObjects', { params: { path: { object_class_id: rackClass.id, object_id: rack.id } } }),
    );
    expect(related.map((o) => o.id)).toEqual([servers[0]!.id]);
    expect(link.from_object_id).toBe(servers[0]!.id);
  });

  it('pages a filtered list with the iterator, following X-Next-Cursor to the last page', async () => {
    const init = {
      params: { path: { class_id: serverClass.id }, query: { name__startswith: 'web-', sort: '-name', limit: 2, include_total: true } },
    };
    const pages = await collect(sdk.pages('listObjects', init));
    expect(pages.map((p) => p.items.length)).toEqual([2, 2, 1]);
    expect(pages.map((p) => p.next === null)).toEqual([false, false, true]);
    expect(pages[0]!.total).toBe(5);
    const names = (await collect(sdk.paginate('listObjects', init))).map((o) => o.name);
    expect(names).toEqual(['web-4', 'web-3', 'web-2', 'web-1', 'web-0']);
  });

  it('sends every kind of filter: declared parameters, repeated values, JSON paths, the free-form object and `filter`', async () => {
    const list = async (query: NonNullable<NonNullable<Parameters<typeof sdk.call<'listObjects'>>[1]>['params']>['query']) =>
      (
        await collect(sdk.paginate('listObjects', { params: { path: { class_id: serverClass.id }, query: { ...query, sort: 'name' } } }))
      ).map((o) => o.name);
    expect(await list({ name__in: 'web-1,db-6' })).toEqual(['db-6', 'web-1']);
    expect(await list({ name__not_equals: ['web-0', 'web-1', 'web-2'], name__startswith: 'web' })).toEqual(['web-3', 'web-4']);
    expect(await list({ json_data__equals: 'rack=r2' })).toEqual(['db-5', 'web-1', 'web-3']);
    expect(await list({ filters: { name__endswith: '-6' } })).toEqual(['db-6']);
    // The repeatable `filter` parameter (`<filter name>=<value>` each), paged with it kept on every request.
    expect(await list({ filter: ['name__endswith=-6'] })).toEqual(['db-6']);
    expect(await list({ filter: ['json_data__equals=rack=r2', 'name__startswith=web'], limit: 1 })).toEqual(['web-1', 'web-3']);
  });

  it('pages a structured search through `next`', async () => {
    const results = await collect(
      sdk.paginate('searchStructured', {
        body: {
          version: 1,
          target: { kind: 'object', class: { id: serverClass.id } },
          filter: { op: 'field', predicate: { field: 'json_data', path: 'rack', operator: 'equals', value: 'r1' } },
          sort: [{ field: 'name', direction: 'asc' }],
          limit: 1,
        },
      }),
    );
    expect(results.map((r) => (r.kind === 'object' ? r.resource.name : r.kind))).toEqual(['db-6', 'web-0', 'web-2', 'web-4']);
  });

  it('pages the plain-text search, each kind through its own cursor, hits tagged with their kind', async () => {
    const pages = await collect(sdk.pages('searchPlainText', { params: { query: { q: tag, limit_per_kind: 2 } } }));
    // Objects need four pages of two; collections and classes are done after the first.
    expect(pages.length).toBeGreaterThanOrEqual(4);
    expect(pages.at(-1)!.next).toBeNull();
    const hits = pages.flatMap((p) => p.items);
    const ids = (kind: string) => hits.filter((h) => h.kind === kind).map((h) => h.resource.id);
    expect(ids('collection')).toEqual([collectionId]);
    expect(ids('class')).toEqual([serverClass.id, rackClass.id]);
    expect(ids('object')).toEqual(servers.map((o) => o.id));

    const objectsOnly = await collect(
      sdk.paginate('searchPlainText', { params: { query: { q: tag, kinds: ['object'], limit_per_kind: 3 } } }),
    );
    expect(objectsOnly.map((h) => (h.kind === 'object' ? h.resource.name : h.kind))).toEqual(servers.map((o) => o.name));
  });

  it('streams a structured search as typed events: started, one result per match, done with next and total', async () => {
    const body = {
      version: 1,
      target: { kind: 'object', class: { id: serverClass.id } },
      filter: { op: 'field', predicate: { field: 'name', operator: 'startswith', value: 'web-' } },
      sort: [{ field: 'name', direction: 'asc' }],
      limit: 3,
      include_total: true,
    } satisfies Schemas['StructuredSearchRequest'];
    const events = await collect(sdk.stream('searchStructuredStream', { body }));
    expect(events.map((e) => e.event)).toEqual(['started', 'result', 'result', 'result', 'done']);
    expect(events[0]!.data).toEqual({ version: 1, kind: 'object' });
    const names = events.flatMap((e) => (e.event === 'result' && e.data.kind === 'object' ? [e.data.resource.name] : []));
    expect(names).toEqual(['web-0', 'web-1', 'web-2']);
    const done = events.at(-1)!;
    if (done.event !== 'done') throw new Error('the stream did not end with done');
    expect(done.data).toMatchObject({ total: 5, page_limit: 3, next: expect.any(String) });
    // the next page through the cursor of `done`
    const rest = await collect(sdk.stream('searchStructuredStream', { body: { ...body, cursor: done.data.next! } }));
    expect(rest.flatMap((e) => (e.event === 'result' && e.data.kind === 'object' ? [e.data.resource.name] : []))).toEqual([
      'web-3',
      'web-4',
    ]);
    expect(rest.at(-1)).toMatchObject({ event: 'done', data: { next: null } });
  });

  it('streams the plain-text search: one batch per kind, then done; a refused request throws before any event', async () => {
    const events = await collect(sdk.stream('searchPlainTextStream', { params: { query: { q: tag, kinds: ['class', 'object'] } } }));
    expect(events[0]).toEqual({ event: 'started', data: { query: tag } });
    expect(events.at(-1)).toEqual({ event: 'done', data: { query: tag } });
    const batches = events.flatMap((e) => (e.event === 'batch' ? [e.data] : []));
    expect(batches.map((b) => b.kind).sort()).toEqual(['classes', 'objects']);
    const objects = batches.find((b) => b.kind === 'objects')!;
    expect(objects.objects.map((o) => o.id)).toEqual(servers.map((o) => o.id));
    expect(objects.classes).toEqual([]);

    const refused = await rejection(
      collect(sdk.stream('searchPlainTextStream', { params: { query: { q: tag, kinds: ['widget' as 'object'] } } })),
    );
    expect(refused.status).toBe(400);
  });

  it('reads server-sent events split anywhere across chunks; an abort ends the wait for the next event', async () => {
    const text = 'event: started\r\ndata: {"a":1}\r\n\r\n: a comment\n\nevent: batch\ndata: {"b":\ndata: [2]}\n\nevent: done\ndata: {}\n\n';
    const bytes = new TextEncoder().encode(text);
    const chunked = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < bytes.length; i += 3) c.enqueue(bytes.slice(i, i + 3));
        c.close();
      },
    });
    expect(await collect(readServerSentEvents(chunked))).toEqual([
      { event: 'started', data: { a: 1 } },
      { event: 'batch', data: { b: [2] } },
      { event: 'done', data: {} },
    ]);

    // aborting the request's signal mid-stream ends the iteration with an AbortError
    const abort = new AbortController();
    const it = sdk.stream('searchPlainTextStream', { params: { query: { q: tag } }, signal: abort.signal });
    expect((await it.next()).value).toEqual({ event: 'started', data: { query: tag } });
    abort.abort();
    const after = await collect({ [Symbol.asyncIterator]: () => it }).then(
      () => 'ended',
      (e: unknown) => (e instanceof Error ? e.name : String(e)),
    );
    expect(after).toBe('AbortError');
  });

  it('reads the audit events of the collection', async () => {
    const events = await collect(
      sdk.paginate('listCollectionEvents', {
        params: { path: { collection_id: collectionId }, query: { entity_type: 'object', action: 'created', limit: 3 } },
      }),
    );
    expect(events.map((e) => e.entity_id).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual([...servers, rack].map((o) => o.id));
    expect(events.every((e) => e.actor_kind === 'user')).toBe(true);
  });

  it('throws the typed error: 409 with its reason, 404, 400 with details', async () => {
    const taken = await rejection(sdk.call('createClass', { body: { name: serverClass.name, collection_id: collectionId } }));
    expect(taken.status).toBe(409);
    expect(taken.body).toMatchObject({ error: 'Conflict', message: expect.stringContaining('name') });
    expect(isApiRequestError(taken, 409)).toBe(true);

    const missing = await rejection(sdk.call('getCollection', { params: { path: { collection_id: 2_000_000_000 } } }));
    expect(missing.status).toBe(404);

    const invalid = await rejection(
      sdk.call('createObject', { params: { path: { class_id: serverClass.id } }, body: { name: uniq('bad'), json_data: { rack: 1 } } }),
    );
    expect(invalid.status).toBe(400);
    expect(invalid.details.length).toBeGreaterThan(0);
    expect(invalid.details[0]).toEqual({ path: expect.any(String), message: expect.any(String) });
  });

  it('reads headers with callWithResponse and sends typed header parameters: If-Match, X-Correlation-ID', async () => {
    const { data: before, response } = await sdk.callWithResponse('getCollection', { params: { path: { collection_id: collectionId } } });
    const etag = response.headers.get('etag');
    expect(etag).toBeTruthy();
    const correlation = uniq('corr');
    const updated = await sdk.call('updateCollection', {
      params: { path: { collection_id: collectionId }, header: { 'If-Match': etag!, 'X-Correlation-ID': correlation } },
      body: { description: 'updated through the SDK' },
    });
    expect(updated.revision).toBe(before.revision + 1);
    const [event] = await collect(
      sdk.paginate('listCollectionEvents', {
        params: { path: { collection_id: collectionId }, query: { action: 'updated', entity_type: 'collection' } },
      }),
    );
    expect(event?.correlation_id).toBe(correlation);

    const stale = await rejection(
      sdk.call('updateCollection', {
        params: { path: { collection_id: collectionId }, header: { 'If-Match': etag! } },
        body: { description: 'again' },
      }),
    );
    expect(stale.status).toBe(412);
    expect(stale.reason).toBe('stale_resource');
  });

  it('logout forgets the token and revokes it', async () => {
    const other = createClient({ baseUrl: http.baseUrl });
    await other.login('admin', ADMIN_PASSWORD);
    const token = other.token;
    await other.logout();
    expect(other.token).toBeUndefined();
    const stale = createClient({ baseUrl: http.baseUrl, token });
    expect((await rejection(stale.call('getCollection', { params: { path: { collection_id: collectionId } } }))).status).toBe(401);
  });

  it('every response matched openapi.yaml', () => {
    expect(http.violations).toEqual([]);
  });
});
