// The three copies of postgres.js that Node can load, each patched by patches/postgres+3.4.9.patch:
// src/ (ESM, what `import 'postgres'` resolves to), cjs/src/ (what `require` resolves to) and
// cf/src/ (workerd's, ESM). The driver tests check each.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
export const ESM_ENTRY = fileURLToPath(import.meta.resolve('postgres'));
export const CJS_ENTRY = require.resolve('postgres');
export const PACKAGE_ROOT = join(dirname(CJS_ENTRY), '..', '..');

export interface DriverCopy {
  name: string;
  /** A module of the copy's src/: an ESM module's namespace, a CommonJS module's exports. */
  load<T>(file: string): Promise<T>;
}

const esm =
  (dir: string) =>
  async <T>(file: string) =>
    (await import(pathToFileURL(join(dir, file)).href)) as T;

export const DRIVER_COPIES: readonly DriverCopy[] = [
  { name: 'ESM (import)', load: esm(dirname(ESM_ENTRY)) },
  { name: 'CommonJS (require)', load: async <T>(file: string) => require(join(dirname(CJS_ENTRY), file)) as T },
  { name: 'workerd (cf)', load: esm(join(PACKAGE_ROOT, 'cf', 'src')) },
];

/** The copies that connect from Node (workerd's opens its sockets through `cloudflare:sockets`). */
export const NODE_DRIVER_COPIES = DRIVER_COPIES.slice(0, 2);

/** Copies as `describe.each` takes them: [name, copy]. */
export const eachCopy = (copies: readonly DriverCopy[] = DRIVER_COPIES) => copies.map((c) => [c.name, c] as const);

/** A module's default export: an ESM namespace's `default`, or a CommonJS module's exports. */
export function defaultExport<T>(module: unknown): T {
  const m = module as { [Symbol.toStringTag]?: string; default?: unknown };
  return (m[Symbol.toStringTag] === 'Module' ? m.default : m) as T;
}
