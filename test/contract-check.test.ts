// The breaking-change check of `make check` (codegen/contract-check.ts): each kind of breaking change
// is caught on a small contract, additive changes and component renames pass, and openapi.yaml has
// no breaking change against the released contract (contract/released/openapi.yaml).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { breakingChanges, verdict } from '../codegen/contract-check.ts';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const BASE = `
openapi: 3.1.0
info: { title: t, version: 1.0.0 }
paths:
  /things/{id}:
    parameters:
      - { name: id, in: path, required: true, schema: { type: integer } }
    get:
      operationId: getThing
      parameters:
        - { name: q, in: query, schema: { type: string } }
        - $ref: "#/components/parameters/Limit"
      responses:
        "200":
          description: ok
          headers: { X-Next-Cursor: { schema: { type: string } } }
          content: { application/json: { schema: { $ref: "#/components/schemas/Thing" } } }
        "404": { $ref: "#/components/responses/Error" }
    patch:
      operationId: updateThing
      requestBody:
        required: true
        content: { application/json: { schema: { $ref: "#/components/schemas/ThingUpdate" } } }
      responses:
        "200": { description: ok, content: { application/json: { schema: { $ref: "#/components/schemas/Thing" } } } }
components:
  parameters:
    Limit: { name: limit, in: query, schema: { type: integer, maximum: 250 } }
  responses:
    Error: { description: error, content: { application/json: { schema: { $ref: "#/components/schemas/Error" } } } }
  schemas:
    Error:
      type: object
      required: [error, message]
      properties: { error: { type: string }, message: { type: string } }
    Thing:
      type: object
      required: [id, name, kind]
      properties:
        id: { type: integer }
        name: { type: string }
        kind: { type: string, enum: [a, b] }
        note: { type: [string, "null"] }
        parts: { type: array, items: { $ref: "#/components/schemas/Thing" } }
    ThingUpdate:
      type: object
      additionalProperties: false
      properties:
        name: { type: string, maxLength: 10 }
        kind: { type: string, enum: [a, b] }
        tags: { type: array, items: { type: string } }
