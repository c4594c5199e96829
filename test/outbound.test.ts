// The outbound HTTP client against real local HTTPS peers. The peer's certificate is generated
// at test time with the openssl command line and trusted through caFile (SVC_OUTBOUND_CA_FILE).
import { execFileSync, execFile } from 'node:child_process';
import { createServer } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import tls from 'node:tls';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { startPeer, type Peer, type Seen } from './tls-fixtures.ts';
import {
  classifyAddress,
  isAddressAllowed,
  OutboundError,
  outboundRequest,
  parseOutboundUrl,
  redactHeaders,
  type OutboundRequest,
} from '../src/outbound/http.ts';
import { closeConnections, destinationCount } from '../src/outbound/pools.ts';
import { trustContext } from '../src/outbound/trust.ts';

let peer: Peer;
let dir: string;
let caFile: string;
let port: number;
let seen: Seen[];
let respond: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end('ok');

beforeAll(async () => {
  peer = await startPeer({ prefix: 'svc-outbound-', altNames: ['DNS:localhost', 'DNS:peer.test', 'IP:127.0.0.1', 'IP:::1'] });
  ({ dir, caFile, port, seen } = peer);
  peer.respond = (req, res) => respond(req, res);
});

afterAll(async () => {
  await peer.close();
});

beforeEach(() => {
  respond = (_req, res) => res.end('ok');
});

function base(overrides: Partial<OutboundRequest>): OutboundRequest {
  return { url: `https://localhost:${port}/`, timeoutMs: 5000, maxResponseBytes: 65536, allowPrivate: true, caFile, ...overrides };
}

async function failure(req: OutboundRequest): Promise<OutboundError> {
  try {
    await outboundRequest(req);
  } catch (err) {
    expect(err).toBeInstanceOf(OutboundError);
    return err as OutboundError;
  }
  throw new Error('expected the request to fail');
}

describe('address screening', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.9.9', 'private'],
    ['192.168.0.1', 'private'],
    ['169.254.1.1', 'link_local'],
    ['169.254.169.254', 'metadata'],
    ['100.64.0.1', 'cgnat'],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['64:ff9b::192.168.1.1', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['fc00::1', 'unique_local'],
    ['fd12:3456::1', 'unique_local'],
    ['fe80::1', 'link_local'],
    ['fd00:ec2::254', 'metadata'],
    ['ff02::1', 'multicast'],
  ])('%s is %s and refused by default', (address, category) => {
    expect(classifyAddress(address).category).toBe(category);
    expect(isAddressAllowed(address, false)).toBe(false);
  });

  it('public addresses pass; private ones pass only with allowPrivate; metadata, unspecified and multicast never', () => {
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) expect(isAddressAllowed(a, false)).toBe(true);
    for (const a of ['127.0.0.1', '10.0.0.1', '::1', 'fd00::1', '100.64.0.1', '169.254.1.1']) expect(isAddressAllowed(a, true)).toBe(true);
    for (const a of ['169.254.169.254', 'fd00:ec2::254', '0.0.0.0', '::', '224.0.0.1', 'ff02::1']) {
      expect(isAddressAllowed(a, true)).toBe(false);
    }
  });
});

describe('URL rules', () => {
  it('only absolute https URLs without credentials', () => {
    expect(parseOutboundUrl('https://example.com/x').hostname).toBe('example.com');
    for (const bad of [
      'http://example.com/',
      'ftp://example.com/',
      'https://user:pw@example.com/',
      'https://user@example.com/',
      '/relative',
      'nope',
    ]) {
      expect(() => parseOutboundUrl(bad)).toThrow(OutboundError);
    }
  });

  it('a plain-http URL is refused before any connection', async () => {
    const before = seen.length;
    const err = await failure(base({ url: `http://localhost:${port}/` }));
    expect(err.code).toBe('invalid_url');
    expect(seen.length).toBe(before);
  });

  it('embedded credentials are refused', async () => {
    const err = await failure(base({ url: `https://u:p@localhost:${port}/` }));
    expect(err.code).toBe('invalid_url');
  });
});

