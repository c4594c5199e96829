import { describe, expect, it } from 'vitest';
import { applyJsonPatch, jsonEqual, JsonPatchError, mergeMembers, parsePointer, type JsonPatchErrorKind } from './json-patch.ts';
import { applyMergePatch } from './merge-patch.ts';
import { patchSettings, checkSettingsDocument } from './settings.ts';

function failure(fn: () => unknown): JsonPatchError {
  try {
    fn();
  } catch (err) {
    if (err instanceof JsonPatchError) return err;
    throw err;
  }
  throw new Error('expected a JsonPatchError');
}

const fails = (kind: JsonPatchErrorKind, fn: () => unknown) => expect(failure(fn).kind).toBe(kind);
const apply = (doc: unknown, patch: unknown, requireObjectRoot = false) => applyJsonPatch(doc, patch, { requireObjectRoot });

describe('JSON Pointer (RFC 6901)', () => {
  it('parses and unescapes', () => {
    expect(parsePointer('')).toEqual([]);
    expect(parsePointer('/')).toEqual(['']);
    expect(parsePointer('/a~1b/m~0n/0')).toEqual(['a/b', 'm~n', '0']);
    expect(parsePointer('/~01')).toEqual(['~1']);
  });

  it('rejects a pointer without a leading slash or with a bad escape', () => {
    fails('invalid_patch', () => parsePointer('a'));
    fails('invalid_patch', () => parsePointer('/a~2'));
    fails('invalid_patch', () => parsePointer('/a~'));
  });

  it('allows 128 segments and rejects 129', () => {
    expect(parsePointer('/a'.repeat(128))).toHaveLength(128);
    fails('limit_exceeded', () => parsePointer('/a'.repeat(129)));
  });
});

describe('JSON Patch (RFC 6902) appendix A examples', () => {
  it('A.1 add an object member', () => {
    expect(apply({ foo: 'bar' }, [{ op: 'add', path: '/baz', value: 'qux' }])).toEqual({ baz: 'qux', foo: 'bar' });
  });
  it('A.2 add an array element', () => {
    expect(apply({ foo: ['bar', 'baz'] }, [{ op: 'add', path: '/foo/1', value: 'qux' }])).toEqual({ foo: ['bar', 'qux', 'baz'] });
  });
  it('A.3 remove an object member', () => {
    expect(apply({ baz: 'qux', foo: 'bar' }, [{ op: 'remove', path: '/baz' }])).toEqual({ foo: 'bar' });
  });
  it('A.4 remove an array element', () => {
    expect(apply({ foo: ['bar', 'qux', 'baz'] }, [{ op: 'remove', path: '/foo/1' }])).toEqual({ foo: ['bar', 'baz'] });
  });
  it('A.5 replace a value', () => {
    expect(apply({ baz: 'qux', foo: 'bar' }, [{ op: 'replace', path: '/baz', value: 'boo' }])).toEqual({ baz: 'boo', foo: 'bar' });
  });
  it('A.6 move a value', () => {
    const doc = { foo: { bar: 'baz', waldo: 'fred' }, qux: { corge: 'grault' } };
    expect(apply(doc, [{ op: 'move', from: '/foo/waldo', path: '/qux/thud' }])).toEqual({
      foo: { bar: 'baz' },
      qux: { corge: 'grault', thud: 'fred' },
    });
  });
  it('A.7 move an array element', () => {
    expect(apply({ foo: ['all', 'grass', 'cows', 'eat'] }, [{ op: 'move', from: '/foo/1', path: '/foo/3' }])).toEqual({
      foo: ['all', 'cows', 'eat', 'grass'],
    });
  });
  it('A.8 test succeeds', () => {
    const doc = { baz: 'qux', foo: ['a', 2, 'c'] };
    expect(
      apply(doc, [
        { op: 'test', path: '/baz', value: 'qux' },
        { op: 'test', path: '/foo/1', value: 2 },
      ]),
    ).toEqual(doc);
  });
  it('A.9 test fails', () => {
    fails('operation_failed', () => apply({ baz: 'qux' }, [{ op: 'test', path: '/baz', value: 'bar' }]));
  });
  it('A.10 add a nested member object', () => {
    expect(apply({ foo: 'bar' }, [{ op: 'add', path: '/child', value: { grandchild: {} } }])).toEqual({
      foo: 'bar',
      child: { grandchild: {} },
    });
  });
  it('A.12 add to a nonexistent target fails', () => {
    fails('operation_failed', () => apply({ foo: 'bar' }, [{ op: 'add', path: '/baz/bat', value: 'qux' }]));
  });
  it('A.14 ~ escape ordering', () => {
    expect(apply({ '/': 9, '~1': 10 }, [{ op: 'test', path: '/~01', value: 10 }])).toEqual({ '/': 9, '~1': 10 });
  });
  it('A.15 comparing strings and numbers fails', () => {
    fails('operation_failed', () => apply({ '/': 9, '~1': 10 }, [{ op: 'test', path: '/~01', value: '10' }]));
  });
  it('A.16 add an array value', () => {
    expect(apply({ foo: ['bar'] }, [{ op: 'add', path: '/foo/-', value: ['abc', 'def'] }])).toEqual({ foo: ['bar', ['abc', 'def']] });
  });
});

