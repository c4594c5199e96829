import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import type { OperationId } from '../../generated/operations.ts';
import { ApiError, type ErrorDetail } from '../domain/errors.ts';
import { defineMember } from '../domain/json-patch.ts';
import { addFormats, openapiDocument } from './openapi.ts';
import { SchemaRegistry, escapePointer } from './schemas.ts';
import { pathDetails, queryNulDetails, stringDetails } from './input.ts';
import { appendParameter } from './request.ts';

export interface RawRequest {
  /** Lowercase. */
  method: string;
  path: string;
  query: Record<string, string | string[]>;
  /** The request headers (read by lowercase name; a handler's header record reads them too). */
  headers: Pick<Headers, 'get' | 'forEach'>;
  body: unknown;
  contentType: string;
}

/** An operation of openapi.yaml as the router knows it, compiled once at start. */
export interface Operation {
  operationId: OperationId;
  /** The path template, e.g. `/api/v1/classes/{class_id}`. */
  path: string;
  /** Lowercase. */
  method: string;
  /** The operation's security requirements (or the document's) ask for a bearer token. */
  needsAuth: boolean;
  /** The operation declares a request body. */
  hasBody: boolean;
}

export interface Routed {
  operationId: OperationId;
  operation: Operation;
  params: Record<string, unknown>;
  query: Record<string, unknown>;
  needsAuth: boolean;
}

type Json = Record<string, unknown>;
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  explode?: boolean;
  style?: string;
  content?: unknown;
  schema?: Json;
}

interface CompiledOperation extends Operation {
  /** Path parameters that are whole segments: [name, segment index]. */
  segmentParams: [string, number][];
  /** Path parameters inside a segment (none in openapi.yaml today): the template as a regex. */
  partialParams?: { names: string[]; regex: RegExp };
  /** Query parameters by name, the first declared of each (array-typed ones are sent singly as a one-item array). */
  queryParams: Map<string, { array: boolean; explode?: boolean; style?: string }>;
  /**
   * Declared header parameters that validation could refuse, lowercase: a header whose schema every
   * string satisfies (X-Request-Id, If-Match, ...: acceptsAnyString) is not read for it.
   */
  headers: string[];
  /** Declares the repeatable `filter` query parameter. */
  filters: boolean;
  /** Path, query and header parameters, with type coercion (the schema openapi-backend built for them). */
  validateParams: ValidateFunction;
  /** The request body: its media types, and the pointer of each one's schema (those that declare one). */
  body?: { required: boolean; types: string[]; schemas: Map<string, string> };
  /** Path parameters whose schema is an integer. */
  integers: Set<string>;
  /**
   * Declares no path parameter, no header parameter validation could refuse and no body, and its
   * parameter validator accepts a request without query parameters: such a request (`/healthz`)
   * is valid as it is.
   */
  validWithoutInput: boolean;
}

const DOC_ID = 'openapi.json';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Schema keywords that refuse nothing. */
const ANNOTATIONS = new Set(['title', 'description', '$comment', 'default', 'example', 'examples', 'deprecated', 'readOnly', 'writeOnly']);

/**
 * Whether every header value (a string) satisfies `schema`: none, or `type: string` with nothing
 * else but annotations. Every operation declares X-Request-Id and X-Correlation-ID, whose invalid
 * values are ignored, never refused: reading them for validation cost each request two header
 * lookups and a validator run (`/healthz` spent 1.4 % of its CPU validating nothing).
 */
function acceptsAnyString(schema: Json | undefined): boolean {
  return schema === undefined || Object.keys(schema).every((k) => ANNOTATIONS.has(k) || (k === 'type' && schema.type === 'string'));
}

/**
 * Routing and request validation against openapi.yaml. Every operation is compiled once, at
 * construction: its route into a trie, its path, query and header parameters into one ajv
 * function (the same schema, ajv options and coercion openapi-backend used to build, so the same
 * 400 details), its request body schema per media type.
 */
export class ContractRouter {
  private readonly schemas = new SchemaRegistry();
  private readonly operations: CompiledOperation[];
  private readonly routes: RouteNode;
  /** The routes whose path has no parameter, by path: looked up before the trie. */
  private readonly exact: Map<string, Route>;

