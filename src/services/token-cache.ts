// The api process's cache of validated bearer tokens, so most requests are authenticated without a
// database round trip (issue #14, reads). It is keyed by the raw token as presented: a hit costs
// neither a statement nor the token's HMAC (hashToken, ~15-25 µs of a request in a busy process,
// most of it OpenSSL's setup of each HMAC), which is computed on a miss to read the token by its
// stored hash. So the process holds in memory the raw form of the tokens it keeps, as it holds each
// request's while serving it (and its token key): a revoked or expired token's entry goes with it.
//
// Safety (a revoked token must not get through beyond the notification delay):
// - every change that bears on validation is announced at commit on LISTEN channel svc_token_cache
//   by database triggers (migrations/0180_token_cache_notify.sql; since 0250 only when a row changed
//   in what the cache holds; since 0260 naming whom it concerns), as the payloads db/auth-changes.ts
//   CacheDrop lists: 't:<id>' drops one token; 'u:<id>' (a principal, its user or service-account
//   row, its memberships, a group of its renamed or re-scoped) drops that principal's tokens, grants and collection sets; 'G:<id>' (a
//   group's grants) drops its members' grants and every collection set, tokens stay; 'c:<id>' (the
//   tree changed at collection <id>: one created under it, it moved or deleted, one moved under
//   it; migration 0270) drops the grants and collection sets that hold <id>; 'c' (a truncate of
//   the collections) all of them; 'k' the classes; 'g' (a truncate, a restore)
//   everything;
// - a change made through this process drops the same before its response is sent
//   (db/auth-changes.ts), so it takes effect at once here and within the NOTIFY delay elsewhere;
// - a lookup that started before a drop does not put its (possibly older) row into the cache;
// - expiry is checked against the cached row on every use; an entry is read again after
//   SVC_TOKEN_CACHE_MAX_AGE_MS whatever happens (the safety net);
// - the cache is used only while its LISTEN connection is confirmed: every HEARTBEAT_MS the process
//   sends itself a notification, and with no notification received for LIVE_WINDOW_MS (or before
//   LISTEN succeeded) every lookup goes to the database; when notifications are heard again, the
//   cache starts empty. A silently lost LISTEN connection thus lets a cached token live at most
//   LIVE_WINDOW_MS after a change.
//
// With each token the cache also keeps the collections its holder may read the audit stream of
// (collectionsWith), which a non-administrator's audit list reads before its page, and with each
// principal its grants (grantSets: every permission's collections, which a non-administrator's read
// request tests collections against instead of reading the grants in its statements): dropped with
// the token or principal, on 'G', 'c:<id>' (those that hold <id>), 'c' and 'g'. And it keeps
// which collection each class is in (classCollection), so a list of a class's objects decides the
// permission on the class without a statement: dropped on 'k' (a class deleted or moved:
// migrations/0220) and 'g'.
//
// last_used_at of a cached token is advanced in memory and written in batches at most
// LAST_USED_FLUSH_MS after the use (the later of stored and batched time wins); token reads of this
// process flush first (flushTokenUses), so they show the latest use of this process.
import type { Deps } from '../deps.ts';
import { listenForTokenChanges, onAuthChange, sendTokenCacheHeartbeat, type CacheDrop } from '../db/auth-changes.ts';
import { recordTokenUses, validateTokenHash } from '../db/tokens.ts';
import { readGrantSets } from '../db/authz.ts';
import { principalGroupIds } from '../db/users.ts';
import type { ValidatedTokenRow } from '../domain/tokens.ts';
import type { GrantSets } from '../domain/authz.ts';
import { tokenCacheDrops, tokenCacheLookups } from '../metrics.ts';
import { hashToken } from '../domain/token-secret.ts';

export const HEARTBEAT_MS = 1000;
export const LIVE_WINDOW_MS = 3000;
/** Longest delay between a cached use of a token and its write to last_used_at. */
export const LAST_USED_FLUSH_MS = 1000;

/** What a change dropped (svc_token_cache_drops_total's `kind`). */
type DropKind = 'token' | 'principal' | 'grants' | 'collections' | 'classes' | 'everything';

/** What the cache keeps of one token: each can be dropped with the token or with its principal. */
interface OfToken {
  tokenId: number;
  principalId: number;
}

