// In-process signal of changes that bear on bearer-token validation, so this process's token cache
// (services/token-cache.ts) drops what it holds as soon as such a change commits, before the
// response that reports the change is sent. Other processes learn of the same change from the
// NOTIFY the database triggers send at commit (migrations/0180_token_cache_notify.sql and those
// after it), named alike (CacheDrop), so both drop the same entries.
//
// appendEvent notes in the transaction what the change of each event it records makes stale
// (cacheDropsOf); withTx signals the transaction's pool with it after COMMIT. Listeners are per
// pool, so two app instances in one process (as tests run them) behave like two processes.
import type { Db, Sql } from './sql.ts';
import { noteForCommit } from './tx-roots.ts';
import { notifyUnflushed } from './wakeups.ts';

/**
 * What the token caches drop (services/token-cache.ts), named as the payloads on channel
 * svc_token_cache that the database triggers send for the same change (migrations/0180, 0200, 0220,
 * 0250, 0260, 0270, 0280):
 *   't:<id>'  token <id> changed or was deleted;
 *   'u:<id>'  principal <id> changed in what the caches hold, its user or service-account row changed
 *             (a service account disabled), it joined or left a group, or a group of its was renamed
 *             or re-scoped (which may change who is an administrator; migration 0280): its
 *             tokens, its grants and its tokens' collection sets;
 *   'G:<id>'  group <id>'s grants changed: its members' grants (the cache keeps each principal's
 *             groups with its grants) and every collection set;
 *   'c:<id>'  the collection tree changed where collection <id> is (migration 0270: a collection
 *             created under <id>, <id> moved or deleted, a collection moved under <id>): every
 *             kept grant and collection set that holds <id>;
 *   'c'       the collection tree changed (a truncate): every collection set and grant;
 *   'k'       a class was deleted or moved: every kept class;
 *   'g'       anything else that may bear on validation (a restore, a truncate): everything.
 * The heartbeat 'p' drops nothing.
 */
export type CacheDrop = `t:${number}` | `u:${number}` | `G:${number}` | `c:${number}` | 'c' | 'k' | 'g';

const NONE: readonly CacheDrop[] = [];
const ALL: readonly CacheDrop[] = ['g'];

/** Member `key` of a snapshot (undefined when `v` is not an object). */
const memberOf = (v: unknown, key: string): unknown => (v && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined);

const idIn = (v: unknown, key: string): number | undefined => {
  const id = memberOf(v, key);
  return typeof id === 'number' && Number.isInteger(id) ? id : undefined;
};

/** Member `key` of a snapshot when it is a list of ids, else undefined. */
const idsIn = (v: unknown, key: string): number[] | undefined => {
  const ids = memberOf(v, key);
  return Array.isArray(ids) && ids.every((id) => typeof id === 'number' && Number.isInteger(id)) ? ids : undefined;
};

/** Whether the snapshots `before` and `after` both exist and agree on every one of `keys`. */
const sameIn = (before: unknown, after: unknown, keys: string[]): boolean =>
  !!before && !!after && keys.every((k) => memberOf(before, k) === memberOf(after, k));

/**
 * What the change an audit event records makes stale in this process's token cache, as the payloads
 * the database sends other processes for it (CacheDrop): nothing for a change the caches hold
 * nothing of, and everything ('g') whenever the event does not say exactly what changed.
 */
