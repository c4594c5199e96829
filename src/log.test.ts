import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createLogger } from './log.ts';

describe('createLogger', () => {
  it('writes JSON lines and redacts credentials wherever they appear', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const log = createLogger('info', sink);
    log.info({ password: 'hunter2', body: { token: 'raw-token', secret: 'shh' }, headers: { authorization: 'Bearer abc' } }, 'request');
    expect(lines).toHaveLength(1);
    const entry = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(entry.msg).toBe('request');
    const text = lines[0]!;
    for (const secret of ['hunter2', 'raw-token', 'shh', 'Bearer abc']) expect(text).not.toContain(secret);
    expect(pino.levels.values.info).toBe(entry.level);
  });
});