`;

const base = (): Json => YAML.parse(BASE) as Json;
const changed = (edit: (d: Json) => void): Json => {
  const d = base();
  edit(d);
  return d;
};
const thing = (d: Json) => d.components.schemas.Thing;
const update = (d: Json) => d.components.schemas.ThingUpdate;
const get = (d: Json) => d.paths['/things/{id}'].get;

describe('contract check: breaking changes are caught', () => {
  const cases: [string, (d: Json) => void, string][] = [
    ['operation removed', (d) => delete d.paths['/things/{id}'].patch, 'PATCH /things/{id}: operation removed'],
    ['path removed', (d) => delete d.paths['/things/{id}'], 'GET /things/{id}: operation removed'],
    ['response status removed', (d) => delete get(d).responses['404'], 'response 404: removed'],
    [
      'response media type removed',
      (d) => (get(d).responses['200'].content = { 'text/plain': { schema: { type: 'string' } } }),
      'media type application/json removed',
    ],
    ['response header removed', (d) => delete get(d).responses['200'].headers, 'header X-Next-Cursor removed'],
    ['response member removed', (d) => delete thing(d).properties.note, '.note: response member removed'],
    ['response member no longer required', (d) => (thing(d).required = ['id', 'kind']), '.name: no longer required'],
    ['response member type changed', (d) => (thing(d).properties.id.type = 'string'), '.id: type string added'],
    ['response member made nullable', (d) => (thing(d).properties.name.type = ['string', 'null']), '.name: type null added'],
    [
      'nested response member removed (through a recursive reference)',
      (d) => delete thing(d).properties.kind,
      '.kind: response member removed',
    ],
    [
      'error body member removed',
      (d) => delete d.components.schemas.Error.properties.message,
      'response 404 (application/json).message: response member removed',
    ],
    ['request member removed', (d) => delete update(d).properties.tags, '.tags: request member removed'],
    ['request member made required', (d) => (update(d).required = ['name']), '.name: made required'],
    [
      'new required request member',
      (d) => ((update(d).required = ['size']), (update(d).properties.size = { type: 'integer' })),
      '.size: new required member',
    ],
    ['request enum value removed', (d) => (update(d).properties.kind.enum = ['a']), 'enum value "b" removed'],
    ['request member type changed', (d) => (update(d).properties.name.type = 'integer'), '.name: type string no longer accepted'],
    [
      'request array items type changed',
      (d) => (update(d).properties.tags.items.type = 'integer'),
      '.tags[]: type string no longer accepted',
    ],
    ['request constraint tightened', (d) => (update(d).properties.name.maxLength = 5), 'maxLength tightened (10 → 5)'],
    ['request pattern added', (d) => (update(d).properties.name.pattern = '^[a-z]+$'), 'pattern added'],
    ['request body removed', (d) => delete d.paths['/things/{id}'].patch.requestBody, 'request body removed'],
    [
      'request media type removed',
      (d) => (d.paths['/things/{id}'].patch.requestBody.content = { 'application/merge-patch+json': { schema: { type: 'object' } } }),
      'media type application/json removed',
    ],
    ['query parameter removed', (d) => get(d).parameters.splice(0, 1), 'query parameter q removed'],
    ['query parameter made required', (d) => (get(d).parameters[0].required = true), 'query parameter q made required'],
    [
      'new required query parameter',
      (d) => get(d).parameters.push({ name: 'r', in: 'query', required: true, schema: { type: 'string' } }),
      'new required query parameter r',
    ],
    [
      'parameter type changed (through a $ref)',
      (d) => (d.components.parameters.Limit.schema.type = 'string'),
      'query parameter limit: type integer no longer accepted',
    ],
    ['parameter constraint tightened', (d) => (d.components.parameters.Limit.schema.maximum = 100), 'maximum tightened (250 → 100)'],
    ['parameter serialization changed', (d) => (get(d).parameters[0].explode = false), 'serialization (style/explode) changed'],
    [
      'path parameter type changed',
      (d) => (d.paths['/things/{id}'].parameters[0].schema.type = 'string'),
      'path parameter #1: type integer no longer accepted',
    ],
  ];
  for (const [name, edit, expected] of cases) {
    it(name, () => {
      const problems = breakingChanges(base(), changed(edit));
      expect(problems.join('\n')).toContain(expected);
    });
  }

  it('fails unless info.version changes', () => {
    const after = changed((d) => delete thing(d).properties.note);
    expect(verdict(base(), after)).toMatchObject({ ok: false, versionChanged: false });
    after.info.version = '2.0.0';
    expect(verdict(base(), after)).toMatchObject({ ok: true, versionChanged: true });
    expect(verdict(base(), after).problems.length).toBe(1);
  });
});

describe('contract check: additive changes and renames pass', () => {
  const cases: [string, (d: Json) => void][] = [
    ['nothing changed', () => {}],
    [
      'components renamed (Error → ErrorResponse, Thing → ThingView), references moved',
      (d) => {
        const text = JSON.stringify(d)
          .replaceAll('#/components/schemas/Error"', '#/components/schemas/ErrorResponse"')
          .replaceAll('#/components/schemas/Thing"', '#/components/schemas/ThingView"');
        const r = JSON.parse(text) as Json;
        r.components.schemas.ErrorResponse = r.components.schemas.Error;
        r.components.schemas.ThingView = r.components.schemas.Thing;
        delete r.components.schemas.Error;
        delete r.components.schemas.Thing;
        Object.assign(d, r);
      },
    ],
    [
      'a referenced schema inlined',
      (d) => (d.paths['/things/{id}'].patch.requestBody.content['application/json'].schema = structuredClone(update(d))),
    ],
    [
      'path parameter renamed (not on the wire)',
      (d) => (
        (d.paths['/things/{thing_id}'] = d.paths['/things/{id}']),
        (d.paths['/things/{thing_id}'].parameters[0].name = 'thing_id'),
        delete d.paths['/things/{id}']
      ),
    ],
    [
      'optional query parameters added (list filters as parameters)',
      (d) => get(d).parameters.push({ name: 'name__startswith', in: 'query', style: 'form', explode: true, schema: { type: 'string' } }),
    ],
    [
      'optional header parameter added',
      (d) => get(d).parameters.push({ name: 'X-Correlation-ID', in: 'header', schema: { type: 'string' } }),
    ],
    ['operation added', (d) => (d.paths['/others'] = { get: { responses: { '200': { description: 'ok' } } } })],
    [
      'response statuses added (405, 503)',
      (d) =>
        Object.assign(get(d).responses, {
          '405': { $ref: '#/components/responses/Error' },
          '503': { $ref: '#/components/responses/Error' },
        }),
    ],
    ['response header added', (d) => (get(d).responses['200'].headers['X-Request-Id'] = { schema: { type: 'string' } })],
    ['response member added', (d) => ((thing(d).properties.size = { type: 'integer' }), thing(d).required.push('size'))],
    ['response enum value added', (d) => thing(d).properties.kind.enum.push('c')],
    ['response member made non-nullable', (d) => (thing(d).properties.note.type = 'string')],
    ['optional request member added', (d) => (update(d).properties.size = { type: 'integer', default: 1 })],
    ['request enum value added', (d) => update(d).properties.kind.enum.push('c')],
    ['request type widened', (d) => (update(d).properties.name.type = ['string', 'null'])],
    ['request constraint loosened', (d) => (update(d).properties.name.maxLength = 20)],
    ['request body made optional', (d) => (d.paths['/things/{id}'].patch.requestBody.required = false)],
    [
      'descriptions and examples',
      (d) => ((thing(d).description = 'A thing.'), (thing(d).examples = [{ id: 1 }]), (get(d).description = 'Reads.')),
    ],
  ];
  for (const [name, edit] of cases) {
    it(name, () => {
      expect(breakingChanges(base(), changed(edit))).toEqual([]);
    });
  }
});

describe('contract check: openapi.yaml against the released contract', () => {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const released = YAML.parse(readFileSync(join(root, 'contract', 'released', 'openapi.yaml'), 'utf8')) as Json;
  const current = YAML.parse(readFileSync(join(root, 'openapi.yaml'), 'utf8')) as Json;

  it('has no breaking change, or a new info.version (what make contract-check enforces)', () => {
    const { ok, problems } = verdict(released, current);
    expect(ok, problems.join('\n')).toBe(true);
  });

  it('the released contract is 0.0.18, before #9 (schemas Error and Event, no declared list filters)', () => {
    expect(released.info.version).toBe('0.0.18');
    expect(Object.keys(released.components.schemas)).toEqual(expect.arrayContaining(['Error', 'Event']));
    expect(Object.keys(released.components.parameters).some((k) => k.startsWith('ListFilter.'))).toBe(false);
  });

  it('a damaged copy of the contract is caught (the comparison reaches the real operations)', () => {
    const damaged = structuredClone(current);
    delete damaged.components.schemas.User.properties.email;
    delete damaged.paths['/api/v1/collections'].post;
    const problems = breakingChanges(released, damaged);
    expect(problems).toContain('POST /api/v1/collections: operation removed');
    expect(problems.some((p) => p.endsWith('.email: response member removed'))).toBe(true);
  });
});
