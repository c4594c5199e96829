// The contract as the process reads it: openapi.yaml parsed once, and the ajv setup its schemas
// are validated with (the router's and the schema registry's alike).
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import type { Document } from 'openapi-backend';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
export const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (a: Ajv2020) => Ajv2020;

export const OPENAPI_PATH = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'openapi.yaml');

let cachedDoc: Document | undefined;
/** The contract, parsed once per process. Never mutate it. */
export function openapiDocument(): Document {
  cachedDoc ??= YAML.parse(readFileSync(OPENAPI_PATH, 'utf8')) as Document;
  return cachedDoc;
}

export function newAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true, discriminator: false });
  addFormats(ajv);
  return ajv;
}