  constructor() {
    const doc = openapiDocument() as unknown as Json;
    // Parameters are validated with type coercion (query and path values arrive as strings), as
    // openapi-backend's customizeAjv set it up; the contract is added once and referenced by pointer.
    const ajv = new Ajv2020({ strict: false, allErrors: true, coerceTypes: true });
    addFormats(ajv);
    ajv.addSchema(Object.assign({}, doc, { $id: DOC_ID }));
    const security = (doc.security as unknown[] | undefined) ?? [];
    this.operations = [];
    for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Json>)) {
      for (const method of METHODS) {
        const op = item[method] as Json | undefined;
        if (!op) continue;
        const pointer = `/paths/${escapePointer(path)}/${method}`;
        this.operations.push(
          this.compileOperation(ajv, path, method, op, item, pointer, (op.security as unknown[] | undefined) ?? security),
        );
      }
    }
    [this.routes, this.exact] = compileRoutes(this.operations);
  }

  /** Kept for callers that awaited the old asynchronous start; everything is compiled in the constructor. */
  async init(): Promise<void> {}

  private compileOperation(
    ajv: Ajv2020,
    path: string,
    method: string,
    op: Json,
    item: Json,
    pointer: string,
    security: unknown[],
  ): CompiledOperation {
    const operationId = op.operationId as OperationId;
    // The operation's parameters, then its path item's (openapi-backend's order: on a name declared
    // twice the later one's schema wins). The declared list filters are left to the list parser,
    // which checks them exactly as before they were declared: compiling some 250 of them per list
    // operation into ajv costs seconds per operation. test/spec-generators.test.ts proves their
    // schemas and the parser agree.
    const refs: [unknown, string][] = [
      ...((op.parameters ?? []) as unknown[]).map((p, i): [unknown, string] => [p, `${pointer}/parameters/${i}`]),
      ...((item.parameters ?? []) as unknown[]).map((p, i): [unknown, string] => [p, `/paths/${escapePointer(path)}/parameters/${i}`]),
    ].filter(([p]) => !String((p as Json).$ref ?? '').startsWith('#/components/parameters/ListFilter.'));
    const params = refs.map(([p, at]) => {
      const [param, ptr] = this.schemas.resolve(p, at);
      return { param: param as unknown as Parameter, schemaPointer: `${ptr}/schema` };
    });
    const target: Record<string, { type: 'object'; additionalProperties: unknown; properties: Json; required: string[] }> = {
      path: { type: 'object', additionalProperties: false, properties: {}, required: [] },
      query: { type: 'object', additionalProperties: false, properties: {}, required: [] },
      header: { type: 'object', additionalProperties: true, properties: {}, required: [] },
      cookie: { type: 'object', additionalProperties: true, properties: {}, required: [] },
    };
    const required: string[] = [];
    const queryParams: CompiledOperation['queryParams'] = new Map();
    const headers: string[] = [];
    const pathNames: string[] = [];
    for (const { param, schemaPointer } of params) {
      const t = target[param.in];
      if (!t || param.in === 'cookie') throw new Error(`${operationId}: parameters in ${param.in} are not supported`);
      if (param.content) throw new Error(`${operationId}: parameter ${param.name} declares content; only schemas are supported`);
      const name = param.in === 'header' ? param.name.toLowerCase() : param.name;
      if (param.required) {
        if (!t.required.includes(name)) t.required.push(name);
        if (!required.includes(param.in)) required.push(param.in);
      }
      const schema = param.schema ? this.resolveSchema(param.schema, schemaPointer) : undefined;
      if (schema?.additionalProperties !== undefined) t.additionalProperties = schema.additionalProperties;
      t.properties[name] = param.schema === undefined ? undefined : { $ref: `${DOC_ID}#${schemaPointer}` };
      if (param.in === 'query' && !queryParams.has(name)) {
        queryParams.set(name, { array: schema?.type === 'array', explode: param.explode, style: param.style });
      }
      if (param.in === 'header' && !headers.includes(name) && (param.required || !acceptsAnyString(schema))) headers.push(name);
      if (param.in === 'path') pathNames.push(name);
    }
    const validateParams = ajv.compile({
      title: 'Request',
      type: 'object',
      additionalProperties: true,
      properties: target,
      required,
    });

    const segments = path.split('/');
    const segmentParams: [string, number][] = [];
    let partial = false;
    segments.forEach((segment, i) => {
      const m = /^\{([A-Za-z0-9_-]+)\}$/.exec(segment);
      if (m) segmentParams.push([m[1]!, i]);
      else if (segment.includes('{')) partial = true;
    });
    const templateNames = [...path.matchAll(/\{([A-Za-z0-9_-]+)\}/g)].map((m) => m[1]!);
    if (new Set(templateNames).size !== templateNames.length) throw new Error(`${path}: a path parameter appears twice`);

    let body: CompiledOperation['body'];
    if (op.requestBody) {
      const [rb, rbPointer] = this.schemas.resolve(op.requestBody, `${pointer}/requestBody`);
      const content = rb.content as Record<string, { schema?: unknown }> | undefined;
      if (content) {
        const schemas = new Map<string, string>();
        for (const [type, media] of Object.entries(content)) {
          if (media.schema) schemas.set(type, `${rbPointer}/content/${escapePointer(type)}/schema`);
        }
        body = { required: rb.required === true, types: Object.keys(content), schemas };
      }
    }
    const integers = new Set(
      params
        .filter(
          ({ param, schemaPointer }) =>
            param.in === 'path' && param.schema && this.resolveSchema(param.schema, schemaPointer).type === 'integer',
        )
        .map(({ param }) => param.name),
    );
    const noInput = segmentParams.length === 0 && !partial && headers.length === 0 && !body;
    return {
      validWithoutInput: noInput && validateParams({ path: {}, query: {}, header: {}, cookie: {} }) === true,
      operationId,
      path,
      method,
      needsAuth: security.length > 0 && !security.some((s) => s && typeof s === 'object' && Object.keys(s).length === 0),
      hasBody: Boolean(op.requestBody),
      segmentParams: partial ? [] : segmentParams,
      partialParams: partial
        ? { names: templateNames, regex: new RegExp('^' + path.replace(/\{[A-Za-z0-9_-]+\}/g, '([^\\/]*)') + '$') }
        : undefined,
      queryParams,
      headers,
      filters: queryParams.has(FILTER_PARAMETER),
      validateParams,
      body,
      integers,
    };
  }

  /** A schema with its `$ref`s followed (to read its type). */
  private resolveSchema(schema: Json, pointer: string): Json {
    return this.schemas.resolve(schema, pointer)[0];
  }

  /**
   * Matches a request to an operation: 404 for unknown paths, 405 for a known path with another
   * method. Paths are compiled once into a per-segment trie (a map of literal segments and one
   * parameter branch per node), so a lookup costs the path's segments, not the number of routes.
   * The routes found keep openapi-backend's precedence: literal segments win over templated ones
   * (a longer literal part is tried first). Of the routes that match, the first whose integer path
   * parameters are integers wins (`/classes/by-name/computed-fields` is the class named
   * `computed-fields`, not the computed fields of class `by-name`: the path pairs redocly.yaml lists
   * as ambiguous); only when none fits does the first match answer (400 for `/classes/abc/objects`,
   * as before).
   */
  match(req: Pick<RawRequest, 'method' | 'path'>): Operation {
    // HEAD is GET without the body (RFC 9110 9.3.2: a server supports HEAD wherever it supports
    // GET): the GET operation answers, and the server sends its status and headers only.
    const method = req.method === 'head' ? 'get' : req.method;
    // A literal path's route comes first of any that match (the order above).
    const exact = this.exact.get(req.path)?.methods.get(method);
    if (exact) return exact;
    const candidates: Route[] = [];
    collectRoutes(this.routes, req.path.split('/'), 0, candidates);
    if (candidates.length > 1) candidates.sort((a, b) => a.order - b.order);
    let loose: Operation | undefined;
    for (const route of candidates) {
      const op = route.methods.get(method);
      if (!op) continue;
      if (route.typed === undefined || route.typed.test(req.path)) return op;
      loose ??= op;
    }
    if (loose) return loose;
    if (candidates.length) {
      throw new ApiError('method_not_allowed', 'this method is not allowed on this path', { allow: allowedMethods(candidates) });
    }
    throw new ApiError('not_found', 'no route matches this request');
  }

  needsAuth(op: Operation): boolean {
    return op.needsAuth;
  }

  /** Every operation, in the contract's order. */
  list(): readonly Operation[] {
    return this.operations;
  }

  /** Validates parameters and body; returns coerced params and query, or throws 400. */
  validate(operation: Operation, req: RawRequest): Routed {
    const op = operation as CompiledOperation;
    if (op.validWithoutInput && !req.path.includes('%') && isEmpty(req.query)) {
      return { operationId: op.operationId, operation: op, params: {}, query: {}, needsAuth: op.needsAuth };
    }
    // Before decoding the path parameters: malformed percent-encoding would throw URIError. Without
    // a `%` there is nothing to decode (and no NUL: Node's parser refuses one sent as it is).
    const hostile = req.path.includes('%') ? pathDetails(op.path, req.path) : [];
    const nul = queryNulDetails(req.query);
    if (hostile.length || nul.length) throw invalidRequest([...hostile, ...nul]);
    const path = pathParams(op, req.path);
    const query = queryForValidation(op, op.filters ? expandFilterParameter(req.query) : req.query);
    const header: Record<string, string> = {};
    for (const name of op.headers) {
      const v = req.headers.get(name);
      if (v !== null) header[name] = v;
    }
    const parameters = { path, query, header, cookie: {} };
    const details: ErrorDetail[] = op.validateParams(parameters) ? [] : (op.validateParams.errors ?? []).map((e) => toDetail(e));
    details.push(...this.validateBody(op, req));
    if (details.length) throw invalidRequest(details);
    return { operationId: op.operationId, operation: op, params: parameters.path, query: parameters.query, needsAuth: op.needsAuth };
  }

  private validateBody(op: CompiledOperation, req: RawRequest): ErrorDetail[] {
    const rb = op.body;
    if (!rb) return [];
    if (req.body === undefined) return rb.required ? [{ path: 'body', message: 'a request body is required' }] : [];
    const { types } = rb;
    const type = types.find((t) => t === req.contentType) ?? (req.contentType === '' && types.length === 1 ? types[0] : undefined);
    if (!type) throw new ApiError('unsupported_media_type', `unsupported content type; use ${types.join(' or ')}`);
    const unstorable = stringDetails(req.body, 'body');
    if (unstorable.length) return unstorable;
    const pointer = rb.schemas.get(type);
    if (pointer === undefined) return [];
    const validate = this.schemas.validatorAt(pointer);
    if (validate(req.body)) return [];
    return (validate.errors ?? []).slice(0, 20).map((e) => toDetail(e, 'body'));
  }
}

