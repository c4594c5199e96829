// bench/driver-queue.ts measures parts of the postgres.js patch against upstream's code by putting
// upstream's text back in a copy of the installed driver; each part names the patched text it
// replaces. When the patch changes, these must follow, or the benchmark stops measuring the part.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PUT_BACK, UPSTREAM_VERSION } from '../bench/driver-queue.ts';
import { ESM_ENTRY, PACKAGE_ROOT } from './driver-copies.ts';

describe('bench/driver-queue.ts put-back parts', () => {
  it('are of the installed version', () => {
    expect((JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version).toBe(UPSTREAM_VERSION);
  });

  for (const [part, replacements] of Object.entries(PUT_BACK)) {
    it(`${part}: every patched text is in the installed driver, once`, () => {
      for (const { file, patched } of replacements) {
        const text = readFileSync(join(dirname(ESM_ENTRY), file), 'utf8');
        expect(text.split(patched).length - 1, `${file}: ${patched.slice(0, 80)}`).toBe(1);
      }
    });
  }
});
