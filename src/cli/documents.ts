// Reading a JSON document from a file as the API receives a request body: parsed, then checked
// against its schema in openapi.yaml (the contract's request validation), with progress.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { SchemaRegistry } from '../http/schemas.ts';
import { Failure } from './errors.ts';
import type { Progress } from './progress.ts';

export async function readJsonFile(path: string, progress: Progress): Promise<unknown> {
  let size: number;
  try {
    const st = await stat(path);
    if (!st.isFile()) throw new Failure(`${path} is not a file`);
    size = st.size;
  } catch (err) {
    if (err instanceof Failure) throw err;
    throw new Failure(`cannot read ${path}: ${(err as Error).message}`);
  }
  progress.step(`reading ${path}`, size, 'bytes');
  const chunks: Buffer[] = [];
  let read = 0;
  for await (const chunk of createReadStream(path)) {
    chunks.push(chunk as Buffer);
    read += (chunk as Buffer).length;
    progress.update(read);
  }
  progress.end(`read ${path} (${read} bytes)`);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw new Failure(`${path} is not JSON: ${(err as Error).message}`);
  }
}

/** Fails like the API's 400 when the document does not match #/components/schemas/<name>. */
export function checkSchema(doc: unknown, name: string, path: string): void {
  const validate = new SchemaRegistry().validatorAt(`/components/schemas/${name}`);
  if (validate(doc)) return;
  const lines = (validate.errors ?? [])
    .slice(0, 10)
    .map((e) => `\n  body${e.instancePath.replaceAll('/', '.')}: ${e.message ?? 'is invalid'}`)
    .join('');
  throw new Failure(`${path} is not a valid ${name} document:${lines}`);
}