function isEmpty(record: object): boolean {
  for (const _ in record) return false;
  return true;
}

/** The path parameters, percent-decoded (pathDetails has refused what decodeURIComponent would). */
function pathParams(op: CompiledOperation, path: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (op.partialParams) {
    const m = op.partialParams.regex.exec(path);
    if (m) op.partialParams.names.forEach((name, i) => (out[name] = decodeURIComponent(m[i + 1]!)));
    return out;
  }
  if (op.segmentParams.length === 0) return out;
  const segments = path.split('/');
  for (const [name, i] of op.segmentParams) {
    const segment = segments[i] ?? '';
    out[name] = segment.includes('%') ? decodeURIComponent(segment) : segment;
  }
  return out;
}

/**
 * The query as the parameter validator reads it (and may coerce): a copy, where an array-typed
 * parameter sent once is a one-item array and a non-exploded one is split at its delimiters, as
 * openapi-backend prepared it.
 */
function queryForValidation(op: CompiledOperation, query: Record<string, string | string[]>): Record<string, unknown> {
  const out = Object.create(Object.getPrototypeOf(query) as object | null) as Record<string, unknown>;
  for (const name of Object.keys(query)) {
    const v = query[name]!;
    const value = Array.isArray(v) ? v.slice() : v;
    // defined, not assigned: an own `__proto__` member stays a member
    if (name === '__proto__') defineMember(out, name, value);
    else out[name] = value;
  }
  for (const name in out) {
    const param = op.queryParams.get(name);
    if (!param || param.explode !== false || !out[name]) continue;
    const raw = out[name];
    if (Array.isArray(raw) && raw.length > 1) continue;
    const value: unknown = Array.isArray(raw) ? raw[0] : raw;
    if (typeof value !== 'string') continue;
    let decoded = value.replace(/%2C/g, ',');
    if (param.style === 'spaceDelimited') decoded = decoded.replace(/ /g, ',').replace(/%20/g, ',');
    if (param.style === 'pipeDelimited') decoded = decoded.replace(/\|/g, ',').replace(/%7C/g, ',');
    out[name] = decoded.split(',');
  }
  for (const name of Object.keys(out)) {
    if (typeof out[name] === 'string' && op.queryParams.get(name)?.array) out[name] = [out[name]];
  }
  return out;
}

