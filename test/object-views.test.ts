// objectJsonText (src/domain/views/objects.ts) writes an object page's JSON directly; it must be
// the text JSON.stringify makes of objectView, member for member and escape for escape.
import { describe, expect, it } from 'vitest';
import { objectJsonText, objectView, type ObjectRow } from '../src/domain/views/objects.ts';

const base: ObjectRow = {
  id: 7,
  name: 'srv-1',
  description: 'a server',
  collection_id: 3,
  class_id: 5,
  json_data: { a: 1 },
  created_at: '2026-11-28 13:08:08.123456',
  updated_at: '2026-11-28 13:08:09',
  revision: 2,
};

describe('objectJsonText', () => {
  const cases: [string, Partial<ObjectRow>][] = [
    ['plain', {}],
    ['quotes, backslashes and control characters', { name: 'a "b" \\c\t\n\u0001', description: '\u007f\u2028\u2029' }],
    ['non-ASCII and a lone surrogate', { name: 'Zürich – 東京 🚀', description: 'x\ud800y' }],
    ['an empty description', { description: '' }],
    ['large ids and revision', { id: 2147483647, collection_id: 1, class_id: 2147483646, revision: 999999 }],
    ['Date times', { created_at: new Date('2026-01-02T03:04:05.678Z'), updated_at: new Date(0) }],
    ['times the database wrote outside the ISO form', { created_at: 'infinity', updated_at: '10000-01-01 00:00:00' }],
    ['nested and unusual JSON', { json_data: { s: 'é"\\', n: [1.5, -0, 1e21, null], o: { deep: { x: true } }, e: {} } }],
    ['JSON that is not an object', { json_data: ['a', 2] }],
  ];
  for (const [what, over] of cases) {
    it(what, () => {
      const row = { ...base, ...over };
      const text = objectJsonText({ ...row, json_data: JSON.stringify(row.json_data) });
      expect(text).toBe(JSON.stringify(objectView(row)));
    });
  }
});
