// Client compatibility: clients generated from openapi.yaml by three widely used generators, with
// their default options, as a client team would (@hey-api/openapi-ts; openapi-typescript types with
// openapi-fetch; orval's fetch client), into a temporary directory. Each must write a function (or a
// typed path) for every operation, typecheck with `tsc --strict` together with its workflow
// (test/client-compat/*.ts), and drive that workflow against the running server: log in; create a
// collection, classes with a schema, objects and a relation; page a filtered list through
// X-Next-Cursor; page a structured search through `next`; read audit events; read a 409 as the
// client's typed error. Every response is checked against openapi.yaml.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../generated/operations.ts';
import type { Observed, WorkflowInput } from './client-compat/workflow.ts';
import { ADMIN_PASSWORD, startTestApp, uniq, type TestApp } from './helpers.ts';
import { serveOverHttp, type HttpServer } from './http-fixtures.ts';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const SPEC = join(REPO, 'openapi.yaml');
/** A package's command as its package.json names it (as `npx` finds it, whatever the version's layout). */
function bin(pkg: string, command = pkg.split('/').pop()!): string {
  const dir = join(REPO, 'node_modules', pkg);
  const declared = (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { bin: string | Record<string, string> }).bin;
  const file = typeof declared === 'string' ? declared : declared[command];
  if (!file) throw new Error(`${pkg} declares no command ${command}`);
  return join(dir, file);
}

type Generator = 'hey-api' | 'openapi-fetch' | 'orval';
const GENERATORS: Generator[] = ['hey-api', 'openapi-fetch', 'orval'];

/** The generator's command line (defaults but for where to write, and orval's server URL). */
function generateCommand(gen: Generator, dir: string, baseUrl: string): string[] {
  switch (gen) {
    case 'hey-api':
      return [bin('@hey-api/openapi-ts'), '-i', SPEC, '-o', join(dir, 'generated', 'hey-api')];
    case 'openapi-fetch':
      return [bin('openapi-typescript'), SPEC, '-o', join(dir, 'generated', 'openapi-typescript', 'schema.ts')];
    case 'orval': {
      const config = join(dir, 'orval.config.ts');
      const output = { target: join(dir, 'generated', 'orval', 'client.ts'), client: 'fetch', mode: 'single', baseUrl };
      writeFileSync(config, `export default ${JSON.stringify({ inventory: { input: { target: SPEC }, output } })};\n`);
      return [bin('orval'), '--config', config];
    }
  }
}

/** Where the generated code must show each operation, as text to find in the generated files. */
function operationMarkers(gen: Generator, id: string, method: string, path: string): string[] {
  switch (gen) {
    case 'hey-api':
      return [`export const ${id} = `];
    case 'openapi-fetch':
      // The path is typed, its method is the operation, and the operation has its types.
      return [`    "${path}": {`, `        ${method}: operations["${id}"];`, `\n    ${id}: {`];
    case 'orval':
      return [`export const ${id} = async (`];
  }
}

function readTree(dir: string): string {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => readFileSync(join(e.parentPath, e.name), 'utf8'))
    .join('\n');
}

let t: TestApp;
let http: HttpServer;
let dir: string;
const generated: Partial<Record<Generator, { ok: boolean; output: string }>> = {};
let typecheck: { ok: boolean; output: string };

beforeAll(async () => {
  t = await startTestApp();
  http = await serveOverHttp(t);
  dir = mkdtempSync(join(tmpdir(), 'client-compat-'));
  for (const f of readdirSync(join(REPO, 'test', 'client-compat'))) cpSync(join(REPO, 'test', 'client-compat', f), join(dir, f));
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2023', 'DOM', 'DOM.Iterable'],
        types: [],
        noEmit: true,
        allowImportingTsExtensions: true,
        skipLibCheck: true,
      },
      include: ['**/*.ts'],
      exclude: ['node_modules'],
    }),
  );
  mkdirSync(join(dir, 'generated'));
  // The three generators side by side (each is a child process of its own command line).
  await Promise.all(
    GENERATORS.map(async (gen) => {
      const [script, ...args] = generateCommand(gen, dir, http.baseUrl);
      try {
        const { stdout, stderr } = await run(process.execPath, [script!, ...args], { cwd: dir, timeout: 90_000 });
        generated[gen] = { ok: true, output: stdout + stderr };
      } catch (e) {
        const err = e as { stdout?: string; stderr?: string; message: string };
        generated[gen] = { ok: false, output: `${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}` };
      }
    }),
  );
  try {
    await run(process.execPath, [bin('typescript', 'tsc'), '-p', dir], { cwd: dir, timeout: 120_000 });
    typecheck = { ok: true, output: '' };
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    typecheck = { ok: false, output: `${err.stdout ?? ''}${err.stderr ?? ''}` || err.message };
  }
}, 240_000);

afterAll(async () => {
  await http?.close();
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.each(GENERATORS)('%s', (gen) => {
  it('generates a function or typed path for every operation', () => {
    const g = generated[gen]!;
    expect(g.ok, g.output).toBe(true);
    const code = readTree(join(dir, 'generated', gen === 'openapi-fetch' ? 'openapi-typescript' : gen));
    const missing = Object.entries(operations)
      .filter(([id, op]) => !operationMarkers(gen, id, op.method, op.path).every((m) => code.includes(m)))
      .map(([id]) => id);
    expect(missing, `${gen} has no function or typed path for these operations`).toEqual([]);
  });

  it('drives the workflow against the running server', async () => {
    const mod = (await import(pathToFileURL(join(dir, `${gen}.ts`)).href)) as { workflow(input: WorkflowInput): Promise<Observed> };
    const o = await mod.workflow({ baseUrl: http.baseUrl, adminPassword: ADMIN_PASSWORD, prefix: uniq('cc') });
    expect(o.serverIds).toHaveLength(7);
    expect(o.relatedToRack).toEqual([o.serverIds[0]]);
    expect(o.pagedNames).toEqual(['web-4', 'web-3', 'web-2', 'web-1', 'web-0']);
    expect(o.pageSizes).toEqual([2, 2, 1]);
    expect(o.filtered).toEqual({ in: ['db-6', 'web-1'], notEquals: ['web-3', 'web-4'], jsonPath: ['db-5', 'web-1', 'web-3'] });
    // Every generator sends the undeclarable filters through `filter`, with its default options.
    expect(o.viaFilter).toEqual({ jsonPath: o.filtered.jsonPath, related: ['web-0'] });
    expect(o.searchNames).toEqual(['db-6', 'web-0', 'web-2', 'web-4']);
    expect(o.searchPages).toBeGreaterThanOrEqual(4);
    expect([...o.eventEntityIds].sort((a, b) => a - b)).toEqual([...o.serverIds, o.rackId].sort((a, b) => a - b));
    expect(o.conflict).toMatchObject({ status: 409, error: 'Conflict' });
    expect(o.conflict.message).toBeTruthy();
  });
});

describe('all generated clients', () => {
  it('typecheck with tsc --strict, together with their workflows', () => {
    expect(typecheck.ok, typecheck.output).toBe(true);
  });

  it('received only responses that match openapi.yaml', () => {
    expect(http.violations).toEqual([]);
  });
});