/**
 * The route trie of the operations. Routes keep openapi-backend's precedence (literal paths first,
 * then longer literal parts); a route with integer path parameters also gets the regex that
 * checks they are integers.
 */
function compileRoutes(operations: CompiledOperation[]): [RouteNode, Map<string, Route>] {
  const byPath = new Map<string, { methods: Map<string, Operation>; integers: Set<string> }>();
  for (const op of operations) {
    const entry = byPath.get(op.path) ?? { methods: new Map<string, Operation>(), integers: new Set<string>() };
    entry.methods.set(op.method, op);
    for (const name of op.integers) entry.integers.add(name);
    byPath.set(op.path, entry);
  }
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // A path parameter's segment pattern: digits for an integer, any segment otherwise.
  const compile = (path: string, segment: (name: string) => string) =>
    new RegExp(
      '^' +
        path
          .split(/(\{[^}]+\})/)
          .map((part, i) => (i % 2 ? segment(part.slice(1, -1)) : escape(part)))
          .join('') +
        '$',
    );
  const ordered = [...byPath.entries()]
    .map(([path, { methods, integers }]) => ({
      path,
      typed: integers.size ? compile(path, (name) => (integers.has(name) ? '-?[0-9]+' : '[^/]+')) : undefined,
      literal: path.replace(/\{[^}]+\}/g, '').length,
      exact: !path.includes('{'),
      methods,
    }))
    .sort((a, b) => Number(b.exact) - Number(a.exact) || b.literal - a.literal);
  const root = newNode();
  const exact = new Map<string, Route>();
  ordered.forEach(({ path, typed, methods, exact: literal }, order) => {
    const route: Route = { order, typed, methods };
    if (literal) exact.set(path, route);
    let node = root;
    for (const segment of path.split('/')) {
      if (/^\{[^}]+\}$/.test(segment)) {
        node = node.param ??= newNode();
      } else if (segment.includes('{')) {
        // A parameter inside a segment (none in openapi.yaml today): matched by its regex.
        node.partial.push({ route, regex: compile(path, () => '[^/]+') });
        return;
      } else {
        let next = node.literal.get(segment);
        if (!next) node.literal.set(segment, (next = newNode()));
        node = next;
      }
    }
    node.routes.push(route);
  });
  return [root, exact];
}

