// A TCP proxy in front of PostgreSQL for tests that observe round trips without timing anything:
// it forwards the client's bytes at once and records them, and holds PostgreSQL's answers while
// told to, so a test sees what a client sent before any answer came back.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { inject } from 'vitest';
import { createApp } from '../src/app.ts';
import type { Config } from '../src/config.ts';
import { createSql, poolStats, type Sql } from '../src/db/sql.ts';
import { wakesSettled } from '../src/db/wakeups.ts';
import type { App } from '../src/http/contract.ts';
import type { TestApp } from './helpers.ts';

/** Forwards client bytes at once; holds the server's until release(). Records what the client sent. */
export class HoldingProxy {
  server!: Server;
  sent = '';
  private held: [Socket, Buffer][] = [];
  private holding = false;
  private waiters: (() => void)[] = [];

  async start(host: string, port: number): Promise<number> {
    this.server = createServer((client) => {
      client.setNoDelay(true);
      const up = connect(port, host);
      up.setNoDelay(true);
      client.on('data', (b) => {
        this.sent += b.toString('latin1');
        up.write(b);
        for (const w of this.waiters.splice(0)) w();
      });
      up.on('data', (b) => (this.holding ? this.held.push([client, b]) : client.write(b)));
      client.on('error', () => up.destroy());
      up.on('error', () => client.destroy());
      client.on('close', () => up.destroy());
    });
    await new Promise<void>((ok) => this.server.listen(0, '127.0.0.1', ok));
    return (this.server.address() as { port: number }).port;
  }

  hold(): void {
    this.holding = true;
    this.sent = '';
  }

  release(): void {
    this.holding = false;
    for (const [c, b] of this.held.splice(0)) c.write(b);
  }

  /**
   * Resolves once the client has sent every marker (while answers are held, none can be a reply to
   * another); a marker given n times must have been sent n times (n statements of the same text).
   */
  async until(markers: string[]): Promise<void> {
    const limit = Date.now() + 5000;
    const wanted = new Map<string, number>();
    for (const m of markers) wanted.set(m, (wanted.get(m) ?? 0) + 1);
    while (![...wanted].every(([m, n]) => this.sent.split(m).length - 1 >= n)) {
      if (Date.now() > limit) throw new Error(`the client sent ${JSON.stringify(this.sent)} but not all of ${markers.join(', ')}`);
      await new Promise<void>((ok) => {
        this.waiters.push(ok);
        setTimeout(ok, 100);
      });
    }
  }

  /**
   * Sends `send` with every answer held until the client has sent each of `markers` (which it can
   * then only have sent without waiting for an answer); returns what it had sent by then, and the
   * reply, once the answers to that much are released. Whatever it sends after stays held until
   * release().
   */
  async sendHeld<R>(markers: string[], send: () => R | Promise<R>): Promise<{ sent: string; reply: R }> {
    this.hold();
    const replying = Promise.resolve(send());
    await this.until(markers);
    const sent = this.sent;
    this.hold(); // keep holding whatever is sent from here on
    this.release(); // and hand over the answers to what was sent so far
    return { sent, reply: await replying };
  }

  close(): Promise<void> {
    return new Promise((ok) => this.server.close(() => ok()));
  }
}

/** An Execute message as a client sends it: 'E', length 9, the unnamed portal, no row limit (one a statement run). */
export const EXECUTE = 'E\0\0\0\t\0\0\0\0\0';

/** A HoldingProxy in front of the tests' database, and that database's URL through it. */
export async function proxyToTestDatabase(): Promise<{ proxy: HoldingProxy; url: string }> {
  const url = new URL(inject('dbUrl'));
  const proxy = new HoldingProxy();
  const port = await proxy.start(url.hostname || '127.0.0.1', Number(url.port || 5432));
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return { proxy, url: url.toString() };
}

/**
 * Opens three connections of `sql` and resolves once none of its statements is under way or
 * waiting. What the app started on its own (learnTextOrder, the token cache's reads) has then been
 * answered, so a test that holds the answers next sees only its own requests' statements. Those
 * go out on a connection already open: a connection opened while answers are held would wait for
 * its start-up and its driver's first query (the array types) forever. One busy with a statement
 * the app sends in the background (the token cache's) leaves the others free.
 */
async function readyPool(sql: Sql): Promise<void> {
  await Promise.all([1, 2, 3].map(() => sql`select pg_sleep(0.02)`));
  const limit = Date.now() + 10_000;
  for (;;) {
    const s = poolStats(sql);
    if (!s) throw new Error('the pool reports no statistics (postgres.js without the patch in patches/)');
    if (s.connecting + s.busy + s.full + s.waiting === 0) return;
    if (Date.now() > limit) throw new Error(`the pool did not become quiet: ${JSON.stringify(s)}`);
    await new Promise((ok) => setTimeout(ok, 5));
  }
}

/**
 * A second app on `t`'s database whose connections pass a HoldingProxy, with its token cache on
 * (once a token is known, a request needs no statement before its own), for `fn` once its pool is
 * ready (readyPool); `get` sends a GET with `t`'s admin token, `quiet` waits for its event wakes. The proxy's answers are released and
 * the app's pool ended afterwards.
 */
export async function withProxiedApp(
  t: TestApp,
  fn: (p: {
    app: App;
    proxy: HoldingProxy;
    config: Config;
    get: (path: string) => Response | Promise<Response>;
    /** Waits for the app's worker wakes under way (sent after a commit that appended events: db/wakeups.ts). */
    quiet: () => Promise<void>;
  }) => Promise<void>,
): Promise<void> {
  const { proxy, url } = await proxyToTestDatabase();
  const config = { ...t.deps.config, SVC_TOKEN_CACHE_SIZE: 100 };
  const sql = createSql(url, config);
  try {
    const app = await createApp({ ...t.deps, config, sql });
    await readyPool(sql);
    const get = (path: string) =>
      app.fetch(new Request(`http://test.local${path}`, { headers: { authorization: `Bearer ${t.adminToken}` } }));
    await fn({ app, proxy, config, get, quiet: () => wakesSettled(sql) });
  } finally {
    proxy.release();
    await sql.end({ timeout: 5 });
    await proxy.close();
  }
}
