import { OpenAPIBackend, type Document, type Operation } from 'openapi-backend';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import type { OperationId } from '../../generated/operations.ts';
import { ApiError, type ErrorDetail } from '../domain/errors.ts';
import { addFormats, openapiDocument } from './openapi.ts';
import { SchemaRegistry, escapePointer } from './schemas.ts';
import { pathDetails, queryNulDetails, stringDetails } from './input.ts';

export interface RawRequest {
  method: string;
  path: string;
  query: Record<string, string | string[]>;
  headers: Record<string, string>;
  body: unknown;
  contentType: string;
}

export interface Routed {
  operationId: OperationId;
  operation: Operation;
  params: Record<string, unknown>;
  query: Record<string, unknown>;
  needsAuth: boolean;
}

/**
 * Routing and request validation against openapi.yaml. openapi-backend matches the route and
 * validates path, query and header parameters; request bodies are validated here per media type
 * (openapi-backend only knows application/json bodies).
 */
export class ContractRouter {
  readonly api: OpenAPIBackend;
  private readonly schemas = new SchemaRegistry();
  /** Operations that declare the repeatable `filter` query parameter (`filter=<filter name>=<value>`). */
  private readonly filterOperations: Set<string>;

  constructor() {
    const doc = withoutListFilterParams(structuredClone(openapiDocument()));
    this.filterOperations = operationsDeclaring(doc, FILTER_PARAMETER);
    this.api = new OpenAPIBackend({
      definition: doc,
      quick: true,
      strict: false,
      validate: true,
      coerceTypes: true,
      ignoreTrailingSlashes: false,
      customizeAjv: (_ajv, opts) => {
        const a = new Ajv2020({ ...opts, strict: false, allErrors: true, coerceTypes: (opts as { coerceTypes?: boolean }).coerceTypes });
        addFormats(a);
        return a as never;
      },
    });
  }