interface Route {
  /** Precedence: lower first (literal paths, then longer literal parts). */
  order: number;
  /** The path with its integer parameters as integers; undefined when it has none. */
  typed: RegExp | undefined;
  methods: Map<string, Operation>;
}

/** The Allow header of a 405 (RFC 9110 10.2.1): the methods of the routes the path matched, HEAD beside GET. */
function allowedMethods(routes: Route[]): string {
  const methods = new Set<string>();
  for (const route of routes) {
    for (const m of route.methods.keys()) {
      methods.add(m.toUpperCase());
      if (m === 'get') methods.add('HEAD');
    }
  }
  const order = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
  return [...methods].sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99) || a.localeCompare(b)).join(', ');
}

/** A node of the route trie: one path segment. */
interface RouteNode {
  literal: Map<string, RouteNode>;
  /** A segment that is a whole path parameter (`{name}`): any non-empty segment. */
  param?: RouteNode;
  /** Routes whose path ends here. */
  routes: Route[];
  /** Routes with a parameter inside this (next) segment, matched whole by their regex. */
  partial: { route: Route; regex: RegExp }[];
}

function newNode(): RouteNode {
  return { literal: new Map(), routes: [], partial: [] };
}

/** Every route whose path template matches the segments (parameters matching any non-empty segment). */
function collectRoutes(node: RouteNode, segments: string[], i: number, out: Route[]): void {
  for (const p of node.partial) if (p.regex.test(segments.join('/'))) out.push(p.route);
  if (i === segments.length) {
    out.push(...node.routes);
    return;
  }
  const segment = segments[i]!;
  const next = node.literal.get(segment);
  if (next) collectRoutes(next, segments, i + 1, out);
  if (node.param && segment !== '') collectRoutes(node.param, segments, i + 1, out);
}

