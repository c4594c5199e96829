// Export templates: CRUD, validation (syntax, includes), permissions and scopes, list query,
// audit events and their wrapper, and the collection-deletion guard. Running exports through
// templates is in test/exports.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { eventsOf, tokenFor, grant, userWith } from './iam-fixtures.ts';

let t: TestApp;
let colA: number;
let colB: number;
let classA: number;

async function post(path: string, body: unknown, token = t.adminToken) {
  return t.request('POST', path, { token, body });
}

async function createCollection(name = uniq('col')): Promise<number> {
  const res = await post('/api/v1/collections', { name });
  expect(res.status, res.text).toBe(201);
  return (res.body as { id: number }).id;
}

type Tpl = Record<string, unknown> & { id: number; name: string; revision: number; collection_id: number };

function body(overrides: Record<string, unknown> = {}) {
  return { collection_id: colA, name: uniq('tpl'), template: '{% for i in items %}{{ i.name }}\n{% endfor %}', ...overrides };
}

async function createTemplate(overrides: Record<string, unknown> = {}, token = t.adminToken): Promise<Tpl> {
  const res = await post('/api/v1/export-templates', body(overrides), token);
  expect(res.status, res.text).toBe(201);
  return res.body as Tpl;
}

beforeAll(async () => {
  t = await startTestApp();
  colA = await createCollection();
  colB = await createCollection();
  const cls = await post('/api/v1/classes', { name: uniq('class'), collection_id: colA });
  expect(cls.status, cls.text).toBe(201);
  classA = (cls.body as { id: number }).id;
});

afterAll(async () => {
  await t.close();
});

describe('export template audit snapshots', () => {
  it('each event holds the template as the write answered it (created, updated, deleted)', async () => {
    const created = await post('/api/v1/export-templates', body({ default_query: 'sort=name' }));
    expect(created.status, created.text).toBe(201);
    const tpl = created.body as Tpl;
    const updated = await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, { body: { template: 'changed {{ items.size }}' } });
    expect(updated.status, updated.text).toBe(200);
    expect((await t.request('GET', `/api/v1/export-templates/${tpl.id}`)).body).toEqual(updated.body);
    expect((await t.request('DELETE', `/api/v1/export-templates/${tpl.id}`)).status).toBe(204);
    const ev = await eventsOf(t, 'export_template', tpl.id);
    expect(ev.map((e) => [e.action, e.before, e.after])).toEqual([
      ['created', null, created.body],
      ['updated', created.body, updated.body],
      ['deleted', updated.body, null],
    ]);
  });
});