export function cacheDropsOf(e: {
  entityType: string;
  entityId?: number | null;
  action: string;
  before?: unknown;
  after?: unknown;
  metadata?: Record<string, unknown>;
}): readonly CacheDrop[] {
  const id = typeof e.entityId === 'number' && e.entityId > 0 ? e.entityId : undefined;
  switch (e.entityType) {
    case 'token':
      // a token created (a login, a mint, a renewal's new token) is in no cache yet
      if (e.action === 'created' || e.action === 'renewed') return NONE;
      return id === undefined ? ALL : [`t:${id}`];
    case 'user':
    case 'service_account':
    case 'principal':
      if (e.action === 'created') return NONE;
      return id === undefined ? ALL : [`u:${id}`];
    case 'group_membership': {
      const principal = idIn(e.metadata, 'principal_id') ?? idIn(e.after, 'principal_id') ?? idIn(e.before, 'principal_id');
      return principal === undefined ? ALL : [`u:${principal}`];
    }
    case 'permission': {
      const group = idIn(e.metadata, 'group_id') ?? id;
      return group === undefined ? ALL : [`G:${group}`];
    }
    case 'group': {
      // a group's name and scope decide who is an administrator; nothing else of it is kept
      if (e.action === 'created') return NONE;
      if (e.action === 'updated' && sameIn(e.before, e.after, ['name', 'identity_scope'])) return NONE;
      // renamed (its members, as migration 0280 names them) or deleted (its memberships', as their
      // deletes name them; its grants go with their own `revoked` events)
      const members = idsIn(e.metadata, e.action === 'deleted' ? 'removed_member_ids' : 'member_ids');
      return members === undefined ? ALL : members.map((p) => `u:${p}` as const);
    }
    case 'collection': {
      // as migration 0270's trigger names them
      const parentAfter = idIn(e.after, 'parent_collection_id');
      const rootAfter = memberOf(e.after, 'parent_collection_id') === null;
      if (e.action === 'created' && rootAfter) return NONE;
      if (e.action === 'created' && parentAfter !== undefined) return [`c:${parentAfter}`];
      if (id === undefined) return ['c'];
      if (e.action === 'deleted') return [`c:${id}`];
      if (e.action !== 'updated' || !e.before || !e.after) return ['c'];
      if (sameIn(e.before, e.after, ['parent_collection_id'])) return NONE;
      if (rootAfter) return [`c:${id}`];
      return parentAfter === undefined ? ['c'] : [`c:${id}`, `c:${parentAfter}`];
    }
    case 'class':
      if (e.action === 'deleted') return ['k'];
      return e.action === 'updated' && idIn(e.before, 'collection_id') !== idIn(e.after, 'collection_id') ? ['k'] : NONE;
    case 'credential_approval':
      // an approval is consumed by the mint or the user it approves; the caches keep none
      return NONE;
    case 'restore':
      return ALL;
    default:
      return NONE;
  }
}

const pending = new WeakMap<object, Set<CacheDrop>>();
const listeners = new Map<object, Set<(drops: readonly CacheDrop[]) => void>>();

/** Calls `fn` with what each committed change of this pool made stale; returns the unsubscribe. */
export function onAuthChange(sql: Sql, fn: (drops: readonly CacheDrop[]) => void): () => void {
  let set = listeners.get(sql);
  if (!set) listeners.set(sql, (set = new Set()));
  set.add(fn);
  return () => {
    set.delete(fn);
    if (set.size === 0) listeners.delete(sql);
  };
}

/**
 * Notes what a change in `db` makes stale (cacheDropsOf). A transaction of withTx (or a savepoint in
 * one) is signalled after its COMMIT; anything else (a bare pool) signals every pool at once, and
 * its NOTIFY follows at commit.
 */
export function markAuthChange(db: Db, drops: readonly CacheDrop[]): void {
  if (drops.length === 0 || noteForCommit(pending, db, drops)) return;
  for (const set of listeners.values()) for (const fn of set) fn(drops);
}

/** After COMMIT of `tx` on `sql`: signals the pool's listeners with what the transaction made stale. */
export function afterCommit(sql: Sql, tx: object): void {
  const drops = pending.get(tx);
  if (!drops) return;
  const list = [...drops];
  for (const fn of listeners.get(sql) ?? []) fn(list);
}

/** The LISTEN channel the token triggers of migrations/0180_token_cache_notify.sql announce on. */
export const TOKEN_CACHE_CHANNEL = 'svc_token_cache';

/**
 * Listens on the token-cache channel: `onMessage` gets each payload (a CacheDrop, or the heartbeat
 * 'p'), `onListen` runs on every (re)connection of the listening connection.
 */
export async function listenForTokenChanges(
  sql: Sql,
  onMessage: (payload: string) => void,
  onListen: () => void,
): Promise<() => Promise<void>> {
  const sub = await sql.listen(TOKEN_CACHE_CHANNEL, onMessage, onListen);
  return () => sub.unlisten();
}

/** Sends the heartbeat a listener uses to know its connection still hears notifications. */
export function sendTokenCacheHeartbeat(sql: Sql): Promise<void> {
  return notifyUnflushed(sql, TOKEN_CACHE_CHANNEL, 'p').then(() => undefined);
}
