// Class-schema lifecycle and object-validation audit events: class_schema staged/activated/deleted
// with class changes, abandoned plus sampled object_validation.failed records after a refused
// change, object_validation.updated when an object's compliance flips, the audit wrapper routes,
// and the import worker's class and object paths.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Logger } from 'pino';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, createClass, createObject, principalWith } from './class-fixtures.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { recordRefusedSchemaChange, SchemaChangeRefused } from '../src/db/class-schema-events.ts';
import { ExistingObjectsInvalid, schemaDigest } from '../src/domain/class-schema.ts';
import type { Sql } from '../src/db/sql.ts';
import type { ClassRow } from '../src/domain/views/classes.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

/** A value no audit document may ever contain. */
const SECRET = 'value-that-must-not-leak-7f3a';

const SCHEMA = { type: 'object', properties: { cpu: { type: 'integer', minimum: 1 } }, required: ['cpu'] };
const STRICTER = { type: 'object', properties: { cpu: { type: 'integer', minimum: 4 } }, required: ['cpu'] };

interface Ev {
  id: number;
  event_id: string;
  entity_type: string;
  entity_id: number;
  entity_name: string | null;
  action: string;
  collection_id: number | null;
  task_id: number | null;
  before: unknown;
  after: unknown;
  before_revision: number | null;
  after_revision: number | null;
  metadata: Record<string, unknown>;
}

/** Events of the given entity types for these entity ids (oldest first), optionally after an event id. */
async function events(types: string[], ids: number[], afterId = 0): Promise<Ev[]> {
  return t.deps.sql<Ev[]>`
    select id, event_id, entity_type, entity_id, entity_name, action, collection_id, task_id, before, after,
      before_revision, after_revision, metadata
    from events where entity_type = any(${types}::text[]) and entity_id = any(${ids}::int[]) and id > ${afterId}
    order by id`;
}

async function lastEventId(): Promise<number> {
  const [row] = await t.deps.sql<{ id: number | null }[]>`select max(id)::int as id from events`;
  return row!.id ?? 0;
}

async function patchClass(id: number, body: Record<string, unknown>) {
  return t.request('PATCH', `/api/v1/classes/${id}`, { body });
}

