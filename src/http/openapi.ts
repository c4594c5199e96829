// The contract as the process reads it: openapi.yaml parsed once, and the ajv setup its schemas
// are validated with (the router's and the schema registry's alike).
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import type { Document } from 'openapi-backend';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
export const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (a: Ajv2020) => Ajv2020;

export const OPENAPI_PATH = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'openapi.yaml');

/**
 * Where the parsed contract is kept as JSON between processes (node_modules/.cache, as build tools
 * keep theirs): parsing the 1.6 MB of YAML takes seconds and grows the heap by some 100 MB that the
 * process then keeps; JSON.parse of the same document takes some 30 ms.
 */
const CACHE_DIR = join(dirname(OPENAPI_PATH), 'node_modules', '.cache', 'inventory-data-service');

let cachedDoc: Document | undefined;
/** The contract, parsed once per process. Never mutate it. */
export function openapiDocument(): Document {
  cachedDoc ??= loadContract();
  return cachedDoc;
}

/**
 * openapi.yaml as parsed by `yaml`, read from the JSON cache when it holds this very text (named
 * by its SHA-256), else parsed and cached for the next process (written to a temporary file and
 * renamed, so a reader never sees half of it; a cache that cannot be written is skipped).
 */
function loadContract(): Document {
  const text = readFileSync(OPENAPI_PATH, 'utf8');
  const name = `openapi-${createHash('sha256').update(text).digest('hex').slice(0, 32)}.json`;
  const cached = join(CACHE_DIR, name);
  try {
    return JSON.parse(readFileSync(cached, 'utf8')) as Document;
  } catch {
    // not cached yet (or unreadable): parse it
  }
  const doc = YAML.parse(text) as Document;
  try {
    mkdirSync(CACHE_DIR, { recursive: true });
    const tmp = `${cached}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(doc));
    renameSync(tmp, cached);
    for (const old of readdirSync(CACHE_DIR)) {
      if (/^openapi-[0-9a-f]+\.json$/.test(old) && old !== name) rmSync(join(CACHE_DIR, old), { force: true });
    }
  } catch {
    // a read-only installation: every process parses the YAML
  }
  return doc;
}

export function newAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true, discriminator: false });
  addFormats(ajv);
  return ajv;
}