interface Entry extends OfToken {
  row: ValidatedTokenRow;
  cachedAt: number;
  /** Effective expiry (ms since epoch): expires_at, or issued + the legacy lifetime. */
  expiresAt: number;
}

/** A cached set of collection ids (collectionsWith). */
interface CollectionSet extends OfToken {
  ids: number[];
  /** The same ids, sorted (holds). */
  sorted: Int32Array;
  cachedAt: number;
}

/** A principal's cached grants (grantSets); null: more than GRANT_SETS_MAX_IDS, not used. */
interface CachedGrants {
  sets: GrantSets | null;
  /** The groups the principal was in when they were read: a change of one's grants drops them. */
  groups: number[];
  /** Every collection of the sets, sorted (holds): a change of the tree there drops them. */
  held: Int32Array;
  /** Its (permission, collection) pairs, counted against SVC_TOKEN_CACHE_GRANT_IDS. */
  size: number;
  cachedAt: number;
}

/**
 * The most (permission, collection) pairs a principal's grants may hold to be kept and used: beyond
 * it the grants are read in SQL as before, so neither the memory of the cache nor the arrays sent
 * with each statement grow with the size of the tree (and readGrantSets stops reading there).
 */
export const GRANT_SETS_MAX_IDS = 2000;

/**
 * The most collections whose tree changes are looked for in the kept grants and sets together
 * (TokenCache.dropCollection); beyond it they all go.
 */
export const TREE_CHANGES_MAX = 256;

/** The oldest key of `map` when it holds `max` entries or more (to drop before adding one), else undefined. */
function oldestWhenFull<K>(map: Map<K, unknown>, max: number): K | undefined {
  return map.size >= max ? map.keys().next().value : undefined;
}

/** The ids of `lists`, sorted, each once. */
function sortedIds(lists: Iterable<readonly number[]>): Int32Array {
  const all: number[] = [];
  for (const ids of lists) for (const id of ids) all.push(id);
  const sorted = Int32Array.from(all).sort();
  let n = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[i - 1]) sorted[n++] = sorted[i]!;
  return sorted.subarray(0, n);
}