describe('class_schema events of class changes', () => {
  it('createClass 201 with a schema records staged then activated; without a schema no class_schema event', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA, validate_schema: true });
    const ev = await events(['class', 'class_schema'], [cls.id]);
    expect(ev.map((e) => `${e.entity_type}.${e.action}`)).toEqual(['class.created', 'class_schema.staged', 'class_schema.activated']);
    const [, staged, activated] = ev;
    const meta = {
      class_id: cls.id,
      change: 'schema_set',
      schema_digest: schemaDigest(SCHEMA),
      validate_schema: true,
      previous_schema_digest: null,
      previous_validate_schema: false,
    };
    expect(staged!.metadata).toEqual(meta);
    expect(activated!.metadata).toEqual({ ...meta, objects_checked: 0, compliance_changes: 0 });
    expect(activated).toMatchObject({ collection_id: cid, entity_name: cls.name, after_revision: 1, before: null });
    expect(activated!.after).toEqual({ json_schema: SCHEMA, validate_schema: true });
    expect(schemaDigest(SCHEMA)).toMatch(/^sha256:[0-9a-f]{64}$/);
    // The digest does not depend on member order.
    expect(schemaDigest({ required: ['cpu'], properties: SCHEMA.properties, type: 'object' })).toBe(schemaDigest(SCHEMA));

    const plain = await createClass(t, cid);
    expect(await events(['class_schema'], [plain.id])).toEqual([]);
  });

  it('updateClass 200 records set, validation_enabled, schema_replaced, validation_disabled and schema removal with object flips', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const good = await createObject(t, cls.id, { cpu: 8 });
    const bad = await createObject(t, cls.id, { cpu: SECRET });

    // Set without validation: every object is read; the one that does not match flips to non-compliant.
    expect((await patchClass(cls.id, { json_schema: SCHEMA })).status).toBe(200);
    let ev = await events(['class_schema'], [cls.id]);
    expect(ev.map((e) => e.action)).toEqual(['staged', 'activated']);
    expect(ev[1]!.metadata).toMatchObject({ change: 'schema_set', validate_schema: false, objects_checked: 2, compliance_changes: 1 });
    let flips = await events(['object_validation'], [good.id, bad.id]);
    expect(flips).toHaveLength(1);
    expect(flips[0]).toMatchObject({
      entity_id: bad.id,
      entity_name: bad.name,
      action: 'updated',
      collection_id: cid,
      before: null,
      after: null,
    });
    expect(flips[0]!.metadata).toEqual({
      class_id: cls.id,
      cause: 'schema_changed',
      compliant: false,
      compliance_changed: true,
      schema_digest: schemaDigest(SCHEMA),
      violations: [{ keyword: 'type', instance_path: '/cpu' }],
    });

    // Fixing the object flips it back (an object write under an advisory schema).
    const mark = await lastEventId();
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${bad.id}`, { body: { json_data: { cpu: 2 } } })).status).toBe(200);
    flips = await events(['object_validation'], [bad.id], mark);
    expect(flips.map((e) => [e.action, e.metadata.cause, e.metadata.compliant])).toEqual([['updated', 'object_written', true]]);

    // Enable validation: checked again, nothing flips.
    expect((await patchClass(cls.id, { validate_schema: true })).status).toBe(200);
    ev = await events(['class_schema'], [cls.id]);
    expect(ev.slice(2).map((e) => e.action)).toEqual(['staged', 'activated']);
    expect(ev[3]!.metadata).toMatchObject({
      change: 'validation_enabled',
      validate_schema: true,
      previous_validate_schema: false,
      schema_digest: schemaDigest(SCHEMA),
      previous_schema_digest: schemaDigest(SCHEMA),
      objects_checked: 2,
      compliance_changes: 0,
    });
    expect(ev[3]!.before).toEqual({ json_schema: SCHEMA, validate_schema: false });

    // Replace while validating (both objects pass the looser schema).
    const looser = { type: 'object', properties: { cpu: { type: 'integer' } } };
    expect((await patchClass(cls.id, { json_schema: looser })).status).toBe(200);
    ev = await events(['class_schema'], [cls.id]);
    expect(ev[5]!.metadata).toMatchObject({
      change: 'schema_replaced',
      schema_digest: schemaDigest(looser),
      previous_schema_digest: schemaDigest(SCHEMA),
      objects_checked: 2,
    });

    // Disable validation: no objects read.
    expect((await patchClass(cls.id, { validate_schema: false })).status).toBe(200);
    ev = await events(['class_schema'], [cls.id]);
    expect(ev[7]!.metadata).toMatchObject({ change: 'validation_disabled', validate_schema: false, objects_checked: 0 });

    // An object that stops matching the advisory schema, then the schema's removal flips it back.
    const m2 = await lastEventId();
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${good.id}`, { body: { json_data: { cpu: 'x' } } })).status).toBe(200);
    expect((await patchClass(cls.id, { json_schema: null })).status).toBe(200);
    ev = await events(['class_schema'], [cls.id], m2);
    expect(ev.map((e) => e.action)).toEqual(['deleted']);
    expect(ev[0]!.metadata).toEqual({
      class_id: cls.id,
      cause: 'schema_removed',
      previous_schema_digest: schemaDigest(looser),
      previous_validate_schema: false,
      objects_checked: 2,
      compliance_changes: 1,
    });
    flips = await events(['object_validation'], [good.id], m2);
    expect(flips.map((e) => [e.metadata.cause, e.metadata.compliant, e.metadata.schema_digest])).toEqual([
      ['object_written', false, schemaDigest(looser)],
      ['schema_changed', true, null],
    ]);
  });

  it('updateClass 200 that changes nothing, or only the description, records no class_schema event', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA, validate_schema: true });
    await createObject(t, cls.id, { cpu: 2 });
    const mark = await lastEventId();
    const same = await patchClass(cls.id, { json_schema: SCHEMA, validate_schema: true, name: cls.name });
    expect(same.status).toBe(200);
    expect((same.body as { revision: number }).revision).toBe(cls.revision);
    const [count] = await t.deps.sql<{ n: number }[]>`select count(*)::int as n from events where id > ${mark} and
      ((entity_type in ('class', 'class_schema') and entity_id = ${cls.id}) or entity_type = 'object_validation' and metadata->>'class_id' = ${String(cls.id)})`;
    expect(count!.n).toBe(0);
    expect((await patchClass(cls.id, { description: 'new' })).status).toBe(200);
    expect((await events(['class', 'class_schema'], [cls.id], mark)).map((e) => `${e.entity_type}.${e.action}`)).toEqual(['class.updated']);
  });

  it('updateClass 200 with more flips than its statement takes records them all after the class and schema events', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid);
    const ids = await t.deps.sql<{ id: number }[]>`
      insert into objects (name, class_id, collection_id, json_data)
      select ${uniq('o')} || '-' || g, ${cls.id}, ${cid}, '{"cpu": "many"}'::jsonb from generate_series(1, 230) g returning id`;
    const mark = await lastEventId();
    const res = await patchClass(cls.id, { json_schema: SCHEMA });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: cls.id, revision: 2, json_schema: SCHEMA, collection: { id: cid } });
    const ev = await t.deps.sql<{ entity_type: string; action: string; entity_id: number }[]>`
      select entity_type, action, entity_id from events where id > ${mark} order by id`;
    expect(ev.slice(0, 3).map((e) => `${e.entity_type}.${e.action}`)).toEqual([
      'class.updated',
      'class_schema.staged',
      'class_schema.activated',
    ]);
    expect(ev.slice(3).map((e) => [e.entity_type, e.action, e.entity_id])).toEqual(ids.map((o) => ['object_validation', 'updated', o.id]));
  });

  it('deleteClass 204 of a class with a schema and objects records the schema first, then the objects, then the class', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA });
    const a = await createObject(t, cls.id, { cpu: 2 });
    const b = await createObject(t, cls.id, { cpu: 3 });
    const mark = await lastEventId();
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}`)).status).toBe(204);
    const ev = await t.deps.sql<{ entity_type: string; action: string; entity_id: number; metadata: Record<string, unknown> }[]>`
      select entity_type, action, entity_id, metadata from events where id > ${mark} order by id`;
    expect(ev.map((e) => [e.entity_type, e.action, e.entity_id])).toEqual([
      ['class_schema', 'deleted', cls.id],
      ['object', 'deleted', a.id],
      ['object', 'deleted', b.id],
      ['class', 'deleted', cls.id],
    ]);
    expect(ev[3]!.metadata).toEqual({ deleted_objects: 2, deleted_object_relations: 0, deleted_class_relations: 0 });
  });

  it('deleteClass 204 records class_schema.deleted for a class with a schema, none without', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA });
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}`)).status).toBe(204);
    const ev = await events(['class_schema'], [cls.id]);
    expect(ev.map((e) => e.action)).toEqual(['staged', 'activated', 'deleted']);
    expect(ev[2]!.metadata).toMatchObject({ cause: 'class_deleted', previous_schema_digest: schemaDigest(SCHEMA) });
    expect(ev[2]!.before).toEqual({ json_schema: SCHEMA, validate_schema: false });
    const plain = await createClass(t, cid);
    expect((await t.request('DELETE', `/api/v1/classes/${plain.id}`)).status).toBe(204);
    expect(await events(['class_schema'], [plain.id])).toEqual([]);
  });
});

