// Entity versions in backups (#11): createBackup's include_entity_history adds the top-level
// `entity_history` section, and a restore of such a document brings the versions back exactly. A
// restore replaces ALL data, so this file runs in its own database on the same server (as
// test/backups.test.ts does); its tests run one after another there.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestApp, uniq, type TestApp } from './helpers.ts';
import { createDatabase, type OwnDatabase } from './db-fixtures.ts';
import { approve } from './iam-fixtures.ts';
import { collection, createClass, createObject, principalWith, type Cls, type Obj } from './class-fixtures.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { ENTITY_HISTORY } from '../src/domain/backup-format.ts';
import { backupArgs } from '../src/cli/commands/backup.ts';

type Row = Record<string, unknown>;
type Doc = {
  backup_version: number;
  manifest: { item_counts: Record<string, number> };
  state: Record<string, Row[]>;
  history: Record<string, Row[]> | null;
  entity_history?: Row[];
};

let db: OwnDatabase | undefined;
let t: TestApp;

beforeAll(async () => {
  db = await createDatabase('svc_history_backup', { migrate: true });
  t = await startTestApp({ SVC_DATABASE_URL: db.url });
});

afterAll(async () => {
  await t?.close();
  await db?.drop();
});

/** Submits a backup, runs it, and returns the task, the output text and the parsed document. */
async function backup(body?: unknown): Promise<{ id: number; text: string; doc: Doc; summary: Row }> {
  const sub = await t.request('POST', '/api/v1/backups', { body });
  expect(sub.status, sub.text).toBe(202);
  const id = (sub.body as { id: number }).id;
  const done = await runTaskOnce(t.deps, { taskIds: [id] });
  expect(done?.status, JSON.stringify(done?.details)).toBe('succeeded');
  const res = await t.request('GET', `/api/v1/backups/${id}/output`);
  expect(res.status, res.text).toBe(200);
  const task = await t.request('GET', `/api/v1/backups/${id}`);
  return { id, text: res.text, doc: JSON.parse(res.text) as Doc, summary: (task.body as { summary: Row }).summary };
}

async function stage(doc: Doc | string) {
  return t.request('POST', '/api/v1/restores', { rawBody: typeof doc === 'string' ? doc : JSON.stringify(doc) });
}

/** Stages and confirms a document; the restore removes every token, so the admin logs in again. */
async function restore(text: string): Promise<void> {
  const staged = await stage(text);
  expect(staged.status, staged.text).toBe(201);
  const s = staged.body as { id: number; sha256: string; restore_capability: string };
  const body = { restore_capability: s.restore_capability, sha256: s.sha256, confirmation: 'REPLACE ALL DATA' };
  const approval = await approve(t, { kind: 'confirm_restore', restore_id: s.id, confirmation: body });
  const res = await t.request('POST', `/api/v1/restores/${s.id}/confirm`, { body, headers: { 'x-svc-credential-approval': approval } });
  expect(res.status, res.text).toBe(200);
  expect((res.body as { status: string; error: string | null }).error).toBeNull();
  t.adminToken = await t.login('admin', ADMIN_PASSWORD);
}

/** The versions as a backup writes them: every column of the view, timestamps as RFC 3339 text in UTC, by id. */
async function tableRows(): Promise<Row[]> {
  return t.deps.sql.begin(async (tx) => {
    await tx`set local timezone = 'UTC'`;
    const rows = await tx<{ r: Row }[]>`select to_json(h) as r from entity_versions h order by id`;
    return rows.map((x) => x.r);
  });
}

const ENVELOPE = ['backup_version', 'source_version', 'created_at', 'manifest', 'state', 'history'];

let cls: Cls;
let obj: Obj;
let gone: Obj;
let editor: { id: number; token: string };
let withVersions: Awaited<ReturnType<typeof backup>>;
let apiHistory: unknown;

