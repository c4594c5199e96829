import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mapStack } from './source-maps.ts';
import { createLogger } from './log.ts';

// A TypeScript module bundled as the server is (esbuild, ESM, a source map beside it) and run by a
// plain `node` without --enable-source-maps: its stack names the bundle until mapStack maps it.
const SOURCE = [
  'interface Box { n: number }', // line 1
  '',
  'export function inner(box: Box): never {',
  '  const twice = box.n * 2;',
  "  throw new Error('boom ' + twice);", // line 5, column 9
  '}',
  '',
  'export function outer(): void {',
  '  inner({ n: 21 });', // line 9, column 3
  '}',
  '',
  'try {',
  '  outer();',
  '} catch (err) {',
  '  process.stdout.write((err as Error).stack ?? "");',
  '}',
].join('\n');

let dir: string;
let stack: string;
let srcFile: string;
let bundleFile: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-source-maps-'));
  mkdirSync(join(dir, 'src'));
  srcFile = join(dir, 'src', 'thrower.ts');
  bundleFile = join(dir, 'dist', 'out.js');
  writeFileSync(srcFile, SOURCE);
  // A few lines before the module's own, so that bundle and source lines differ.
  await build({
    entryPoints: [srcFile],
    outfile: bundleFile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    sourcemap: true,
    banner: { js: '// banner\n// banner\n' },
    logLevel: 'warning',
  });
  stack = execFileSync(process.execPath, [bundleFile], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('mapStack', () => {
  it('maps the frames of a bundle with a source map beside it to the source lines', () => {
    const url = pathToFileURL(bundleFile).href;
    expect(stack).toContain(url); // unmapped: the bundle, as Node prints it without --enable-source-maps
    expect(stack).not.toContain('thrower.ts');
    const mapped = mapStack(stack).split('\n');
    expect(mapped[0]).toBe('Error: boom 42');
    const src = pathToFileURL(srcFile).href;
    expect(mapped[1]).toBe(`    at inner (${src}:5:9)`);
    expect(mapped[2]).toBe(`    at outer (${src}:9:3)`);
    expect(mapped.join('\n')).not.toContain(url);
  });

  it('leaves frames alone that have no source map: node internals, files without a map, plain paths of them', () => {
    const lines = [
      'TypeError: x',
      '    at Module._compile (node:internal/modules/cjs/loader:1364:14)',
      `    at f (${join(dir, 'src', 'no-map.js')}:3:7)`,
      `    at ${pathToFileURL(join(dir, 'nowhere.mjs')).href}:1:1`,
      '    at new Promise (<anonymous>)',
    ].join('\n');
    expect(mapStack(lines)).toBe(lines);
  });

  it('maps a frame given as a plain path as well as one given as a file URL', () => {
    const lineOfThrow = stack.split('\n')[1]!.replace(pathToFileURL(bundleFile).href, bundleFile);
    expect(mapStack(lineOfThrow)).toBe(`    at inner (${srcFile}:5:9)`);
  });
});

describe('createLogger', () => {
  it("logs an error's stack with its frames mapped to the sources", () => {
    const lines: string[] = [];
    const err = new Error('boom 42');
    err.stack = stack;
    createLogger('info', { write: (line: string) => lines.push(line) }).error({ err }, 'unhandled error');
    const entry = JSON.parse(lines[0]!) as { err: { message: string; stack: string } };
    expect(entry.err.message).toBe('boom 42');
    expect(entry.err.stack).toContain(`at inner (${pathToFileURL(srcFile).href}:5:9)`);
  });
});
