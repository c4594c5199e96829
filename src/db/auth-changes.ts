// In-process signal of changes that bear on bearer-token validation, so this process's token cache
// (services/token-cache.ts) drops what it holds as soon as such a change commits, before the
// response that reports the change is sent. Other processes learn of the same change from the
// NOTIFY the database triggers send at commit (migrations/0180_token_cache_notify.sql).
//
// appendEvent marks the transaction when it records an event of one of AUTH_ENTITY_TYPES; withTx
// signals the marked transaction's pool after COMMIT. Listeners are per pool, so two app instances
// in one process (as tests run them) behave like two processes.
import type { Db, Sql } from './sql.ts';

/**
 * Audit entity types whose changes may revoke, disable or re-scope a token or change who is admin,
 * or (collections: grants reach down the tree) which collections a grant covers, as the token cache
 * also keeps per token (services/token-cache.ts collectionsWith).
 */
export const AUTH_ENTITY_TYPES: ReadonlySet<string> = new Set([
  'token',
  'collection',
  'user',
  'principal',
  'service_account',
  'group',
  'group_membership',
  'permission',
  'credential_approval',
  'restore',
]);

/**
 * Whether an audit event records a change that bears on the token cache: one of AUTH_ENTITY_TYPES
 * (but a token created), or a class deleted or moved to another collection (the cache keeps each
 * class's collection: services/token-cache.ts classCollection).
 */
export function bearsOnAuth(e: { entityType: string; action: string; before?: unknown; after?: unknown }): boolean {
  // A token just created (a login, a minted token) is in no cache yet, and changes nothing the
  // cache holds: it need not empty the cache of the process, as every login did.
  if (e.entityType === 'token' && e.action === 'created') return false;
  if (AUTH_ENTITY_TYPES.has(e.entityType)) return true;
  if (e.entityType !== 'class') return false;
  if (e.action === 'deleted') return true;
  const collectionOf = (v: unknown) => (v && typeof v === 'object' ? (v as { collection_id?: unknown }).collection_id : undefined);
  return e.action === 'updated' && collectionOf(e.before) !== collectionOf(e.after);
}

const open = new WeakSet<object>();
const marked = new WeakSet<object>();
const listeners = new Map<object, Set<() => void>>();

/** Calls `fn` after each committed change of this pool that bore on token validation; returns the unsubscribe. */
export function onAuthChange(sql: Sql, fn: () => void): () => void {
  let set = listeners.get(sql);
  if (!set) listeners.set(sql, (set = new Set()));
  set.add(fn);
  return () => {
    set.delete(fn);
    if (set.size === 0) listeners.delete(sql);
  };
}

/** withTx registers each transaction it opens, so a change recorded in it is signalled after COMMIT. */
export function trackTransaction(tx: object): void {
  open.add(tx);
}

/**
 * Marks `db` as having changed auth. A transaction of withTx is signalled after its COMMIT; anything
 * else (a savepoint, a bare pool) signals every pool at once, and its NOTIFY follows at commit.
 */
export function markAuthChange(db: Db): void {
  if (open.has(db)) marked.add(db);
  else for (const set of listeners.values()) for (const fn of set) fn();
}

/** After COMMIT of `tx` on `sql`: signals the pool's listeners when the transaction was marked. */
export function afterCommit(sql: Sql, tx: object): void {
  if (marked.has(tx)) signalAuthChange(sql);
}

function signalAuthChange(sql: Sql): void {
  for (const fn of listeners.get(sql) ?? []) fn();
}

/** The LISTEN channel the token triggers of migrations/0180_token_cache_notify.sql announce on. */
export const TOKEN_CACHE_CHANNEL = 'svc_token_cache';

/**
 * Listens on the token-cache channel: `onMessage` gets each payload ('t:<id>', 'g', 'c' from
 * migrations/0200_collection_tree_notify.sql, 'k' from migrations/0220_class_collection_notify.sql,
 * or the heartbeat 'p'), `onListen` runs on every
 * (re)connection of the listening connection.
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
  return sql`select pg_notify(${TOKEN_CACHE_CHANNEL}, 'p')`.then(() => undefined);
}
