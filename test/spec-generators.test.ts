// What client generators need from openapi.yaml: every list filter declared as its own query
// parameter (generated from the server's list tables, and accepted by the real app), no two
// parameters of one operation that a generator would give the same identifier, the responses and
// headers every operation can produce, no schema named after a JavaScript global, and request
// members with a `default` optional in openapi-typescript clients under the option the README names.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ts from 'typescript';
import YAML from 'yaml';
import openapiTS, { astToString, type OpenAPITSOptions } from 'openapi-typescript';
import { operations, type OperationId } from '../generated/operations.ts';
import { SchemaRegistry } from '../src/http/schemas.ts';
import { ApiError } from '../src/domain/errors.ts';
import { parseListQuery } from '../src/domain/list-query.ts';
import { LIST_FILTER_OPERATIONS, accepts, extraParams, filterParams, sampleValue } from '../codegen/list-filters.ts';
import { FILTER_EXPRESSIONS_REF, syncSpecText } from '../codegen/spec-blocks.ts';
import { NO_DATABASE, insertConventions } from '../codegen/insert-conventions.ts';
import { SDK_TYPE_OPTIONS } from '../codegen/sdk.ts';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, createClass, createObject } from './class-fixtures.ts';

type Json = Record<string, unknown>;
interface Param {
  name: string;
  in: string;
  required?: boolean;
  style?: string;
  explode?: boolean;
  $ref?: string;
  schema?: Json;
}
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;
const text = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'openapi.yaml'), 'utf8');
const doc = YAML.parse(text) as { paths: Record<string, Json>; components: { parameters: Record<string, Param>; schemas: Json } };
const registry = new SchemaRegistry(doc as unknown as Json);

function resolveParam(p: Param, d = doc): [Param, string | undefined] {
  if (!p.$ref) return [p, undefined];
  const key = p.$ref.split('/').pop()!;
  return [d.components.parameters[key]!, `/components/parameters/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`];
}

/** Every operation with its parameters (path-level ones first), references resolved. */
function allOperations(d = doc): { opId: string; method: string; path: string; op: Json; params: [Param, string | undefined][] }[] {
  const out = [];
  for (const [path, item] of Object.entries(d.paths)) {
    for (const method of METHODS) {
      const op = item[method] as Json | undefined;
      if (!op) continue;
      const raw = [...((item.parameters as Param[] | undefined) ?? []), ...((op.parameters as Param[] | undefined) ?? [])];
      out.push({ opId: op.operationId as string, method, path, op, params: raw.map((p) => resolveParam(p, d)) });
    }
  }
  return out;
}

const queryNames = (opId: string): Map<string, string | undefined> => {
  const op = allOperations().find((o) => o.opId === opId)!;
  return new Map(op.params.filter(([p]) => p.in === 'query').map(([p, ptr]) => [p.name, ptr]));
};

/** Parameters an operation declares that are not list filters (paging, sort, the free-form object, its own). */
const NOT_FILTERS = new Set(['limit', 'cursor', 'sort', 'include_total', 'filters', 'filter', 'include', 'group_by', 'aggregate']);