describe('refused schema changes', () => {
  it('updateClass 409 records class_schema.abandoned with the failing count and a capped sample, and object_validation.failed without values', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA });
    const ok = await createObject(t, cls.id, { cpu: 4 });
    const failing = [];
    for (let i = 0; i < 12; i++) failing.push(await createObject(t, cls.id, { cpu: i % 2 ? SECRET : -1, note: SECRET }));
    const mark = await lastEventId();

    const refused = await patchClass(cls.id, { validate_schema: true });
    expect(refused.status, refused.text).toBe(409);
    expect((refused.body as { reason: string }).reason).toBe('existing_objects_invalid');

    // The class is unchanged: no class.updated, staged or activated.
    const [row] = await t.deps.sql<
      { revision: number; validate_schema: boolean }[]
    >`select revision, validate_schema from classes where id = ${cls.id}`;
    expect(row).toEqual({ revision: cls.revision, validate_schema: false });
    const classEvents = await events(['class', 'class_schema'], [cls.id], mark);
    expect(classEvents.map((e) => `${e.entity_type}.${e.action}`)).toEqual(['class_schema.abandoned']);
    const abandoned = classEvents[0]!;
    const sampleIds = failing.slice(0, 10).map((o) => o.id);
    expect(abandoned).toMatchObject({ collection_id: cid, entity_name: cls.name, before_revision: cls.revision, after_revision: null });
    expect(abandoned.metadata).toEqual({
      class_id: cls.id,
      reason: 'existing_objects_invalid',
      change: 'validation_enabled',
      schema_digest: schemaDigest(SCHEMA),
      validate_schema: true,
      previous_schema_digest: schemaDigest(SCHEMA),
      previous_validate_schema: false,
      objects_checked: 13,
      failing_objects: 12,
      sample_object_ids: sampleIds,
      sample_cap: 10,
    });

    const failed = await events(['object_validation'], [ok.id, ...failing.map((o) => o.id)], mark);
    expect(failed.map((e) => e.entity_id)).toEqual(sampleIds);
    for (const [i, e] of failed.entries()) {
      expect(e).toMatchObject({ action: 'failed', collection_id: cid, entity_name: failing[i]!.name, before: null, after: null });
      expect(e.metadata).toEqual({
        class_id: cls.id,
        cause: 'schema_change_refused',
        compliance_changed: false,
        schema_digest: schemaDigest(SCHEMA),
        class_schema_event_id: abandoned.event_id,
        violations: [{ keyword: i % 2 ? 'type' : 'minimum', instance_path: '/cpu' }],
      });
    }
    const [leak] = await t.deps.sql<{ n: number }[]>`select count(*)::int as n from events where id > ${mark} and
      (metadata::text like ${'%' + SECRET + '%'} or coalesce(before::text, '') like ${'%' + SECRET + '%'}
        or coalesce(after::text, '') like ${'%' + SECRET + '%'} or coalesce(summary, '') like ${'%' + SECRET + '%'})`;
    expect(leak!.n).toBe(0);
  });

  it('updateClass 409 for a stricter schema records the attempted digest and the change kind', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA, validate_schema: true });
    const small = await createObject(t, cls.id, { cpu: 2 });
    const mark = await lastEventId();
    expect((await patchClass(cls.id, { json_schema: STRICTER })).status).toBe(409);
    const [abandoned] = await events(['class_schema'], [cls.id], mark);
    expect(abandoned!.metadata).toMatchObject({
      change: 'schema_replaced',
      schema_digest: schemaDigest(STRICTER),
      previous_schema_digest: schemaDigest(SCHEMA),
      failing_objects: 1,
      sample_object_ids: [small.id],
    });
    expect(abandoned!.after).toEqual({ json_schema: STRICTER, validate_schema: true });
    const failed = await events(['object_validation'], [small.id], mark);
    expect(failed.map((e) => [e.action, e.metadata.violations])).toEqual([['failed', [{ keyword: 'minimum', instance_path: '/cpu' }]]]);
  });

  it('recordRefusedSchemaChange swallows and logs its own failure, so the 409 stands alone', async () => {
    const broken = { begin: () => Promise.reject(new Error('database gone')) } as unknown as Sql;
    const log = { error: vi.fn() } as unknown as Logger;
    const cls = { id: 1, name: 'k', collection_id: 1, json_schema: null, validate_schema: false, revision: 1 } as ClassRow;
    const refused = new SchemaChangeRefused(cls, { json_schema: SCHEMA, validate_schema: true }, new ExistingObjectsInvalid(1, 1, [], []));
    await expect(
      recordRefusedSchemaChange(broken, log, { kind: 'system', principalId: null, principalName: null }, refused),
    ).resolves.toBeUndefined();
    expect(log.error).toHaveBeenCalledTimes(1);
  });
});