/** Whether sorted `ids` hold `id` (binary search). */
function holds(ids: Int32Array, id: number): boolean {
  let lo = 0;
  let hi = ids.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const v = ids[mid]!;
    if (v === id) return true;
    if (v < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

/** Whether sorted `a` and sorted `b` share an id (each of the shorter searched in the longer). */
function holdsAny(a: Int32Array, b: Int32Array): boolean {
  const [short, long] = a.length <= b.length ? [a, b] : [b, a];
  for (const id of short) if (holds(long, id)) return true;
  return false;
}

/**
 * A map of what the cache keeps of tokens (at most `max()` entries: a new one first drops the
 * oldest) that drops a token's or a principal's entries without looking at the others: one change
 * (a large group deleted) may name thousands of principals.
 */
class TokenKeyed<V extends OfToken> {
  private readonly map = new Map<string, V>();
  private readonly byToken = new Map<number, Set<string>>();
  private readonly byPrincipal = new Map<number, Set<string>>();

  constructor(private readonly max: () => number) {}

  get(key: string): V | undefined {
    return this.map.get(key);
  }

  set(key: string, value: V): void {
    this.delete(key);
    const full = oldestWhenFull(this.map, this.max());
    if (full !== undefined) this.delete(full);
    this.map.set(key, value);
    TokenKeyed.index(this.byToken, value.tokenId).add(key);
    TokenKeyed.index(this.byPrincipal, value.principalId).add(key);
  }

  delete(key: string): void {
    const value = this.map.get(key);
    if (!value) return;
    this.map.delete(key);
    TokenKeyed.unindex(this.byToken, value.tokenId, key);
    TokenKeyed.unindex(this.byPrincipal, value.principalId, key);
  }

  dropToken(id: number): void {
    for (const key of [...(this.byToken.get(id) ?? [])]) this.delete(key);
  }

  dropPrincipal(id: number): void {
    for (const key of [...(this.byPrincipal.get(id) ?? [])]) this.delete(key);
  }

  dropWhere(test: (value: V) => boolean): void {
    for (const [key, value] of this.map) if (test(value)) this.delete(key);
  }

  clear(): void {
    this.map.clear();
    this.byToken.clear();
    this.byPrincipal.clear();
  }

  private static index(index: Map<number, Set<string>>, id: number): Set<string> {
    let keys = index.get(id);
    if (!keys) index.set(id, (keys = new Set()));
    return keys;
  }

  private static unindex(index: Map<number, Set<string>>, id: number, key: string): void {
    const keys = index.get(id);
    keys?.delete(key);
    if (keys?.size === 0) index.delete(id);
  }
}

export class TokenCache {
  private readonly entries: TokenKeyed<Entry>;
  private readonly collectionSets: TokenKeyed<CollectionSet>;
  private readonly grants = new Map<string, CachedGrants>();
  /** For each group, the principals (keys of `grants`) whose kept grants were read with it. */
  private readonly grantsByGroup = new Map<number, Set<string>>();
  /** The pairs the kept grants hold, all together (at most SVC_TOKEN_CACHE_GRANT_IDS). */
  private grantIds = 0;
  private readonly classes = new Map<string, { collectionId: number; cachedAt: number }>();
  private generation = 0;
  /** Collections where the tree changed, to look for at the end of the current task (dropCollection). */
  private treeChanges: Set<number> | undefined;
  private listening = false;
  private lastHeard = 0;
  private readonly pending = new Map<number, Date>();
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private heartbeat: NodeJS.Timeout | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private unsubscribe: (() => void) | undefined;
  private closed = false;
  readonly enabled: boolean;

  constructor(private readonly deps: Deps) {
    this.enabled = deps.config.SVC_TOKEN_CACHE_SIZE > 0 && deps.config.SVC_TOKEN_CACHE_MAX_AGE_MS > 0;
    const max = () => deps.config.SVC_TOKEN_CACHE_SIZE;
    this.entries = new TokenKeyed(max);
    this.collectionSets = new TokenKeyed(max);
  }

  /** Subscribes to invalidations; the cache stays unused until LISTEN succeeds. */
  async start(): Promise<void> {
    if (!this.enabled) return;
    this.unsubscribe = onAuthChange(this.deps.sql, (drops) => drops.forEach((d) => this.drop(d)));
    try {
      this.unlisten = await listenForTokenChanges(
        this.deps.sql,
        (payload) => this.onNotify(payload),
        () => {
          // (re)connected: notifications in between may be lost
          this.clear();
          this.listening = true;
          this.lastHeard = Date.now();
        },
      );
    } catch (err) {
      this.deps.log.warn({ err }, 'token cache: LISTEN failed; tokens are read from the database until it succeeds');
    }
    this.heartbeat = setInterval(() => {
      sendTokenCacheHeartbeat(this.deps.sql).catch(() => {});
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  private onNotify(payload: string): void {
    const now = Date.now();
    if (now - this.lastHeard >= LIVE_WINDOW_MS) this.clear();
    this.lastHeard = now;
    // counted here only: every process, the one that made the change too, hears each change once
    if (payload !== 'p') tokenCacheDrops.observe(this.drop(payload));
  }

  /**
   * Drops what a change made stale (a CacheDrop; anything else drops everything); returns what it
   * dropped, as svc_token_cache_drops_total counts it.
   */
  private drop(payload: CacheDrop | string): DropKind {
    const id = Number(payload.slice(2));
    switch (payload[1] === ':' && Number.isInteger(id) ? payload.slice(0, 2) : payload) {
      case 't:':
        this.dropToken(id);
        return 'token';
      case 'u:':
        this.dropPrincipal(id);
        return 'principal';
      case 'G:':
        this.dropGroupGrants(id);
        return 'grants';
      case 'c:':
        this.dropCollection(id);
        return 'collections';
      case 'c':
        this.dropCollectionSets();
        return 'collections';
      case 'k':
        this.dropClasses();
        return 'classes';
      default:
        this.clear();
        return 'everything';
    }
  }

  private live(now: number): boolean {
    return this.listening && !this.closed && now - this.lastHeard < LIVE_WINDOW_MS;
  }

  /** Drops every entry; lookups under way no longer fill the cache. */
  clear(): void {
    this.generation++;
    this.entries.clear();
    this.collectionSets.clear();
    this.forgetAllGrants();
    this.classes.clear();
  }

  private dropToken(id: number): void {
    this.generation++;
    this.entries.dropToken(id);
    this.collectionSets.dropToken(id);
  }

  /** A principal changed, or joined or left a group: its tokens, grants and collection sets go. */
  private dropPrincipal(id: number): void {
    this.generation++;
    this.entries.dropPrincipal(id);
    this.collectionSets.dropPrincipal(id);
    this.forgetGrants(String(id));
  }

  /**
   * A group's grants changed: the kept grants of its members go (the groups of each were read with
   * its grants), and every collection set (they are read without the groups); the tokens stay.
   */
  private dropGroupGrants(id: number): void {
    this.generation++;
    this.collectionSets.clear();
    for (const key of [...(this.grantsByGroup.get(id) ?? [])]) this.forgetGrants(key);
  }

  /**
   * The collection tree changed where collection `id` is (migration 0270): the kept grants and
   * collection sets that hold it go, the tokens stay. The collections named together (the
   * notifications of one read from the connection, the events of one commit) are looked for
   * together, at the end of the current task (before any other request's next step can use what
   * goes, and no read under way can keep what it read: the generation moves now); more than
   * TREE_CHANGES_MAX of them (an import of a large tree) drop every grant and set instead.
   */
  private dropCollection(id: number): void {
    this.generation++;
    if (!this.treeChanges) {
      this.treeChanges = new Set();
      queueMicrotask(() => this.applyTreeChanges());
    }
    this.treeChanges.add(id);
  }

  private applyTreeChanges(): void {
    const changed = this.treeChanges;
    this.treeChanges = undefined;
    if (!changed) return;
    if (changed.size > TREE_CHANGES_MAX) {
      this.dropCollectionSets();
      return;
    }
    const ids = sortedIds([[...changed]]);
    this.collectionSets.dropWhere((set) => holdsAny(set.sorted, ids));
    for (const [key, kept] of this.grants) if (holdsAny(kept.held, ids)) this.forgetGrants(key);
  }

  /** The collection tree changed: the collection sets and grants go, the tokens stay. */
  private dropCollectionSets(): void {
    this.generation++;
    this.collectionSets.clear();
    this.forgetAllGrants();
  }

  /** Forgets one principal's kept grants. */
  private forgetGrants(key: string): void {
    const kept = this.grants.get(key);
    if (!kept) return;
    this.grants.delete(key);
    this.grantIds -= kept.size;
    for (const g of kept.groups) {
      const keys = this.grantsByGroup.get(g);
      keys?.delete(key);
      if (keys?.size === 0) this.grantsByGroup.delete(g);
    }
  }

  private forgetAllGrants(): void {
    this.grants.clear();
    this.grantsByGroup.clear();
    this.grantIds = 0;
  }

  /** A class was deleted or moved: the cached classes go. */
  private dropClasses(): void {
    this.generation++;
    this.classes.clear();
  }

  /**
   * The collection of class `classId` as kept (see `knowClass`), or undefined when it is not kept or
   * the cache may not be used.
   */
  classCollection(classId: number): number | undefined {
    const now = Date.now();
    if (!this.enabled || !this.live(now)) return undefined;
    const kept = this.classes.get(String(classId));
    if (!kept || now - kept.cachedAt >= this.deps.config.SVC_TOKEN_CACHE_MAX_AGE_MS) return undefined;
    return kept.collectionId;
  }

  /** A mark to pass to `knowClass` (taken before the statement that reads the class). */
  mark(): number {
    return this.generation;
  }

  /**
   * Keeps that class `classId` is in collection `collectionId`, as a statement begun at `mark` read
   * it: not when anything was dropped since (the row may be older than the change), nor while the
   * cache may not be used. Dropped on 'k', with everything on 'g', and after
   * SVC_TOKEN_CACHE_MAX_AGE_MS.
   */
  knowClass(classId: number, collectionId: number, mark: number): void {
    if (!this.enabled || mark !== this.generation || !this.live(Date.now())) return;
    this.put(this.classes, String(classId), { collectionId, cachedAt: Date.now() });
  }

  /**
   * The collections where the holder of a token holds `perm` (`read` reads them from the database),
   * kept with the token while the cache may be used: dropped with the token or its principal ('t',
   * 'u'), on any change of grants ('G'), on a change of the collection tree at a collection it
   * holds ('c:<id>', migration 0270: grants reach down the tree) and with everything ('c', 'g').
   * A read that started before a drop does not fill it, and an entry is read again after
   * SVC_TOKEN_CACHE_MAX_AGE_MS, as a token is.
   */
  async collectionsWith(holder: OfToken, perm: string, read: () => Promise<number[]>): Promise<number[]> {
    const now = Date.now();
    if (!this.enabled || !this.live(now)) return read();
    const key = `${holder.tokenId}:${perm}`;
    const cached = this.collectionSets.get(key);
    if (cached && now - cached.cachedAt < this.deps.config.SVC_TOKEN_CACHE_MAX_AGE_MS) return cached.ids;
    const generation = this.generation;
    const ids = await read();
    if (generation === this.generation && this.live(Date.now())) {
      this.collectionSets.set(key, {
        tokenId: holder.tokenId,
        principalId: holder.principalId,
        ids,
        sorted: sortedIds([ids]),
        cachedAt: now,
      });
    }
    return ids;
  }

  /**
   * The grants of principal `principalId` (Authority.grants; read by db/authz.ts readGrantSets),
   * kept while the cache may be used as collectionsWith keeps its sets: dropped with the principal
   * ('u'), on a change of its groups' grants ('G'), of the tree at a collection they hold ('c:<id>')
   * and with everything, not filled by a read that started before a drop, read again after
   * SVC_TOKEN_CACHE_MAX_AGE_MS. Undefined
   * when the cache may not be used, or the grants hold more than GRANT_SETS_MAX_IDS pairs: the
   * caller's statements then read the grants themselves. At once when kept, else a promise.
   */
  grantSets(principalId: number): GrantSets | undefined | Promise<GrantSets | undefined> {
    const now = Date.now();
    if (!this.enabled || !this.live(now)) return undefined;
    const key = String(principalId);
    const cached = this.grants.get(key);
    if (cached && now - cached.cachedAt < this.deps.config.SVC_TOKEN_CACHE_MAX_AGE_MS) return cached.sets ?? undefined;
    return this.readGrants(principalId, key, now);
  }

  private async readGrants(principalId: number, key: string, now: number): Promise<GrantSets | undefined> {
    const generation = this.generation;
    // the principal's groups beside its grants (one round trip): a change of one's grants drops them
    const inGroups = principalGroupIds(this.deps.sql, principalId);
    inGroups.catch(() => undefined); // awaited below
    const usable = await readGrantSets(this.deps.sql, principalId, GRANT_SETS_MAX_IDS);
    const groups = await inGroups;
    // a change committed since either read began has been heard by now, or will drop them when it is
    if (generation !== this.generation || !this.live(Date.now())) return undefined;
    let size = 0;
    for (const ids of usable?.values() ?? []) size += ids.length;
    this.keepGrants(key, { sets: usable, groups, held: sortedIds(usable?.values() ?? []), size, cachedAt: now });
    return usable ?? undefined;
  }

  /**
   * Keeps a principal's grants, first dropping the oldest kept ones while the map holds
   * SVC_TOKEN_CACHE_SIZE principals or their pairs and these would exceed SVC_TOKEN_CACHE_GRANT_IDS
   * (grants that alone exceed it are not kept, and are read again at the next request).
   */
  private keepGrants(key: string, entry: CachedGrants): void {
    const budget = this.deps.config.SVC_TOKEN_CACHE_GRANT_IDS;
    this.forgetGrants(key);
    if (entry.size > budget) return;
    for (const k of this.grants.keys()) {
      if (this.grants.size < this.deps.config.SVC_TOKEN_CACHE_SIZE && this.grantIds + entry.size <= budget) break;
      this.forgetGrants(k);
    }
    this.grants.set(key, entry);
    this.grantIds += entry.size;
    for (const g of entry.groups) {
      let keys = this.grantsByGroup.get(g);
      if (!keys) this.grantsByGroup.set(g, (keys = new Set()));
      keys.add(key);
    }
  }

  /** What the kept grants hold: principals and (permission, collection) pairs. */
  grantsHeld(): { principals: number; ids: number } {
    return { principals: this.grants.size, ids: this.grantIds };
  }

  /** Sets `key` in `map`, first dropping its oldest entry when it holds SVC_TOKEN_CACHE_SIZE. */
  private put<V>(map: Map<string, V>, key: string, value: V): void {
    map.delete(key);
    const full = oldestWhenFull(map, this.deps.config.SVC_TOKEN_CACHE_SIZE);
    if (full !== undefined) map.delete(full);
    map.set(key, value);
  }

  private fromDb(raw: string): Promise<ValidatedTokenRow | undefined> {
    const { config } = this.deps;
    return validateTokenHash(this.deps.sql, hashToken(this.deps.tokenKey, raw), config.SVC_TOKEN_LIFETIME_HOURS, {
      group: config.SVC_ADMIN_GROUPNAME,
      scope: config.SVC_ADMIN_IDENTITY_SCOPE,
    });
  }

  /**
   * The live token presented as `raw` (a bearer token) and its principal: at once when the cache
   * keeps it and may be used, else a promise of it read by the token's hash.
   */
  lookup(raw: string): ValidatedTokenRow | undefined | Promise<ValidatedTokenRow | undefined> {
    const now = Date.now();
    if (!this.enabled || !this.live(now)) {
      tokenCacheLookups.observe('bypass');
      return this.fromDb(raw);
    }
    const entry = this.entries.get(raw);
    if (entry) {
      if (now - entry.cachedAt < this.deps.config.SVC_TOKEN_CACHE_MAX_AGE_MS && now < entry.expiresAt) {
        tokenCacheLookups.observe('hit');
        const at = new Date(now);
        this.noteUse(entry.row.token_id, at);
        return Object.assign({}, entry.row, { last_used_at: at });
      }
      this.entries.delete(raw);
    }
    tokenCacheLookups.observe('miss');
    return this.miss(raw, now);
  }

  private async miss(raw: string, now: number): Promise<ValidatedTokenRow | undefined> {
    const generation = this.generation;
    const row = await this.fromDb(raw);
    if (row && generation === this.generation && this.live(Date.now())) {
      const expiresAt = (
        row.expires_at ?? new Date(row.issued.getTime() + this.deps.config.SVC_TOKEN_LIFETIME_HOURS * 3_600_000)
      ).getTime();
      this.entries.set(raw, { tokenId: row.token_id, principalId: row.principal_id, row, cachedAt: now, expiresAt });
    }
    return row;
  }

  private noteUse(tokenId: number, at: Date): void {
    this.pending.set(tokenId, at);
    if (!this.flushTimer) {
      this.flushTimer = setTimeout(() => void this.flush(), LAST_USED_FLUSH_MS);
      this.flushTimer.unref();
    }
  }

  /** Writes the pending uses now (and waits for a write under way). */
  flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const uses = [...this.pending].map(([id, at]) => ({ id, at }));
    this.pending.clear();
    const previous = this.flushing;
    this.flushing = previous.then(() =>
      recordTokenUses(this.deps.sql, uses).catch((err: unknown) => {
        this.deps.log.warn({ err, tokens: uses.length }, 'token cache: writing last_used_at failed');
      }),
    );
    return this.flushing;
  }

  /** Shutdown: stops listening and writes the pending uses. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.heartbeat);
    this.unsubscribe?.();
    this.clear();
    await this.unlisten?.().catch(() => {});
    await this.flush();
  }
}

/** This process's token cache (created, not started, on first use). */
export function tokenCache(deps: Deps): TokenCache {
  const existing = deps.services.tokenCache as TokenCache | undefined;
  if (existing) return existing;
  const cache = new TokenCache(deps);
  deps.services.tokenCache = cache;
  return cache;
}

/** Writes this process's pending token uses, so a token read that follows shows them. */
export async function flushTokenUses(deps: Deps): Promise<void> {
  const existing = deps.services.tokenCache as TokenCache | undefined;
  if (existing) await existing.flush();
}

/** Shutdown: stops the cache and writes its pending uses. */
export async function closeTokenCache(deps: Deps): Promise<void> {
  const existing = deps.services.tokenCache as TokenCache | undefined;
  delete deps.services.tokenCache;
  await existing?.close();
}
