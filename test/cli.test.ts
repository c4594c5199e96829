// The admin command line, run as an operator runs it: bin/svc as a child process, from another
// directory, on SVC_DATABASE_URL. A restore replaces ALL data, so this file works in a database of
// its own on the test server (created unmigrated: the first test migrates it with the CLI).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestApp, uniq, type TestApp } from './helpers.ts';
import { createGroup, createHuman, createServiceAccount } from './iam-fixtures.ts';
import { createDatabase, type OwnDatabase } from './db-fixtures.ts';

const SVC = fileURLToPath(new URL('../bin/svc', import.meta.url));
let db: OwnDatabase | undefined;
let serverUrl: URL;
let dbUrl: string;
let work: string;
let t: TestApp | undefined;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** bin/svc with these arguments, from a scratch directory, on this file's database. */
function svc(args: string[], opts: { input?: string; env?: Record<string, string | undefined> } = {}): Promise<Run> {
  const env: Record<string, string | undefined> = { ...process.env, DATABASE_URL: undefined, SVC_DATABASE_URL: dbUrl, ...opts.env };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  return new Promise((ok, fail) => {
    const child = spawn(SVC, args, { cwd: work, env: env as NodeJS.ProcessEnv, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => ok({ code, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}

function app(): TestApp {
  if (!t) throw new Error('the app starts after the migrate test');
  return t;
}

beforeAll(async () => {
  db = await createDatabase('svc_cli');
  serverUrl = new URL(db.serverUrl);
  dbUrl = db.url;
  work = await mkdtemp(join(tmpdir(), 'svc-cli-'));
});

afterAll(async () => {
  await t?.close();
  if (work) await rm(work, { recursive: true, force: true });
  await db?.drop();
});

describe('svc', () => {
  it('migrate --check exits 1 listing pending migrations; migrate applies them; --check then exits 0', async () => {
    const before = await svc(['migrate', '--check']);
    expect(before.code, before.stderr).toBe(1);
    expect(before.stdout).toContain('pending 0001_foundation.sql');
    expect(before.stdout).toMatch(/^0 applied, \d+ pending$/m);

    const applied = await svc(['migrate']);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('applied 0001_foundation.sql');

    const after = await svc(['migrate', '--check']);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).toMatch(/^\d+ applied, 0 pending$/m);
    expect(after.stdout).not.toContain('pending 0');

    t = await startTestApp({ SVC_DATABASE_URL: dbUrl });
  });

  it('usage errors exit 2 with a message and the usage; nothing runs', async () => {
    const cases: [string[], RegExp][] = [
      [[], /usage: svc <command>/],
      [['frobnicate'], /unknown command "frobnicate"/],
      [['constructor'], /unknown command "constructor"/],
      [['__proto__'], /unknown command "__proto__"/],
      [['toString'], /unknown command "toString"/],
      [['migrate', '--bogus'], /Unknown option '--bogus'/],
      [['import'], /missing the import FILE/],
      [['import', 'x.json', '--mode', 'fast'], /--mode must be strict or best-effort/],
      [['restore', '--in', 'x.json'], /pass --yes/],
      [['backup'], /--out FILE is required/],
      [['create-token', 'admin', '--lifetime-hours', '0'], /--lifetime-hours must be a positive integer/],
      [['create-token', 'admin', '--scope', 'ReadObject,Bogus'], /unknown permission name "Bogus"/],
    ];
    const runs = await Promise.all(cases.map(([args]) => svc(args)));
    runs.forEach((r, i) => {
      expect(r.code, `svc ${cases[i]![0].join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(cases[i]![1]);
      expect(r.stderr).toMatch(/usage: svc/);
      expect(r.stdout).toBe('');
    });
  });

  it('reset-password sets the password from stdin, revokes the tokens and records the API events as the system actor', async () => {
    const h = await createHuman(app());
    const fresh = `pw-${uniq()}`;
    const r = await svc(['reset-password', h.name], { input: `${fresh}\n` });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`password of user ${h.name} (id ${h.id}, identity scope local) reset; 1 token revoked`);
    expect(r.stderr).not.toContain(fresh);

    expect((await app().request('GET', '/api/v0/auth/validate', { token: h.token })).status).toBe(401);
    const old = await app().request('POST', '/api/v0/auth/login', { token: null, body: { name: h.name, password: h.password } });
    expect(old.status).toBe(401);
    const token = await app().login(h.name, fresh);
    expect((await app().request('GET', '/api/v0/auth/validate', { token })).status).toBe(200);

    const events = await app().deps.sql<
      { entity_type: string; action: string; actor_kind: string; request_id: string; metadata: Record<string, unknown> }[]
    >`
      select entity_type, action, actor_kind, request_id, metadata from events
      where (entity_type = 'user' and entity_id = ${h.id} and action = 'updated')
         or (entity_type = 'token' and action = 'revoked' and (metadata->>'principal_id')::int = ${h.id})
      order by id`;
    expect(events.map((e) => [e.entity_type, e.action, e.actor_kind])).toEqual([
      ['user', 'updated', 'system'],
      ['token', 'revoked', 'system'],
    ]);
    expect(events[0]!.metadata).toMatchObject({ password_changed: true });
    expect(events[1]!.metadata).toMatchObject({ via: 'password_reset' });
    expect(events[0]!.request_id).toMatch(/^cli-[0-9a-f-]{36}$/);
    expect(events[1]!.request_id).toBe(events[0]!.request_id);

    const generated = await svc(['reset-password', h.name, '--generate']);
    expect(generated.code, generated.stderr).toBe(0);
    const pw = generated.stdout.trim();
    expect(pw).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(generated.stderr).not.toContain(pw);
    expect(generated.stderr).toContain('1 token revoked');
    await app().login(h.name, pw);

    const missing = await svc(['reset-password', uniq('nobody'), '--generate']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no user "nobody-[0-9a-f]+" in identity scope "local"/);
    expect(missing.stdout).toBe('');
  });

  it('create-token mints a scoped token for a service account that works once printed; the API rules apply', async () => {
    const g = await createGroup(app());
    const sa = await createServiceAccount(app(), g.id);
    const r = await svc(['create-token', sa.name, '--scope', 'ReadObject', '--lifetime-hours', '2', '--description', 'from the cli']);
    expect(r.code, r.stderr).toBe(0);
    const token = r.stdout.trim();
    expect(token.length).toBeGreaterThan(20);
    expect(r.stderr).toContain(`for service account ${sa.name} (id ${sa.id}), scoped`);
    expect(r.stderr).not.toContain(token);

    const me = await app().request('GET', '/api/v1/iam/me', { token });
    expect(me.status, me.text).toBe(200);
    const info = me.body as { principal: { id: number }; token: { id: number; scope: unknown; expires_at: string; description: string } };
    expect(info.principal.id).toBe(sa.id);
    expect(info.token.scope).toEqual({ permissions: ['ReadObject'] });
    expect(info.token.description).toBe('from the cli');
    const hours = (Date.parse(info.token.expires_at) - Date.now()) / 3600_000;
    expect(hours).toBeGreaterThan(1.9);
    expect(hours).toBeLessThanOrEqual(2);
    const [ev] = await app().deps.sql<{ action: string; actor_kind: string; actor_user_id: number | null; text: string }[]>`
      select action, actor_kind, actor_user_id, to_jsonb(e)::text as text from events e where entity_type = 'token' and entity_id = ${info.token.id}`;
    expect(ev).toMatchObject({ action: 'created', actor_kind: 'system', actor_user_id: null });
    expect(ev!.text).not.toContain(token);

    // A scope resource that does not exist is a wrong argument; a disabled account gets no token.
    const noSuch = await svc(['create-token', sa.name, '--scope', 'collection:2147483000']);
    expect(noSuch.code).toBe(2);
    expect(noSuch.stderr).toContain('collection 2147483000 does not exist');
    await app().deps.sql`update service_accounts set disabled_at = now() where principal_id = ${sa.id}`;
    const disabled = await svc(['create-token', sa.name]);
    expect(disabled.code).toBe(1);
    expect(disabled.stderr).toContain('the service account is disabled');
    expect(disabled.stdout).toBe('');
  });

  it('import FILE: --dry-run writes nothing; the import creates the objects, with progress lines', async () => {
    const collection = uniq('cli-col');
    const klass = uniq('cli-class');
    const doc = {
      version: 2,
      graph: {
        collections: [{ ref: 'c', name: collection }],
        classes: [{ ref: 'k', name: klass, collection_ref: 'c' }],
        objects: [
          { ref: 'a', name: 'a', class_ref: 'k', json_data: { n: 1 } },
          { ref: 'b', name: 'b', class_ref: 'k', json_data: { n: 2 } },
        ],
      },
    };
    const file = join(work, 'import.json');
    await writeFile(file, JSON.stringify(doc));

    const dry = await svc(['import', 'import.json', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ status: 'succeeded', summary: { dry_run: true } });
    expect((await app().request('GET', `/api/v1/classes/by-name/${klass}`)).status).toBe(404);

    const r = await svc(['import', file, '--mode', 'best-effort']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { task_id: number; status: string; summary: { atomicity: string } };
    expect(out).toMatchObject({ status: 'succeeded', summary: { atomicity: 'best_effort' } });
    expect(r.stderr).toContain(`svc import: import task ${out.task_id}, best-effort (4 items)`);
    expect(r.stderr).toContain(`svc import: import task ${out.task_id} succeeded: 4 succeeded`);

    const objects = await app().request('GET', `/api/v1/classes/by-name/${klass}/objects`);
    expect(objects.status, objects.text).toBe(200);
    const rows = objects.body as { name: string; json_data: unknown }[];
    expect(rows.map((o) => [o.name, o.json_data])).toEqual([
      ['a', { n: 1 }],
      ['b', { n: 2 }],
    ]);
    // The task is the admin's (the CLI submits in its name); the queued event is the system's.
    const [task] = await app().deps.sql<
      { submitted_by: number; kind: string }[]
    >`select submitted_by, kind from tasks where id = ${out.task_id}`;
    const [admin] = await app().deps.sql<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
    expect(task).toEqual({ submitted_by: admin!.id, kind: 'import' });
    const queued = await app().deps.sql<{ actor_kind: string; initiator_user_id: number | null }[]>`
      select actor_kind, initiator_user_id from events where entity_type = 'task' and entity_id = ${out.task_id} and action = 'queued'`;
    expect(queued).toEqual([{ actor_kind: 'system', initiator_user_id: admin!.id }]);

    await writeFile(join(work, 'bad.json'), JSON.stringify({ version: 2 }));
    const bad = await svc(['import', 'bad.json']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("must have required property 'graph'");
  });

  it('status reports the database, migrations, tasks by kind and status, fan-out lag and deliveries by sink kind', async () => {
    const r = await svc(['status', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as {
      database: { reachable: boolean; source: string };
      migrations: { applied: number; pending: string[] };
      tasks: { kind: string; status: string; count: number }[];
      event_fanout: { newest_event_id: number; pending_events: number; lag_events: number };
      deliveries_by_sink_kind: unknown[];
    };
    expect(s.database).toMatchObject({ reachable: true, source: 'SVC_DATABASE_URL' });
    expect(s.migrations.pending).toEqual([]);
    expect(s.migrations.applied).toBeGreaterThan(0);
    expect(s.tasks).toContainEqual({ kind: 'import', status: 'succeeded', count: 2 });
    const [newest] = await app().deps.sql<{ id: number }[]>`select max(id)::int as id from events`;
    expect(s.event_fanout.newest_event_id).toBeLessThanOrEqual(newest!.id);
    // Nothing fans the events of this database out: every one of them is waiting.
    expect(s.event_fanout.pending_events).toBeGreaterThan(0);
    expect(s.event_fanout.lag_events).toBeGreaterThan(0);
    expect(s.deliveries_by_sink_kind).toEqual([]);

    const text = await svc(['status']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^database {5}reachable, PostgreSQL /m);
    expect(text.stdout).toMatch(/^migrations {3}\d+ applied, 0 pending$/m);
    expect(text.stdout).toMatch(/^ {2}import +succeeded +2$/m);
  });

  it('status connects to a server already running on SVC_DATA_DIR instead of starting one', async () => {
    // A data directory as the embedded server leaves it while running: postmaster.pid names a
    // live process (this one), the port and the listen address; the password file is beside it.
    const dataDir = join(work, 'data');
    await mkdir(join(dataDir, 'postgres'), { recursive: true });
    const pid = [String(process.pid), join(dataDir, 'postgres'), '0', serverUrl.port || '5432', '', serverUrl.hostname, '0 0', 'ready'];
    await writeFile(join(dataDir, 'postgres', 'postmaster.pid'), pid.join('\n') + '\n');
    await writeFile(join(dataDir, 'postgres.password'), decodeURIComponent(serverUrl.password || 'unused') + '\n', { mode: 0o600 });
    const r = await svc(['status', '--json'], { env: { SVC_DATABASE_URL: undefined, SVC_DATA_DIR: dataDir } });
    const s = JSON.parse(r.stdout) as { database: { reachable: boolean; source: string } };
    expect(s.database, r.stderr).toEqual(
      expect.objectContaining({ reachable: true, source: `the running embedded PostgreSQL of ${dataDir}` }),
    );
    expect(existsSync(join(dataDir, 'postgres', 'PG_VERSION')), 'no server was initialised').toBe(false);
  });

  it('backup --out writes the document; restore --in replaces the data with it', async () => {
    const kept = uniq('kept');
    expect((await app().request('POST', '/api/v1/collections', { body: { name: kept } })).status).toBe(201);

    const b = await svc(['backup', '--out', 'backup.json']);
    expect(b.code, b.stderr).toBe(0);
    const file = join(work, 'backup.json');
    const bytes = await readFile(file);
    const sha = createHash('sha256').update(bytes).digest('hex');
    expect(b.stdout).toBe(`${sha}  ${file}\n`);
    expect(b.stderr).toMatch(/svc backup: backup task \d+ succeeded: \d+ rows/);
    expect(b.stderr).toContain(`svc backup: writing ${file}`);
    const doc = JSON.parse(bytes.toString('utf8')) as { backup_version: number; state: { collections: { name: string }[] } };
    expect(doc.backup_version).toBe(7);
    expect(doc.state.collections.map((c) => c.name)).toContain(kept);
    const again = await svc(['backup', '--out', file]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('exists; pass --force');

    const later = uniq('later');
    expect((await app().request('POST', '/api/v1/collections', { body: { name: later } })).status).toBe(201);

    const r = await svc(['restore', '--in', 'backup.json', '--yes']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`restored ${file} (sha256 ${sha})\n`);
    expect(r.stderr).toMatch(/svc restore: restore \d+ succeeded: all data replaced/);

    // Every token is gone after a restore; admin keeps its password.
    const token = await app().login('admin', ADMIN_PASSWORD);
    const names = await app().deps.sql<{ name: string }[]>`select name from collections where name in (${kept}, ${later})`;
    expect(names.map((n) => n.name)).toEqual([kept]);
    const listed = await app().request('GET', '/api/v1/collections', { token, query: { name: kept } });
    expect(listed.status, listed.text).toBe(200);
    const [ev] = await app().deps.sql<{ actor_kind: string; request_id: string }[]>`
      select actor_kind, request_id from events where entity_type = 'restore' and action = 'succeeded' order by id desc limit 1`;
    expect(ev!.actor_kind).toBe('system');
    expect(ev!.request_id).toMatch(/^cli-/);
  });
});