describe('outboundRequest against a local HTTPS peer', () => {
  it('GET reaches the peer with SNI and Host of the hostname, and redacts sensitive response headers', async () => {
    respond = (_req, res) => {
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      res.setHeader('www-authenticate', 'Bearer realm="x"');
      res.setHeader('x-session-id', 'abc');
      res.setHeader('x-plain', 'visible');
      res.end('hello');
    };
    const res = await outboundRequest(base({ url: `https://localhost:${port}/p/a?q=1&r=2`, headers: { 'X-Trace': 't-1' } }));
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('hello');
    expect(res.truncated).toBe(false);
    expect(res.address).toBe('127.0.0.1');
    expect(res.headers['set-cookie']).toBe('[redacted]');
    expect(res.headers['www-authenticate']).toBe('[redacted]');
    expect(res.headers['x-session-id']).toBe('[redacted]');
    expect(res.headers['x-plain']).toBe('visible');
    const got = seen.at(-1)!;
    expect(got.method).toBe('GET');
    expect(got.url).toBe('/p/a?q=1&r=2');
    expect(got.headers.host).toBe(`localhost:${port}`);
    expect(got.headers['x-trace']).toBe('t-1');
    expect(got.servername).toBe('localhost');
  });

  it('POST sends the exact body and headers', async () => {
    respond = (_req, res) => {
      res.statusCode = 201;
      res.end('{"created":true}');
    };
    const body = '{"a": 1,  "b":"ü"}';
    const res = await outboundRequest(base({ method: 'post', headers: { 'Content-Type': 'application/json' }, body }));
    expect(res.status).toBe(201);
    const got = seen.at(-1)!;
    expect(got.method).toBe('POST');
    expect(got.body).toBe(body);
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['content-length']).toBe(String(Buffer.byteLength(body)));
  });

  it('loopback is refused without allowPrivate (hostname, IPv4 literal, IPv6 literal, mapped form) and nothing is sent', async () => {
    const before = seen.length;
    for (const url of [
      `https://localhost:${port}/`,
      `https://127.0.0.1:${port}/`,
      `https://[::1]:${port}/`,
      `https://[::ffff:127.0.0.1]:${port}/`,
      'https://169.254.169.254/latest/meta-data/',
      'https://10.0.0.1/',
      'https://100.64.0.1/',
      'https://[fd00::1]/',
      'https://[fe80::1]/',
    ]) {
      const err = await failure(base({ url, allowPrivate: false }));
      expect(err.code, url).toBe('blocked_destination');
      expect(err.message).not.toContain(String(port));
    }
    expect(seen.length).toBe(before);
  });

  it('cloud metadata stays refused even with allowPrivate', async () => {
    const err = await failure(base({ url: 'https://169.254.169.254/latest/meta-data/', allowPrivate: true }));
    expect(err.code).toBe('blocked_destination');
  });

  it('every resolved address is screened: one private address among public ones refuses the call', async () => {
    const err = await failure(
      base({
        url: `https://peer.test:${port}/`,
        allowPrivate: false,
        resolve: async () => [
          { address: '93.184.216.34', family: 4 },
          { address: '10.0.0.7', family: 4 },
        ],
      }),
    );
    expect(err.code).toBe('blocked_destination');
  });

  it('the screened address is pinned: one resolution, the connection goes there, SNI and Host keep the name', async () => {
    let calls = 0;
    const res = await outboundRequest(
      base({
        url: `https://peer.test:${port}/pinned`,
        resolve: async () => {
          calls++;
          return [{ address: '127.0.0.1', family: 4 }];
        },
      }),
    );
    expect(res.status).toBe(200);
    expect(calls).toBe(1);
    const got = seen.at(-1)!;
    expect(got.url).toBe('/pinned');
    expect(got.headers.host).toBe(`peer.test:${port}`);
    expect(got.servername).toBe('peer.test');
  });

  it('redirects are not followed: a 3xx is the final response', async () => {
    respond = (req, res) => {
      if (req.url === '/start') {
        res.statusCode = 302;
        res.setHeader('location', `/elsewhere`);
        res.end();
      } else res.end('followed');
    };
    const before = seen.length;
    const res = await outboundRequest(base({ url: `https://localhost:${port}/start` }));
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('/elsewhere');
    expect(seen.length).toBe(before + 1);
  });

  it('the body is read only up to the byte cap', async () => {
    respond = (_req, res) => res.end(Buffer.alloc(200_000, 0x61));
    const res = await outboundRequest(base({ maxResponseBytes: 1000 }));
    expect(res.status).toBe(200);
    expect(res.body.length).toBe(1000);
    expect(res.truncated).toBe(true);
    const exact = await outboundRequest(base({ maxResponseBytes: 200_000 }));
    expect(exact.body.length).toBe(200_000);
    expect(exact.truncated).toBe(false);
  });

  it('a peer that does not answer in time is a timeout', async () => {
    respond = () => {};
    const started = Date.now();
    const err = await failure(base({ timeoutMs: 300 }));
    expect(err.code).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('an untrusted certificate is a TLS failure (no extra CA given)', async () => {
    const err = await failure(base({ caFile: undefined }));
    expect(err.code).toBe('tls_failure');
  });

  it('a refused connection is a connection failure', async () => {
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', () => ok()));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise<void>((ok) => closed.close(() => ok()));
    const err = await failure(base({ url: `https://127.0.0.1:${freePort}/` }));
    expect(err.code).toBe('connection_failed');
  });

  it('transport-controlled request headers are refused', async () => {
    for (const name of ['Host', 'Content-Length', 'Transfer-Encoding', 'Connection', 'Proxy-Authorization', 'TE', 'Upgrade']) {
      const err = await failure(base({ headers: { [name]: 'x' } }));
      expect(err.code, name).toBe('invalid_request');
    }
    const err = await failure(base({ headers: { 'X-Bad': 'a\r\nInjected: 1' } }));
    expect(err.code).toBe('invalid_request');
  });

  it('NODE_EXTRA_CA_CERTS alone makes the peer trusted (child process, no caFile)', async () => {
    respond = (_req, res) => res.end('extra-ca');
    const script = [
      `import { outboundRequest } from ${JSON.stringify(join(process.cwd(), 'src/outbound/http.ts'))};`,
      `const r = await outboundRequest({ url: 'https://localhost:${port}/', timeoutMs: 5000, maxResponseBytes: 100, allowPrivate: true });`,
      `process.stdout.write(String(r.status) + ' ' + r.body.toString());`,
    ].join('\n');
    const file = join(dir, 'extra-ca.mts');
    execFileSync('sh', ['-c', `cat > ${JSON.stringify(file)}`], { input: script });
    const { stdout } = await promisify(execFile)(join(process.cwd(), 'node_modules/.bin/tsx'), [file], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile },
    });
    expect(stdout).toBe('200 extra-ca');
  });
});

