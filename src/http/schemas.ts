import type { ValidateFunction } from 'ajv/dist/2020.js';
import { newAjv, openapiDocument } from './openapi.ts';

type Json = Record<string, unknown>;
const DOC_ID = 'openapi.json';

/**
 * Compiles validators for schemas at JSON pointers of the raw (not dereferenced) contract, so
 * recursive schemas such as the search expression compile once, by reference.
 */
export class SchemaRegistry {
  private readonly ajv = newAjv();
  private readonly cache = new Map<string, ValidateFunction>();
  readonly doc: Json;

  constructor(doc: Json = openapiDocument() as unknown as Json) {
    this.doc = doc;
    this.ajv.addSchema(Object.assign({}, doc, { $id: DOC_ID }));
  }

  validatorAt(pointer: string): ValidateFunction {
    let v = this.cache.get(pointer);
    if (!v) {
      v = this.ajv.compile({ $ref: `${DOC_ID}#${pointer}` });
      this.cache.set(pointer, v);
    }
    return v;
  }

  /** Follows a `$ref` of a non-schema object (response, parameter, header); returns [object, pointer]. */
  resolve(obj: unknown, pointer: string): [Json, string] {
    let cur = obj as Json;
    let ptr = pointer;
    for (let i = 0; i < 8 && cur && typeof cur.$ref === 'string'; i++) {
      ptr = (cur.$ref as string).replace(/^#/, '');
      cur = this.at(ptr) as Json;
    }
    return [cur, ptr];
  }

  at(pointer: string): unknown {
    let cur: unknown = this.doc;
    for (const raw of pointer.split('/').slice(1)) {
      const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
      cur = (cur as Json | undefined)?.[key];
    }
    return cur;
  }
}

export function escapePointer(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}
