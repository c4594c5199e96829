// Kept broker connections (AMQP, Redis): a connection opened for one delivery serves the next ones
// to the same destination while it works, instead of a connect, TLS handshake, login (and for AMQP
// a confirm channel) per message; a broker sees a few long connections rather than one per event.
// The key is the whole destination as prepared for this send: the screened address and port, the
// host name (TLS name), the trust context, the credentials (so a rotated secret opens a new
// connection at once), the virtual host or database and the connection options; it is hashed, so
// no secret is kept as a map key. Every send still resolves and screens its destination first.
// A connection is dropped (and closed) when a send on it fails in a way that may have broken it,
// when it closes or errors by itself, and after IDLE_MS unused; a failed connect is not kept, so
// the next send connects again. A connection is not given to new sends once MAX_AGE_MS old (it
// closes when its last send is done): credentials are checked when a connection logs in, so a
// password revoked at the broker or mail server stops working here within that time at most.
import { createHash } from 'node:crypto';
import { trustId } from '../outbound/trust.ts';
import type { Destination } from './uri.ts';

/** A kept connection unused this long is closed. */
export const IDLE_MS = 10_000;
/** A kept connection older than this serves no new send. */
export const MAX_AGE_MS = 10 * 60_000;

interface Entry<T> {
  opening: Promise<T>;
  users: number;
  idleTimer: NodeJS.Timeout | undefined;
  closed: boolean;
  openedAt: number;
}

export interface Held<T> {
  conn: T;
  /** Gives the connection back; `broken` drops it (closed once its other users are done). */
  release: (broken: boolean) => void;
}

/**
 * The key of a destination as prepared for a send: the kind, TLS name, screened address, port and
 * trust context, then the kind's own parts (credentials, database, options); hashed, as those may
 * hold a secret.
 */
export function destinationKey(kind: string, dest: Destination, own: unknown[]): string {
  const parts = [kind, dest.hostname, dest.address.address, dest.port, trustId(dest.tls.secureContext), ...own];
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url');
}

export class ConnectionKeeper<T> {
  private readonly entries = new Map<string, Entry<T>>();

  /**
   * `close` ends a connection (quietly, settling once it is closed); `watch` is called once per
   * new connection with a callback that drops it (for its own close and error events); `maxAgeMs`
   * is for tests.
   */
  constructor(
    private readonly close: (conn: T) => Promise<void> | void,
    private readonly watch: (conn: T, drop: () => void) => void,
    private readonly maxAgeMs = MAX_AGE_MS,
  ) {}

  /**
   * The kept connection for `key`, or a new one from `open` (shared with concurrent takers while
   * it opens). `wait` bounds the wait (a send's deadline); an open that fails is not kept.
   */
  async take(key: string, open: () => Promise<T>, wait: <R>(p: Promise<R>) => Promise<R>): Promise<Held<T>> {
    let entry = this.entries.get(key);
    if (entry && Date.now() - entry.openedAt >= this.maxAgeMs) {
      this.drop(key, entry);
      entry = undefined;
    }
    if (!entry) {
      const opening = open();
      const e: Entry<T> = { opening, users: 0, idleTimer: undefined, closed: false, openedAt: Date.now() };
      entry = e;
      this.entries.set(key, e);
      opening.then(
        (conn) => {
          if (this.entries.get(key) === e) this.watch(conn, () => this.drop(key, e));
          else void this.closeWhenUnused(e);
        },
        () => {
          if (this.entries.get(key) === e) this.entries.delete(key);
        },
      );
    }
    const e = entry;
    e.users++;
    clearTimeout(e.idleTimer);
    e.idleTimer = undefined;
    let conn: T;
    try {
      conn = await wait(e.opening);
    } catch (err) {
      this.done(key, e, true);
      throw err;
    }
    let released = false;
    return {
      conn,
      release: (broken) => {
        if (released) return;
        released = true;
        this.done(key, e, broken);
      },
    };
  }

  private done(key: string, e: Entry<T>, broken: boolean): void {
    e.users--;
    if (broken) this.drop(key, e);
    else if (this.entries.get(key) !== e) void this.closeWhenUnused(e);
    else if (e.users === 0) {
      e.idleTimer = setTimeout(() => this.drop(key, e), IDLE_MS);
      e.idleTimer.unref();
    }
  }

  /** Forgets the entry (new sends open another connection) and closes it once unused. */
  private drop(key: string, e: Entry<T>): void {
    if (this.entries.get(key) === e) this.entries.delete(key);
    clearTimeout(e.idleTimer);
    void this.closeWhenUnused(e);
  }

  private closeWhenUnused(e: Entry<T>): Promise<void> {
    if (e.users > 0 || e.closed) return Promise.resolve();
    e.closed = true;
    return e.opening
      .then(
        (conn) => this.close(conn),
        () => {},
      )
      .catch(() => {});
  }

  /** Closes every kept connection not in use (shutdown, tests); those in use close when released. */
  async closeAll(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(
      all.map((e) => {
        clearTimeout(e.idleTimer);
        return this.closeWhenUnused(e);
      }),
    );
  }
}
