// The workflow with openapi-typescript types (default options) and openapi-fetch: paths typed by
// URL and method, { data, error, response } results. With the default options every request member
// that has a `default` is typed as required, so this client passes them (see the README).
import createClient from 'openapi-fetch';
import type { components, paths } from './generated/openapi-typescript/schema.ts';
import { SERVERS, SERVER_SCHEMA, type Observed, type WorkflowInput } from './workflow.ts';

type ListObjectsQuery = NonNullable<paths['/api/v1/classes/{class_id}/objects']['get']['parameters']['query']>;

function ok<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.data === undefined) throw new Error(`openapi-fetch: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
}

export async function workflow(input: WorkflowInput): Promise<Observed> {
  const anonymous = createClient<paths>({ baseUrl: input.baseUrl });
  const { token } = ok(
    await anonymous.POST('/api/v0/auth/login', { body: { name: 'admin', password: input.adminPassword, identity_scope: 'local' } }),
  );
  const api = createClient<paths>({ baseUrl: input.baseUrl, headers: { Authorization: `Bearer ${token}` } });

  const col = ok(await api.POST('/api/v1/collections', { body: { name: `${input.prefix}-oft` } }));
  const server = ok(
    await api.POST('/api/v1/classes', {
      body: {
        name: `${input.prefix}-oft-Server`,
        description: '',
        collection_id: col.id,
        json_schema: SERVER_SCHEMA,
        validate_schema: true,
      },
    }),
  );
  const rackClass = ok(
    await api.POST('/api/v1/classes', {
      body: { name: `${input.prefix}-oft-Rack`, description: '', collection_id: col.id, validate_schema: false },
    }),
  );
  const serverIds: number[] = [];
  for (const s of SERVERS) {
    serverIds.push(
      ok(
        await api.POST('/api/v1/classes/{class_id}/objects', {
          params: { path: { class_id: server.id } },
          body: { ...s, description: '' },
        }),
      ).id,
    );
  }
  const rack = ok(
    await api.POST('/api/v1/classes/{class_id}/objects', {
      params: { path: { class_id: rackClass.id } },
      body: { name: 'r1', description: '', json_data: {} },
    }),
  );
  const rel = ok(
    await api.POST('/api/v1/relations/classes', {
      body: {
        from_class_id: server.id,
        to_class_id: rackClass.id,
        forward_alias: null,
        reverse_alias: null,
        from_max_relations: null,
        to_max_relations: null,
      },
    }),
  );
  ok(
    await api.POST('/api/v1/relations/objects', {
      body: { class_relation_id: rel.id, from_object_id: serverIds[0]!, to_object_id: rack.id },
    }),
  );
  const related = ok(
    await api.GET('/api/v1/classes/{object_class_id}/{object_id}/related/objects', {
      params: { path: { object_class_id: rackClass.id, object_id: rack.id } },
    }),
  );

  const pagedNames: string[] = [];
  const pageSizes: number[] = [];
  let cursor: string | undefined;
  do {
    const r = await api.GET('/api/v1/classes/{class_id}/objects', {
      params: { path: { class_id: server.id }, query: { name__startswith: 'web-', sort: '-name', limit: 2, cursor } },
    });
    const page = ok(r);
    pagedNames.push(...page.map((o) => o.name));
    pageSizes.push(page.length);
    cursor = r.response.headers.get('X-Next-Cursor') ?? undefined;
  } while (cursor);

  const names = async (query: ListObjectsQuery) =>
    ok(
      await api.GET('/api/v1/classes/{class_id}/objects', { params: { path: { class_id: server.id }, query: { ...query, sort: 'name' } } }),
    ).map((o) => o.name);
  const filtered = {
    in: await names({ name__in: 'web-1,db-6' }),
    notEquals: await names({ name__not_equals: ['web-0', 'web-1', 'web-2'], name__startswith: 'web' }),
    jsonPath: await names({ json_data__equals: 'rack=r2' }),
  };

  // Filters through the repeatable string parameter `filter` (`<filter name>=<value>` each, as the
  // filter would be sent on its own): the way to send the filters no list declares (related.*,
  // computed.*), with the client's default options.
  const viaFilter = {
    jsonPath: await names({ filter: ['json_data__equals=rack=r2'] }),
    related: await names({ filter: [`related.r.class.id=${rackClass.id}`, 'json_data__equals=rack=r1'] }),
  };

  const searchNames: string[] = [];
  let searchPages = 0;
  const search: components['schemas']['StructuredSearchRequest'] = {
    version: 1,
    target: { kind: 'object', class: { id: server.id } },
    filter: { op: 'field', predicate: { field: 'json_data', path: 'rack', operator: 'equals', value: 'r1' } },
    sort: [{ field: 'name', direction: 'asc' }],
    limit: 1,
    include_total: false,
  };
  let next: string | null = null;
  do {
    const page: components['schemas']['StructuredSearchResponse'] = ok(
      await api.POST('/api/v1/search', { body: { ...search, cursor: next } }),
    );
    searchPages++;
    for (const r of page.results) if (r.kind === 'object') searchNames.push(r.resource.name);
    next = page.next;
  } while (next);

  const eventEntityIds: number[] = [];
  let evCursor: string | undefined;
  do {
    const r = await api.GET('/api/v1/collections/{collection_id}/events', {
      params: { path: { collection_id: col.id }, query: { entity_type: 'object', action: 'created', limit: 3, cursor: evCursor } },
    });
    for (const e of ok(r)) if (e.entity_id !== null) eventEntityIds.push(e.entity_id);
    evCursor = r.response.headers.get('X-Next-Cursor') ?? undefined;
  } while (evCursor);

  const dup = await api.POST('/api/v1/classes', {
    body: { name: server.name, description: '', collection_id: col.id, validate_schema: false },
  });
  if (!dup.error) throw new Error('openapi-fetch: creating the class twice succeeded');
  const conflict = { status: dup.response.status, error: dup.error.error, message: dup.error.message };

  return {
    collectionId: col.id,
    serverIds,
    rackId: rack.id,
    relatedToRack: related.map((o) => o.id),
    pagedNames,
    pageSizes,
    filtered,
    viaFilter,
    searchNames,
    searchPages,
    eventEntityIds,
    conflict,
  };
}
