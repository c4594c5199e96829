// Every example in openapi.yaml is what /docs and generated SDK docs show as the shape of a call, so
// each one must validate against the schema it illustrates (with the same ajv setup as request
// validation), and every JSON request body and 2xx JSON response must have one. One style: media
// types carry an `examples` map (summary + value), mostly references to components/examples, so
// /docs shows each summary in its example picker and one value serves every operation returning it.
import { describe, expect, it } from 'vitest';
import { openapiDocument } from '../src/http/openapi.ts';
import { SchemaRegistry, escapePointer } from '../src/http/schemas.ts';

type Json = Record<string, unknown>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;
const isJson = (mediaType: string): boolean => /^application\/(.+\+)?json$/.test(mediaType);

interface Report {
  problems: string[];
  validated: number;
  usedExamples: Set<string>;
}

/**
 * Walks the document and validates every example against its schema. `only` limits the walk to
 * some operations (the self-test uses it on a damaged copy of the contract).
 */
function checkExamples(doc: Json, only?: Set<string>): Report {
  const registry = new SchemaRegistry(doc);
  const report: Report = { problems: [], validated: 0, usedExamples: new Set() };

  const validate = (value: unknown, schemaPtr: string, where: string): void => {
    if (registry.at(schemaPtr) === undefined) {
      report.problems.push(`${where}: has an example but no schema`);
      return;
    }
    const v = registry.validatorAt(schemaPtr);
    report.validated++;
    if (!v(value)) report.problems.push(`${where}: example does not match its schema: ${JSON.stringify(v.errors?.slice(0, 3))}`);
  };

  // An `examples` map of Example Objects or references to components/examples; returns how many.
  const exampleMap = (holder: Json, holderPtr: string, schemaPtr: string, where: string): number => {
    const examples = holder.examples as Record<string, Json> | undefined;
    if (examples === undefined) return 0;
    if (!examples || typeof examples !== 'object' || Array.isArray(examples)) {
      report.problems.push(`${where}: examples must be a map of Example Objects`);
      return 0;
    }
    for (const [name, entry] of Object.entries(examples)) {
      const [example, ptr] = registry.resolve(entry, `${holderPtr}/examples/${escapePointer(name)}`);
      if (typeof entry?.$ref === 'string') report.usedExamples.add(ptr);
      const label = `${where} example "${name}"`;
      if (!example) {
        report.problems.push(`${label}: unresolved reference ${String(entry?.$ref)}`);
        continue;
      }
      if (!('value' in example) || 'externalValue' in example) {
        report.problems.push(`${label}: needs an inline value (externalValue cannot be checked)`);
        continue;
      }
      if (typeof example.summary !== 'string' || !example.summary) report.problems.push(`${label}: needs a summary`);
      validate(example.value, schemaPtr, label);
    }
    return Object.keys(examples).length;
  };

  // Parameters and headers: `example` or `examples` against their `schema`.
  const checkSchemaHolder = (obj: unknown, ptr: string, where: string): void => {
    const [holder, holderPtr] = registry.resolve(obj, ptr);
    if (!holder || !holder.schema) return;
    if ('example' in holder) validate(holder.example, `${holderPtr}/schema`, `${where} example`);
    exampleMap(holder, holderPtr, `${holderPtr}/schema`, where);
  };

  // A media type map; `required` says whether JSON media types must carry an example.
  const checkContent = (content: unknown, ptr: string, where: string, required: boolean): void => {
    if (!content || typeof content !== 'object') return;
    for (const [type, media] of Object.entries(content as Record<string, Json>)) {
      const mediaPtr = `${ptr}/${escapePointer(type)}`;
      const label = `${where} ${type}`;
      let count = 0;
      if ('example' in media) {
        report.problems.push(`${label}: use the examples map (summary + value) rather than example, as everywhere else`);
        if (media.schema) validate(media.example, `${mediaPtr}/schema`, `${label} example`);
        count++;
      }
      count += exampleMap(media, mediaPtr, `${mediaPtr}/schema`, label);
      if (required && isJson(type) && count === 0) report.problems.push(`${label}: has no example`);
    }
  };

  const paths = (doc.paths ?? {}) as Record<string, Json>;
  for (const [path, item] of Object.entries(paths)) {
    const itemPtr = `/paths/${escapePointer(path)}`;
    for (const method of METHODS) {
      const op = item[method] as Json | undefined;
      if (!op) continue;
      const id = String(op.operationId ?? `${method} ${path}`);
      if (only && !only.has(id)) continue;
      const opPtr = `${itemPtr}/${method}`;
      const params: [unknown, string][] = [
        ...((item.parameters ?? []) as unknown[]).map((p, i): [unknown, string] => [p, `${itemPtr}/parameters/${i}`]),
        ...((op.parameters ?? []) as unknown[]).map((p, i): [unknown, string] => [p, `${opPtr}/parameters/${i}`]),
      ];
      for (const [p, ptr] of params) checkSchemaHolder(p, ptr, `${id} parameter ${String((registry.resolve(p, ptr)[0] ?? {}).name)}`);
      if (op.requestBody) {
        const [body, bodyPtr] = registry.resolve(op.requestBody, `${opPtr}/requestBody`);
        checkContent(body?.content, `${bodyPtr}/content`, `${id} request`, true);
      }
      for (const [status, r] of Object.entries((op.responses ?? {}) as Record<string, unknown>)) {
        const [resp, respPtr] = registry.resolve(r, `${opPtr}/responses/${escapePointer(status)}`);
        if (!resp) continue;
        checkContent(resp.content, `${respPtr}/content`, `${id} ${status}`, /^2/.test(status));
        for (const [name, h] of Object.entries((resp.headers ?? {}) as Record<string, unknown>))
          checkSchemaHolder(h, `${respPtr}/headers/${escapePointer(name)}`, `${id} ${status} header ${name}`);
      }
    }
  }
  if (only) return report;

  // Shared parameters and headers, and examples written into the component schemas themselves.
  const components = (doc.components ?? {}) as Record<string, Record<string, unknown>>;
  for (const [name, p] of Object.entries(components.parameters ?? {}))
    checkSchemaHolder(p, `/components/parameters/${escapePointer(name)}`, `parameter ${name}`);
  for (const [name, h] of Object.entries(components.headers ?? {}))
    checkSchemaHolder(h, `/components/headers/${escapePointer(name)}`, `header ${name}`);
  const walkSchema = (schema: unknown, ptr: string): void => {
    if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return;
    const s = schema as Json;
    if ('example' in s) validate(s.example, ptr, `schema ${ptr} example`);
    if (Array.isArray(s.examples)) s.examples.forEach((e, i) => validate(e, ptr, `schema ${ptr} examples[${i}]`));
    for (const key of ['properties', 'patternProperties', '$defs'] as const)
      for (const [k, sub] of Object.entries((s[key] ?? {}) as Json)) walkSchema(sub, `${ptr}/${key}/${escapePointer(k)}`);
    for (const key of ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains'] as const)
      walkSchema(s[key], `${ptr}/${key}`);
    for (const key of ['allOf', 'anyOf', 'oneOf', 'prefixItems'] as const)
      if (Array.isArray(s[key])) (s[key] as unknown[]).forEach((sub, i) => walkSchema(sub, `${ptr}/${key}/${i}`));
  };
  for (const [name, schema] of Object.entries(components.schemas ?? {})) walkSchema(schema, `/components/schemas/${escapePointer(name)}`);
  return report;
}

describe('openapi.yaml examples', () => {
  const doc = openapiDocument() as unknown as Json;
  let full: Report | undefined;
  const fullReport = (): Report => (full ??= checkExamples(doc));

  it('every example validates against its schema, and every JSON request body and 2xx JSON response has one', () => {
    const report = fullReport();
    expect(report.problems).toEqual([]);
    expect(report.validated).toBeGreaterThan(200);
  });

  it('every shared example in components/examples is used by some operation', () => {
    const { usedExamples } = fullReport();
    const defined = Object.keys(((doc.components as Json | undefined)?.examples ?? {}) as Json).map(
      (name) => `/components/examples/${escapePointer(name)}`,
    );
    expect(defined.filter((ptr) => !usedExamples.has(ptr))).toEqual([]);
  });

  it('reports a missing example and an example that does not match its schema', () => {
    const broken = structuredClone(doc) as Json;
    const paths = broken.paths as Record<string, Record<string, Json>>;
    const create = paths['/api/v1/collections']!.post!;
    const body = (create.requestBody as Json).content as Record<string, Json>;
    delete body['application/json']!.examples;
    delete body['application/json']!.example;
    const created = ((create.responses as Json)['201'] as Json).content as Record<string, Json>;
    created['application/json']!.examples = { wrong: { summary: 'a collection without its id', value: { name: 'datacenter-eu' } } };
    const report = checkExamples(broken, new Set(['createCollection']));
    expect(report.problems).toEqual([
      expect.stringMatching(/^createCollection request application\/json: has no example$/),
      expect.stringMatching(/^createCollection 201 application\/json example "wrong": example does not match its schema/),
    ]);
  });
});