describe('JSON Patch operations', () => {
  it('copy deep-copies the value', () => {
    const out = apply({ a: { b: [1] } }, [
      { op: 'copy', from: '/a', path: '/c' },
      { op: 'add', path: '/c/b/-', value: 2 },
    ]) as { a: { b: number[] }; c: { b: number[] } };
    expect(out).toEqual({ a: { b: [1] }, c: { b: [1, 2] } });
  });

  it('replace and add at the root', () => {
    expect(apply({ a: 1 }, [{ op: 'replace', path: '', value: { b: 2 } }])).toEqual({ b: 2 });
    expect(apply({ a: 1 }, [{ op: 'add', path: '', value: { c: 3 } }])).toEqual({ c: 3 });
  });

  it('add replaces an existing member; replace and remove need one', () => {
    expect(apply({ a: 1 }, [{ op: 'add', path: '/a', value: 2 }])).toEqual({ a: 2 });
    fails('operation_failed', () => apply({ a: 1 }, [{ op: 'replace', path: '/b', value: 2 }]));
    fails('operation_failed', () => apply({ a: 1 }, [{ op: 'remove', path: '/b' }]));
    fails('operation_failed', () => apply({ a: 1 }, [{ op: 'remove', path: '' }]));
  });

  it('array index rules: "-" only for add, no leading zeros, bounds', () => {
    fails('operation_failed', () => apply({ a: [1] }, [{ op: 'remove', path: '/a/-' }]));
    fails('operation_failed', () => apply({ a: [1, 2] }, [{ op: 'remove', path: '/a/01' }]));
    fails('operation_failed', () => apply({ a: [1] }, [{ op: 'add', path: '/a/2', value: 0 }]));
    fails('operation_failed', () => apply({ a: [1] }, [{ op: 'replace', path: '/a/1', value: 0 }]));
    expect(apply({ a: [1] }, [{ op: 'add', path: '/a/1', value: 0 }])).toEqual({ a: [1, 0] });
  });

  it('move into its own child fails; move onto itself is a no-op', () => {
    fails('operation_failed', () => apply({ a: { b: {} } }, [{ op: 'move', from: '/a', path: '/a/b/c' }]));
    expect(apply({ a: 1 }, [{ op: 'move', from: '/a', path: '/a' }])).toEqual({ a: 1 });
    fails('operation_failed', () => apply({ a: 1 }, [{ op: 'move', from: '/x', path: '/y' }]));
    fails('operation_failed', () => apply({ a: 1 }, [{ op: 'copy', from: '/x', path: '/y' }]));
  });

  it('test compares objects recursively regardless of member order, arrays in order, numbers by value', () => {
    const doc = { o: { x: 1, y: [1, { z: null }] }, n: 1 };
    expect(apply(doc, [{ op: 'test', path: '/o', value: { y: [1.0, { z: null }], x: 1.0 } }])).toEqual(doc);
    expect(apply(doc, [{ op: 'test', path: '/n', value: 1 }])).toEqual(doc);
    fails('operation_failed', () => apply(doc, [{ op: 'test', path: '/o/y', value: [{ z: null }, 1] }]));
    fails('operation_failed', () => apply(doc, [{ op: 'test', path: '/o', value: { x: 1 } }]));
    fails('operation_failed', () => apply(doc, [{ op: 'test', path: '/o', value: { x: 1, y: [1, { z: null }], w: 0 } }]));
    fails('operation_failed', () => apply(doc, [{ op: 'test', path: '/missing', value: null }]));
    expect(jsonEqual({ a: [1, 2] }, { a: [1, 2] })).toBe(true);
    expect(jsonEqual(null, {})).toBe(false);
    expect(jsonEqual([], {})).toBe(false);
  });

  it('is atomic: a failing operation leaves the input untouched', () => {
    const doc = { a: 1, list: [1, 2] };
    const before = JSON.stringify(doc);
    fails('operation_failed', () =>
      apply(doc, [
        { op: 'add', path: '/b', value: 2 },
        { op: 'remove', path: '/list/0' },
        { op: 'test', path: '/a', value: 2 },
      ]),
    );
    expect(JSON.stringify(doc)).toBe(before);
  });

  it('reports the index of the failing operation', () => {
    const err = failure(() =>
      apply({}, [
        { op: 'add', path: '/a', value: 1 },
        { op: 'remove', path: '/zzz' },
      ]),
    );
    expect(err.operationIndex).toBe(1);
    expect(err.status).toBe(409);
  });

  it('rejects malformed operations with invalid_patch (400)', () => {
    fails('invalid_patch', () => apply({}, { op: 'add' }));
    fails('invalid_patch', () => apply({}, [{ op: 'nope', path: '/a' }]));
    fails('invalid_patch', () => apply({}, [{ op: 'add', path: '/a' }]));
    fails('invalid_patch', () => apply({}, [{ op: 'move', path: '/a' }]));
    fails('invalid_patch', () => apply({}, [{ op: 'add', path: 'a', value: 1 }]));
    fails('invalid_patch', () => apply({}, ['add']));
    expect(failure(() => apply({}, [{ op: 'add', path: 'a', value: 1 }])).status).toBe(400);
  });

  it('never touches prototypes: __proto__ is an ordinary member', () => {
    const out = apply({}, [
      { op: 'add', path: '/__proto__', value: { polluted: true } },
      { op: 'add', path: '/__proto__/x', value: 1 },
    ]) as Record<string, unknown>;
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(out))).toEqual(JSON.parse('{"__proto__":{"polluted":true,"x":1}}'));
    fails('operation_failed', () => apply({}, [{ op: 'add', path: '/__proto__/x', value: 1 }]));
    fails('operation_failed', () => apply({}, [{ op: 'add', path: '/constructor/x', value: 1 }]));
    fails('operation_failed', () => apply({}, [{ op: 'test', path: '/toString', value: null }]));
  });

  it('requires an object root when asked', () => {
    fails('invalid_result', () => applyJsonPatch({}, [{ op: 'replace', path: '', value: [1] }]));
    expect(failure(() => applyJsonPatch({}, [{ op: 'replace', path: '', value: 1 }])).status).toBe(400);
    expect(applyJsonPatch({}, [{ op: 'replace', path: '', value: [1] }], { requireObjectRoot: false })).toEqual([1]);
  });
});

