// The contract's JSON bodies as the code builds them (views, handlers): generated/openapi.ts types,
// named by operation and status so schema renames in openapi.yaml do not reach the code.
import type { operations } from '../../generated/openapi.ts';

/**
 * A JSON value as handlers may hand it to the renderer: the contract's type, where a string may
 * also be a Date (JSON.stringify writes it as ISO 8601 text, which is what date-time members hold).
 */
export type Wire<T> = T extends string
  ? string extends T
    ? string | Date
    : T
  : T extends readonly (infer U)[]
    ? Wire<U>[]
    : T extends object
      ? { [P in keyof T]: Wire<T[P]> }
      : T;

/** The JSON body operation K declares for status S (a view's return type). */
export type ResponseBody<K extends keyof operations, S extends keyof operations[K]['responses']> = Wire<
  operations[K]['responses'][S] extends { content: { 'application/json': infer B } } ? B : never
>;

/**
 * A date-time member as the text JSON.stringify would write for it (ISO 8601, UTC, milliseconds),
 * made here: serializing a Date calls its toJSON through V8's slow path, ~1.5 µs per object with
 * two of them, which a page of 100 objects pays 100 times.
 */
export function isoTime(d: Date | string): string {
  return typeof d === 'string' ? d : d.toISOString();
}