describe('kept-alive connections (src/outbound/pools.ts)', () => {
  beforeEach(async () => {
    await closeConnections();
  });

  it('requests to the same origin, address, trust and deadline share one connection; headers stay per request', async () => {
    const before = seen.length;
    const opened = peer.connections.opened;
    await outboundRequest(base({ headers: { Authorization: 'Bearer first' } }));
    await outboundRequest(base({ method: 'POST', body: '{}' }));
    await outboundRequest(base({}));
    const got = seen.slice(before);
    expect(got.map((r) => r.connection)).toEqual([opened + 1, opened + 1, opened + 1]);
    expect(peer.connections.opened).toBe(opened + 1);
    expect(got[0]!.headers.authorization).toBe('Bearer first');
    expect(got[1]!.headers.authorization).toBeUndefined();
    expect(got[2]!.headers.authorization).toBeUndefined();
  });

  it('another host name, address, CA file or deadline gets a connection of its own', async () => {
    const any = await startPeer({ prefix: 'svc-outbound-any-', host: '0.0.0.0', altNames: ['DNS:peer.test', 'DNS:localhost'] });
    const to = (address: string, extra: Partial<OutboundRequest> = {}) =>
      base(
        Object.assign(
          { url: `https://peer.test:${any.port}/`, caFile: any.caFile, resolve: async () => [{ address, family: 4 as const }] },
          extra,
        ),
      );
    const copy = join(any.dir, 'copy.pem');
    writeFileSync(copy, readFileSync(any.caFile));
    try {
      await outboundRequest(to('127.0.0.1'));
      await outboundRequest(to('127.0.0.2'));
      await outboundRequest(to('127.0.0.1', { caFile: copy }));
      await outboundRequest(to('127.0.0.1', { timeoutMs: 4000 }));
      await outboundRequest(base({ url: `https://localhost:${any.port}/`, caFile: any.caFile }));
      await outboundRequest(to('127.0.0.2'));
      await outboundRequest(to('127.0.0.1'));
      expect(any.seen.map((r) => r.connection)).toEqual([1, 2, 3, 4, 5, 2, 1]);
      expect(any.seen.map((r) => r.localAddress)).toEqual([
        '127.0.0.1',
        '127.0.0.2',
        '127.0.0.1',
        '127.0.0.1',
        '127.0.0.1',
        '127.0.0.2',
        '127.0.0.1',
      ]);
      expect(destinationCount()).toBe(5);
    } finally {
      await closeConnections();
      await any.close();
    }
  });

  it('a kept connection does not pass the screening: the next request to a refused address is refused', async () => {
    const to = (address: string, allowPrivate: boolean) =>
      base({ url: `https://peer.test:${port}/`, allowPrivate, resolve: async () => [{ address, family: 4 as const }] });
    expect((await outboundRequest(to('127.0.0.1', true))).status).toBe(200);
    const before = seen.length;
    expect((await failure(to('127.0.0.1', false))).code).toBe('blocked_destination');
    expect((await failure(to('169.254.169.254', true))).code).toBe('blocked_destination');
    expect(seen.length).toBe(before);
  });

  // (undici then opens one connection more for the dropped request, which it discards once
  // connected; that idle connection serves the next request)
  it('a response read only in part drops its connection: the next request goes on another one', async () => {
    respond = (req, res) => res.end(req.url === '/big' ? Buffer.alloc(500_000, 0x61) : 'small');
    const before = seen.length;
    const cut = await outboundRequest(base({ url: `https://localhost:${port}/big`, maxResponseBytes: 100 }));
    expect(cut.truncated).toBe(true);
    const first = seen[before]!.connection;
    await vi.waitFor(() => expect(peer.connections.closed.has(first)).toBe(true));
    const next = await outboundRequest(base({ url: `https://localhost:${port}/small` }));
    expect(next.body.toString()).toBe('small');
    expect(seen[before + 1]!.connection).toBeGreaterThan(first);
  });

  it('a request past its deadline drops its connection', async () => {
    respond = (req, res) => {
      if (req.url !== '/slow') res.end('quick');
    };
    const before = seen.length;
    expect((await failure(base({ url: `https://localhost:${port}/slow`, timeoutMs: 300 }))).code).toBe('timeout');
    const first = seen[before]!.connection;
    await vi.waitFor(() => expect(peer.connections.closed.has(first)).toBe(true));
    expect((await outboundRequest(base({ url: `https://localhost:${port}/quick`, timeoutMs: 300 }))).status).toBe(200);
    expect(seen[before + 1]!.connection).toBeGreaterThan(first);
  });

  /** A kept connection (made by one request), which the peer closes at its next request unanswered. */
  async function keptThenClosed(): Promise<{ kept: number; before: number }> {
    await outboundRequest(base({}));
    const kept = seen.at(-1)!.connection;
    respond = (req, res) => {
      if (seen.at(-1)!.connection === kept) req.socket.destroy();
      else res.end('again');
    };
    return { kept, before: seen.length };
  }

  it('a kept connection the peer closes as a request that may arrive twice goes out: it goes once more, on a new connection', async () => {
    const { kept, before } = await keptThenClosed();
    const res = await outboundRequest(base({ method: 'POST', body: '{"n":1}', idempotent: true }));
    expect(res.body.toString()).toBe('again');
    const tries = seen.slice(before);
    expect(tries.map((r) => r.connection === kept)).toEqual([true, false]);
    expect(tries.map((r) => r.body)).toEqual(['{"n":1}', '{"n":1}']);
  });

  it('a POST not marked idempotent is not sent again, nor on a kept connection the peer closed', async () => {
    const { before } = await keptThenClosed();
    expect((await failure(base({ method: 'POST', body: '{}' }))).code).toBe('connection_failed');
    expect(seen.length).toBe(before + 1);
    // a PUT may arrive twice (RFC 9110): sent again
    await keptThenClosed();
    expect((await outboundRequest(base({ method: 'PUT', body: '{}' }))).body.toString()).toBe('again');
  });

  it('a new connection closed without an answer is a failure: the request is not sent again', async () => {
    const before = seen.length;
    respond = (req) => req.socket.destroy();
    expect((await failure(base({ method: 'POST', body: '{}' }))).code).toBe('connection_failed');
    expect(seen.length).toBe(before + 1);
  });

  it('requests at once use as many connections, which are reused afterwards', async () => {
    let hold: (() => void)[] = [];
    respond = (_req, res) => hold.push(() => res.end('ok'));
    const { opened } = peer.connections;
    const sent = Promise.all([1, 2, 3].map(() => outboundRequest(base({}))));
    await vi.waitFor(() => expect(hold.length).toBe(3));
    for (const h of hold) h();
    hold = [];
    await sent;
    expect(peer.connections.opened).toBe(opened + 3);
    respond = (_req, res) => res.end('ok');
    await Promise.all([1, 2, 3].map(() => outboundRequest(base({}))));
    expect(peer.connections.opened).toBe(opened + 3);
  });
});

