import { describe, expect, it } from 'vitest';
import { isoTime, isoTimeJson } from './wire.ts';

describe('isoTime', () => {
  it('writes a Date as JSON.stringify would', () => {
    const d = new Date('2026-11-25T06:25:27.123Z');
    expect(isoTime(d)).toBe(JSON.parse(JSON.stringify(d)));
  });

  it("turns the database's UTC text into the same ISO text a Date of it gives (fraction cut to milliseconds)", () => {
    for (const [text, iso] of [
      ['2026-11-25 06:25:27.123456', '2026-11-25T06:25:27.123Z'],
      ['2026-11-25 06:25:27.999999', '2026-11-25T06:25:27.999Z'],
      ['2026-11-25 06:25:27.12', '2026-11-25T06:25:27.120Z'],
      ['2026-11-25 06:25:27.1', '2026-11-25T06:25:27.100Z'],
      ['2026-11-25 06:25:27', '2026-11-25T06:25:27.000Z'],
      ['0001-01-01 00:00:00', '0001-01-01T00:00:00.000Z'],
    ] as const) {
      expect(isoTime(text), text).toBe(iso);
      // what the driver's Date parsing and toISOString made of the same instant
      expect(isoTime(new Date(`${text.replace(' ', 'T')}Z`)), text).toBe(iso);
    }
  });

  it('leaves ISO text as it is', () => {
    expect(isoTime('2026-11-25T06:25:27.123Z')).toBe('2026-11-25T06:25:27.123Z');
  });
});

describe('isoTimeJson', () => {
  it("is JSON.stringify(isoTime(d)) for Dates, the database's texts and texts it passes through", () => {
    for (const d of [
      new Date('2026-11-25T06:25:27.123Z'),
      new Date(0),
      new Date('+010000-01-01T00:00:00.000Z'),
      '2026-11-25 06:25:27.123456',
      '2026-11-25 06:25:27',
      '2026-11-25T06:25:27.123Z',
      'infinity',
      '-infinity',
      '10000-01-01 00:00:00',
      '0044-03-15 12:00:00 BC',
      'a "quoted" \\ text\n\u0001',
    ]) {
      expect(isoTimeJson(d), String(d)).toBe(JSON.stringify(isoTime(d)));
    }
  });
});