describe('object_validation of object writes', () => {
  it('createObject/updateObject 2xx record object_validation.updated only when compliance flips under an advisory schema', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA });
    const fine = await createObject(t, cls.id, { cpu: 1 });
    const off = await createObject(t, cls.id, { cpu: SECRET });
    expect(await events(['object_validation'], [fine.id])).toEqual([]);
    let ev = await events(['object_validation'], [off.id]);
    expect(ev.map((e) => [e.action, e.metadata.cause, e.metadata.compliant])).toEqual([['updated', 'object_written', false]]);
    expect(ev[0]).toMatchObject({ after_revision: off.revision, collection_id: cid });

    // Still non-compliant (another problem): no flip. Description-only: no flip.
    await t.request('PATCH', `/api/v1/classes/${cls.id}/${off.id}`, { body: { json_data: { cpu: 0 } } });
    await t.request('PATCH', `/api/v1/classes/${cls.id}/${off.id}`, { body: { description: 'x' } });
    expect(await events(['object_validation'], [off.id])).toHaveLength(1);

    // JSON Patch that fixes it flips it back.
    const fixed = await t.request('PATCH', `/api/v1/classes/${cls.id}/${off.id}/data`, {
      contentType: 'application/json-patch+json',
      rawBody: JSON.stringify([{ op: 'replace', path: '/cpu', value: 3 }]),
    });
    expect(fixed.status, fixed.text).toBe(200);
    ev = await events(['object_validation'], [off.id]);
    expect(ev.map((e) => e.metadata.compliant)).toEqual([false, true]);
    expect(ev[1]!.metadata.violations).toEqual([]);
  });

  it('createObject 201 and 400 under enforced validation record no object_validation event', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA, validate_schema: true });
    const mark = await lastEventId();
    const obj = await createObject(t, cls.id, { cpu: 2 });
    const bad = await t.request('POST', `/api/v1/classes/${cls.id}/objects`, { body: { name: uniq('o'), json_data: { cpu: SECRET } } });
    expect(bad.status).toBe(400);
    expect((bad.body as { reason: string }).reason).toBe('schema_validation_failed');
    const [n] = await t.deps.sql<
      { n: number }[]
    >`select count(*)::int as n from events where id > ${mark} and entity_type = 'object_validation'
      and metadata->>'class_id' = ${String(cls.id)}`;
    expect(n!.n).toBe(0);
    expect(await events(['object_validation'], [obj.id])).toEqual([]);
  });
});