describe('the trust context of a CA file (src/outbound/trust.ts)', () => {
  it('is built once and shared by every connection while the file stays as it is', async () => {
    const first = trustContext(caFile);
    expect(first).toBeDefined();
    // TLS contexts made while connecting (node's TLS socket makes one per connection unless given one)
    const made = vi.spyOn(tls, 'createSecureContext');
    try {
      for (let i = 0; i < 3; i++) expect((await outboundRequest(base({}))).status).toBe(200);
      expect(made).not.toHaveBeenCalled();
    } finally {
      made.mockRestore();
    }
    expect(trustContext(caFile)).toBe(first);
    expect(trustContext(undefined)).toBeUndefined();
  });

  it('a changed file is read again: a rotated CA is trusted from the next connection, the old one no longer', async () => {
    const other = await startPeer({ prefix: 'svc-outbound-rotated-' });
    const file = join(dir, 'rotating-ca.pem');
    try {
      writeFileSync(file, readFileSync(caFile));
      const before = trustContext(file);
      expect((await outboundRequest(base({ caFile: file }))).status).toBe(200);
      expect((await failure(base({ caFile: file, url: other.url() }))).code).toBe('tls_failure');
      // the rotation: the other peer's CA in place of the first (another size, so another version
      // even within the file system's timestamp resolution)
      writeFileSync(file, `${readFileSync(other.caFile, 'utf8')}\n`);
      expect(trustContext(file)).not.toBe(before);
      expect((await outboundRequest(base({ caFile: file, url: other.url() }))).status).toBe(200);
      expect((await failure(base({ caFile: file }))).code).toBe('tls_failure');
    } finally {
      await other.close();
    }
  });

  it('a file without a certificate, or none at all, fails the call before anything is sent', async () => {
    const empty = join(dir, 'no-certificate.pem');
    writeFileSync(empty, 'not a certificate\n');
    expect(() => trustContext(empty)).toThrow(/no PEM certificate/);
    const before = seen.length;
    expect((await failure(base({ caFile: empty }))).code).toBe('connection_failed');
    expect((await failure(base({ caFile: join(dir, 'missing.pem') }))).code).toBe('connection_failed');
    expect(seen.length).toBe(before);
  });
});

describe('redactHeaders', () => {
  it('redacts cookie, auth and similar headers and joins repeated ones', () => {
    expect(
      redactHeaders({
        'Set-Cookie': ['a', 'b'],
        Authorization: 'Bearer x',
        'Proxy-Authenticate': 'Basic',
        'X-Api-Key': 'k',
        'X-Auth-Token': 't',
        Vary: ['a', 'b'],
        'Content-Type': 'text/plain',
      }),
    ).toEqual({
      'set-cookie': '[redacted]',
      authorization: '[redacted]',
      'proxy-authenticate': '[redacted]',
      'x-api-key': '[redacted]',
      'x-auth-token': '[redacted]',
      vary: 'a, b',
      'content-type': 'text/plain',
    });
  });
});