describe('list filters declared as query parameters', () => {
  it('openapi.yaml holds the generated filter parameters as codegen writes them (make codegen)', () => {
    expect(syncSpecText(text) === text, 'openapi.yaml is stale: run make codegen').toBe(true);
  });

  it('every list operation declares exactly the filter names the server accepts, and no others', () => {
    for (const [opId, listOp] of Object.entries(LIST_FILTER_OPERATIONS)) {
      const declared = queryNames(opId);
      const accepted = new Set([...filterParams(listOp).map((p) => p.name), ...extraParams(listOp)]);
      // A filter named like a path parameter is left to the free-form `filters` (one identifier in clients).
      const pathParams = new Set(
        allOperations()
          .find((o) => o.opId === opId)!
          .params.filter(([p]) => p.in === 'path')
          .map(([p]) => p.name),
      );
      for (const name of accepted) if (!pathParams.has(name)) expect(declared.has(name), `${opId} does not declare ${name}`).toBe(true);
      for (const name of declared.keys()) {
        if (NOT_FILTERS.has(name)) continue;
        // A hand-declared name (the audit lists' entity_type, ...) is a field the parser reads too.
        const field = name.split('__')[0]!;
        const ok = accepted.has(name) || field in listOp.spec.fields || field in (listOp.spec.aliases ?? {});
        expect(ok, `${opId} declares ${name}, which the server does not accept`).toBe(true);
      }
    }
  });

  it('each filter schema accepts exactly what the list parser accepts (a corpus of good and bad values)', () => {
    const bad = ['', ' ', 'abc', '1.0', '+5', ' 5', '1e3', '1,,2', '1,2,3', '1-', '5-1x', 'yes', 'TRUE', 'nope', '2026/01/01', 'yesterday'];
    const json = ['novalue', ',=1', ' ,a=1', 'a=x', 'a=1', 'a=1,2,3', 'a=maybe', 'a,b', 'a=true', '=1'];
    let checked = 0;
    const seen = new Set<string>();
    for (const [opId, listOp] of Object.entries(LIST_FILTER_OPERATIONS)) {
      const declared = queryNames(opId);
      for (const p of filterParams(listOp)) {
        const ptr = declared.get(p.name);
        const key = `${p.type}:${p.op}:${String(p.values)}`;
        if (!ptr?.startsWith('/components/parameters/ListFilter.') || seen.has(key)) continue;
        seen.add(key);
        const validate = registry.validatorAt(`${ptr}/schema`);
        const good = sampleValue(p);
        expect(validate(good), `${p.name}=${good} fails its schema`).toBe(true);
        expect(accepts(listOp, p.name, good), `${p.name}=${good} is refused by the parser`).toBe(true);
        for (const v of [...bad, ...(p.type === 'json' ? json : []), ...(p.values ?? []).map((x) => ` ${x} ,${x}`)]) {
          const schemaSays = validate(v);
          const parserSays = accepts(listOp, p.name, v);
          expect(schemaSays, `${p.name}=${JSON.stringify(v)}: schema ${schemaSays}, parser ${parserSays}`).toBe(parserSays);
          checked++;
        }
        // A repeated filter is accepted by both (all filters combine with AND).
        expect(validate([good, good])).toBe(true);
      }
    }
    expect(checked).toBeGreaterThan(300);
  });

  it('every operation with the free-form filters object also declares the repeatable string parameter `filter`, and no list field is called filter', () => {
    const withFilters = allOperations().filter(({ params }) => params.some(([p]) => p.in === 'query' && p.name === 'filters'));
    expect(withFilters.length).toBeGreaterThanOrEqual(Object.keys(LIST_FILTER_OPERATIONS).length);
    for (const { opId, params, op } of withFilters) {
      const filter = params.filter(([p]) => p.in === 'query' && p.name === 'filter');
      expect(filter, `${opId} does not declare filter`).toHaveLength(1);
      expect(
        (op.parameters as Param[]).some((p) => p.$ref === FILTER_EXPRESSIONS_REF),
        opId,
      ).toBe(true);
      const [p] = filter[0]!;
      expect(p).toMatchObject({ style: 'form', explode: true, schema: { type: 'array', items: { type: 'string' } } });
      expect(p.required ?? false).toBe(false);
    }
    // Reserved: a field or alias named `filter` could not be told from the parameter.
    for (const [opId, listOp] of Object.entries(LIST_FILTER_OPERATIONS)) {
      expect(
        filterParams(listOp).filter((f) => f.field === 'filter' || f.name.split('__')[0] === 'filter'),
        opId,
      ).toEqual([]);
      expect(extraParams(listOp), opId).not.toContain('filter');
    }
    for (const { opId, params } of allOperations()) {
      if (params.some(([p]) => p.in === 'query' && p.name === 'filter')) {
        expect(
          withFilters.some((o) => o.opId === opId),
          `${opId} declares filter without the list filters`,
        ).toBe(true);
      }
    }
  });

  it('declares nothing the generators could not tell apart: no two parameters of an operation with one identifier', () => {
    // openapi-typescript-codegen camel-cases names (class_id and classId collide), others keep them.
    const ident = (name: string) => name.replace(/[^A-Za-z0-9]/g, '').toLowerCase();
    for (const { opId, params } of allOperations()) {
      const seen = new Map<string, string>();
      for (const [p] of params) {
        const id = ident(p.name);
        expect(seen.has(id), `${opId}: ${p.in} ${p.name} collides with ${seen.get(id)}`).toBe(false);
        seen.set(id, `${p.in} ${p.name}`);
      }
    }
  });
});

