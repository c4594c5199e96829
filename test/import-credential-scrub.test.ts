// A credential-bearing import keeps password hashes in tasks.request only while it can still run:
// whatever ends the task (worker, cancel while queued, runner refusal), the hashes are gone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { approve } from './iam-fixtures.ts';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});

afterAll(async () => {
  await t?.close();
});

function importWithPassword(name: string, password: string) {
  return {
    version: 2,
    graph: {
      collections: [],
      classes: [],
      objects: [],
      class_relations: [],
      object_relations: [],
      collection_permissions: [],
      principals: [{ kind: 'human', name, password }],
    },
  };
}

async function storedRequest(taskId: number): Promise<string> {
  const [row] = await t.deps.sql<{ request: string }[]>`select request::text as request from tasks where id = ${taskId}`;
  return row!.request;
}

describe('import credentials in stored task requests', () => {
  it('cancelTask 200 on a queued credential-bearing import removes the password hashes', async () => {
    const name = uniq('imported');
    const password = uniq('pw');
    const body = importWithPassword(name, password);
    const approval = await approve(t, { kind: 'import_credentials', import: body });
    const res = await t.request('POST', '/api/v1/imports', { body, headers: { 'x-svc-credential-approval': approval } });
    expect(res.status, res.text).toBe(202);
    const id = (res.body as { id: number }).id;
    // While queued the hash is there (the worker needs it), never the password itself.
    const queued = await storedRequest(id);
    expect(queued).toContain('password_hash');
    expect(queued).not.toContain(password);

    const cancel = await t.request('POST', `/api/v1/tasks/${id}/cancel`);
    expect(cancel.status, cancel.text).toBe(200);
    expect((cancel.body as { status: string }).status).toBe('cancelled');
    const after = JSON.parse(await storedRequest(id)) as { graph: { principals: Record<string, unknown>[] } };
    expect(after.graph.principals).toEqual([{ kind: 'human', name, password_removed: true }]);
  });

  it('any terminal status written to an import task removes the hashes; other kinds and live states keep their request', async () => {
    const request = {
      version: 2,
      graph: {
        principals: [
          { kind: 'human', name: 'x', password_hash: '$argon2id$v=19$stub' },
          { kind: 'service_account', name: 'y' },
        ],
      },
    };
    const [admin] = await t.deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
    const rows = await t.deps.sql<{ id: number; kind: string }[]>`
      insert into tasks (kind, status, submitted_by, request)
      values ('import', 'queued', ${admin!.id}, ${t.deps.sql.json(request)}),
             ('export', 'queued', ${admin!.id}, ${t.deps.sql.json(request)})
      returning id, kind`;
    const imp = rows.find((r) => r.kind === 'import')!.id;
    const exp = rows.find((r) => r.kind === 'export')!.id;
    await t.deps.sql`update tasks set status = 'running' where id in (${imp}, ${exp})`;
    expect(await storedRequest(imp)).toContain('password_hash');
    await t.deps.sql`update tasks set status = 'failed', finished_at = now() where id in (${imp}, ${exp})`;
    const scrubbed = JSON.parse(await storedRequest(imp)) as { graph: { principals: unknown[] } };
    expect(scrubbed.graph.principals).toEqual([
      { kind: 'human', name: 'x', password_removed: true },
      { kind: 'service_account', name: 'y' },
    ]);
    expect(await storedRequest(exp)).toContain('password_hash');
  });
});
