// Content codings for the bodies that are large and the same for every caller: the API reference's
// scripts and styles, the console's built files, this OpenAPI document, and the Prometheus text.
// The API's JSON replies are not compressed here: on the hot paths the CPU a compression takes
// would cost more throughput than the bytes save on a local network, and a gateway in front of the
// service (README "Deployment") compresses for distant clients when its operator wants it.
//
// A static body (StaticBody) is compressed once per coding, on first demand, off the event loop
// (zlib's thread pool), at a high level; brotli at quality 9 takes the 1.7 MB of swagger-ui's bundle
// to 0.39 MB in ~0.1 s, the 1.4 MB of the OpenAPI document to 0.1 MB in ~0.04 s. A dynamic body
// (the metrics) is gzipped at the default level per reply.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';

export type ContentCoding = 'br' | 'gzip';

/** Bodies below this are sent as they are: the coding's framing would eat most of the saving. */
export const MIN_COMPRESSED_BYTES = 1024;

const brotliAsync = promisify(brotliCompress);
const gzipAsync = promisify(gzip);

/**
 * The coding to send a body in for a request's Accept-Encoding (RFC 9110 12.5.3), among `offered`
 * in the server's order of preference: the one with the highest q-value, ties going to the earlier
 * of `offered`; `*` stands for every coding the header does not name; q=0 refuses. null: none
 * (no header, or none accepted): the body goes as it is.
 */
export function negotiateCoding(
  acceptEncoding: string | null | undefined,
  offered: readonly ContentCoding[] = ['br', 'gzip'],
): ContentCoding | null {
  if (!acceptEncoding) return null;
  const q = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [rawName, ...params] = part.split(';');
    const name = rawName!.trim().toLowerCase();
    if (!name) continue;
    let weight = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*$/i.exec(p);
      if (m) weight = Number(m[1]);
    }
    // x-gzip is gzip (RFC 9110 8.4.1.3); a repeated name keeps its first weight
    const key = name === 'x-gzip' ? 'gzip' : name;
    if (!q.has(key)) q.set(key, weight);
  }
  let best: ContentCoding | null = null;
  let bestQ = 0;
  for (const coding of offered) {
    const weight = q.get(coding) ?? q.get('*') ?? 0;
    if (weight > bestQ) {
      best = coding;
      bestQ = weight;
    }
  }
  return best;
}

/** A static body in `coding`, at the highest levels a body compressed once can afford. */
function compressStatic(bytes: Uint8Array, coding: ContentCoding): Promise<Buffer<ArrayBuffer>> {
  if (coding === 'gzip') return gzipAsync(bytes, { level: 9 });
  return brotliAsync(bytes, {
    params: { [constants.BROTLI_PARAM_QUALITY]: 9, [constants.BROTLI_PARAM_SIZE_HINT]: bytes.byteLength },
  });
}

/** A body and the headers that go with it: `content-encoding` when coded, `vary` when it could be. */
export interface CodedBody {
  body: Buffer<ArrayBuffer>;
  headers: Record<string, string>;
}

/**
 * A body that stays the same for the life of the process. Its coded forms are made on first demand
 * and kept (a failed compression is not kept: the next request tries again, this one gets the body
 * as it is).
 */
export class StaticBody {
  readonly #coded = new Map<ContentCoding, Promise<Buffer<ArrayBuffer> | null>>();
  #etag: string | undefined;

  constructor(readonly bytes: Buffer<ArrayBuffer>) {}

  /**
   * A weak validator of the body (its SHA-256): weak, as each coding's bytes differ while the
   * body they decode to is one. A browser revalidating a cached asset sends it back in
   * If-None-Match and gets a 304 without the body (notModified).
   */
  get etag(): string {
    this.#etag ??= `W/"${createHash('sha256').update(this.bytes).digest('base64url').slice(0, 27)}"`;
    return this.#etag;
  }