/** What an operation of `d` lacks among the responses and headers every operation can produce. */
function conventionProblems(d: typeof doc): string[] {
  const components = (d.components as unknown as { responses: Record<string, Json> }).responses;
  const responseOf = (r: Json): Json => (r.$ref ? components[(r.$ref as string).split('/').pop()!]! : r);
  const missing: string[] = [];
  for (const { opId, op, params } of allOperations(d)) {
    const responses = op.responses as Record<string, Json>;
    if (!responses['405']) missing.push(`${opId} 405`);
    if (!NO_DATABASE.has(opId) && !responses['503']) missing.push(`${opId} 503`);
    if (op.requestBody && !responses['415']) missing.push(`${opId} 415`);
    for (const h of ['X-Correlation-ID', 'X-Request-Id']) {
      if (!params.some(([p]) => p.in === 'header' && p.name === h)) missing.push(`${opId} ${h} parameter`);
    }
    for (const [code, r] of Object.entries(responses)) {
      const headers = (responseOf(r).headers ?? {}) as Record<string, Json>;
      for (const h of ['X-Request-Id', 'X-Correlation-ID']) if (!headers[h]) missing.push(`${opId} ${code} ${h}`);
    }
  }
  return missing;
}

describe('responses and headers every operation can produce', () => {
  it('every operation declares 405, 503 (database_busy) where it reads the database, 415 where it takes a body, the X-Correlation-ID and X-Request-Id parameters, and X-Request-Id/X-Correlation-ID on every response', () => {
    expect(conventionProblems(doc)).toEqual([]);
    expect(allOperations().length).toBeGreaterThan(170);
    expect(insertConventions(text) === text, 'run npx tsx codegen/insert-conventions.ts').toBe(true);
  });

  it('the inserter adds what an operation lacks (a damaged copy of the contract)', () => {
    const damaged = text
      .replace(/\n {8}"405":\n {10}\$ref: "#\/components\/responses\/MethodNotAllowed"/g, '')
      .replace(/\n {8}"503":\n {10}\$ref: "#\/components\/responses\/ServiceUnavailable"/g, '')
      .replace(/\n {12}X-Request-Id:\n {14}\$ref: "#\/components\/headers\/XRequestId"/g, '')
      // (only where another parameter stays, so that no `parameters:` is left empty)
      .replace(/(?<=\n {8}- [^\n]*)\n {8}- \$ref: "#\/components\/parameters\/XCorrelationId"/g, '')
      .replace(/(?<=\n {8}- [^\n]*)\n {8}- \$ref: "#\/components\/parameters\/XRequestId"/g, '');
    const broken = conventionProblems(YAML.parse(damaged) as typeof doc);
    expect(broken.length).toBeGreaterThan(500);
    expect(conventionProblems(YAML.parse(insertConventions(damaged)) as typeof doc)).toEqual([]);
  });
});

/**
 * The names a generated client module cannot declare without hiding something it or its user
 * needs: every global value of JavaScript (ECMAScript, DOM and Node.js: `Error`, `Event`, `Request`,
 * `Buffer`, ...) and every type of the ECMAScript libraries (`Record`, `Partial`, ...). Type-only
 * DOM aliases (`PermissionName`) are left out: no generated code refers to them, so a module's own
 * declaration of that name changes nothing a client runs.
 */
function globalNames(): Set<string> {
  const file = '/__globals__.ts';
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ESNext,
    lib: ['lib.esnext.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
    types: ['node'],
    noEmit: true,
  };
  const host = ts.createCompilerHost(options);
  const program = ts.createProgram({
    rootNames: [file],
    options,
    host: {
      ...host,
      fileExists: (f) => f === file || host.fileExists(f),
      getSourceFile: (f, lang) => (f === file ? ts.createSourceFile(f, 'export {};', lang) : host.getSourceFile(f, lang)),
    },
  });
  const checker = program.getTypeChecker();
  const isEcmaScriptLib = (d: ts.Declaration) => /[\\/]lib\.(es\w*|decorators)[\w.]*\.d\.ts$/.test(d.getSourceFile().fileName);
  const names = new Set<string>();
  for (const s of checker.getSymbolsInScope(program.getSourceFile(file)!, ts.SymbolFlags.Value | ts.SymbolFlags.Type)) {
    if (s.flags & ts.SymbolFlags.Value || (s.declarations ?? []).some(isEcmaScriptLib)) names.add(s.name);
  }
  return names;
}

