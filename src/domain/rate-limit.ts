import { createHash } from 'node:crypto';
import { isIP } from 'node:net';

/**
 * Login rate limiting: pure rules shared by the memory backend (which runs them directly) and the
 * Redis backend (whose Lua script mirrors them step for step).
 *
 * Failed attempts are counted per (name, IP), per IP and per subnet in a sliding window. When a
 * key's failures reach its threshold the key is locked for `lockoutBaseSeconds`, doubling with
 * each further lockout of the same key up to `lockoutMaxSeconds`; failures from before the end of
 * the previous lockout do not count again. An attempt in flight (admitted, password not yet
 * checked) holds a reservation on every key and counts as a possible failure, so however many
 * attempts arrive at once no more than the threshold can ever reach the password check.
 *
 * One more key bounds an account whatever the addresses: per login name (`user`). It never locks:
 * once its failures in the window reach `maxFailuresPerUser`, the name's attempts are spaced
 * `userIntervalSeconds` apart (one at a time, each at least that long after the name's latest
 * failure), so guessing one password from many addresses slows to one try per interval while the
 * owner waits a few seconds at most, and only while the guessing goes on.
 */
export interface LimiterConfig {
  maxFailuresPerUserIp: number;
  maxFailuresPerIp: number;
  maxFailuresPerSubnet: number;
  /** Failures of one login name (any address) in the window before its attempts are spaced out. */
  maxFailuresPerUser: number;
  /** Spacing of a name's attempts once it is over maxFailuresPerUser (never a lockout). */
  userIntervalSeconds: number;
  subnetPrefixV4: number;
  subnetPrefixV6: number;
  windowSeconds: number;
  lockoutBaseSeconds: number;
  lockoutMaxSeconds: number;
  /** How long a reservation may stay unresolved before it stops counting (crashed requests). */
  reservationSeconds: number;
}

export const DEFAULT_LIMITER_CONFIG: LimiterConfig = {
  maxFailuresPerUserIp: 5,
  maxFailuresPerIp: 20,
  maxFailuresPerSubnet: 100,
  maxFailuresPerUser: 20,
  userIntervalSeconds: 5,
  subnetPrefixV4: 24,
  subnetPrefixV6: 64,
  windowSeconds: 300,
  lockoutBaseSeconds: 300,
  lockoutMaxSeconds: 86_400,
  reservationSeconds: 30,
};

export type LimitScope = 'user_ip' | 'ip' | 'subnet' | 'user';

/** One rate-limit key of an attempt. `id` is opaque: base64url SHA-256 of scope and identity. */
export interface LimitKey {
  id: string;
  scope: LimitScope;
  name: string | null;
  ip: string | null;
  subnet: string | null;
  identifier: string;
  threshold: number;
}

/** Entry ids are exactly this shape (43 base64url characters). */
export const ENTRY_ID = /^[A-Za-z0-9_-]{43}$/;

export function thresholdOf(cfg: LimiterConfig, scope: LimitScope): number {
  if (scope === 'user') return cfg.maxFailuresPerUser;
  return scope === 'user_ip' ? cfg.maxFailuresPerUserIp : scope === 'ip' ? cfg.maxFailuresPerIp : cfg.maxFailuresPerSubnet;
}

/** The four keys of a login attempt by `name` from `ip` (the Redis script relies on this order). */
export function keysFor(cfg: LimiterConfig, name: string, ip: string): LimitKey[] {
  const addr = normalizeIp(ip);
  const net = subnetOf(addr, cfg);
  const id = (...parts: string[]) => createHash('sha256').update(parts.join('\u0000'), 'utf8').digest('base64url');
  return [
    {
      id: id('user_ip', name, addr),
      scope: 'user_ip',
      name,
      ip: addr,
      subnet: null,
      identifier: `${name}@${addr}`,
      threshold: cfg.maxFailuresPerUserIp,
    },
    { id: id('ip', addr), scope: 'ip', name: null, ip: addr, subnet: null, identifier: addr, threshold: cfg.maxFailuresPerIp },
    { id: id('subnet', net), scope: 'subnet', name: null, ip: null, subnet: net, identifier: net, threshold: cfg.maxFailuresPerSubnet },
    { id: id('user', name), scope: 'user', name, ip: null, subnet: null, identifier: name, threshold: cfg.maxFailuresPerUser },
  ];
}

