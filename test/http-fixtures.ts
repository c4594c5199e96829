// The test app behind a real listening socket, for clients that speak HTTP themselves (the shipped
// SDK, generated clients). Every response is checked against openapi.yaml on its way out, as the
// in-process helpers do; a violation is recorded (the client still gets the response) and the test
// asserts that none was.
import { serve } from '@hono/node-server';
import { checkResponse, decodedText } from './contract-check.ts';
import type { TestApp } from './helpers.ts';

export interface HttpServer {
  /** http://127.0.0.1:<port> */
  baseUrl: string;
  /** Contract violations of the responses served so far. */
  violations: string[];
  close(): Promise<void>;
}

export async function serveOverHttp(t: TestApp): Promise<HttpServer> {
  const violations: string[] = [];
  const server = serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: async (req: Request) => {
      const res = await t.app.fetch(req);
      const text = await decodedText(res.clone());
      try {
        checkResponse(req.method, new URL(req.url).pathname, res.status, res.headers, text);
      } catch (e) {
        violations.push(String(e));
      }
      return res;
    },
  });
  await new Promise<void>((ok) => server.once('listening', () => ok()));
  const { port } = server.address() as { port: number };
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    violations,
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}
