// The permission check on a class that a read makes first (a list or aggregate of its objects,
// getClass, its computed fields), without a statement when the token cache
// (services/token-cache.ts) keeps the class's collection and the caller is an administrator or a
// non-administrator whose grants are known (Authority.grants: a GET).
// Otherwise the class is read with the check (db/authz.ts requireClassPermission), and its
// collection kept for the next request. The cache drops a class when it is deleted or moved
// (migrations/0220, db/auth-changes.ts cacheDropsOf), so a decision from it is at most as stale as a
// cached token: at once in this process, within the NOTIFY delay in the others.
import type { Deps } from '../deps.ts';
import type { Authority, Permission } from '../domain/authz.ts';
import { classPermissionOf, requireClassPermission, type ClassRef } from '../db/authz.ts';
import { findClassExpanded, readClassExpandedAs } from '../db/classes.ts';
import { notFound } from '../domain/errors.ts';
import type { ClassExpandedRow } from '../domain/views/classes.ts';
import { tokenCache } from './token-cache.ts';

/**
 * A read of a class that needs `perm` on it: `kept` when the kept collection decides (given the
 * class's id and collection), else `checked`, a read with the check whose collection is then kept.
 */
async function withClassAccess<R extends ClassRef>(
  deps: Deps,
  auth: Authority,
  classId: number,
  perm: Permission,
  kept: (ref: ClassRef) => Promise<R>,
  checked: () => Promise<R>,
): Promise<R> {
  const cache = tokenCache(deps);
  const collectionId = cache.classCollection(classId);
  const decided = collectionId === undefined ? undefined : classPermissionOf(auth, classId, collectionId, perm);
  if (decided) return kept(decided);
  const mark = cache.mark();
  const row = await checked();
  cache.knowClass(row.id, row.collection_id, mark);
  return row;
}

/** 404 when the class does not exist; 403 when the caller lacks `perm` on its collection or is scoped out. */
export function requireClassAccess(deps: Deps, auth: Authority, classId: number, perm: Permission): Promise<ClassRef> {
  return withClassAccess(
    deps,
    auth,
    classId,
    perm,
    async (ref) => ref,
    () => requireClassPermission(deps.sql, auth, classId, perm),
  );
}

/**
 * getClass's read: the class with its collection, checked as requireClassAccess checks it, in one
 * statement either way (the row alone when the kept collection decides, else the row with its
 * check).
 */
export function readClassExpanded(deps: Deps, auth: Authority, classId: number, perm: Permission): Promise<ClassExpandedRow> {
  return withClassAccess(
    deps,
    auth,
    classId,
    perm,
    async () => {
      const row = await findClassExpanded(deps.sql, classId);
      if (!row) throw notFound('class');
      return row;
    },
    () => readClassExpandedAs(deps.sql, auth, classId, perm),
  );
}
