// Connections over a real socket, with SVC_HTTP_HEADERS_TIMEOUT_MS and SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS
// short. One that never finishes a request (it sends nothing, only the blank lines a parser skips
// before a request line, or half its headers) gets the 408 with the JSON error body and is closed;
// one that sends its request in time is served and kept for the next one until it has been idle
// for the keep-alive timeout; the server goes on serving.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, startTestApp, type Listening, type TestApp } from './helpers.ts';
import { SchemaRegistry } from '../src/http/schemas.ts';

const TIMEOUT_MS = 400;
const KEEP_ALIVE_MS = 2_000;
let t: TestApp;
let served: Listening;
let port = 0;

beforeAll(async () => {
  t = await startTestApp({ SVC_HTTP_HEADERS_TIMEOUT_MS: TIMEOUT_MS, SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS: KEEP_ALIVE_MS });
  served = await listen(t);
  port = served.port;
});

afterAll(async () => {
  await served.close();
  await t.close();
});

/** What the server did with a connection: what it sent, and whether it closed it within `waitMs`. */
async function connection(talk: (socket: Socket) => void, waitMs = 20 * TIMEOUT_MS): Promise<{ closed: boolean; received: string }> {
  const socket = connect(port, '127.0.0.1');
  let received = '';
  socket.on('data', (d: Buffer) => (received += d.toString('utf8')));
  socket.on('error', () => {});
  await new Promise<void>((ok) => socket.once('connect', () => ok()));
  talk(socket);
  const closed = await new Promise<boolean>((ok) => {
    const timer = setTimeout(() => ok(false), waitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      ok(true);
    });
  });
  socket.destroy();
  return { closed, received };
}

describe('a connection that does not finish its request in SVC_HTTP_HEADERS_TIMEOUT_MS gets the 408 and is closed:', () => {
  const errorBody = new SchemaRegistry().validatorAt('/components/schemas/ErrorResponse');
  const expect408 = ({ closed, received }: { closed: boolean; received: string }) => {
    expect(closed).toBe(true);
    const [head = '', body = ''] = received.split('\r\n\r\n');
    expect(head.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
    expect(head.toLowerCase()).toContain('content-type: application/json');
    expect(errorBody(JSON.parse(body)), body).toBe(true);
  };

  it('one that sends nothing', async () => {
    expect408(await connection(() => {}));
  });

  it('one that sends only blank lines', async () => {
    expect408(
      await connection((socket) => {
        const timer = setInterval(() => socket.writable && socket.write('\r\n'), TIMEOUT_MS / 4);
        socket.once('close', () => clearInterval(timer));
      }),
    );
  });

  it('one whose headers stop half-way', async () => {
    expect408(await connection((socket) => socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ')));
  });

  const healthz = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

  it('but one that sends its request in time is served, and kept while it is idle for less than the keep-alive timeout', async () => {
    const { closed, received } = await connection((socket) => {
      setTimeout(() => socket.write(healthz), TIMEOUT_MS / 4);
      // its second request comes after the headers timeout, well within the keep-alive one
      setTimeout(() => socket.write(healthz), 2 * TIMEOUT_MS);
    }, KEEP_ALIVE_MS);
    expect(closed).toBe(false);
    expect(received.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(2);
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
  });

  it("and closed once idle for SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS (Node's default, 5 s, is past the wait)", async () => {
    const { closed, received } = await connection((socket) => socket.write(healthz), 2 * KEEP_ALIVE_MS);
    expect(received.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    expect(received.toLowerCase()).toContain(`keep-alive: timeout=${KEEP_ALIVE_MS / 1000}`);
    expect(closed).toBe(true);
  });
});
