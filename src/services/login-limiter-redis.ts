import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import {
  DEFAULT_LIMITER_CONFIG,
  ENTRY_ID,
  entryOf,
  keysFor,
  prune,
  selectEntries,
  type KeyState,
  type LimitEntry,
  type LimitKey,
  type LimiterConfig,
  type SnapshotFilter,
} from '../domain/rate-limit.ts';
import {
  MemoryLoginLimiter,
  limiterUnavailable,
  type Admission,
  type AttemptTicket,
  type LimiterSnapshot,
  type LoginLimiter,
} from './login-limiter-memory.ts';

/**
 * The rules of src/domain/rate-limit.ts as one atomic script over the four keys of an attempt
 * (KEYS = user_ip, ip, subnet, user state documents). Keep the two in step: the same tests run
 * against both backends.
 * ARGV: op (admit|fail|success|abandon), now ms, reservation id, window ms, lockout base ms,
 * lockout max ms, reservation ms, user interval ms, then per key: threshold, initial state JSON.
 * admit returns 0 when admitted, else the seconds to wait.
 */
const SCRIPT = `
local op = ARGV[1]
local now = tonumber(ARGV[2])
local rid = ARGV[3]
local window = tonumber(ARGV[4])
local base = tonumber(ARGV[5])
local maxl = tonumber(ARGV[6])
local resv = tonumber(ARGV[7])
local interval = tonumber(ARGV[8])

local function threshold(i) return tonumber(ARGV[9 + (i - 1) * 2]) end

local function load(i)
  local raw = redis.call('GET', KEYS[i])
  local st
  if raw then st = cjson.decode(raw) else
    st = cjson.decode(ARGV[10 + (i - 1) * 2])
    st.lu = 0 st.lc = 0 st.le = 0 st.lf = 0
  end
  if type(st.f) ~= 'table' then st.f = {} end
  if type(st.p) ~= 'table' then st.p = {} end
  for k, d in pairs(st.p) do if d < now then st.p[k] = nil end end
  local keep = {}
  for _, t in ipairs(st.f) do if t > now - window then keep[#keep + 1] = t end end
  st.f = keep
  return st
end

local function npend(st)
  local c = 0
  for _ in pairs(st.p) do c = c + 1 end
  return c
end

local function counted(st)
  local c = 0
  for _, t in ipairs(st.f) do if t > now - window and t >= st.le then c = c + 1 end end
  return c
end

local function save(i, st)
  if st.lf == 0 and npend(st) == 0 then redis.call('DEL', KEYS[i]) return end
  local at = st.lf + window
  if st.lu > at then at = st.lu end
  for _, d in pairs(st.p) do if d > at then at = d end end
  if st.lc > 0 and st.le + maxl > at then at = st.le + maxl end
  if at <= now then redis.call('DEL', KEYS[i]) return end
  redis.call('SET', KEYS[i], cjson.encode(st), 'PX', math.ceil(at - now))
end

if op == 'admit' then
  local wait = 0
  local sts = {}
  for i = 1, #KEYS do
    local st = load(i)
    sts[i] = st
    if st.lu > now then
      local w = math.ceil((st.lu - now) / 1000)
      if w < 1 then w = 1 end
      if w > wait then wait = w end
    elseif counted(st) + npend(st) >= threshold(i) then
      local w = 1
      if st.s == 'user' and npend(st) == 0 then
        -- over the account bound: one attempt per interval after the latest failure
        w = 0
        if st.lf + interval > now then
          w = math.ceil((st.lf + interval - now) / 1000)
          if w < 1 then w = 1 end
        end
      end
      if w > wait then wait = w end
    end
  end
  if wait > 0 then return wait end
  for i = 1, #KEYS do
    sts[i].p[rid] = now + resv
    save(i, sts[i])
  end
  return 0
elseif op == 'fail' then
  for i = 1, #KEYS do
    local st = load(i)
    st.p[rid] = nil
    st.f[#st.f + 1] = now
    if #st.f > 1000 then table.remove(st.f, 1) end
    st.lf = now
    if st.s ~= 'user' and st.lu <= now and counted(st) >= threshold(i) then
      st.lc = st.lc + 1
      local ms = base * (2 ^ (st.lc - 1))
      if ms > maxl then ms = maxl end
      st.lu = now + ms
      st.le = st.lu
    end
    save(i, st)
  end
  return 0
else
  for i = 1, #KEYS do
    if op == 'success' and i == 1 then
      redis.call('DEL', KEYS[i])
    else
      local st = load(i)
      st.p[rid] = nil
      save(i, st)
    end
  end
  return 0
end
`;

type ScriptRedis = Redis & { svcLoginLimit(k1: string, k2: string, k3: string, k4: string, ...argv: (string | number)[]): Promise<number> };

export interface RedisLimiterOptions {
  url: string;
  log?: Logger;
  /** Key prefix (tests use a unique one per run). */
  prefix?: string;
  config?: LimiterConfig;
  now?: () => number;
}

/**
 * Login limits shared across instances through Redis. While Redis is unreachable, logins fall back
 * to this process's own limits and the admin views answer 503.
 */
