// TLS peers for the tests: a self-signed certificate made at test time with the openssl command
// line (trusted through SVC_OUTBOUND_CA_FILE or a caFile), and a local HTTPS server that records
// every request it receives.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SelfSignedCert {
  /** A new temporary directory holding key.pem and cert.pem; the caller removes it. */
  dir: string;
  /** cert.pem: the certificate, which is its own CA. */
  caFile: string;
  key: Buffer;
  cert: Buffer;
}

/** A fresh self-signed EC P-256 certificate for CN=localhost and `altNames`, valid for one day. */
export function selfSignedCert(prefix = 'svc-tls-', altNames = ['DNS:localhost', 'IP:127.0.0.1']): SelfSignedCert {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const keyFile = join(dir, 'key.pem');
  const caFile = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      caFile,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      `subjectAltName=${altNames.join(',')}`,
    ],
    { stdio: 'ignore' },
  );
  return { dir, caFile, key: readFileSync(keyFile), cert: readFileSync(caFile) };
}

export interface Seen {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** The SNI name the client sent. */
  servername: string | false | null | undefined;
  /** Which TLS connection carried the request (1, 2, … in the order the peer accepted them). */
  connection: number;
  /** The peer's own address on that connection (the address the client connected to). */
  localAddress: string | undefined;
}

export interface Peer {
  port: number;
  /** The peer's certificate directory (removed by close). */
  dir: string;
  caFile: string;
  seen: Seen[];
  /** How many TLS connections were accepted so far, and which of them (by number) have closed. */
  connections: { opened: number; closed: Set<number> };
  /** Answers each request once its body has arrived; replace it to change the answer (default 200 "ok"). */
  respond: (req: IncomingMessage, res: ServerResponse) => void;
  url(path?: string): string;
  close(): Promise<void>;
}

/** A local HTTPS server on 127.0.0.1 with a fresh self-signed certificate (see selfSignedCert). */
export async function startPeer(opts: { prefix?: string; altNames?: string[]; host?: string } = {}): Promise<Peer> {
  const { dir, caFile, key, cert } = selfSignedCert(opts.prefix ?? 'svc-peer-', opts.altNames);
  const peer: Peer = {
    port: 0,
    dir,
    caFile,
    seen: [],
    connections: { opened: 0, closed: new Set<number>() },
    respond: (_req, res) => {
      res.statusCode = 200;
      res.end('ok');
    },
    url: (path = '/hook') => `https://127.0.0.1:${peer.port}${path}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  const server: Server = createServer({ key, cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      peer.seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        servername: (req.socket as TLSSocket).servername,
        connection: connectionIds.get(req.socket as TLSSocket) ?? 0,
        localAddress: req.socket.localAddress,
      });
      peer.respond(req, res);
    });
  });
  const connectionIds = new WeakMap<TLSSocket, number>();
  server.on('secureConnection', (socket: TLSSocket) => {
    const id = ++peer.connections.opened;
    connectionIds.set(socket, id);
    socket.on('close', () => peer.connections.closed.add(id));
  });
  await new Promise<void>((ok) => server.listen(0, opts.host ?? '127.0.0.1', () => ok()));
  peer.port = (server.address() as AddressInfo).port;
  return peer;
}