export function normalizeIp(ip: string): string {
  let a = ip.trim();
  const zone = a.indexOf('%');
  if (zone >= 0) a = a.slice(0, zone);
  if (a.toLowerCase().startsWith('::ffff:') && isIP(a.slice(7)) === 4) a = a.slice(7);
  return isIP(a) === 6 ? compressV6(expandV6(a)) : a;
}

/** The client network in CIDR notation (/24 and /64 by default); an unparsable address is its own network. */
export function subnetOf(ip: string, cfg: Pick<LimiterConfig, 'subnetPrefixV4' | 'subnetPrefixV6'>): string {
  if (isIP(ip) === 4) {
    const n = ip.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
    const bits = cfg.subnetPrefixV4;
    const masked = bits === 0 ? 0 : Math.floor(n / 2 ** (32 - bits)) * 2 ** (32 - bits);
    const octets = [24, 16, 8, 0].map((s) => Math.floor(masked / 2 ** s) % 256);
    return `${octets.join('.')}/${bits}`;
  }
  if (isIP(ip) === 6) {
    const groups = expandV6(ip);
    const bits = cfg.subnetPrefixV6;
    const out = groups.map((g, i) => {
      const lo = i * 16;
      if (bits >= lo + 16) return g;
      if (bits <= lo) return 0;
      const keep = bits - lo;
      return g & (0xffff << (16 - keep)) & 0xffff;
    });
    return `${compressV6(out)}/${bits}`;
  }
  return ip;
}

function expandV6(ip: string): number[] {
  let s = ip.toLowerCase();
  // An embedded IPv4 tail (::ffff:1.2.3.4 style) becomes two groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const o = v4[1]!.split('.').map(Number);
    s = s.slice(0, -v4[1]!.length) + `${((o[0]! << 8) | o[1]!).toString(16)}:${((o[2]! << 8) | o[3]!).toString(16)}`;
  }
  const [head, tail] = s.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const fill = tail !== undefined ? 8 - h.length - t.length : 0;
  return [...h, ...Array<string>(Math.max(fill, 0)).fill('0'), ...t].map((g) => parseInt(g, 16) || 0);
}

function compressV6(groups: number[]): string {
  let best = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i > 1) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/**
 * The stored state of one key (also the JSON document of the Redis backend, hence the short
 * member names). Times are epoch milliseconds; 0 = never.
 */
export interface KeyState {
  /** scope, name, ip, subnet (display only) */
  s: LimitScope;
  n: string | null;
  ip: string | null;
  net: string | null;
  /** failure times inside the window */
  f: number[];
  /** open reservations: reservation id → deadline */
  p: Record<string, number>;
  /** locked until */
  lu: number;
  /** consecutive lockouts */
  lc: number;
  /** end of the latest lockout: failures before it never count again */
  le: number;
  /** last failure */
  lf: number;
}

export function newState(k: LimitKey): KeyState {
  return { s: k.scope, n: k.name, ip: k.ip, net: k.subnet, f: [], p: {}, lu: 0, lc: 0, le: 0, lf: 0 };
}

/** Drops expired reservations and failures that left the window. */
export function prune(st: KeyState, now: number, cfg: LimiterConfig): void {
  if (!Array.isArray(st.f)) st.f = [];
  if (!st.p || Array.isArray(st.p)) st.p = {};
  for (const [rid, deadline] of Object.entries(st.p)) if (deadline < now) delete st.p[rid];
  const from = now - cfg.windowSeconds * 1000;
  st.f = st.f.filter((t) => t > from);
}

/** Seconds until this key admits attempts again, or null when it admits one now. */
export function denial(st: KeyState, now: number, threshold: number, cfg: LimiterConfig): number | null {
  if (st.lu > now) return Math.max(1, Math.ceil((st.lu - now) / 1000));
  const pending = Object.keys(st.p).length;
  const counted = countedFailures(st, now, cfg) + pending;
  if (counted < threshold) return null;
  if (st.s !== 'user') return 1; // attempts in flight could still fill the window: come back shortly
  // Over the account bound: one attempt at a time, each userIntervalSeconds after the latest failure.
  if (pending > 0) return 1;
  const next = st.lf + cfg.userIntervalSeconds * 1000;
  return next > now ? Math.max(1, Math.ceil((next - now) / 1000)) : null;
}

