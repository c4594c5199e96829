// The process's life as the HTTP side shows it, answered at the front door before the app:
//   starting  the database schema is not ready yet (an api process waits for the migrations):
//             /healthz 200, everything else 503, /readyz included;
//   serving   the app answers everything (its /readyz checks the database and the migrations);
//   stopping  SIGTERM arrived: /readyz 503 at once so the gateway stops routing here, requests in
//             flight (and stragglers the gateway still sends) are served with `Connection: close`,
//             and the listener closes once none is in flight, or when the drain bound runs out
//             (the connections still open are then cut).
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { Hono } from 'hono';
import type { App } from './contract.ts';
import { reasonPhrase, type ErrorBody } from '../domain/errors.ts';
import { SECURITY_HEADERS } from './security-headers.ts';

export type Phase = 'starting' | 'serving' | 'stopping';

function unavailable(message: string): Response {
  const body: ErrorBody = { error: reasonPhrase(503), message };
  return new Response(JSON.stringify(body), {
    status: 503,
    headers: { 'content-type': 'application/json', 'x-request-id': randomUUID(), 'retry-after': '5', ...SECURITY_HEADERS },
  });
}

export class Lifecycle {
  private current: Phase = 'starting';
  private app: App | undefined;
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];
  /** Why the process is not serving yet (the 503 message while starting). */
  startingMessage = 'the service is starting';

  get phase(): Phase {
    return this.current;
  }

  /** The app to hand to the server: the phase answers first, then the app set by serve(). */
  front(): App {
    const hono = new Hono();
    hono.get('/healthz', (c) => c.json({ status: 'ok' }, 200, { 'x-request-id': randomUUID(), ...SECURITY_HEADERS }));
    hono.all('*', () => unavailable(this.current === 'stopping' ? 'the service is stopping' : this.startingMessage));
    const fetch = (req: Request, env?: unknown): Response | Promise<Response> => {
      const app = this.app;
      if (!app) return hono.fetch(req, env as never);
      if (this.current === 'stopping' && new URL(req.url).pathname === '/readyz') return unavailable('the service is stopping');
      return app.fetch(req, env);
    };
    return { fetch, hono };
  }

  /** The schema is ready: the app answers from now on (unless a stop began meanwhile). */
  serve(app: App): void {
    this.app = app;
    if (this.current === 'starting') this.current = 'serving';
  }

  /** Counts requests in flight and asks clients to close their connections once stopping. */
  track(server: Server): void {
    // prepended: the response may be written within the app's own listener, before ours would run
    server.prependListener('request', (_req, res) => {
      this.inFlight++;
      if (this.current === 'stopping') res.setHeader('connection', 'close');
      res.once('close', () => {
        this.inFlight--;
        if (this.inFlight === 0) for (const ok of this.idleWaiters.splice(0)) ok();
        // a keep-alive connection whose request began before the stop turns idle now
        if (this.current === 'stopping') setImmediate(() => server.closeIdleConnections());
      });
    });
  }

  /** readyz answers 503 from now on. */
  stop(): void {
    this.current = 'stopping';
  }

  /**
   * Stops `server` within `boundMs`: waits for the requests in flight, closes the listener and the
   * idle connections, and cuts what is still open when the bound runs out. Returns the number of
   * requests cut.
   */
  async drain(server: Server, boundMs: number): Promise<number> {
    this.stop();
    const deadline = Date.now() + boundMs;
    if (this.inFlight > 0) await this.within(new Promise<void>((ok) => this.idleWaiters.push(ok)), boundMs);
    const closed = new Promise<void>((ok) => server.close(() => ok()));
    server.closeIdleConnections();
    const finished = await this.within(closed, Math.max(0, deadline - Date.now()));
    if (finished) return 0;
    const cut = this.inFlight;
    server.closeAllConnections();
    await closed;
    return cut;
  }

  /** True when `p` settled within `ms`. */
  private async within(p: Promise<void>, ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((ok) => (timer = setTimeout(() => ok(false), ms)));
    try {
      return await Promise.race([p.then(() => true as const), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
