import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createLogger, LOG_BUFFER_MAX_BYTES, writeInfoLine } from './log.ts';

/** A stream that keeps each line written to it. */
function captured(): { lines: string[]; sink: Writable } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { lines, sink };
}

describe('createLogger', () => {
  it('writes JSON lines and redacts credentials wherever they appear', () => {
    const { lines, sink } = captured();
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

describe('writeInfoLine', () => {
  it("writes to the logger's stream the line pino would write for the same fields, unredacted", () => {
    const { lines, sink } = captured();
    const log = createLogger('info', sink);
    const fields = { request_id: 'r-1', correlation_id: null, route: '/a "b"\n', status: 200, duration_ms: 0.4, token: 'raw' };
    const before = Date.now();
    writeInfoLine(
      log,
      Object.entries(fields)
        .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`)
        .join(','),
      'request',
    );
    const after = Date.now();
    const plain = pino({ level: 'info', base: undefined }, sink);
    plain.info(fields, 'request');
    log.info({ token: 'raw-token' }, 'redacted still');
    expect(lines).toHaveLength(3);
    const time = (line: string): number => (JSON.parse(line) as { time: number }).time;
    expect(time(lines[0]!)).toBeGreaterThanOrEqual(before);
    expect(time(lines[0]!)).toBeLessThanOrEqual(after);
    // The same text, byte for byte, but for the time.
    expect(lines[0]!.replace(/"time":\d+/, '"time":0')).toBe(lines[1]!.replace(/"time":\d+/, '"time":0'));
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: pino.levels.values.info, route: '/a "b"\n', token: 'raw', msg: 'request' });
    expect(lines[2]).not.toContain('raw-token');
  });
});

describe('stdoutLogDestination', () => {
  /**
   * A child process that logs `n` lines of ~250 bytes through createLogger(stdoutLogDestination),
   * says on stderr how many it dropped, and exits at once with the rest still waiting. Its stdout
   * is read only once it has said so when `stallStdout`, as a log collector that stopped reading.
   */
  async function logInChild(n: number, stallStdout: boolean): Promise<{ lines: string[]; dropped: number }> {
    const dir = await mkdtemp(join(tmpdir(), 'svc-log-'));
    const script = join(dir, 'child.ts');
    await writeFile(
      script,
      [
        `import { createLogger, stdoutLogDestination } from ${JSON.stringify(pathToFileURL(join(import.meta.dirname, 'log.ts')).href)};`,
        'let dropped = 0;',
        "const log = createLogger('info', stdoutLogDestination(() => dropped++));",
        `for (let i = 0; i < ${n}; i++) log.info({ i, pad: 'x'.repeat(200) }, 'line');`,
        'process.stderr.write(`dropped ${dropped}\\n`);',
        'process.exit(0);',
      ].join('\n'),
    );
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      let err = '';
      const said = new Promise<number>((ok) =>
        child.stderr.on('data', (b: Buffer) => {
          err += b.toString();
          const m = /dropped (\d+)\n/.exec(err);
          if (m) ok(Number(m[1]));
        }),
      );
      const exited = new Promise<number | null>((ok) => child.once('exit', ok));
      if (stallStdout) await said;
      child.stdout.on('data', (b: Buffer) => out.push(b));
      const closed = new Promise<void>((ok) => child.stdout.once('close', ok));
      const [dropped, code] = await Promise.all([said, exited, closed]);
      expect(code, err).toBe(0);
      return { lines: Buffer.concat(out).toString().split('\n').filter(Boolean), dropped };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  it('every line reaches stdout, in order, those still waiting at exit included', async () => {
    const { lines, dropped } = await logInChild(20_000, false);
    expect(dropped).toBe(0);
    expect(lines).toHaveLength(20_000);
    expect(lines.map((l) => (JSON.parse(l) as { i: number }).i)).toEqual(Array.from({ length: 20_000 }, (_, i) => i));
  });

  it('a stdout nobody reads makes lines wait up to LOG_BUFFER_MAX_BYTES, then drops and counts them; the rest arrive whole', async () => {
    const n = 100_000; // ~25 MB of lines
    const { lines, dropped } = await logInChild(n, true);
    expect(dropped).toBeGreaterThan(0);
    expect(lines.length + dropped).toBe(n);
    expect(lines.join('\n').length).toBeLessThan(LOG_BUFFER_MAX_BYTES + 1024 * 1024);
    const seen = lines.map((l) => (JSON.parse(l) as { i: number; msg: string }).i);
    expect(seen.every((i, k) => k === 0 || i > seen[k - 1]!)).toBe(true);
  });
});
