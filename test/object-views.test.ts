// objectJsonText (src/domain/views/objects.ts) writes an object page's JSON directly; it must be
// the text JSON.stringify makes of objectView, member for member and escape for escape. And
// eventJsonText the same for an audit page.
import { describe, expect, it } from 'vitest';
import { objectJsonText, objectView, type ObjectRow } from '../src/domain/views/objects.ts';
import { eventJsonText, eventWire, type EventRow } from '../src/domain/audit.ts';
import { JsonTexts, spliceJsonTexts } from '../src/domain/json-text.ts';

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

// eventJsonText (src/domain/audit.ts) likewise writes an audit page's JSON directly; it must be the
// text of eventWire with its JSON texts spliced in (what the page wrote before), member for member.
describe('eventJsonText', () => {
  const event: EventRow = {
    id: 11,
    event_id: '0b6c3f0e-6a8d-4c1e-9a39-6f1f2f0c9b11',
    occurred_at: '2026-11-28 16:30:00.123456' as unknown as Date,
    entity_type: 'object',
    entity_id: 42,
    entity_name: 'srv-42',
    collection_id: 3,
    action: 'updated',
    actor_kind: 'user',
    actor_user_id: 1,
    initiator_user_id: 1,
    task_id: null,
    provenance:
      '{"actor": {"kind": "user", "principal": {"id": 1, "name": "admin"}}, "task_id": null}' as unknown as EventRow['provenance'],
    request_id: 'req-1',
    correlation_id: null,
    summary: 'object srv-42 updated',
    before: '{"counter": 1}',
    after: '{"counter": 2}',
    before_revision: 1,
    after_revision: 2,
    metadata: '{"class_id": 5}' as unknown as EventRow['metadata'],
    schema_version: 2,
  };
  const cases: [string, Partial<EventRow>][] = [
    ['plain', {}],
    ['no snapshots, no metadata (null: "{}")', { before: null, after: null, metadata: null as unknown as EventRow['metadata'] }],
    ['nulls where columns allow them', { entity_id: null, entity_name: null, collection_id: null, actor_user_id: null, request_id: null }],
    [
      'quotes, control characters, non-ASCII and a lone surrogate',
      { entity_name: 'a "b" \\c\t\u0001 Zürich 🚀', summary: 'x\ud800y\u2028' },
    ],
    ['a Date time', { occurred_at: new Date('2026-01-02T03:04:05.678Z') }],
    ['a task, a worker, a redacted snapshot', { task_id: 9, actor_kind: 'worker', actor_user_id: null, before: null }],
  ];
  for (const [what, over] of cases) {
    it(what, () => {
      const row = { ...event, ...over } as EventRow;
      const texts = new JsonTexts();
      expect(eventJsonText(row)).toBe(spliceJsonTexts(JSON.stringify(eventWire(row, texts)), texts.texts));
    });
  }
});