describe('audit wrapper routes', () => {
  it('listClassEvents 200 and listObjectEvents 200 show the lifecycle to a ReadAudit holder; 403 without ReadAudit', async () => {
    const cid = await collection(t);
    const cls = await createClass(t, cid, { json_schema: SCHEMA });
    const obj = await createObject(t, cls.id, { cpu: 'many' });
    expect((await patchClass(cls.id, { validate_schema: true })).status).toBe(409);
    const auditor = await principalWith(t, [[cid, ['ReadAudit', 'ReadClass', 'ReadObject']]]);
    const reader = await principalWith(t, [[cid, ['ReadClass', 'ReadObject']]]);

    const classEvents = await t.request('GET', `/api/v1/classes/${cls.id}/events`, { token: auditor.token, query: { sort: 'id' } });
    expect(classEvents.status, classEvents.text).toBe(200);
    expect((classEvents.body as Ev[]).map((e) => `${e.entity_type}.${e.action}`)).toEqual([
      'class.created',
      'class_schema.staged',
      'class_schema.activated',
      'class_schema.abandoned',
    ]);
    const onlySchema = await t.request('GET', `/api/v1/classes/${cls.id}/events`, {
      token: auditor.token,
      query: { entity_type: 'class_schema', action: 'abandoned' },
    });
    expect((onlySchema.body as Ev[]).map((e) => e.metadata.failing_objects)).toEqual([1]);

    const objectEvents = await t.request('GET', `/api/v1/classes/${cls.id}/${obj.id}/events`, {
      token: auditor.token,
      query: { sort: 'id' },
    });
    expect(objectEvents.status, objectEvents.text).toBe(200);
    expect((objectEvents.body as Ev[]).map((e) => `${e.entity_type}.${e.action}`)).toEqual([
      'object.created',
      'object_validation.updated',
      'object_validation.failed',
    ]);

    expect((await t.request('GET', `/api/v1/classes/${cls.id}/events`, { token: reader.token })).status).toBe(403);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/${obj.id}/events`, { token: reader.token })).status).toBe(403);
  });
});

describe('imports', () => {
  type Graph = Record<string, unknown[]>;
  function importBody(parts: Graph, extra: Record<string, unknown> = {}) {
    return {
      version: 2,
      graph: { collections: [], classes: [], objects: [], class_relations: [], object_relations: [], collection_permissions: [], ...parts },
      ...extra,
    };
  }
  async function runImport(b: unknown): Promise<{ id: number; results: { outcome: string; error: string | null }[] }> {
    const res = await t.request('POST', '/api/v1/imports', { body: b });
    expect(res.status, res.text).toBe(202);
    const id = (res.body as { id: number }).id;
    expect((await runTaskOnce(t.deps, { taskIds: [id] }))?.id).toBe(id);
    const results = await t.request('GET', `/api/v1/imports/${id}/results`);
    return { id, results: results.body as { outcome: string; error: string | null }[] };
  }

  it('createImport 202: the import worker records the same lifecycle (activation, object flips, abandonment; nothing for a dry run)', async () => {
    const col = uniq('col');
    const k = uniq('k');
    const created = await runImport(
      importBody({
        collections: [{ ref: 'c', name: col }],
        classes: [{ ref: 'k', name: k, collection_ref: 'c', json_schema: SCHEMA }],
        objects: [
          { name: 'good', class_ref: 'k', json_data: { cpu: 2 } },
          { name: 'bad', class_ref: 'k', json_data: { cpu: SECRET } },
        ],
      }),
    );
    expect(created.results.map((r) => r.outcome)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    const [cls] = await t.deps.sql<{ id: number; collection_id: number }[]>`select id, collection_id from classes where name = ${k}`;
    const objs = await t.deps.sql<{ id: number; name: string }[]>`select id, name from objects where class_id = ${cls!.id} order by name`;
    const bad = objs.find((o) => o.name === 'bad')!;
    const schemaEvents = await events(['class_schema'], [cls!.id]);
    expect(schemaEvents.map((e) => [e.action, e.task_id])).toEqual([
      ['staged', created.id],
      ['activated', created.id],
    ]);
    const flips = await events(
      ['object_validation'],
      objs.map((o) => o.id),
    );
    expect(flips.map((e) => [e.entity_id, e.metadata.cause, e.metadata.compliant])).toEqual([[bad.id, 'object_written', false]]);

    const mode = { mode: { collision_policy: 'overwrite', atomicity: 'best_effort' } };
    const enable = [{ name: k, collection_key: { name: col, path: [col] }, validate_schema: true }];
    const mark = await lastEventId();
    const dry = await runImport(importBody({ classes: enable }, { ...mode, dry_run: true }));
    expect(dry.results[0]!.outcome).toBe('failed');
    expect(await events(['class_schema', 'class'], [cls!.id], mark)).toEqual([]);

    const refused = await runImport(importBody({ classes: enable }, mode));
    expect(refused.results[0]!.outcome).toBe('failed');
    expect(refused.results[0]!.error).toMatch(/1 existing object\(s\) of the class do not match/);
    const after = await events(['class_schema', 'class'], [cls!.id], mark);
    expect(after.map((e) => [e.action, e.task_id])).toEqual([['abandoned', refused.id]]);
    expect(after[0]!.metadata).toMatchObject({ failing_objects: 1, sample_object_ids: [bad.id] });
    const failed = await events(['object_validation'], [bad.id], mark);
    expect(failed.map((e) => [e.action, e.metadata.compliance_changed, e.task_id])).toEqual([['failed', false, refused.id]]);

    // Fix the object by import, then enabling succeeds with staged/activated.
    await runImport(importBody({ objects: [{ name: 'bad', class_key: { name: k }, json_data: { cpu: 3 } }] }, mode));
    const m2 = await lastEventId();
    const ok = await runImport(importBody({ classes: enable }, mode));
    expect(ok.results[0]!.outcome).toBe('succeeded');
    expect((await events(['class_schema'], [cls!.id], m2)).map((e) => [e.action, e.metadata.change ?? null])).toEqual([
      ['staged', 'validation_enabled'],
      ['activated', 'validation_enabled'],
    ]);
  });
});