  async init(): Promise<void> {
    await this.api.init();
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
  match(req: RawRequest): Operation {
    this.routes ??= this.compileRoutes();
    const candidates: Route[] = [];
    collectRoutes(this.routes, req.path.split('/'), 0, candidates);
    if (candidates.length > 1) candidates.sort((a, b) => a.order - b.order);
    let pathMatched = false;
    let loose: Operation | undefined;
    for (const route of candidates) {
      const op = route.methods.get(req.method);
      if (!op) {
        pathMatched = true;
      } else if (route.typed === undefined || route.typed.test(req.path)) {
        return op;
      } else {
        loose ??= op;
      }
    }
    if (loose) return loose;
    if (pathMatched) throw new ApiError('method_not_allowed', 'this method is not allowed on this path');
    throw new ApiError('not_found', 'no route matches this request');
  }

  private routes?: RouteNode;

  private compileRoutes(): RouteNode {
    const byPath = new Map<string, Map<string, Operation>>();
    for (const op of this.api.router.getOperations()) {
      const methods = byPath.get(op.path) ?? new Map<string, Operation>();
      methods.set(op.method, op);
      byPath.set(op.path, methods);
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
      .map(([path, methods]) => {
        const integers = new Set(
          [...methods.values()].flatMap((op) =>
            ((op.parameters ?? []) as { name?: string; in?: string; schema?: { type?: unknown } }[])
              .filter((p) => p.in === 'path' && p.schema?.type === 'integer')
              .map((p) => p.name),
          ),
        );
        return {
          path,
          typed: integers.size ? compile(path, (name) => (integers.has(name) ? '-?[0-9]+' : '[^/]+')) : undefined,
          literal: path.replace(/\{[^}]+\}/g, '').length,
          exact: !path.includes('{'),
          methods,
        };
      })
      .sort((a, b) => Number(b.exact) - Number(a.exact) || b.literal - a.literal);
    const root = newNode();
    ordered.forEach(({ path, typed, methods }, order) => {
      const route: Route = { order, typed, methods };
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
    return root;
  }

  needsAuth(op: Operation): boolean {
    const sec = op.security ?? (this.api.definition.security as unknown[] | undefined) ?? [];
    return Array.isArray(sec) && sec.length > 0 && !sec.some((s) => s && typeof s === 'object' && Object.keys(s).length === 0);
  }

  /** Validates parameters and body; returns coerced params and query, or throws 400. */
  validate(op: Operation, req: RawRequest): Routed {
    // Before openapi-backend, whose path parameter parsing throws URIError on malformed encoding.
    const hostile = [...pathDetails(op.path, req.path), ...queryNulDetails(req.query)];
    if (hostile.length) throw invalidRequest(hostile);
    const query = this.filterOperations.has(op.operationId!) ? expandFilterParameter(req.query) : req.query;
    const result = this.api.validateRequest({ method: req.method, path: req.path, headers: req.headers, query, body: undefined }, op);
    const errors = (result.errors ?? []).filter(
      (e) =>
        !e.instancePath.startsWith('/requestBody') &&
        !(e.keyword === 'required' && (e.params as { missingProperty?: string }).missingProperty === 'requestBody'),
    );
    const details: ErrorDetail[] = errors.map((e) => toDetail(e));
    details.push(...this.validateBody(op, req));
    if (details.length) throw invalidRequest(details);
    return {
      operationId: op.operationId as OperationId,
      operation: op,
      params: (result.coerced.params ?? {}) as Record<string, unknown>,
      query: (result.coerced.query ?? {}) as Record<string, unknown>,
      needsAuth: this.needsAuth(op),
    };
  }

  private validateBody(op: Operation, req: RawRequest): ErrorDetail[] {
    const rb = op.requestBody as { required?: boolean; content?: Record<string, { schema?: unknown }> } | undefined;
    if (!rb?.content) return [];
    const hasBody = req.body !== undefined;
    if (!hasBody) return rb.required ? [{ path: 'body', message: 'a request body is required' }] : [];
    const types = Object.keys(rb.content);
    const type = types.find((t) => t === req.contentType) ?? (req.contentType === '' && types.length === 1 ? types[0] : undefined);
    if (!type) throw new ApiError('unsupported_media_type', `unsupported content type; use ${types.join(' or ')}`);
    const opPointer = `/paths/${escapePointer(op.path)}/${op.method}`;
    const [rawBody, rbPointer] = this.schemas.resolve(this.schemas.at(`${opPointer}/requestBody`), `${opPointer}/requestBody`);
    const content = rawBody.content as Record<string, { schema?: unknown }> | undefined;
    const unstorable = stringDetails(req.body, 'body');
    if (unstorable.length) return unstorable;
    if (!content?.[type]?.schema) return [];
    const validate = this.schemas.validatorAt(`${rbPointer}/content/${escapePointer(type)}/schema`);
    if (validate(req.body)) return [];
    return (validate.errors ?? []).slice(0, 20).map((e) => toDetail(e, 'body'));
  }
}

interface Route {
  /** Precedence: lower first (literal paths, then longer literal parts). */
  order: number;
  /** The path with its integer parameters as integers; undefined when it has none. */
  typed: RegExp | undefined;
  methods: Map<string, Operation>;
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

/**
 * The declared list filter parameters (`#/components/parameters/ListFilter.*`, generated from the
 * list parser's own tables by codegen/list-filters.ts) are left to that parser, which checks them
 * exactly as before they were declared: compiling some 250 of them per list operation into ajv
 * costs seconds per operation. test/spec-generators.test.ts proves their schemas and the parser agree.
 */
function withoutListFilterParams(doc: Document): Document {
  const paths = (doc.paths ?? {}) as Record<string, Record<string, { parameters?: { $ref?: string }[] } | undefined>>;
  for (const item of Object.values(paths)) {
    for (const op of Object.values(item)) {
      if (op && Array.isArray(op.parameters)) {
        op.parameters = op.parameters.filter((p) => !p.$ref?.startsWith('#/components/parameters/ListFilter.'));
      }
    }
  }
  return doc;
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
    else {
      const prev = out[name];
      const v = value.slice(eq + 1);
      out[name] = prev === undefined ? v : [...(Array.isArray(prev) ? prev : [prev]), v];
    }
  }
  if (details.length) throw invalidRequest(details);
  return out;
}

/** The operationIds whose query parameters (their own or their path's, references resolved) include `name`. */
function operationsDeclaring(doc: Document, name: string): Set<string> {
  const components = (doc.components?.parameters ?? {}) as Record<string, { name?: string; in?: string }>;
  type P = { $ref?: string; name?: string; in?: string };
  const resolve = (p: P): P | undefined => (p.$ref ? components[p.$ref.split('/').pop()!] : p);
  const out = new Set<string>();
  for (const item of Object.values((doc.paths ?? {}) as Record<string, Record<string, unknown>>)) {
    const shared = (item.parameters ?? []) as P[];
    for (const op of Object.values(item)) {
      const o = op as { operationId?: string; parameters?: P[] } | undefined;
      if (!o?.operationId || !Array.isArray(o.parameters)) continue;
      if ([...shared, ...o.parameters].some((p) => resolve(p)?.in === 'query' && resolve(p)?.name === name)) out.add(o.operationId);
    }
  }
  return out;
}