export class RedisLoginLimiter implements LoginLimiter {
  readonly backend = 'redis' as const;
  readonly config: LimiterConfig;
  private readonly redis: ScriptRedis;
  private readonly prefix: string;
  private readonly now: () => number;
  private readonly fallback: MemoryLoginLimiter;
  private readonly log?: Logger;
  private lastWarn = 0;

  constructor(opts: RedisLimiterOptions) {
    this.config = opts.config ?? DEFAULT_LIMITER_CONFIG;
    this.prefix = opts.prefix ?? 'svc:login-rate-limit:';
    this.now = opts.now ?? Date.now;
    this.log = opts.log;
    this.fallback = new MemoryLoginLimiter(this.config, this.now);
    this.redis = new Redis(opts.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: 2000,
      connectTimeout: 2000,
      retryStrategy: (times) => Math.min(times * 200, 5000),
    }) as ScriptRedis;
    this.redis.on('error', (err: Error) => this.warn(err));
    this.redis.defineCommand('svcLoginLimit', { numberOfKeys: 4, lua: SCRIPT });
  }

  /** Resolves once connected (or after timeoutMs); tests use it to avoid the start-up fallback. */
  async ready(timeoutMs = 5000): Promise<boolean> {
    if (this.redis.status === 'ready') return true;
    return new Promise((ok) => {
      const t = setTimeout(() => ok(false), timeoutMs);
      this.redis.once('ready', () => {
        clearTimeout(t);
        ok(true);
      });
    });
  }

  async admit(name: string, ip: string): Promise<Admission> {
    const keys = keysFor(this.config, name, ip);
    const rid = randomUUID();
    try {
      const wait = await this.run('admit', keys, rid);
      return wait > 0 ? { ok: false, retryAfter: wait } : { ok: true, ticket: { rid, keys, store: 'redis' } };
    } catch (err) {
      this.warn(err);
      return this.fallback.admitKeys(keys);
    }
  }

  async failed(t: AttemptTicket): Promise<void> {
    if (t.store === 'memory') return this.fallback.failed(t);
    try {
      await this.run('fail', t.keys, t.rid);
    } catch (err) {
      this.warn(err);
      await this.fallback.failed(t);
    }
  }

  async succeeded(t: AttemptTicket): Promise<void> {
    if (t.store === 'memory') return this.fallback.succeeded(t);
    await this.run('success', t.keys, t.rid).catch((err: unknown) => this.warn(err));
  }

  async abandon(t: AttemptTicket): Promise<void> {
    if (t.store === 'memory') return this.fallback.abandon(t);
    await this.run('abandon', t.keys, t.rid).catch((err: unknown) => this.warn(err));
  }

  async snapshot(filter: SnapshotFilter): Promise<LimiterSnapshot> {
    const now = this.now();
    const entries: LimitEntry[] = [];
    await this.guard(async () => {
      for (const batch of await this.scanKeys()) {
        const values = await this.redis.mget(...batch);
        batch.forEach((key, i) => {
          const raw = values[i];
          if (!raw) return;
          const st = JSON.parse(raw) as KeyState;
          prune(st, now, this.config);
          const e = entryOf(key.slice(this.prefix.length), st, now, this.config);
          if (e) entries.push(e);
        });
      }
    });
    return selectEntries(entries, filter);
  }

  async clear(): Promise<number> {
    return this.guard(async () => {
      let n = 0;
      for (const batch of await this.scanKeys()) n += await this.redis.del(...batch);
      return n;
    });
  }

  async releaseEntry(id: string): Promise<boolean> {
    if (!ENTRY_ID.test(id)) return false;
    return this.guard(async () => (await this.redis.del(this.prefix + id)) > 0);
  }

  async close(): Promise<void> {
    this.redis.disconnect();
    await this.fallback.close();
  }

  private run(op: string, keys: LimitKey[], rid: string): Promise<number> {
    const c = this.config;
    const argv: (string | number)[] = [
      op,
      this.now(),
      rid,
      c.windowSeconds * 1000,
      c.lockoutBaseSeconds * 1000,
      c.lockoutMaxSeconds * 1000,
      c.reservationSeconds * 1000,
      c.userIntervalSeconds * 1000,
    ];
    for (const k of keys) argv.push(k.threshold, JSON.stringify({ s: k.scope, n: k.name, ip: k.ip, net: k.subnet, f: [], p: {} }));
    const [a, b, d, u] = keys.map((k) => this.prefix + k.id) as [string, string, string, string];
    return this.redis.svcLoginLimit(a, b, d, u, ...argv);
  }

  private async scanKeys(): Promise<string[][]> {
    const batches: string[][] = [];
    let cursor = '0';
    const pattern = `${this.prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (keys.length) batches.push(keys);
    } while (cursor !== '0');
    return batches;
  }

  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    if (this.redis.status !== 'ready') throw limiterUnavailable();
    try {
      return await fn();
    } catch (err) {
      this.warn(err);
      throw limiterUnavailable();
    }
  }

  private warn(err: unknown): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.log?.warn({ err }, 'login rate limiter: Redis unavailable, using local limits');
  }
}
