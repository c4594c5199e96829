// Request bodies over a real socket, against SVC_BODY_LIMIT_BYTES: declared (Content-Length) or
// chunked, sent whole or in pieces, over the limit or cut short. A body over the limit is a 413
// with the JSON error body and the connection is closed (the rest of the body is never read);
// nothing is written; the server goes on serving.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, startTestApp, uniq, type Listening, type TestApp } from './helpers.ts';
import { checkResponse } from './contract-check.ts';

const LIMIT = 4096;
let t: TestApp;
let served: Listening;
let port = 0;

beforeAll(async () => {
  t = await startTestApp({ SVC_BODY_LIMIT_BYTES: LIMIT });
  served = await listen(t);
  port = served.port;
});

afterAll(async () => {
  await served.close();
  await t.close();
});

interface Exchange {
  status: number;
  headers: Headers;
  text: string;
  /** The server closed the connection. */
  closed: boolean;
}

/**
 * Writes `head`, then each piece of the body in turn (waiting `gapMs` between them) until the
 * server answers; reads one response. `closeAfterSending` ends the client's side once every piece
 * went out (a body cut short).
 */
async function exchange(head: string, pieces: Buffer[], gapMs = 0, closeAfterSending = false): Promise<Exchange> {
  const socket: Socket = connect(port, '127.0.0.1');
  let buf = Buffer.alloc(0);
  let answered = false;
  const response = new Promise<Exchange>((ok, fail) => {
    let closed = false;
    const parse = (): Exchange | undefined => {
      const text = buf.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return undefined;
      const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
      const headers = new Headers();
      for (const l of lines) headers.append(l.slice(0, l.indexOf(':')).trim(), l.slice(l.indexOf(':') + 1).trim());
      const length = Number(headers.get('content-length') ?? NaN);
      const body = buf.subarray(Buffer.byteLength(text.slice(0, end + 4), 'latin1'));
      if (Number.isNaN(length) || body.length < length) return undefined;
      return { status: Number(statusLine.split(' ')[1]), headers, text: body.subarray(0, length).toString('utf8'), closed };
    };
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (parse()) answered = true;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      const got = parse();
      if (got) ok(got);
      else fail(new Error(`the connection closed without a whole response: ${JSON.stringify(buf.toString('latin1'))}`));
    });
    // A connection kept open after a whole response: give the server a moment to close it.
    const poll = setInterval(() => {
      if (!answered) return;
      clearInterval(poll);
      setTimeout(() => {
        const got = parse()!;
        if (!closed) {
          ok(got);
          socket.destroy();
        }
      }, 200);
    }, 10);
    socket.on('close', () => clearInterval(poll));
  });
  await new Promise<void>((ok) => socket.once('connect', () => ok()));
  socket.write(head);
  const gone = new Promise<void>((ok) => socket.once('close', () => ok()));
  for (const piece of pieces) {
    if (gapMs) await new Promise((ok) => setTimeout(ok, gapMs));
    if (answered || socket.destroyed) break;
    if (!socket.write(piece)) await Promise.race([new Promise((ok) => socket.once('drain', ok)), gone]);
  }
  if (closeAfterSending && !answered) socket.end();
  return response;
}