describe('createExportTemplate', () => {
  it('201 with Location, ETag, defaults and a created event', async () => {
    const b = body();
    const res = await post('/api/v1/export-templates', b);
    expect(res.status, res.text).toBe(201);
    const tpl = res.body as Tpl;
    expect(res.headers.get('location')).toBe(`/api/v1/export-templates/${tpl.id}`);
    expect(res.headers.get('etag')).toMatch(/^"svc-v1\.export_template\./);
    expect(tpl).toMatchObject({ ...b, description: '', kind: 'export', content_type: 'text/plain', default_query: null, revision: 1 });
    const ev = await eventsOf(t, 'export_template', tpl.id);
    expect(ev.map((e) => e.action)).toEqual(['created']);
    expect(ev[0]!.after).toMatchObject({ id: tpl.id, name: b.name, template: b.template });
    expect(ev[0]!.after_revision).toBe(1);
  });

  it('201 for a template including fragments of its collection, and a fragment including itself', async () => {
    const row = await createTemplate({ kind: 'fragment', template: '{{ item.name }}' });
    const self = await createTemplate({ kind: 'fragment', name: uniq('self'), template: '' });
    const rec = await t.request('PATCH', `/api/v1/export-templates/${self.id}`, {
      body: { template: `{% if n > 0 %}x{% render '${self.name}', n: n | minus: 1 %}{% endif %}` },
    });
    expect(rec.status, rec.text).toBe(200);
    const main = await createTemplate({
      content_type: 'text/csv',
      default_query: 'name__startswith=a&sort=-name',
      template: `{% for i in items %}{% include '${row.name}', item: i %}{% render "${row.name}", item: i %}{% endfor %}`,
    });
    expect(main).toMatchObject({ content_type: 'text/csv', default_query: 'name__startswith=a&sort=-name' });
  });

  it.each([
    ['a syntax error', { template: '{{ items ' }],
    ['an unknown filter', { template: '{{ items | nosuchfilter }}' }],
    ['an unknown tag', { template: '{% layout "x" %}' }],
    ['an unquoted include name', { template: '{% include row %}' }],
    ['an include with a malformed argument', { template: '{% include "row" with x %}' }],
    ['an include of a missing fragment', { template: '{% include "no-such-fragment" %}' }],
    ['a default_query with limit', { default_query: 'limit=5' }],
    ['a default_query with cursor', { default_query: 'name=a&cursor=abc' }],
    ['an unknown member', { extra: true }],
    ['an unknown kind', { kind: 'layout' }],
    ['an unknown content_type', { content_type: 'application/xml' }],
    ['a blank name', { name: '   ' }],
    ['a name over 255 characters', { name: 'n'.repeat(256) }],
  ])('400 for %s', async (_what, overrides) => {
    const res = await post('/api/v1/export-templates', body(overrides));
    expect(res.status, res.text).toBe(400);
    expect((res.body as { error: string }).error).toBe('Bad Request');
  });

  it('400 with details for blocks nested deeper than the recursion limit', async () => {
    const depth = t.deps.config.SVC_EXPORT_TEMPLATE_RECURSION_LIMIT + 1;
    const res = await post('/api/v1/export-templates', body({ template: '{% if a %}'.repeat(depth) + '{% endif %}'.repeat(depth) }));
    expect(res.status, res.text).toBe(400);
    expect((res.body as { details: { path: string }[] }).details[0]!.path).toBe('body.template');
  });

  it('400 for including a fragment of another collection or an export template', async () => {
    const other = await createTemplate({ collection_id: colB, kind: 'fragment', template: 'x' });
    const cross = await post('/api/v1/export-templates', body({ template: `{% include '${other.name}' %}` }));
    expect(cross.status, cross.text).toBe(400);
    const exp = await createTemplate();
    const ofExport = await post('/api/v1/export-templates', body({ template: `{% include '${exp.name}' %}` }));
    expect(ofExport.status, ofExport.text).toBe(400);
    expect(ofExport.text).toContain('only fragments can be included');
  });

  it('404 for a missing collection; 409 for a name already used in the collection', async () => {
    const missing = await post('/api/v1/export-templates', body({ collection_id: 2_000_000_000 }));
    expect(missing.status).toBe(404);
    const tpl = await createTemplate();
    const again = await post('/api/v1/export-templates', body({ name: tpl.name }));
    expect(again.status, again.text).toBe(409);
    await createTemplate({ name: tpl.name, collection_id: colB });
  });

  it('403 without CreateTemplate; 401 without a token', async () => {
    const u = await userWith(t, [[colA, ['ReadTemplate']]]);
    expect((await post('/api/v1/export-templates', body(), u.token)).status).toBe(403);
    const writer = await userWith(t, [[colA, ['CreateTemplate']]]);
    await createTemplate({}, writer.token);
    expect((await t.request('POST', '/api/v1/export-templates', { token: null, body: body() })).status).toBe(401);
  });
});

describe('getExportTemplate', () => {
  it('200 with ETag; 404 for a missing template; 403 without ReadTemplate', async () => {
    const tpl = await createTemplate();
    const res = await t.request('GET', `/api/v1/export-templates/${tpl.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(tpl);
    expect(res.headers.get('etag')).toMatch(/\.1"$/);
    expect((await t.request('GET', '/api/v1/export-templates/2000000000')).status).toBe(404);
    expect((await t.request('GET', '/api/v1/export-templates/0')).status).toBe(400);
    const u = await userWith(t, [[colA, ['ReadCollection', 'ReadClass']]]);
    expect((await t.request('GET', `/api/v1/export-templates/${tpl.id}`, { token: u.token })).status).toBe(403);
  });

  it('a resource-scoped token needs an explicit collection entry (a class entry is not enough)', async () => {
    const tpl = await createTemplate();
    const u = await userWith(t, [[colA, ['ReadTemplate']]]);
    const classScoped = await tokenFor(t, u.id, { resources: [{ kind: 'class', id: classA }] });
    expect((await t.request('GET', `/api/v1/export-templates/${tpl.id}`, { token: classScoped })).status).toBe(403);
    const colScoped = await tokenFor(t, u.id, { resources: [{ kind: 'collection', id: colA }] });
    expect((await t.request('GET', `/api/v1/export-templates/${tpl.id}`, { token: colScoped })).status).toBe(200);
    const permScoped = await tokenFor(t, u.id, { permissions: ['ReadCollection'] });
    expect((await t.request('GET', `/api/v1/export-templates/${tpl.id}`, { token: permScoped })).status).toBe(403);
  });
});

describe('listExportTemplates', () => {
  it('200 with only templates the caller may read (in SQL: totals agree), and scoped tokens narrowed', async () => {
    const col = await createCollection();
    const hidden = await createCollection();
    const a = await createTemplate({ collection_id: col, name: 'b-tpl' });
    const f = await createTemplate({ collection_id: col, name: 'a-frag', kind: 'fragment', template: 'x' });
    await createTemplate({ collection_id: hidden });
    const u = await userWith(t, [[col, ['ReadTemplate']]]);
    const res = await t.request('GET', '/api/v1/export-templates', { token: u.token });
    expect(res.status, res.text).toBe(200);
    expect((res.body as Tpl[]).map((r) => r.id)).toEqual([a.id, f.id]);
    expect(res.headers.get('x-total-count')).toBe('2');
    const classScoped = await tokenFor(t, u.id, { resources: [{ kind: 'class', id: classA }] });
    const none = await t.request('GET', '/api/v1/export-templates', { token: classScoped });
    expect(none.body).toEqual([]);
    expect(none.headers.get('x-total-count')).toBe('0');
    const colScoped = await tokenFor(t, u.id, { resources: [{ kind: 'collection', id: col }], permissions: ['ReadTemplate'] });
    expect(((await t.request('GET', '/api/v1/export-templates', { token: colScoped })).body as Tpl[]).length).toBe(2);
  });

  it('filters, sorts and keyset pages; 400 for an unknown filter or a paging misuse', async () => {
    const col = await createCollection();
    const ids: number[] = [];
    for (const n of ['c', 'a', 'b']) ids.push((await createTemplate({ collection_id: col, name: n })).id);
    await createTemplate({ collection_id: col, name: 'frag', kind: 'fragment', template: 'x' });
    const q = { collection_id: col, kind: 'export', sort: '-name', limit: 2 };
    const first = await t.request('GET', '/api/v1/export-templates', { query: q });
    expect(first.status, first.text).toBe(200);
    expect((first.body as Tpl[]).map((r) => r.name)).toEqual(['c', 'b']);
    expect(first.headers.get('x-total-count')).toBe('3');
    expect(first.headers.get('x-page-limit')).toBe('2');
    const cursor = first.headers.get('x-next-cursor')!;
    const second = await t.request('GET', '/api/v1/export-templates', { query: { ...q, cursor, include_total: false } });
    expect((second.body as Tpl[]).map((r) => r.name)).toEqual(['a']);
    expect(second.headers.get('x-next-cursor')).toBeNull();
    expect(second.headers.get('x-total-count')).toBeNull();
    const byType = await t.request('GET', '/api/v1/export-templates', {
      query: { collections: col, content_type: 'text/plain', name__in: 'a,b' },
    });
    expect((byType.body as Tpl[]).map((r) => r.id)).toEqual([ids[1], ids[2]]);
    expect((await t.request('GET', '/api/v1/export-templates', { query: { template: 'x' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/export-templates', { query: { kind: 'other' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/export-templates', { query: { ...q, cursor: 'bogus' } })).status).toBe(400);
    expect((await t.request('GET', '/api/v1/export-templates', { token: null })).status).toBe(401);
  });
});

describe('updateExportTemplate', () => {
  it('200 advances the revision with an updated event; a no-op changes nothing', async () => {
    const tpl = await createTemplate({ default_query: 'name=a' });
    const res = await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, {
      body: { description: 'new', default_query: null, content_type: 'text/html' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ description: 'new', default_query: null, content_type: 'text/html', revision: 2 });
    expect(res.headers.get('etag')).toMatch(/\.2"$/);
    const same = await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, { body: { description: 'new', name: tpl.name } });
    expect(same.status).toBe(200);
    expect((same.body as Tpl).revision).toBe(2);
    const ev = await eventsOf(t, 'export_template', tpl.id);
    expect(ev.map((e) => e.action)).toEqual(['created', 'updated']);
    expect(ev[1]).toMatchObject({ before_revision: 1, after_revision: 2 });
    expect(ev[1]!.before).toMatchObject({ default_query: 'name=a' });
    expect(ev[1]!.after).toMatchObject({ default_query: null, description: 'new' });
  });

  it('412 for a stale If-Match, 200 for the current one, 400 for a weak validator', async () => {
    const tpl = await createTemplate();
    const etag = (await t.request('GET', `/api/v1/export-templates/${tpl.id}`)).headers.get('etag')!;
    const ok = await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, {
      body: { description: 'x' },
      headers: { 'if-match': etag },
    });
    expect(ok.status).toBe(200);
    const stale = await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, {
      body: { description: 'y' },
      headers: { 'if-match': etag },
    });
    expect(stale.status).toBe(412);
    expect(stale.headers.get('etag')).toMatch(/\.2"$/);
    const weak = await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, {
      body: { description: 'y' },
      headers: { 'if-match': `W/${etag}` },
    });
    expect(weak.status).toBe(400);
  });

  it('400 for an invalid template, 409 for a taken name, 404 for a missing template', async () => {
    const a = await createTemplate();
    const b = await createTemplate();
    expect((await t.request('PATCH', `/api/v1/export-templates/${a.id}`, { body: { template: '{% for %}' } })).status).toBe(400);
    expect((await t.request('PATCH', `/api/v1/export-templates/${a.id}`, { body: { name: b.name } })).status).toBe(409);
    expect((await t.request('PATCH', '/api/v1/export-templates/2000000000', { body: { name: 'x' } })).status).toBe(404);
    expect((await t.request('PATCH', `/api/v1/export-templates/${a.id}`, { body: { bogus: 1 } })).status).toBe(400);
  });

  it('moving needs UpdateTemplate here and CreateTemplate on the destination (403 otherwise)', async () => {
    const tpl = await createTemplate();
    const u = await userWith(t, [
      [colA, ['UpdateTemplate']],
      [colB, ['ReadTemplate']],
    ]);
    expect((await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, { token: u.token, body: { collection_id: colB } })).status).toBe(
      403,
    );
    await grant(t, colB, u.groupId, ['CreateTemplate']);
    const moved = await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, { token: u.token, body: { collection_id: colB } });
    expect(moved.status, moved.text).toBe(200);
    expect((moved.body as Tpl).collection_id).toBe(colB);
    const ev = await eventsOf(t, 'export_template', tpl.id);
    expect(ev.at(-1)!.metadata).toMatchObject({ from_collection_id: colA, to_collection_id: colB, related_collection_ids: [colA] });
    const reader = await userWith(t, [[colB, ['ReadTemplate']]]);
    expect(
      (await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, { token: reader.token, body: { description: 'z' } })).status,
    ).toBe(403);
  });
});

describe('deleteExportTemplate', () => {
  it('204 with a deleted event; then 404', async () => {
    const tpl = await createTemplate();
    const res = await t.request('DELETE', `/api/v1/export-templates/${tpl.id}`);
    expect(res.status, res.text).toBe(204);
    expect((await t.request('GET', `/api/v1/export-templates/${tpl.id}`)).status).toBe(404);
    expect((await t.request('DELETE', `/api/v1/export-templates/${tpl.id}`)).status).toBe(404);
    const ev = await eventsOf(t, 'export_template', tpl.id);
    expect(ev.map((e) => e.action)).toEqual(['created', 'deleted']);
    expect(ev[1]!.before).toMatchObject({ id: tpl.id });
    expect(ev[1]!.after).toBeNull();
  });

  it('412 for a stale If-Match; 403 without DeleteTemplate', async () => {
    const tpl = await createTemplate();
    const stale = await t.request('DELETE', `/api/v1/export-templates/${tpl.id}`, {
      headers: { 'if-match': '"svc-v1.export_template.x.9"' },
    });
    expect(stale.status).toBe(412);
    const u = await userWith(t, [[colA, ['ReadTemplate', 'UpdateTemplate']]]);
    expect((await t.request('DELETE', `/api/v1/export-templates/${tpl.id}`, { token: u.token })).status).toBe(403);
    expect((await t.request('GET', `/api/v1/export-templates/${tpl.id}`)).status).toBe(200);
  });
});

describe('listExportTemplateEvents', () => {
  it('200 with the template events; 404 for a missing template; 403 without ReadAudit', async () => {
    const tpl = await createTemplate();
    await t.request('PATCH', `/api/v1/export-templates/${tpl.id}`, { body: { description: 'changed' } });
    const res = await t.request('GET', `/api/v1/export-templates/${tpl.id}/events`);
    expect(res.status, res.text).toBe(200);
    const rows = res.body as { action: string; entity_type: string; entity_id: number }[];
    expect(rows.map((r) => [r.entity_type, r.entity_id, r.action]).sort((a, b) => String(a[2]).localeCompare(String(b[2])))).toEqual([
      ['export_template', tpl.id, 'created'],
      ['export_template', tpl.id, 'updated'],
    ]);
    expect(res.headers.get('x-total-count')).toBe('2');
    expect((await t.request('GET', '/api/v1/export-templates/2000000000/events')).status).toBe(404);
    const u = await userWith(t, [[colA, ['ReadTemplate']]]);
    expect((await t.request('GET', `/api/v1/export-templates/${tpl.id}/events`, { token: u.token })).status).toBe(403);
    const auditor = await userWith(t, [[colA, ['ReadAudit']]]);
    const seen = await t.request('GET', `/api/v1/export-templates/${tpl.id}/events`, { token: auditor.token });
    expect((seen.body as unknown[]).length).toBe(2);
  });
});

describe('deleteCollection with templates', () => {
  it('409 while the collection owns a template; 204 once it is gone', async () => {
    const col = await createCollection();
    const tpl = await createTemplate({ collection_id: col });
    const blocked = await t.request('DELETE', `/api/v1/collections/${col}`);
    expect(blocked.status, blocked.text).toBe(409);
    expect(blocked.text).toContain('export template');
    expect((await t.request('DELETE', `/api/v1/export-templates/${tpl.id}`)).status).toBe(204);
    expect((await t.request('DELETE', `/api/v1/collections/${col}`)).status).toBe(204);
  });
});