describe('schema names in generated clients', () => {
  it('no schema is named after a JavaScript global or an ECMAScript type (Error and Event were)', () => {
    const globals = globalNames();
    // The list is the real one (a broken lookup would pass everything).
    for (const name of ['Error', 'Event', 'Request', 'Response', 'Headers', 'URL', 'Map', 'Buffer', 'Record', 'Partial']) {
      expect(globals.has(name), name).toBe(true);
    }
    const schemas = Object.keys(doc.components.schemas);
    expect(schemas).toContain('ErrorResponse');
    expect(schemas).toContain('AuditEvent');
    expect(schemas.filter((name) => globals.has(name))).toEqual([]);
  });
});

/** What a client generated by openapi-typescript with `options` sees of `components.schemas`. */
async function generatedSchemas(options: OpenAPITSOptions): Promise<{ checker: ts.TypeChecker; schemaType: (name: string) => ts.Type }> {
  const source = astToString(await openapiTS(YAML.parse(text) as never, options));
  const file = '/__schema__.ts';
  const compilerOptions: ts.CompilerOptions = { target: ts.ScriptTarget.ESNext, strict: true, noEmit: true, types: [] };
  const host = ts.createCompilerHost(compilerOptions);
  const program = ts.createProgram({
    rootNames: [file],
    options: compilerOptions,
    host: {
      ...host,
      fileExists: (f) => f === file || host.fileExists(f),
      getSourceFile: (f, lang) => (f === file ? ts.createSourceFile(f, source, lang) : host.getSourceFile(f, lang)),
    },
  });
  const checker = program.getTypeChecker();
  const decl = program
    .getSourceFile(file)!
    .statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === 'components')!;
  const schemas = checker.getTypeOfSymbol(checker.getTypeAtLocation(decl.name).getProperty('schemas')!);
  return { checker, schemaType: (name) => checker.getTypeOfSymbol(schemas.getProperty(name)!) };
}

/** Members with a `default` that the contract does not require, and those of them the generated types require. */
function defaultedMembers({ checker, schemaType }: Awaited<ReturnType<typeof generatedSchemas>>): {
  checked: string[];
  required: string[];
} {
  const checked: string[] = [];
  const required: string[] = [];
  const visit = (schema: Json, type: ts.Type, where: string) => {
    const props = schema.properties as Record<string, Json> | undefined;
    if (!props) return;
    const object = checker.getNonNullableType(type);
    for (const [name, member] of Object.entries(props)) {
      const symbol = object.getProperty(name);
      expect(symbol, `${where}.${name} is not in the generated type`).toBeDefined();
      if (member.default !== undefined && !((schema.required as string[] | undefined) ?? []).includes(name)) {
        checked.push(`${where}.${name}`);
        if (!(symbol!.flags & ts.SymbolFlags.Optional)) required.push(`${where}.${name}`);
      }
      if (!member.$ref) visit(member, checker.getTypeOfSymbol(symbol!), `${where}.${name}`);
    }
  };
  for (const [name, schema] of Object.entries(doc.components.schemas as Record<string, Json>)) visit(schema, schemaType(name), name);
  return { checked, required };
}