describe('JSON Patch limits', () => {
  const MiB = 1024 * 1024;

  it('1,000 operations pass, 1,001 are rejected', () => {
    const ops = Array.from({ length: 1000 }, (_, i) => ({ op: 'add', path: `/k${i}`, value: i }));
    expect(Object.keys(apply({}, ops) as object)).toHaveLength(1000);
    fails('limit_exceeded', () => apply({}, [...ops, { op: 'add', path: '/x', value: 0 }]));
  });

  it('documents and results over 2 MiB are rejected', () => {
    const big = 'x'.repeat(2 * MiB);
    fails('limit_exceeded', () => apply({ big }, [{ op: 'remove', path: '/big' }]));
    const half = 'y'.repeat(MiB);
    fails('limit_exceeded', () =>
      apply({ a: half }, [
        { op: 'copy', from: '/a', path: '/b' },
        { op: 'copy', from: '/a', path: '/c' },
      ]),
    );
    const justUnder = 'z'.repeat(2 * MiB - 20);
    expect(apply({}, [{ op: 'add', path: '/a', value: justUnder }])).toEqual({ a: justUnder });
  });

  it('pointers with more than 128 segments are rejected in path and from', () => {
    fails('limit_exceeded', () => apply({}, [{ op: 'add', path: '/a'.repeat(129), value: 1 }]));
    fails('limit_exceeded', () => apply({}, [{ op: 'copy', from: '/a'.repeat(129), path: '/b' }]));
  });

  it('64 nested containers pass, 65 are rejected (values, documents and results)', () => {
    const nest = (n: number): unknown => (n === 0 ? 1 : { a: nest(n - 1) });
    // The root object is one container: a value of 63 inside it makes 64.
    expect(apply({}, [{ op: 'add', path: '/v', value: nest(63) }])).toBeTruthy();
    fails('limit_exceeded', () => apply({}, [{ op: 'add', path: '/v', value: nest(64) }]));
    fails('limit_exceeded', () => apply(nest(65), [{ op: 'test', path: '', value: null }]));
    // Two values that each fit, combined deeper than the limit.
    fails('limit_exceeded', () =>
      apply({ x: nest(40) }, [
        { op: 'add', path: '/y', value: nest(40) },
        { op: 'move', from: '/y', path: '/x/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a' },
      ]),
    );
    // A hostile depth is reported, not a stack overflow.
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    fails('limit_exceeded', () => apply({}, [{ op: 'add', path: '/d', value: deep }]));
  });

  it('cumulative work over 32 MiB is rejected even when the result stays small', () => {
    const chunk = 'w'.repeat(MiB);
    const ops: unknown[] = [];
    for (let i = 0; i < 40; i++) ops.push({ op: 'copy', from: '/a', path: '/b' }, { op: 'remove', path: '/b' });
    fails('limit_exceeded', () => apply({ a: chunk }, ops));
    // The same pattern within the budget passes.
    expect(apply({ a: chunk }, ops.slice(0, 20))).toEqual({ a: chunk });
    // Repeated tests count compared bytes too.
    const tests = Array.from({ length: 20 }, () => ({ op: 'test', path: '/a', value: chunk }));
    fails('limit_exceeded', () => apply({ a: chunk }, tests));
  });
});

