import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { getRequestListener, RequestError, type ServerType } from '@hono/node-server';
import type { App } from './contract.ts';
import { reasonPhrase, type ErrorBody } from '../domain/errors.ts';
import { SECURITY_HEADERS } from './security-headers.ts';
import type { Config } from '../config.ts';

export interface ServeOptions {
  /**
   * SVC_HTTP_HEADERS_TIMEOUT_MS: how long a request's headers may take to arrive (default 60 s,
   * Node's own).
   */
  headersTimeoutMs?: number;
  /**
   * SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS: how long an idle connection is kept for its next request
   * (default 5 s, Node's own).
   */
  keepAliveTimeoutMs?: number;
}

/** The listeners' options from their settings. */
export function serveOptionsOf(config: Pick<Config, 'SVC_HTTP_HEADERS_TIMEOUT_MS' | 'SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS'>): ServeOptions {
  return { headersTimeoutMs: config.SVC_HTTP_HEADERS_TIMEOUT_MS, keepAliveTimeoutMs: config.SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS };
}

/**
 * Serves the app on host:port. Requests that never reach the app still get the contract's JSON
 * error body: those Node's HTTP parser refuses (a bad request line, header fields or a URL too
 * large, headers that did not arrive in time) and those @hono/node-server cannot turn into a
 * Request (e.g. a backslash in the path). A request's headers must arrive within the headers
 * timeout, counted for a connection's first request from its opening: a connection that sends
 * nothing, or only blank lines, gets the 408 as well and is closed.
 */
export function serveApp(app: App, host: string, port: number, opts: ServeOptions = {}): ServerType {
  const headersTimeout = opts.headersTimeoutMs ?? 60_000;
  // Node checks the headers timeout of the connections this often: its default, 30 s, let a
  // request's headers take up to 90 s.
  const checkEvery = Math.min(5_000, Math.max(50, Math.floor(headersTimeout / 10)));
  const server: Server = createServer(
    {
      headersTimeout,
      requestTimeout: Math.max(300_000, headersTimeout),
      connectionsCheckingInterval: checkEvery,
      keepAliveTimeout: opts.keepAliveTimeoutMs ?? 5_000,
    },
    requestListener(app, host),
  );
  server.on('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer; bytesParsed?: number }, socket: Socket) => {
    // Write only where no response has begun on this connection (else the peer would get two).
    const current = (socket as Socket & { _httpMessage?: { headersSent: boolean } | null })._httpMessage;
    if (err.code !== 'ECONNRESET' && socket.writable && !current?.headersSent) {
      const [status, message] = parserErrorStatus(err);
      socket.end(rawErrorResponse(status, message), () => socket.destroy());
    } else {
      socket.destroy();
    }
  });
  server.listen(port, host);
  return server;
}

/**
 * The function the server hands each parsed request (node:http's IncomingMessage and
 * ServerResponse): @hono/node-server's, which turns them into the app's Request and writes its
 * Response. (bench/served.ts calls it on an in-memory connection.)
 */
export function requestListener(app: App, host: string): ReturnType<typeof getRequestListener> {
  return getRequestListener(app.fetch, {
    hostname: host,
    errorHandler: (err) =>
      err instanceof RequestError
        ? errorResponse(400, 'the request URL or Host header is not valid')
        : errorResponse(500, 'internal server error'),
  });
}

/** The status and message for an error of Node's HTTP parser (its own choice of status, plus 414). */
export function parserErrorStatus(err: { code?: string; rawPacket?: Buffer; bytesParsed?: number }): [number, string] {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW': {
      // The request line alone did not end within the limit: the URL is too long.
      const seen = err.rawPacket?.subarray(0, err.bytesParsed ?? err.rawPacket.length).toString('latin1') ?? '';
      if (/^[A-Z]+ /.test(seen) && !seen.includes('\n')) return [414, 'the request URL is too long'];
      return [431, 'the request header fields are too large'];
    }
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return [413, 'the chunk extensions of the request body are too large'];
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, 'the request was not received in time'];
    default:
      return [400, 'the request is not valid HTTP/1.1'];
  }
}

function errorBody(status: number, message: string): string {
  const body: ErrorBody = { error: reasonPhrase(status), message };
  return JSON.stringify(body);
}

function errorResponse(status: number, message: string): Response {
  return new Response(errorBody(status, message), {
    status,
    headers: { 'content-type': 'application/json', 'x-request-id': randomUUID(), ...SECURITY_HEADERS },
  });
}

function rawErrorResponse(status: number, message: string): string {
  const body = errorBody(status, message);
  return [
    `HTTP/1.1 ${status} ${reasonPhrase(status)}`,
    'content-type: application/json',
    `content-length: ${Buffer.byteLength(body)}`,
    `x-request-id: ${randomUUID()}`,
    ...Object.entries(SECURITY_HEADERS).map(([k, v]) => `${k}: ${v}`),
    'connection: close',
    '',
    body,
  ].join('\r\n');
}
