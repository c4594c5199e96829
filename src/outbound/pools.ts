// Kept-alive outbound connections (remote calls, webhook deliveries). A connection is reused only
// by a request to the same origin (scheme, host name, port: so the same SNI, Host and certificate
// name), pinned to the same screened address, verified with the same trust context and under the
// same deadline; every request resolves and screens its destination first and only then takes a
// connection, so a name that now resolves elsewhere (or to a refused address) never reaches an old
// one. Headers (and their secrets) are per request; a response read only in part (byte cap,
// deadline, abort) drops its connection, so the next request never reads the rest of it.
// Opening a TCP + TLS connection per request cost a handshake and a certificate check each time.
// Each connection is an undici Client used by one request at a time, so a lease knows whether its
// connection was already open (`reused`): a peer may close an idle connection just as a request
// is written, and only then is the request worth sending again (outbound/http.ts).
// Idle connections close after IDLE_MS (sooner when the peer's Keep-Alive says so); when a new
// destination is added, those unused for DESTINATION_IDLE_MS are forgotten; at most MAX_IDLE
// connections wait per destination and MAX_DESTINATIONS destinations are kept. Idle sockets do not
// keep the process alive.
import type { LookupFunction } from 'node:net';
import type { SecureContext } from 'node:tls';
import { Client } from 'undici';
import { trustId } from './trust.ts';
import type { ResolvedAddress } from '../domain/outbound.ts';

const IDLE_MS = 4_000;
const DESTINATION_IDLE_MS = 30_000;
const MAX_IDLE = 64;
const MAX_DESTINATIONS = 64;

interface Connection {
  client: Client;
  open: boolean;
}

interface Destination {
  key: string;
  idle: Connection[];
  inFlight: number;
  lastUsed: number;
  make: () => Connection;
}

const destinations = new Map<string, Destination>();
function close(c: Connection): void {
  void c.client.close().catch(() => {});
}

/** Forgets destinations unused for DESTINATION_IDLE_MS, then the least recently used beyond MAX_DESTINATIONS. */
function sweep(now: number): void {
  const forget = (key: string, d: Destination) => {
    destinations.delete(key);
    for (const c of d.idle.splice(0)) close(c);
  };
  for (const [key, d] of destinations) if (d.inFlight === 0 && now - d.lastUsed > DESTINATION_IDLE_MS) forget(key, d);
  if (destinations.size < MAX_DESTINATIONS) return;
  const unused = [...destinations].filter(([, d]) => d.inFlight === 0).sort((a, b) => a[1].lastUsed - b[1].lastUsed);
  for (const [key, d] of unused.slice(0, destinations.size - MAX_DESTINATIONS + 1)) forget(key, d);
}

function destination(origin: string, pinned: ResolvedAddress, trust: SecureContext | undefined, timeoutMs: number): Destination {
  const key = `${origin}\0${pinned.address}\0${trustId(trust)}\0${timeoutMs}`;
  let d = destinations.get(key);
  if (d) return d;
  sweep(Date.now());
  const lookup: LookupFunction = (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all) {
      (callback as unknown as (e: null, a: ResolvedAddress[]) => void)(null, [pinned]);
    } else {
      callback(null, pinned.address, pinned.family);
    }
  };
  const make = (): Connection => {
    const client = new Client(origin, {
      connect: { lookup, secureContext: trust, rejectUnauthorized: true, timeout: timeoutMs },
      pipelining: 1,
      keepAliveTimeout: IDLE_MS,
      keepAliveMaxTimeout: IDLE_MS,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const c: Connection = { client, open: false };
    client.on('connect', () => (c.open = true));
    client.on('disconnect', () => (c.open = false));
    return c;
  };
  d = { key, idle: [], inFlight: 0, lastUsed: Date.now(), make };
  destinations.set(key, d);
  return d;
}

export interface Lease {
  client: Client;
  /** The connection was open before this request (kept alive from an earlier one). */
  reused: boolean;
  /** Gives the connection back (or closes it when enough wait); call once the response is read or dropped. */
  release: () => void;
}

/**
 * A connection for one request to `origin` pinned to `pinned`, verified with `trust`, under
 * `timeoutMs`: an idle one of the same destination when there is one, else a new one. `fresh`
 * skips the idle ones.
 */
export function lease(origin: string, pinned: ResolvedAddress, trust: SecureContext | undefined, timeoutMs: number, fresh = false): Lease {
  const d = destination(origin, pinned, trust, timeoutMs);
  let c: Connection | undefined;
  while (!fresh && (c = d.idle.pop()) && (c.client.closed || c.client.destroyed)) c = undefined;
  c ??= d.make();
  const conn = c;
  const reused = conn.open;
  d.inFlight++;
  d.lastUsed = Date.now();
  let released = false;
  return {
    client: conn.client,
    reused,
    release: () => {
      if (released) return;
      released = true;
      d.inFlight--;
      d.lastUsed = Date.now();
      if (conn.client.closed || conn.client.destroyed) return;
      if (destinations.get(d.key) === d && d.idle.length < MAX_IDLE) d.idle.push(conn);
      else close(conn);
    },
  };
}

/** Closes every kept connection (requests in flight finish first). For shutdown and tests. */
export async function closeConnections(): Promise<void> {
  const all = [...destinations.values()];
  destinations.clear();
  await Promise.all(all.flatMap((d) => d.idle.splice(0).map((c) => c.client.close().catch(() => {}))));
}

/** How many destinations are kept (tests). */
export function destinationCount(): number {
  return destinations.size;
}