function invalidRequest(details: ErrorDetail[]): ApiError {
  const first = details[0]!;
  return new ApiError('bad_request', `invalid request: ${first.path ? first.path + ' ' : ''}${first.message}`, {
    details,
    reason: 'invalid_request',
  });
}

function toDetail(e: ErrorObject, root?: string): ErrorDetail {
  let path = e.instancePath.replace(/^\/requestBody/, '/body').replace(/^\/(path|query|header)\//, '$1.');
  if (root) path = root + e.instancePath;
  path = path.replace(/^\//, '').replace(/\//g, '.');
  const p = e.params as Record<string, unknown>;
  let message = e.message ?? 'is invalid';
  if (e.keyword === 'additionalProperties') message = `unknown member "${String(p.additionalProperty)}"`;
  if (e.keyword === 'required') message = `missing required member "${String(p.missingProperty)}"`;
  if (e.keyword === 'enum') message = `must be one of ${(p.allowedValues as unknown[]).map(String).join(', ')}`;
  return { path: path || 'body', message };
}

/** The declared, repeatable query parameter of list operations that carries one filter per value. */
export const FILTER_PARAMETER = 'filter';
/** Names a `filter` value may not carry: the list's own parameters, which are not filters. */
const NOT_FILTERS = new Set(['limit', 'cursor', 'sort', 'include_total', FILTER_PARAMETER, 'filters']);

/**
 * `filter=<filter name>=<value>` (repeatable): each value becomes the query parameter it names,
 * exactly as if it had been sent as its own (`filter=json_data.port__eq%3D80` is `json_data.port__eq=80`),
 * after any such parameter sent directly; the list parser then reads them alike (repeated names
 * AND, the same 400s naming the filter). It exists for the filter names that cannot be declared
 * (`json_data.*`, `computed.*`, `related.*`): every generated client sends a string array, where a
 * free-form object is serialized differently by each. A value without `=`, with an empty name or
 * naming a list parameter that is not a filter is a 400 naming `filter`.
 */
export function expandFilterParameter(query: Record<string, string | string[]>): Record<string, string | string[]> {
  const raw = query[FILTER_PARAMETER];
  if (raw === undefined) return query;
  const out: Record<string, string | string[]> = { ...query };
  delete out[FILTER_PARAMETER];
  const details: ErrorDetail[] = [];
  for (const value of Array.isArray(raw) ? raw : [raw]) {
    const eq = value.indexOf('=');
    const name = eq < 0 ? '' : value.slice(0, eq);
    const shown = JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value);
    if (eq < 0) details.push({ path: `query.${FILTER_PARAMETER}`, message: `${shown} is not <filter name>=<value>` });
    else if (!name.trim()) details.push({ path: `query.${FILTER_PARAMETER}`, message: `${shown} has an empty filter name` });
    else if (NOT_FILTERS.has(name))
      details.push({ path: `query.${FILTER_PARAMETER}`, message: `${shown}: ${name} is not a filter (send it as its own parameter)` });
    else appendParameter(out, name, value.slice(eq + 1));
  }
  if (details.length) throw invalidRequest(details);
  return out;
}