describe('mergeMembers', () => {
  it('copies as { ...a, ...b }: same members, same order, later ones replacing earlier ones in place', () => {
    const a = { x: 1, y: 2, 3: 'n' };
    const b = { z: 3, x: 4 };
    const out = mergeMembers(a, b);
    expect(out).toEqual({ ...a, ...b });
    expect(Object.keys(out)).toEqual(Object.keys({ ...a, ...b }));
    expect(mergeMembers(undefined, b)).toEqual(b);
    expect(mergeMembers(a, null)).not.toBe(a);
  });

  it('keeps an own __proto__ member of parsed JSON a member', () => {
    const parsed = JSON.parse('{"a":1,"__proto__":{"polluted":true},"b":2}') as Record<string, unknown>;
    const out = mergeMembers(parsed, { c: 3 }) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect((out as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.keys(out)).toEqual(['a', '__proto__', 'b', 'c']);
    expect(JSON.stringify(out)).toBe(JSON.stringify({ ...parsed, c: 3 }));
  });
});

describe('JSON Merge Patch (RFC 7396) appendix A', () => {
  const cases: [unknown, unknown, unknown][] = [
    [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
    [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
    [{ a: 'b' }, { a: null }, {}],
    [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
    [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
    [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
    [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
    [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
    [
      ['a', 'b'],
      ['c', 'd'],
      ['c', 'd'],
    ],
    [{ a: 'b' }, ['c'], ['c']],
    [{ a: 'foo' }, null, null],
    [{ a: 'foo' }, 'bar', 'bar'],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: 'b', c: null }, { a: 'b' }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
  ];
  it.each(cases)('%j + %j', (target, patch, expected) => {
    const before = JSON.stringify(target);
    expect(applyMergePatch(target, patch)).toEqual(expected);
    expect(JSON.stringify(target)).toBe(before);
  });

  it('__proto__ in a merge patch is an ordinary member', () => {
    const out = applyMergePatch({}, JSON.parse('{"__proto__":{"polluted":true}}')) as object;
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(out)).toEqual(['__proto__']);
  });
});

describe('settings documents', () => {
  it('PATCH picks semantics by media type', () => {
    expect(patchSettings({ a: 1, b: 2 }, 'application/json', { a: null })).toEqual({ b: 2 });
    expect(patchSettings({ a: 1 }, 'application/merge-patch+json', { c: { d: 1 } })).toEqual({ a: 1, c: { d: 1 } });
    expect(patchSettings({ a: 1 }, 'application/json-patch+json', [{ op: 'remove', path: '/a' }])).toEqual({});
  });

  it('merge patch keeps nested nulls out, PUT keeps them', () => {
    expect(checkSettingsDocument({ a: { b: null } })).toEqual({ a: { b: null } });
    fails('invalid_result', () => checkSettingsDocument([1]));
    fails('invalid_patch', () => patchSettings({}, 'application/json', [1]));
  });

  it('limits apply to merge-patched and replaced documents', () => {
    const nest = (n: number): unknown => (n === 0 ? 1 : { a: nest(n - 1) });
    fails('limit_exceeded', () => checkSettingsDocument({ v: nest(64) }));
    expect(checkSettingsDocument({ v: nest(63) })).toBeTruthy();
    fails('limit_exceeded', () => patchSettings({}, 'application/json', { v: nest(64) }));
    fails('limit_exceeded', () => checkSettingsDocument({ s: 'x'.repeat(2 * 1024 * 1024) }));
  });
});