describe('base URL in generated clients', () => {
  it('keeps the one server entry `/` and says there which base URL generated clients use', () => {
    const servers = (doc as unknown as { servers: { url: string; description?: string }[] }).servers;
    expect(servers.map((s) => s.url)).toEqual(['/']);
    expect(servers[0]!.description).toMatch(/base URL is the service's origin/);
  });
});

describe('defaults in generated clients', () => {
  it('with defaultNonNullable: false (the option the README names and the SDK sets) every defaulted member the contract does not require is optional', async () => {
    expect(SDK_TYPE_OPTIONS.defaultNonNullable).toBe(false);
    const { checked, required } = defaultedMembers(await generatedSchemas(SDK_TYPE_OPTIONS));
    expect(checked).toEqual(
      expect.arrayContaining(['NewClass.description', 'StructuredSearchRequest.include_total', 'LoginRequest.identity_scope']),
    );
    expect(checked.length).toBeGreaterThan(50);
    expect(required).toEqual([]);
  });

  it('with the default options they are required (what the README warns about; the contract keeps its defaults)', async () => {
    const { checked, required } = defaultedMembers(await generatedSchemas({ alphabetize: true }));
    expect(required).toEqual(checked);
    expect(required).toEqual(expect.arrayContaining(['NewClass.description', 'StructuredSearchRequest.include_total']));
  });
});

describe('list filters against the running app', () => {
  let t: TestApp;
  const pathValues: Record<string, Record<string, string | number>> = {};

  beforeAll(async () => {
    t = await startTestApp();
    const col = await collection(t);
    const cls = await createClass(t, col);
    const obj = await createObject(t, cls.id, { a: { b: 1 } });
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and kind = 'human' limit 1`;
    const [group] = await t.deps.sql<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
    const tpl = await t.request('POST', '/api/v1/export-templates', { body: { collection_id: col, name: uniq('tpl'), template: 'x' } });
    expect(tpl.status, tpl.text).toBe(201);
    const rt = await t.request('POST', '/api/v1/remote-targets', {
      body: {
        collection_id: col,
        name: uniq('rt'),
        description: 'a target',
        method: 'post',
        url_template: 'https://hooks.example.com/{{ subject.id }}',
        allowed_subject_types: ['collection'],
      },
    });
    expect(rt.status, rt.text).toBe(201);
    const cls2 = await createClass(t, col);
    const obj2 = await createObject(t, cls2.id, {});
    const cr = await t.request('POST', '/api/v1/relations/classes', { body: { from_class_id: cls.id, to_class_id: cls2.id } });
    expect(cr.status, cr.text).toBe(201);
    const crId = (cr.body as { id: number }).id;
    const or = await t.request('POST', '/api/v1/relations/objects', {
      body: { class_relation_id: crId, from_object_id: obj.id, to_object_id: obj2.id },
    });
    expect(or.status, or.text).toBe(201);
    const orId = (or.body as { id: number }).id;
    const common = { collection_id: col, class_id: cls.id, class_name: cls.name, object_id: obj.id, object_name: obj.name };
    for (const opId of Object.keys(LIST_FILTER_OPERATIONS)) {
      pathValues[opId] = {
        ...common,
        template_id: (tpl.body as { id: number }).id,
        target_id: (rt.body as { id: number }).id,
        user_id: admin!.id,
        group_id: group!.id,
        object_class_id: cls.id,
        relation_id: opId.includes('ObjectRelation') ? orId : crId,
      };
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  const pathOf = (opId: string) =>
    operations[opId as OperationId].path.replace(/\{([^}]+)\}/g, (_, name: string) => String(pathValues[opId]![name]));

  it('every declared filter parameter, sent as an ordinary query parameter, is answered 200 by every list', async () => {
    for (const [opId, listOp] of Object.entries(LIST_FILTER_OPERATIONS)) {
      const declared = queryNames(opId);
      // The generated ones (hand-declared names such as the audit lists' entity_id keep their own schemas).
      const params = filterParams(listOp).filter((p) => declared.get(p.name)?.startsWith('/components/parameters/ListFilter.'));
      for (let i = 0; i < params.length; i += 60) {
        // An aggregate needs a measure or a dimension besides its filters.
        const query: Record<string, string> = opId.startsWith('aggregate') ? { group_by: 'name' } : {};
        for (const p of params.slice(i, i + 60)) query[p.name] = sampleValue(p);
        const res = await t.request('GET', pathOf(opId), { query });
        expect(res.status, `${opId} ${JSON.stringify(query)}: ${res.text}`).toBe(200);
      }
    }
  });

  it('an unknown filter is still refused with the same 400 as before the filters were declared', async () => {
    for (const opId of ['listUsers', 'listObjects', 'listEvents'] as const) {
      const res = await t.request('GET', pathOf(opId), { query: { name__nearby: 'x' } });
      expect(res.status).toBe(400);
      let expected: ApiError | undefined;
      try {
        parseListQuery({ name__nearby: 'x' }, LIST_FILTER_OPERATIONS[opId]!.spec);
      } catch (e) {
        expected = e as ApiError;
      }
      expect(res.body).toMatchObject({ error: 'Bad Request', message: expected!.message });
      // The bracketed form a deepObject serializer produces stays unknown too.
      const bracketed = await t.request('GET', pathOf(opId), { query: { 'filters[name]': 'x' } });
      expect(bracketed.status).toBe(400);
    }
  });

  it('each value of `filter` is answered exactly as the filter sent as its own query parameter (a corpus of values)', async () => {
    const objects = pathOf('listObjects');
    const corpus: [string, Record<string, string | string[]>][] = [
      ['listObjects', { json_data__equals: 'a,b=1' }],
      ['listObjects', { json_data__equals: 'a,b=2' }],
      ['listObjects', { name__startswith: 'o', id__gt: '0' }],
      ['listObjects', { name__not_equals: ['x', 'y'] }],
      ['listObjects', { 'related.r.class.id': '999999999' }],
      ['listObjects', { 'related.r.class.name': 'nope' }],
      ['listObjects', { 'related.r.class.id': '1', 'related.r.depth__lte': '2' }],
      ['listObjects', { 'computed.shared.nope__gt': '4' }],
      ['listObjects', { name__nearby: 'x' }],
      ['listObjects', { id__gt: '1.0' }],
      ['listObjects', { json_data__equals: 'novalue' }],
      ['listObjects', { name: '' }],
      ['listUsers', { name__in: 'admin,x', id__gte: '1' }],
      ['listEvents', { action: 'created', entity_type: 'object' }],
      ['listCollectionEvents', { collection_id: '1' }],
    ];
    expect(objects).toMatch(/^\/api\/v1\/classes\/\d+\/objects$/);
    for (const [opId, direct] of corpus) {
      const expressions = Object.entries(direct).flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((x) => `${k}=${x}`));
      const a = await t.request('GET', pathOf(opId), { query: { ...direct, sort: '-id' } });
      const b = await t.request('GET', pathOf(opId), { query: { filter: expressions, sort: '-id' } });
      expect(b.status, `${opId} filter=${JSON.stringify(expressions)}: ${b.text}`).toBe(a.status);
      expect(b.body, `${opId} filter=${JSON.stringify(expressions)}`).toEqual(a.body);
      expect(b.headers.get('x-next-cursor')).toBe(a.headers.get('x-next-cursor'));
    }
    // Both forms at once: every filter applies (AND), as a repeated parameter does.
    const [obj] = (await t.request('GET', objects, { query: { limit: 1 } })).body as { id: number; name: string }[];
    const both = await t.request('GET', objects, {
      query: { id__gte: String(obj!.id), filter: [`id__lte=${obj!.id}`, `name=${obj!.name}`] },
    });
    expect(both.status, both.text).toBe(200);
    expect((both.body as { id: number }[]).map((o) => o.id)).toEqual([obj!.id]);
    const none = await t.request('GET', objects, { query: { id__gte: String(obj!.id), filter: `id__lt=${obj!.id}` } });
    expect(none.body).toEqual([]);
    // A cursor made with one form pages the other (the same filters, the same signature).
    await createObject(t, Number(pathValues.listObjects!.class_id), { a: { b: 2 } });
    const first = await t.request('GET', objects, { query: { limit: 1, filter: 'id__gte=1' } });
    const cursor = first.headers.get('x-next-cursor');
    expect(cursor).toBeTruthy();
    const second = await t.request('GET', objects, { query: { limit: 1, id__gte: '1', cursor: cursor! } });
    expect(second.status, second.text).toBe(200);
    expect(second.body).toHaveLength(1);
  });

  it('a `filter` value that is not <filter name>=<value> is a 400 naming filter', async () => {
    for (const value of ['novalue', '=x', ' =x', 'limit=5', 'cursor=abc', 'sort=name', 'filters=x', 'filter=name=x']) {
      const res = await t.request('GET', pathOf('listObjects'), { query: { filter: ['name=x', value] } });
      expect(res.status, `${value}: ${res.text}`).toBe(400);
      expect(res.body).toMatchObject({ error: 'Bad Request', reason: 'invalid_request', details: [{ path: 'query.filter' }] });
      expect((res.body as { message: string }).message).toMatch(/^invalid request: query\.filter /);
    }
  });

  it('a filter value the parser refuses is a 400 naming the parameter, as before', async () => {
    const res = await t.request('GET', '/api/v1/iam/users', { query: { id__gt: '1.0' } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ message: 'invalid value for id__gt: expected an integer' });
  });
});
