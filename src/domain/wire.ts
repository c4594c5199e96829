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
 * A date-time member as the text JSON.stringify would write for a Date (ISO 8601, UTC,
 * milliseconds), made here: serializing a Date calls its toJSON through V8's slow path, ~1.5 µs
 * per object with two of them, which a page of 100 objects pays 100 times. Takes a Date, ISO text
 * as it is, or the database's text of a UTC timestamp (`(t at time zone 'UTC')::text`, e.g.
 * `2026-11-25 06:25:27.123456`: reads that select it so skip the driver's Date parsing too), whose
 * fraction is cut to milliseconds as a Date would.
 */
export function isoTime(d: Date | string): string {
  if (typeof d !== 'string') return d.toISOString();
  if (!PG_UTC.test(d)) return d;
  const ms = d.length > 20 ? d.slice(20, 23).padEnd(3, '0') : '000';
  return `${d.slice(0, 10)}T${d.slice(11, 19)}.${ms}Z`;
}

/**
 * JSON.stringify(isoTime(d)), written as a template: the ISO text needs no escape, and quoting it
 * in the template instead of calling JSON.stringify spares flattening the text isoTime built (an
 * object page's 200 times: ~94 -> ~73 µs for writing the page, timed alone; bench/FINDINGS.md,
 * 2026-12-07, tenth session). A text isoTime passes through as it is goes through JSON.stringify.
 */
export function isoTimeJson(d: Date | string): string {
  const iso = isoTime(d);
  return iso === d ? JSON.stringify(d) : `"${iso}"`;
}

/** PostgreSQL's text of a timestamp (DateStyle ISO, as the driver's own Date parsing assumes), years 0001-9999. */
const PG_UTC = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?$/;
