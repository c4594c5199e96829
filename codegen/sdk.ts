// The generated part of the shipped TypeScript SDK (clients/typescript/generated/): the openapi-typescript
// types of openapi.yaml as the SDK's openapi-fetch client uses them, and the operationId → method and
// path table its `call` and `paginate` look operations up in. Written by codegen/generate.ts, so
// `make check` fails when the SDK lags the contract.
import { join } from 'node:path';
import YAML from 'yaml';
import openapiTS, { astToString } from 'openapi-typescript';

const HEADER = '// DO NOT EDIT: written by codegen/generate.ts from openapi.yaml (make codegen).\n';
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;

interface Op {
  operationId?: string;
}

/**
 * openapi-typescript's options for the SDK. `defaultNonNullable: false`: a request member that has a
 * `default` (identity_scope, description, include_total, ...) stays optional, as the contract means
 * it; with the generator's default (true) every such member would have to be passed.
 */
export const SDK_TYPE_OPTIONS = { alphabetize: true, defaultNonNullable: false } as const;

/** The SDK's generated files: [path, content] pairs under clients/typescript/generated/. */
export async function sdkFiles(root: string, specText: string): Promise<[string, string][]> {
  // Parsed here: openapi-typescript annotates the document it is given (discriminator descriptions),
  // so a document another run has seen would give other output.
  const doc = YAML.parse(specText) as { paths: Record<string, Record<string, unknown>> };
  const ast = await openapiTS(doc as never, SDK_TYPE_OPTIONS);
  const schema = HEADER + '/* eslint-disable */\n' + astToString(ast);

  const rows: string[] = [];
  for (const [path, item] of Object.entries(doc.paths).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    for (const method of METHODS) {
      const op = item[method] as Op | undefined;
      if (op?.operationId) rows.push(`  ${op.operationId}: { method: '${method}', path: '${path}' },`);
    }
  }
  const operations =
    HEADER +
    '/** Every operation of openapi.yaml by operationId: its HTTP method and path template. */\n' +
    `export const OPERATIONS = {\n${rows.join('\n')}\n} as const;\n\n` +
    'export type OperationId = keyof typeof OPERATIONS;\n';

  const dir = join(root, 'clients', 'typescript', 'generated');
  return [
    [join(dir, 'schema.ts'), schema],
    [join(dir, 'operations.ts'), operations],
  ];
}
