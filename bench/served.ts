// Requests through the service's HTTP request listener (src/http/server.ts requestListener: the
// function `make run`'s server hands each parsed request, @hono/node-server's), on an in-memory
// connection instead of a socket: a request pays what a deployed one pays from node:http's parsed
// IncomingMessage to the response bytes written on its connection (node-server's Request and
// Response, the app, node:http's header writing), and not the kernel's part, which a benchmark
// process sharing the machine with PostgreSQL would time mostly as wake-ups. app.fetch with
// undici's Request and Response (bench/setup.ts `request`) costs more than that path: in a
// 100-row object page, ~50 µs to build the Request, ~90 µs for the Response to turn its string
// body into a stream and ~100 µs for `text()` to read it back, none of which a deployed server does.
import { IncomingMessage, ServerResponse } from 'node:http';
import { Duplex } from 'node:stream';
import { getRequestListener } from '@hono/node-server';
import type { App } from '../src/http/contract.ts';
import { requestListener } from '../src/http/server.ts';

/** The connection: what the response writes is kept; nothing is read from it. */
class Connection extends Duplex {
  readonly remoteAddress = '127.0.0.1';
  readonly remotePort = 40000;
  readonly remoteFamily = 'IPv4';
  readonly encrypted = false;
  written: Buffer[] = [];
  override _read(): void {}
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.written.push(chunk);
    done();
  }
  setTimeout(): this {
    return this;
  }
}

export interface ServedResponse {
  status: number;
  /** Header names lowercased. */
  headers: Map<string, string>;
  text: string;
}

type Send = (method: string, pathAndQuery: string, headers: Record<string, string>) => Promise<ServedResponse>;

/** A client of `app` through its request listener; `send` resolves once the response is written. */
export function servedClient(app: App): Send {
  return servedListener(requestListener(app, '127.0.0.1'));
}

/** A client of any fetch handler (e.g. a bare Hono app's) through @hono/node-server's listener, as above. */
export function servedFetch(fetch: (req: Request) => Response | Promise<Response>): Send {
  return servedListener(getRequestListener(fetch, { hostname: '127.0.0.1' }));
}

function servedListener(listener: ReturnType<typeof getRequestListener>): Send {
  return (method, pathAndQuery, headers) =>
    new Promise<ServedResponse>((resolve, reject) => {
      const conn = new Connection();
      const req = new IncomingMessage(conn as never);
      req.method = method;
      req.url = pathAndQuery;
      req.httpVersion = '1.1';
      req.httpVersionMajor = 1;
      req.httpVersionMinor = 1;
      req.rawHeaders = ['host', 'bench.local', ...Object.entries(headers).flat()];
      req.complete = true;
      req.push(null); // no body
      const res = new ServerResponse(req);
      res.assignSocket(conn as never);
      res.on('finish', () => {
        try {
          resolve(parse(Buffer.concat(conn.written)));
        } catch (err) {
          reject(err as Error);
        }
      });
      res.on('error', reject);
      listener(req, res).catch(reject);
    });
}

/** An HTTP/1.1 response with a Content-Length body (what the service writes for a string body). */
function parse(raw: Buffer): ServedResponse {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) throw new Error('the response has no end of headers');
  const [statusLine, ...lines] = raw.toString('latin1', 0, end).split('\r\n');
  const status = Number(statusLine!.split(' ')[1]);
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
  }
  if (headers.get('transfer-encoding')) throw new Error('a chunked response (not expected of a list page)');
  const length = Number(headers.get('content-length') ?? 0);
  const text = raw.toString('utf8', end + 4, end + 4 + length);
  if (raw.length !== end + 4 + length) throw new Error(`the response body has ${raw.length - end - 4} bytes, not ${length}`);
  return { status, headers, text };
}
