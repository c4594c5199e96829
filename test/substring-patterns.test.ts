// The texts every match of a `like` or `regex` filter's pattern must hold (src/db/substring-stats.ts),
// by which a pattern is judged rare in a large objects table. Where a pattern has them, strings that
// PostgreSQL matches against it are checked to hold every one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { likeRequiredTexts, regexRequiredTexts } from '../src/db/substring-stats.ts';
import { startTestApp, uniq, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

/** Whether PostgreSQL matches `s` against the pattern. */
async function pgMatches(op: 'like' | 'regex', s: string, pattern: string): Promise<boolean> {
  const [row] =
    op === 'like'
      ? await t.deps.sql<{ m: boolean }[]>`select ${s}::text like ${pattern}::text as m`
      : await t.deps.sql<{ m: boolean }[]>`select ${s}::text ~ ${pattern}::text as m`;
  return row!.m;
}

/** Each string matches its pattern in PostgreSQL and holds every text the pattern requires. */
async function expectHeld(op: 'like' | 'regex', cases: [string, string[]][]): Promise<void> {
  for (const [pattern, strings] of cases) {
    const texts = (op === 'like' ? likeRequiredTexts(pattern) : regexRequiredTexts(pattern))!;
    for (const s of strings) {
      expect(await pgMatches(op, s, pattern), `${s} ${op} ${pattern}`).toBe(true);
      for (const text of texts) expect(s).toContain(text);
    }
  }
}

describe('the texts a LIKE pattern requires', () => {
  it.each([
    ['%beef%', ['beef']],
    ['srv-%-12', ['srv-', '-12']],
    ['a_bcd%e', ['a', 'bcd', 'e']],
    ['100\\%%', ['100%']],
    ['x\\_y%', ['x_y']],
    ['%', []],
    ['', []],
  ])('%s requires %j', async (pattern, texts) => {
    expect(likeRequiredTexts(pattern)).toEqual(texts);
  });

  it('a pattern PostgreSQL refuses (ending in the escape character) is not read', async () => {
    expect(likeRequiredTexts('abc\\')).toBeUndefined();
    await expect(pgMatches('like', 'abcd', 'abc\\')).rejects.toThrow(/escape/i);
  });

  it('strings PostgreSQL matches hold them', async () => {
    const cases: [string, string[]][] = [
      ['%beef%', ['beef', 'xbeefy', 'srv-beef-1']],
      ['a_bcd%e', ['axbcde', 'a-bcd--e']],
      ['100\\%%', ['100%', '100% sure']],
    ];
    await expectHeld('like', cases);
  });
});

describe('the texts a regular expression requires', () => {
  it.each([
    ['beef', ['beef']],
    ['^srv-[0-9]+-beef$', ['srv-', '-beef']],
    ['^srv-\\d+\\.example\\.net$', ['srv-', '.example.net']],
    ['abcd?e', ['abc', 'e']],
    ['abc+d', ['abc', 'd']],
    ['ab*cdef', ['a', 'cdef']],
    ['x{2}yz', ['yz']],
    ['(beef)+host', ['host']],
    ['pre(?:fix)?-name', ['pre', '-name']],
    ['[a-z]beef[^x]', ['beef']],
    ['[]ab]cdef', ['cdef']],
    ['[[:digit:]]+-rack', ['-rack']],
    ['***=a.b*c', ['a.b*c']],
    ['.*', []],
  ])('%s requires %j', async (pattern, texts) => {
    expect(regexRequiredTexts(pattern)).toEqual(texts);
  });

  it.each([
    ['alternation', 'beef|cafe'],
    ['alternation in a group', 'srv-(a|b)'],
    ['embedded options', '(?i)beef'],
    ['a director', '***:beef'],
    ['an escape of a letter', 'beef\\y'],
    ['a back reference', '(a)bcd\\1'],
    ['an unclosed bracket', 'beef[abc'],
    ['an unclosed group', 'beef(abc'],
    ['an unclosed bound', 'beef{2'],
  ])('none for %s (%s)', async (_what, pattern) => {
    expect(regexRequiredTexts(pattern)).toBeUndefined();
  });

  it('strings PostgreSQL matches hold them', async () => {
    const cases: [string, string[]][] = [
      ['^srv-[0-9]+-beef$', ['srv-12-beef', 'srv-0-beef']],
      ['^srv-\\d+\\.example\\.net$', ['srv-7.example.net']],
      ['abcd?e', ['abce', 'abcde']],
      ['ab*cdef', ['acdef', 'abbbcdef']],
      ['(beef)+host', ['beefhost', 'beefbeefhost']],
      ['pre(?:fix)?-name', ['pre-name', 'prefix-name']],
      ['[]ab]cdef', [']cdef', 'acdef']],
      ['[[:digit:]]+-rack', ['12-rack']],
      ['***=a.b*c', ['xa.b*cx']],
    ];
    await expectHeld('regex', cases);
  });

  it('a pattern whose backtracking would be exponential is read in linear time, never run', () => {
    // (a+)+$ against a long run of a's and one b takes a backtracking engine 2^n steps
    expect(regexRequiredTexts('(a+)+$')).toEqual([]);
    expect(regexRequiredTexts(`^(${'a?'.repeat(40)})${'a'.repeat(40)}$`)).toEqual(['a'.repeat(40)]);
  });
});

// PostgreSQL refuses a LIKE pattern that ends in its escape character only when a match reaches its
// end: over some rows a 500 (invalid_escape_sequence), over others an empty page. Such a pattern is
// a 400 before any row is read, wherever a filter takes one.
describe('a LIKE pattern ending in the escape character', () => {
  it('is a 400 in a list filter, negated, on JSON data, in a related filter and in a structured search', async () => {
    const col = await t.request('POST', '/api/v1/collections', { body: { name: uniq('likes') } });
    expect(col.status, col.text).toBe(201);
    const cls = await t.request('POST', '/api/v1/classes', {
      body: { name: uniq('likes'), collection_id: (col.body as { id: number }).id },
    });
    expect(cls.status, cls.text).toBe(201);
    const classId = (cls.body as { id: number }).id;
    // a row the pattern's end would be reached on ('abc' then the escape)
    const obj = await t.request('POST', `/api/v1/classes/${classId}/objects`, { body: { name: 'abcd', json_data: { host: 'abcd' } } });
    expect(obj.status, obj.text).toBe(201);
    const list = `/api/v1/classes/${classId}/objects`;
    for (const query of <Record<string, string>[]>[
      { name__like: 'abc\\' },
      { name__not_like: 'abc\\' },
      { description__like: '\\\\\\' },
      { json_data__like: 'host=abc\\' },
      { 'related.r.class.id': String(classId), 'related.r.object.name__like': 'abc\\' },
    ]) {
      const res = await t.request('GET', list, { query });
      expect(res.status, `${JSON.stringify(query)}: ${res.text}`).toBe(400);
      expect((res.body as { message: string }).message).toMatch(/escape character/);
    }
    // an escaped backslash at the end is a backslash
    for (const query of <Record<string, string>[]>[{ name__like: 'abc\\\\' }, { name__like: 'abc%' }]) {
      const res = await t.request('GET', list, { query });
      expect(res.status, `${JSON.stringify(query)}: ${res.text}`).toBe(200);
    }
    const search = await t.request('POST', '/api/v1/search', {
      body: {
        version: 1,
        target: { kind: 'object', class: { id: classId } },
        filter: { op: 'field', predicate: { field: 'name', operator: 'like', value: 'abc\\' } },
      },
    });
    expect(search.status, search.text).toBe(400);
    expect(search.text, search.text).toMatch(/escape character/);
  });
});