const headOf = (path: string, extra: string) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${t.adminToken}\r\nContent-Type: application/json\r\n${extra}\r\n`;

const chunk = (b: Buffer) => Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]);
const LAST_CHUNK = Buffer.from('0\r\n\r\n');

/** A collection body of about `size` bytes (a long description). */
function collectionBody(name: string, size: number): Buffer {
  const base = JSON.stringify({ name, description: '' });
  return Buffer.from(JSON.stringify({ name, description: 'd'.repeat(Math.max(0, size - base.length)) }));
}

function pieces(b: Buffer, n: number): Buffer[] {
  const size = Math.ceil(b.length / n);
  return Array.from({ length: n }, (_, i) => b.subarray(i * size, (i + 1) * size)).filter((p) => p.length > 0);
}

async function collectionNamed(name: string): Promise<number> {
  const res = await t.request('GET', '/api/v1/collections', { query: { name } });
  expect(res.status).toBe(200);
  return (res.body as unknown[]).length;
}

function checked(res: Exchange, path = '/api/v1/collections'): Exchange & { body: unknown } {
  const c = checkResponse('POST', path, res.status, res.headers, res.text);
  return { ...res, body: c.body };
}

describe('request bodies against SVC_BODY_LIMIT_BYTES (a real listening server)', () => {
  it('a body under the limit is read whole, declared or chunked, sent at once or in pieces', async () => {
    for (const [what, make] of [
      ['declared, at once', (b: Buffer) => [headOf('/api/v1/collections', `Content-Length: ${b.length}\r\n`), [b], 0]],
      ['declared, in pieces', (b: Buffer) => [headOf('/api/v1/collections', `Content-Length: ${b.length}\r\n`), pieces(b, 5), 20]],
      [
        'chunked, in pieces',
        (b: Buffer) => [headOf('/api/v1/collections', 'Transfer-Encoding: chunked\r\n'), [...pieces(b, 5).map(chunk), LAST_CHUNK], 20],
      ],
    ] as const) {
      const name = uniq('body');
      const [head, parts, gap] = make(collectionBody(name, LIMIT - 10));
      const res = checked(await exchange(head as string, parts as Buffer[], gap as number));
      expect(res.status, what).toBe(201);
      expect((res.body as { name: string; description: string }).description.length, what).toBeGreaterThan(LIMIT - 100);
      expect(res.closed, `${what}: the connection stays open`).toBe(false);
    }
  });

  it('a declared length over the limit is a 413 before the body is read, and the connection closes', async () => {
    const name = uniq('big');
    const body = collectionBody(name, LIMIT + 1);
    // Only the head is sent: the answer must not wait for the body.
    const res = checked(await exchange(headOf('/api/v1/collections', `Content-Length: ${body.length}\r\n`), []));
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ error: 'Payload Too Large' });
    expect(res.headers.get('connection')).toBe('close');
    expect(res.closed).toBe(true);
    expect(await collectionNamed(name)).toBe(0);
  });

  it('a chunked body is refused as soon as it passes the limit, though the client keeps sending', async () => {
    const name = uniq('big');
    // A body that never ends: 1,000 chunks of 1 KiB, sent one by one until the server answers.
    const start = Buffer.from(`{"name":${JSON.stringify(name)},"description":"`);
    const parts = [chunk(start), ...Array.from({ length: 1000 }, () => chunk(Buffer.alloc(1024, 'x')))];
    const res = checked(await exchange(headOf('/api/v1/collections', 'Transfer-Encoding: chunked\r\n'), parts, 2));
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ error: 'Payload Too Large', message: 'the request body is too large' });
    expect(res.headers.get('connection')).toBe('close');
    expect(res.closed).toBe(true);
    expect(await collectionNamed(name)).toBe(0);
  });

  it('a body cut short writes nothing, and the server goes on serving', async () => {
    const name = uniq('cut');
    const body = collectionBody(name, 2000);
    await exchange(headOf('/api/v1/collections', `Content-Length: ${body.length}\r\n`), [body.subarray(0, 1000)], 0, true).catch(
      () => undefined,
    );
    await exchange(headOf('/api/v1/collections', 'Transfer-Encoding: chunked\r\n'), [chunk(body.subarray(0, 1000))], 0, true).catch(
      () => undefined,
    );
    expect(await collectionNamed(name)).toBe(0);
    const after = uniq('after');
    const b = collectionBody(after, 100);
    const res = checked(await exchange(headOf('/api/v1/collections', `Content-Length: ${b.length}\r\n`), [b]));
    expect(res.status).toBe(201);
    expect(await collectionNamed(after)).toBe(1);
  });

  it('the limit holds for every method with a body and before routing', async () => {
    for (const [method, path] of [
      ['PUT', '/api/v1/collections/1'],
      ['PATCH', '/api/v1/collections/1'],
      ['POST', '/api/v1/no-such-operation'],
    ] as const) {
      const head = `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${LIMIT + 1}\r\n\r\n`;
      const res = await exchange(head, []);
      expect(res.status, `${method} ${path}`).toBe(413);
      expect(JSON.parse(res.text), `${method} ${path}`).toMatchObject({ error: 'Payload Too Large' });
    }
  });
});
