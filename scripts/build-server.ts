// The server as plain JavaScript (README "Stopping" and "systemd"): esbuild bundles src/main.ts with the project's own
// modules (src/, generated/) into one ES module, dist/server/main.js with its source map, in well
// under a second; packages stay in node_modules and are imported from there. `make run`, the
// deployment units and `make bench-throughput` run the bundle with node: no TypeScript loader at run
// time, which costs memory (tsx's transform caches) and per-request CPU (its keepNames wrappers
// around every function created at run time).
//
// The bundle sits two directories below the checkout, as every src/ module that finds files by
// import.meta.url does (src/http/openapi.ts, src/db/migrate.ts, src/http/console.ts, src/http/docs.ts,
// src/workers/backup.ts: `../..` is the checkout from both).
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Bundles `entry` (relative to the checkout) into `outfile` (the same), two levels below the checkout. */
export async function bundle(entry: string, outfile: string): Promise<string> {
  if (outfile.split('/').length !== 3) throw new Error(`${outfile}: a bundle must sit two directories below the checkout`);
  const out = join(root, outfile);
  await build({
    entryPoints: [join(root, entry)],
    outfile: out,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: true,
    logLevel: 'warning',
  });
  return out;
}

export const SERVER_BUNDLE = 'dist/server/main.js';

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await bundle('src/main.ts', SERVER_BUNDLE);
}