describe('backups with and without entity versions', () => {
  it('the section lists every column of entity_versions: the stored ones of entity_history and the derived valid_to', async () => {
    const columns = async (table: string) =>
      (
        await t.deps.sql<{ column_name: string }[]>`
        select column_name from information_schema.columns where table_schema = 'public' and table_name = ${table}`
      )
        .map((c) => c.column_name)
        .sort();
    expect([...ENTITY_HISTORY.fields].sort()).toEqual(await columns(ENTITY_HISTORY.source));
    // The table: the same but valid_to, and the retention mark a restore sets (migration 0330).
    const stored = ENTITY_HISTORY.fields.filter((f) => !(ENTITY_HISTORY.derived as readonly string[]).includes(f));
    expect([...stored, 'supersedes'].sort()).toEqual(await columns(ENTITY_HISTORY.table));
  });

  it('a default backup (and include_entity_history false) has no entity_history member and no count: the format as before', async () => {
    const cid = await collection(t);
    cls = await createClass(t, cid);
    editor = await principalWith(t, [[cid, ['ReadClass', 'ReadObject', 'UpdateObject']]]);
    obj = await createObject(t, cls.id, { v: 1 });
    const upd = await t.request('PATCH', `/api/v1/classes/${cls.id}/${obj.id}`, { token: editor.token, body: { json_data: { v: 2 } } });
    expect(upd.status, upd.text).toBe(200);
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${obj.id}`, { body: { json_data: { v: 3 } } })).status).toBe(200);
    gone = await createObject(t, cls.id, {});
    expect((await t.request('DELETE', `/api/v1/classes/${cls.id}/${gone.id}`)).status).toBe(204);

    for (const body of [undefined, { include_entity_history: false }, { include_history: false }]) {
      const b = await backup(body);
      expect(Object.keys(b.doc), JSON.stringify(body)).toEqual(ENVELOPE);
      expect(Object.keys(b.doc.manifest.item_counts)).not.toContain('entity_history');
      expect(b.summary.include_entity_history).toBe(false);
    }
    // The task request is recorded as before (no new member when it is not asked for).
    const [req] = await t.deps.sql<{ request: Row }[]>`select request from tasks where kind = 'backup' order by id desc limit 1`;
    expect(req!.request).toEqual({ include_history: false });
  });

  it('include_entity_history true adds every version (revision, interval, actor) with its manifest count', async () => {
    apiHistory = (await t.request('GET', `/api/v1/classes/${cls.id}/${obj.id}/history`)).body;
    withVersions = await backup({ include_entity_history: true });
    const doc = withVersions.doc;
    expect(Object.keys(doc)).toEqual([...ENVELOPE, 'entity_history']);
    expect(doc.history).not.toBeNull();
    expect(withVersions.summary.include_entity_history).toBe(true);
    const rows = doc.entity_history!;
    expect(doc.manifest.item_counts.entity_history).toBe(rows.length);
    expect(rows).toEqual(await tableRows());
    for (const r of rows) expect(Object.keys(r)).toEqual([...ENTITY_HISTORY.fields]);
    const mine = rows.filter((r) => r.entity_kind === 'object' && r.entity_id === obj.id);
    expect(mine.map((r) => [r.revision, r.operation, r.actor_kind, r.actor_principal_id])).toEqual([
      [1, 'insert', 'user', expect.any(Number)],
      [2, 'update', 'user', editor.id],
      [3, 'update', 'user', expect.any(Number)],
    ]);
    expect(mine[0]!.valid_to).toBe(mine[1]!.valid_from);
    expect(mine[2]!.valid_to).toBeNull();
    const tomb = rows.filter((r) => r.entity_kind === 'object' && r.entity_id === gone.id).at(-1)!;
    expect([tomb.operation, tomb.valid_to]).toEqual(['delete', null]);
    // Only the history part is optional: include_history false with versions has history null.
    const both = await backup({ include_history: false, include_entity_history: true });
    expect(both.doc.history).toBeNull();
    expect(both.doc.entity_history!.length).toBeGreaterThan(0);
  });
});

describe('restores with and without entity versions', () => {
  it('a document with the section: after the restore the table holds exactly its versions; new versions continue after them', async () => {
    // Changes after the backup that the restore undoes, versions included.
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${obj.id}`, { body: { json_data: { v: 4 } } })).status).toBe(200);
    const later = await createObject(t, cls.id, {});

    await restore(withVersions.text);

    expect(await tableRows()).toEqual(withVersions.doc.entity_history);
    // Each restored version is marked for retention exactly when an earlier one of its entity is kept.
    const [marks] = await t.deps.sql<{ n: number; wrong: number }[]>`
      select count(*)::int as n, count(*) filter (where supersedes is distinct from exists (
        select 1 from entity_history p where p.entity_kind = h.entity_kind and p.entity_id = h.entity_id and p.id < h.id))::int as wrong
      from entity_history h`;
    expect(marks!.n).toBe(withVersions.doc.entity_history!.length);
    expect(marks!.wrong).toBe(0);
    const history = await t.request('GET', `/api/v1/classes/${cls.id}/${obj.id}/history`);
    expect(history.status).toBe(200);
    expect(history.body).toEqual(apiHistory);
    expect((await t.request('GET', `/api/v1/classes/${cls.id}/${later.id}/history`)).status).toBe(404);

    // A change after the restore is a new version of the restored chain, with a new id.
    const maxId = Math.max(...withVersions.doc.entity_history!.map((r) => r.id as number));
    expect((await t.request('PATCH', `/api/v1/classes/${cls.id}/${obj.id}`, { body: { json_data: { v: 5 } } })).status).toBe(200);
    const [v] = await t.deps.sql<{ id: number; revision: number }[]>`
      select id::int, revision from entity_versions where entity_kind = 'object' and entity_id = ${obj.id} and valid_to is null`;
    expect(v!.revision).toBe(4);
    expect(v!.id).toBeGreaterThan(maxId);
  });

  it('a document without the section keeps the stored versions; the restore adds its deletes and inserts', async () => {
    const plain = await backup();
    const before = await tableRows();
    await restore(plain.text);
    const after = await tableRows();
    expect(after.slice(0, before.length).map((r) => ({ ...r, valid_to: null }))).toEqual(before.map((r) => ({ ...r, valid_to: null })));
    const mine = after.filter((r) => r.entity_kind === 'object' && r.entity_id === obj.id);
    expect(mine.map((r) => [r.revision, r.operation])).toEqual([
      [1, 'insert'],
      [2, 'update'],
      [3, 'update'],
      [4, 'update'],
      [5, 'delete'],
      [4, 'insert'],
    ]);
  });

  it('400 for an invalid section: a wrong count, a missing or unknown field, two current versions of one entity, not an array', async () => {
    const good = (await backup({ include_entity_history: true })).doc;
    const cases: [string, (d: Doc) => void, string][] = [
      ['count', (d) => (d.manifest.item_counts.entity_history = 0), 'body.manifest.item_counts.entity_history'],
      ['missing field', (d) => delete d.entity_history![0]!.actor_kind, 'body.entity_history.0.actor_kind'],
      ['unknown field', (d) => (d.entity_history![0]!.extra = 1), 'body.entity_history.0.extra'],
      [
        'two current versions',
        (d) => {
          const first = d.entity_history![0]!;
          const copy = { ...first, id: 999999, valid_to: null };
          d.entity_history!.push(copy);
          first.valid_to = null;
          d.manifest.item_counts.entity_history = d.entity_history!.length;
        },
        'body.entity_history.0.valid_to',
      ],
      [
        "a valid_to that is not the next version's valid_from",
        (d) => {
          const i = d.entity_history!.findIndex((r) => r.valid_to !== null);
          d.entity_history![i]!.valid_to = '2001-01-01T00:00:00.000Z';
        },
        `body.entity_history.${good.entity_history!.findIndex((r) => r.valid_to !== null)}.valid_to`,
      ],
      [
        'a current version given an end',
        (d) => {
          const i = d.entity_history!.findIndex((r) => r.valid_to === null);
          d.entity_history![i]!.valid_to = '2999-01-01T00:00:00.000Z';
        },
        `body.entity_history.${good.entity_history!.findIndex((r) => r.valid_to === null)}.valid_to`,
      ],
      [
        'count without section',
        (d) => {
          delete d.entity_history;
        },
        'body.manifest.item_counts.entity_history',
      ],
    ];
    for (const [name, change, path] of cases) {
      const doc = structuredClone(good);
      change(doc);
      const res = await stage(doc);
      expect(res.status, `${name}: ${res.text}`).toBe(400);
      const details = (res.body as { details: { path: string }[] }).details;
      expect(
        details.map((d) => d.path),
        name,
      ).toContain(path);
    }
    // The detail says what the value must be.
    const shifted = structuredClone(good);
    const k = shifted.entity_history!.findIndex((r) => r.valid_to !== null);
    const next = shifted.entity_history!.find(
      (r, i) => i > k && r.entity_kind === shifted.entity_history![k]!.entity_kind && r.entity_id === shifted.entity_history![k]!.entity_id,
    )!;
    shifted.entity_history![k]!.valid_to = '2999-01-01T00:00:00Z';
    const res = await stage(shifted);
    expect(res.body).toMatchObject({
      details: [
        {
          path: `body.entity_history.${k}.valid_to`,
          message: `must be ${new Date(next.valid_from as string).toISOString().replace('Z', '000Z')}, the valid_from of the next version of its entity (id ${next.id as number}): a version is current until the next one begins`,
        },
      ],
    });
    const notArray = structuredClone(good) as unknown as Row;
    notArray.entity_history = { rows: [] };
    expect((await stage(notArray as unknown as Doc)).status).toBe(400);
  });
});

describe('svc backup --include-entity-history', () => {
  it('passes include_entity_history through; without the flag it is false', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-hb-'));
    const out = join(dir, uniq('b') + '.json');
    try {
      expect(backupArgs(['--out', out, '--include-entity-history'])).toEqual({ out, includeHistory: true, includeEntityHistory: true });
      expect(backupArgs(['--out', out])).toEqual({ out, includeHistory: true, includeEntityHistory: false });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
