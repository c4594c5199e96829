import { describe, expect, it } from 'vitest';
import { ApiError, ERROR_STATUS, type ErrorKind } from './errors.ts';

describe('ApiError', () => {
  it('captures no stack frames for a client error (4xx), and keeps them for 503', () => {
    const frames = (e: Error) => (e.stack ?? '').split('\n').filter((l) => l.trimStart().startsWith('at ')).length;
    for (const kind of Object.keys(ERROR_STATUS) as ErrorKind[]) {
      const e = new ApiError(kind, `a ${kind}`);
      expect(e.message).toBe(`a ${kind}`);
      expect(e.stack).toContain(`a ${kind}`);
      if (ERROR_STATUS[kind] < 500) expect(frames(e), kind).toBe(0);
      else expect(frames(e), kind).toBeGreaterThan(0);
    }
    // the process's own setting is left as it was
    const limit = Error.stackTraceLimit;
    new ApiError('not_found', 'x');
    expect(Error.stackTraceLimit).toBe(limit);
    expect(frames(new Error('plain'))).toBeGreaterThan(0);
  });
});
