import { describe, expect, it } from 'vitest';
import { JsonTexts, spliceJsonTexts } from './json-text.ts';

describe('JSON texts passed through a reply', () => {
  it('replaces each placeholder by its text, wherever it stands', () => {
    const texts = new JsonTexts();
    const body = [
      { id: 1, json_data: texts.add('{"a": 1, "b": [1.50, "x"]}') },
      { id: 2, json_data: texts.add('"just a string"') },
      { id: 3, json_data: texts.add('null'), after: 'tail' },
    ];
    const out = spliceJsonTexts(JSON.stringify(body), texts.texts);
    expect(out).toBe(
      '[{"id":1,"json_data":{"a": 1, "b": [1.50, "x"]}},{"id":2,"json_data":"just a string"},{"id":3,"json_data":null,"after":"tail"}]',
    );
    expect(JSON.parse(out)).toEqual([
      { id: 1, json_data: { a: 1, b: [1.5, 'x'] } },
      { id: 2, json_data: 'just a string' },
      { id: 3, json_data: null, after: 'tail' },
    ]);
  });

  it('leaves text that only looks like a placeholder alone (a literal backslash-u0000 is escaped)', () => {
    const body = { s: '\\u0000', t: '"\\u00000\\u0000"', [`k\\u0000`]: 1 };
    const json = JSON.stringify(body);
    expect(spliceJsonTexts(json, [])).toBe(json);
    expect(JSON.parse(spliceJsonTexts(json, []))).toEqual(body);
  });

  it('refuses a placeholder it has no text for (a bug, never a silent wrong body)', () => {
    const texts = new JsonTexts();
    const body = JSON.stringify({ a: texts.add('1'), b: '\u00007\u0000' });
    expect(() => spliceJsonTexts(body, texts.texts)).toThrow(/no text/);
  });
});
