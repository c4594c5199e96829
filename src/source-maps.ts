// Stack traces in the log name the TypeScript sources although the server runs as a bundle without
// `node --enable-source-maps`: that flag makes Node read and keep the source maps of every module
// it loads, and the server then served ~10 % fewer requests per second (bench/FINDINGS.md, "The
// fixed cost of a request"). Here a frame of a file with a source map beside it
// (`dist/server/main.js.map`, written by esbuild) is mapped when an error is logged, from a map read
// on the first such error and kept.
import { SourceMap } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** `(file:///…/x.js:12:5)` or ` /…/x.js:12:5` at the end of a stack line. */
const FRAME = /((?:file:\/\/)?\/[^\s()]+?\.[cm]?js):(\d+):(\d+)(\)?)$/;
/**
 * Maps read so far, by file (null: the file has none, or it could not be read). Kept for every file
 * a stack named: they are the installed modules' files, so their number is bounded, and no file is
 * read twice however many errors follow.
 */
const maps = new Map<string, { map: SourceMap; dir: string } | null>();

function mapOf(path: string): { map: SourceMap; dir: string } | null {
  let found = maps.get(path);
  if (found !== undefined) return found;
  try {
    found = { map: new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8')) as never), dir: dirname(path) };
  } catch {
    found = null;
  }
  maps.set(path, found);
  return found;
}

/** One stack line with its frame mapped to the source, or as it was. */
function mapLine(line: string): string {
  const m = FRAME.exec(line);
  if (!m) return line;
  const [whole, location, lineText, columnText, close] = m as unknown as [string, string, string, string, string];
  const isUrl = location.startsWith('file://');
  let path: string;
  try {
    path = isUrl ? fileURLToPath(location) : location;
  } catch {
    return line;
  }
  const found = mapOf(path);
  if (!found) return line;
  const entry = found.map.findEntry(Number(lineText) - 1, Number(columnText) - 1) as {
    originalSource?: string;
    originalLine?: number;
    originalColumn?: number;
  };
  if (entry.originalSource === undefined || entry.originalLine === undefined || entry.originalColumn === undefined) return line;
  const source = resolve(found.dir, entry.originalSource);
  const named = isUrl ? pathToFileURL(source).href : source;
  return `${line.slice(0, line.length - whole.length)}${named}:${entry.originalLine + 1}:${entry.originalColumn + 1}${close}`;
}

/** A stack trace with every frame of a file that has a source map beside it pointing at the source. */
export function mapStack(stack: string): string {
  return stack.split('\n').map(mapLine).join('\n');
}