/** Failures inside the window that happened at or after the end of the latest lockout. */
function countedFailures(st: KeyState, now: number, cfg: LimiterConfig): number {
  const from = now - cfg.windowSeconds * 1000;
  return st.f.filter((t) => t > from && t >= st.le).length;
}

export function reserve(st: KeyState, rid: string, now: number, cfg: LimiterConfig): void {
  st.p[rid] = now + cfg.reservationSeconds * 1000;
}

/** Resolves a reservation as a failure; locks the key when the failures reach its threshold. */
export function fail(st: KeyState, rid: string, now: number, threshold: number, cfg: LimiterConfig): void {
  delete st.p[rid];
  st.f.push(now);
  if (st.f.length > 1000) st.f = st.f.slice(-1000);
  st.lf = now;
  if (st.lu > now || st.s === 'user') return;
  if (countedFailures(st, now, cfg) >= threshold) {
    st.lc += 1;
    const ms = Math.min(cfg.lockoutBaseSeconds * 1000 * 2 ** (st.lc - 1), cfg.lockoutMaxSeconds * 1000);
    st.lu = now + ms;
    st.le = st.lu;
  }
}

/** When the state may be forgotten: after its window, lockout and reservations end, plus one maximum lockout once it escalated. */
export function expiresAt(st: KeyState, cfg: LimiterConfig): number {
  let at = Math.max(st.lf + cfg.windowSeconds * 1000, st.lu, ...Object.values(st.p));
  if (st.lc > 0) at = Math.max(at, st.le + cfg.lockoutMaxSeconds * 1000);
  return at;
}

export interface LimitEntry {
  id: string;
  scope: LimitScope;
  identifier: string;
  name: string | null;
  ip: string | null;
  subnet: string | null;
  failures: number;
  threshold: number;
  first_failure_at: Date | null;
  last_failure_at: Date;
  locked: boolean;
  locked_until: Date | null;
  lockout_count: number;
}

/** The admin view of a key; null for keys that never failed (reservations only). */
export function entryOf(id: string, st: KeyState, now: number, cfg: LimiterConfig): LimitEntry | null {
  if (!st.lf) return null;
  const inWindow = (Array.isArray(st.f) ? st.f : []).filter((t) => t > now - cfg.windowSeconds * 1000);
  const identifier =
    st.s === 'user_ip' ? `${st.n ?? ''}@${st.ip ?? ''}` : st.s === 'user' ? (st.n ?? '') : st.s === 'ip' ? (st.ip ?? '') : (st.net ?? '');
  return {
    id,
    scope: st.s,
    identifier,
    name: st.s === 'user_ip' || st.s === 'user' ? st.n : null,
    ip: st.s === 'user_ip' || st.s === 'ip' ? st.ip : null,
    subnet: st.s === 'subnet' ? st.net : null,
    failures: inWindow.length,
    threshold: thresholdOf(cfg, st.s),
    first_failure_at: inWindow.length ? new Date(Math.min(...inWindow)) : null,
    last_failure_at: new Date(st.lf),
    locked: st.lu > now,
    locked_until: st.lu > now ? new Date(st.lu) : null,
    lockout_count: st.lc,
  };
}

export interface SnapshotFilter {
  include: 'locked' | 'all';
  scope?: LimitScope;
  q?: string;
}

export const SNAPSHOT_MAX_ENTRIES = 1000;

/** Filters and orders entries: locked first, then by most recent failure. */
export function selectEntries(entries: LimitEntry[], f: SnapshotFilter): { entries: LimitEntry[]; total: number; truncated: boolean } {
  const q = f.q?.toLowerCase();
  const matched = entries
    .filter((e) => (f.include === 'all' || e.locked) && (!f.scope || e.scope === f.scope) && (!q || e.identifier.toLowerCase().includes(q)))
    .sort(
      (a, b) =>
        Number(b.locked) - Number(a.locked) || b.last_failure_at.getTime() - a.last_failure_at.getTime() || a.id.localeCompare(b.id),
    );
  return { entries: matched.slice(0, SNAPSHOT_MAX_ENTRIES), total: matched.length, truncated: matched.length > SNAPSHOT_MAX_ENTRIES };
}