  /**
   * Whether a request's If-None-Match names this body (RFC 9110 13.1.2: `*`, or a list of entity
   * tags compared weakly, W/ aside).
   */
  notModified(ifNoneMatch: string | null | undefined): boolean {
    if (!ifNoneMatch) return false;
    const mine = this.etag.slice(2);
    for (const raw of ifNoneMatch.split(',')) {
      const tag = raw.trim();
      if (tag === '*' || (tag.startsWith('W/') ? tag.slice(2) : tag) === mine) return true;
    }
    return false;
  }

  /** Whether a coded form can be sent at all (else the reply needs no `vary`). */
  get compressible(): boolean {
    return this.bytes.byteLength >= MIN_COMPRESSED_BYTES;
  }

  /** The body for a request's Accept-Encoding, and its `content-encoding` and `vary` headers. */
  async forRequest(acceptEncoding: string | null | undefined): Promise<CodedBody> {
    if (!this.compressible) return { body: this.bytes, headers: {} };
    const coding = negotiateCoding(acceptEncoding);
    const coded = coding ? await this.#codedIn(coding) : null;
    if (!coding || !coded) return { body: this.bytes, headers: { vary: 'accept-encoding' } };
    return { body: coded, headers: { vary: 'accept-encoding', 'content-encoding': coding } };
  }

  #codedIn(coding: ContentCoding): Promise<Buffer<ArrayBuffer> | null> {
    let coded = this.#coded.get(coding);
    if (!coded) {
      coded = compressStatic(this.bytes, coding).then(
        // a coded form no smaller than the body is not worth a header
        (out) => (out.byteLength < this.bytes.byteLength ? out : null),
        (err: unknown) => {
          this.#coded.delete(coding);
          throw err;
        },
      );
      this.#coded.set(coding, coded);
    }
    return coded.catch(() => null);
  }
}

/** Files read once as static bodies, by path (those found; a missing one is looked for again). */
const staticFiles = new Map<string, Promise<StaticBody | null>>();

/**
 * The file at `path` as a StaticBody, read on first demand and kept for the life of the process
 * (files that do not change while it runs: the API reference's assets, the console's hashed
 * assets); null when there is no such file.
 */
export function staticFile(path: string): Promise<StaticBody | null> {
  let body = staticFiles.get(path);
  if (!body) {
    body = readFile(path).then(
      (bytes) => new StaticBody(bytes),
      () => {
        staticFiles.delete(path); // looked for again next time
        return null;
      },
    );
    staticFiles.set(path, body);
  }
  return body;
}

/** A static body's reply to a request: its status, bytes (none for a 304) and headers. */
export interface StaticReply {
  status: 200 | 304;
  body: Buffer<ArrayBuffer> | null;
  /** etag, vary and, for a 200, content-encoding and content-length (what the request log counts). */
  headers: Record<string, string>;
}

/**
 * `body` for a request with these Accept-Encoding and If-None-Match headers: 304 without the body
 * when If-None-Match names it, else 200 in the coding the request prefers.
 */
export async function staticReply(
  body: StaticBody,
  acceptEncoding: string | undefined,
  ifNoneMatch: string | undefined,
): Promise<StaticReply> {
  const headers: Record<string, string> = { etag: body.etag };
  if (body.notModified(ifNoneMatch)) {
    if (body.compressible) headers.vary = 'accept-encoding';
    return { status: 304, body: null, headers };
  }
  const coded = await body.forRequest(acceptEncoding);
  Object.assign(headers, coded.headers);
  headers['content-length'] = String(coded.body.byteLength);
  return { status: 200, body: coded.body, headers };
}

/** A body made for one reply (the metrics), gzipped for a request that accepts it. */
export async function codedDynamicBody(body: string | Buffer<ArrayBuffer>, acceptEncoding: string | null | undefined): Promise<CodedBody> {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  if (bytes.byteLength < MIN_COMPRESSED_BYTES) return { body: bytes, headers: {} };
  // gzip only: what Prometheus asks for, and at the levels a per-reply coding can afford, brotli
  // saves little more than gzip on such text
  const coding = negotiateCoding(acceptEncoding, ['gzip']);
  if (!coding) return { body: bytes, headers: { vary: 'accept-encoding' } };
  return { body: await gzipAsync(bytes), headers: { vary: 'accept-encoding', 'content-encoding': coding } };
}
