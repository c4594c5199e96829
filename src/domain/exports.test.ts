import { describe, expect, it } from 'vitest';
import { JsonOutputWriter, exportTemplateScope, templateContextItem, templateItem } from './exports.ts';

const row = (i: number) => ({
  id: i,
  name: `srv-${i} ✓ "quoted" \\ \u2028`,
  description: i % 2 ? '' : 'production 🚀',
  created_at: new Date(Date.UTC(2024, 0, 1, 0, 0, i)),
  json_data: { env: ['prod', 'dev'][i % 2], tags: ['a', null, 1.5], nested: { deep: [{ x: i }] } },
  gone: undefined,
});

describe('JsonOutputWriter', () => {
  it('writes the bytes of JSON.stringify({ items, meta, warnings }) however the items are paged', () => {
    const items = Array.from({ length: 7 }, (_, i) => row(i));
    const meta = { count: items.length, truncated: true };
    const warnings = ['the result was cut at limits.max_items: 7 of 9 rows exported'];
    const expected = Buffer.from(JSON.stringify({ items, meta, warnings }), 'utf8');
    for (const pages of [[7], [1, 6], [3, 0, 3, 1], [1, 1, 1, 1, 1, 1, 1]]) {
      const w = new JsonOutputWriter();
      let at = 0;
      for (const n of pages) {
        w.add(items.slice(at, at + n));
        at += n;
      }
      expect(w.count).toBe(7);
      expect(w.itemBytes).toBe(items.reduce((s, i) => s + Buffer.byteLength(JSON.stringify(i)) + 1, 0));
      expect(Buffer.concat(w.finish(meta, warnings)).equals(expected), `pages ${pages.join(',')}`).toBe(true);
    }
  });

  it('writes an empty export as an empty items array', () => {
    const w = new JsonOutputWriter();
    w.add([]);
    expect(Buffer.concat(w.finish({ count: 0, truncated: false }, [])).toString('utf8')).toBe(
      JSON.stringify({ items: [], meta: { count: 0, truncated: false }, warnings: [] }),
    );
    expect(w.itemBytes).toBe(0);
  });
});

describe('exportTemplateScope', () => {
  it('equals the JSON round trip of the whole context when built from items converted page by page', () => {
    const rows = [row(1), row(2)];
    const scope = { kind: 'objects_in_class' as const, class_id: 4 };
    const meta = { count: 2, truncated: false };
    const whole = JSON.parse(
      JSON.stringify({ items: rows.map((r) => templateItem(scope.kind, r)), meta, warnings: ['w'], scope }),
    ) as unknown;
    const context = exportTemplateScope(
      rows.map((r) => templateContextItem(scope.kind, r)),
      meta,
      ['w'],
      scope,
    );
    expect(context).toStrictEqual(whole);
    expect(Object.keys(context)).toEqual(['items', 'meta', 'warnings', 'scope']);
    expect((context.items as { data: unknown }[])[0]!.data).toEqual(rows[0]!.json_data);
  });
});
