// JSON values a reply passes through as the database wrote them (`jsonb::text`), instead of
// parsing them (postgres.js) only to serialize them again (the renderer): for a page of objects
// the two cost more than everything else the service does with the rows. The text goes into the
// reply's body as a placeholder string, which the renderer replaces by the text after
// JSON.stringify (spliceJsonTexts).
//
// A placeholder is a NUL, the text's index and a NUL. No stored or accepted string can hold a NUL
// (requests with one are refused at the boundary, src/http/input.ts, and PostgreSQL text and jsonb
// cannot store it), so in JSON.stringify's output the escaped NUL (`\u0000`) is only ever ours.
// PostgreSQL's jsonb output is valid JSON; it differs from JSON.stringify's only in spacing
// (`{"a": 1}`) and in numbers kept as written (`1.50`, integers beyond 2^53), which parse to
// the same values (the latter more exactly than a round trip through a JavaScript number).

/** The JSON texts of one reply, each added where its placeholder stands in the body. */
export class JsonTexts {
  readonly texts: string[] = [];

  /** The placeholder of `text` to put in the body where the value goes. */
  add(text: string): string {
    return `\u0000${this.texts.push(text) - 1}\u0000`;
  }

  /**
   * The placeholder of a JSON array whose members are the JSON texts `members` (a page written
   * directly, e.g. objectJsonText), typed as the array it stands for in the body.
   */
  addArray<T>(members: string[]): T[] {
    return this.add(`[${members.join(',')}]`) as unknown as T[];
  }
}

/**
 * A column's value as JSON.stringify writes it as a member: null for null or undefined, an integer
 * as the template's text (without the call), anything else as JSON.stringify does.
 */
export function jsonMember(v: unknown): string {
  if (typeof v === 'number') return Number.isFinite(v) ? `${v}` : 'null';
  if (v === null || v === undefined) return 'null';
  return JSON.stringify(v);
}

const OPEN = '"\\u0000';
const CLOSE = '\\u0000"';

/** `json` (JSON.stringify of a body holding placeholders of `texts`) with each placeholder replaced by its text. */
export function spliceJsonTexts(json: string, texts: readonly string[]): string {
  let out = '';
  let from = 0;
  for (;;) {
    const open = json.indexOf(OPEN, from);
    if (open < 0) break;
    const close = json.indexOf(CLOSE, open + OPEN.length);
    const digits = close < 0 ? '' : json.slice(open + OPEN.length, close);
    const text = /^[0-9]+$/.test(digits) ? texts[Number(digits)] : undefined;
    if (text === undefined) throw new Error('a reply holds a JSON text placeholder it has no text for');
    out += json.slice(from, open) + text;
    from = close + CLOSE.length;
  }
  return from === 0 ? json : out + json.slice(from);
}
