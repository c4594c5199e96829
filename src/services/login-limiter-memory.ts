// The limiter's interface and its in-process backend (the default, and the shared backend's
// fallback); src/services/login-limiter.ts picks the backend, login-limiter-redis.ts is the shared one.
import { randomUUID } from 'node:crypto';
import { ApiError } from '../domain/errors.ts';
import {
  DEFAULT_LIMITER_CONFIG,
  denial,
  entryOf,
  expiresAt,
  fail,
  keysFor,
  newState,
  prune,
  reserve,
  selectEntries,
  type KeyState,
  type LimitEntry,
  type LimitKey,
  type LimiterConfig,
  type SnapshotFilter,
} from '../domain/rate-limit.ts';

/** An admitted attempt: its reservation on each key, resolved by failed/succeeded/abandon. */
export interface AttemptTicket {
  rid: string;
  keys: LimitKey[];
  /** Which store holds the reservation (the shared one, or the local fallback). */
  store: 'memory' | 'redis';
}

export type Admission = { ok: true; ticket: AttemptTicket } | { ok: false; retryAfter: number };

export interface LimiterSnapshot {
  entries: LimitEntry[];
  total: number;
  truncated: boolean;
}

export interface LoginLimiter {
  readonly backend: 'memory' | 'redis';
  readonly config: LimiterConfig;
  /** Admits an attempt (reserving it on every key) or says how long to wait. Never throws for backend trouble. */
  admit(name: string, ip: string): Promise<Admission>;
  failed(ticket: AttemptTicket): Promise<void>;
  /** A successful login: forgets the (name, IP) key and releases the other reservations. */
  succeeded(ticket: AttemptTicket): Promise<void>;
  /** The attempt ended without a verdict (an error): releases its reservations. */
  abandon(ticket: AttemptTicket): Promise<void>;
  /** Admin views; throw LimiterUnavailable (503) when the shared backend is unreachable. */
  snapshot(filter: SnapshotFilter): Promise<LimiterSnapshot>;
  clear(): Promise<number>;
  releaseEntry(id: string): Promise<boolean>;
  close(): Promise<void>;
}

export const limiterUnavailable = () =>
  new ApiError('unavailable', 'the shared login rate limiter is unavailable; try again later', { reason: 'limiter_unavailable' });

/** In-process limiter: the default backend, and the fallback of the shared one. */
export class MemoryLoginLimiter implements LoginLimiter {
  readonly backend = 'memory' as const;
  private readonly states = new Map<string, KeyState>();
  private ops = 0;

  constructor(
    readonly config: LimiterConfig = DEFAULT_LIMITER_CONFIG,
    private readonly now: () => number = Date.now,
    private readonly maxKeys = 100_000,
  ) {}

  admit(name: string, ip: string): Promise<Admission> {
    return Promise.resolve(this.admitKeys(keysFor(this.config, name, ip)));
  }

  /** Synchronous, hence atomic: no other attempt can interleave between the check and the reservation. */
  admitKeys(keys: LimitKey[]): Admission {
    const now = this.now();
    this.housekeeping(now);
    let wait = 0;
    const states = keys.map((k) => {
      const st = this.states.get(k.id) ?? newState(k);
      prune(st, now, this.config);
      wait = Math.max(wait, denial(st, now, k.threshold, this.config) ?? 0);
      return st;
    });
    if (wait > 0) return { ok: false, retryAfter: wait };
    const rid = randomUUID();
    keys.forEach((k, i) => {
      reserve(states[i]!, rid, now, this.config);
      this.states.set(k.id, states[i]!);
    });
    return { ok: true, ticket: { rid, keys, store: 'memory' } };
  }

  failed(t: AttemptTicket): Promise<void> {
    const now = this.now();
    for (const k of t.keys) {
      const st = this.states.get(k.id) ?? newState(k);
      prune(st, now, this.config);
      fail(st, t.rid, now, k.threshold, this.config);
      this.states.set(k.id, st);
    }
    return Promise.resolve();
  }

  succeeded(t: AttemptTicket): Promise<void> {
    for (const k of t.keys) {
      if (k.scope === 'user_ip') this.states.delete(k.id);
      else this.unreserve(k, t.rid);
    }
    return Promise.resolve();
  }

  abandon(t: AttemptTicket): Promise<void> {
    for (const k of t.keys) this.unreserve(k, t.rid);
    return Promise.resolve();
  }

  snapshot(filter: SnapshotFilter): Promise<LimiterSnapshot> {
    const now = this.now();
    this.housekeeping(now, true);
    const entries: LimitEntry[] = [];
    for (const [id, st] of this.states) {
      const e = entryOf(id, st, now, this.config);
      if (e) entries.push(e);
    }
    return Promise.resolve(selectEntries(entries, filter));
  }

  clear(): Promise<number> {
    const n = this.states.size;
    this.states.clear();
    return Promise.resolve(n);
  }

  releaseEntry(id: string): Promise<boolean> {
    return Promise.resolve(this.states.delete(id));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private unreserve(k: LimitKey, rid: string): void {
    const st = this.states.get(k.id);
    if (!st) return;
    delete st.p[rid];
    if (!st.lf && Object.keys(st.p).length === 0) this.states.delete(k.id);
  }

  /** Forgets expired keys now and then; above maxKeys, evicts unlocked keys, oldest failure first. */
  private housekeeping(now: number, force = false): void {
    if (!force && ++this.ops % 256 !== 0 && this.states.size < this.maxKeys) return;
    for (const [id, st] of this.states) if (expiresAt(st, this.config) <= now) this.states.delete(id);
    if (this.states.size < this.maxKeys) return;
    const unlocked = [...this.states].filter(([, st]) => st.lu <= now).sort((a, b) => a[1].lf - b[1].lf);
    for (const [id] of unlocked.slice(0, this.states.size - Math.floor(this.maxKeys * 0.9))) this.states.delete(id);
  }
}
