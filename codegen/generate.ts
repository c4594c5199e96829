// openapi.yaml → generated/openapi.ts (openapi-typescript types) and generated/operations.ts
// (operationId → method, path, tag), and the generated part of the shipped SDK (codegen/sdk.ts:
// clients/typescript/generated/). Deterministic: `make check` fails when any of them is stale.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import openapiTS, { astToString } from 'openapi-typescript';
import { syncSpecBlocks } from './spec-blocks.ts';
import { permissionNamesSource, sdkFiles } from './sdk.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const HEADER = '// DO NOT EDIT: written by codegen/generate.ts from openapi.yaml (make codegen).\n';
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

interface Op {
  operationId?: string;
  tags?: string[];
}

export async function generate(check = false): Promise<boolean> {
  // The generated blocks of openapi.yaml first (list filter parameters): the types follow from them.
  const { text, changed: specStale } = syncSpecBlocks(join(root, 'openapi.yaml'), check);
  const doc = YAML.parse(text) as { paths: Record<string, Record<string, Op>> };
  const ast = await openapiTS(doc as never, { alphabetize: true });
  const types = HEADER + '/* eslint-disable */\n' + astToString(ast);

  const rows: string[] = [];
  const ids = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      if (!op.operationId) throw new Error(`${method} ${path} has no operationId`);
      if (ids.has(op.operationId)) throw new Error(`operationId ${op.operationId} is used twice`);
      ids.add(op.operationId);
      rows.push(`  ${op.operationId}: { method: '${method}', path: '${path}', tag: '${op.tags?.[0] ?? 'default'}' },`);
    }
  }
  const table =
    HEADER +
    `export const operations = {\n${rows.join('\n')}\n} as const;\n\n` +
    `export type OperationId = keyof typeof operations;\n` +
    `export type Tag = (typeof operations)[OperationId]['tag'];\n\n` +
    permissionNamesSource(doc as never);

  const outDir = join(root, 'generated');
  mkdirSync(outDir, { recursive: true });
  const files: [string, string][] = [
    [join(outDir, 'openapi.ts'), types],
    [join(outDir, 'operations.ts'), table],
    ...(await sdkFiles(root, text)),
  ];
  let stale = specStale;
  for (const [file, content] of files) {
    let current = '';
    try {
      current = readFileSync(file, 'utf8');
    } catch {
      current = '';
    }
    if (current !== content) {
      stale = true;
      if (!check) {
        mkdirSync(dirname(file), { recursive: true });
        writeFileSync(file, content);
      }
    }
  }
  return stale;
}

const check = process.argv.includes('--check');
const stale = await generate(check);
if (check && stale) {
  console.error('generated/ or clients/typescript/generated/ is stale: run `make codegen` and commit the result');
  process.exit(1);
}
console.log(check ? 'generated/ is up to date' : stale ? 'generated/ written' : 'generated/ unchanged');
