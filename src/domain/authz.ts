/**
 * Authorization: the one place that decides what a caller may do. Three rooms:
 *   src/domain/authz.ts (this file)  the pure rules: permissions, scopes, decisions, the
 *                                    administrator and identity-management rules;
 *   src/db/authz.ts                  the SQL lookups: point checks and list-visibility fragments;
 *   src/handlers/gates.ts            the request-level gates handlers open with (they read the
 *                                    request's caller and call the two modules above).
 * Every part of the service calls these modules; nobody re-implements them.
 *
 * MODEL
 *   Effective authority = group grants (on the collection or any ancestor: grants inherit down the
 *   tree) ∩ token permission scope ∩ token resource scope. The scope filter always runs first;
 *   only then does the administrator rule apply: a member of the admin group holds every
 *   collection permission on every collection. So an unscoped admin can do everything with
 *   collections, and a scoped admin token gets exactly "all permissions ∩ its scope" (a scope is
 *   never a grant, and can never take a token beyond what its principal holds).
 *   Humans and service accounts are treated alike: authority comes only from group membership.
 *
 *   Which collection a permission is checked on:
 *     collection-level permissions (Read/Update/Delete/DelegateCollection, *Template,
 *     *RemoteTarget, ReadAudit, ManageEventSubscription) → the collection itself;
 *     *Class → the class's collection_id; *Object → the object's own collection_id;
 *     relations → the caller decides (normally: the permission on both endpoints' collections,
 *     and both endpoints inside the resource scope — see relationInScope()).
 *
 *   Resource scope (token.scope.resources):
 *     {kind: collection, id: C} covers collection C itself, classes with collection_id C and
 *       objects with collection_id C. It does NOT cover child collections (a scope is literal).
 *     {kind: class, id: K} covers class K and the objects of class K; not K's collection, not
 *       sibling classes.
 *     {kind: object, id: O} covers object O only.
 *     A relation is usable only when both endpoints are covered.
 *     Collection-level features (templates, remote targets, audit events, event subscriptions,
 *     and the collection operations themselves) need an explicit collection entry: that is
 *     exactly resourceInScope({kind: 'collection', id}).
 *     Runtime-wide operations are unavailable to resource-scoped tokens: use
 *     requireUnscopedAdmin (src/handlers/gates.ts) for system operations, and
 *     requireRootAuthority() below for "admin at the top of the tree" (top-level collections).
 *   Permission scope (token.scope.permissions): the permission must be listed.
 *   A dimension that is present but empty denies everything.
 *
 * STATUS CODES of the point checks (src/db/authz.ts)
 *   404 the resource does not exist;
 *   403 it exists but the caller lacks the permission, or the token's scope does not cover the
 *       permission or the resource ("point request to a scoped-out resource" is 403 by spec).
 *   Existence of collections, classes and objects therefore leaks to authenticated callers
 *   through 403 vs 404; ids are sequential anyway and the specification lists 403 for these
 *   cases. Resources whose existence must not leak (other principals' tasks, settings) answer
 *   404 in their own handlers and do not use these checks.
 *
 * API (src/db/authz.ts)
 *   Point checks (throw ApiError 404/403, return the row's ids):
 *     requireCollectionPermission(db, auth, collectionId, perm) → {id, parent_collection_id}
 *     requireClassPermission(db, auth, classId, perm)           → {id, collection_id}
 *     requireObjectPermission(db, auth, objectId, perm, {classId?}) → {id, class_id, collection_id}
 *       (classId given and different from the object's class → 404, for nested routes)
 *     hasCollectionPermission(db, auth, collectionId, perm) → boolean (no existence check)
 *     effectiveCollectionPermissions(db, auth, collectionId) → Permission[] (after scope)
 *   Point reads with their check in the same statement (404/403 as the checks above):
 *     readCollectionAs, readClassAs, readObjectAs, readObjectByIdAs (getObject's constant text),
 *     readInCollectionAs (a row kept in a collection: remote target, template, an audited entity);
 *     grantColumn(db, auth, perm, collectionColumn) + enforceGranted(auth, perm, resource, granted)
 *       for a statement of one's own (a relation's two ends: db/relations.ts)
 *     readUnderCollection(db, auth, collectionId, perm, read, alsoCheck?) → a page under the
 *       collection (children, ancestors, grants), the check (and alsoCheck: a named group's or
 *       principal's 404) skipped when the grants decide and the page's rows show they exist
 *   List visibility (postgres.js fragments to embed in queries, so lists and totals filter in SQL):
 *     visibleCollectionIds(db, auth, perm)  → subquery selecting one integer column `id`
 *       use as: db`e.collection_id in (${visibleCollectionIds(db, auth, 'ReadAudit')})`
 *     collectionWhere(db, auth, perm, {id: 'c.id'})                      → boolean fragment
 *     classWhere(db, auth, perm, {id: 'k.id', collectionId: 'k.collection_id'}) → boolean fragment
 *     objectWhere(db, auth, perm, {id: 'o.id', classId: 'o.class_id', collectionId: 'o.collection_id'})
 *     grantedCollectionIds(db, principalId, perm) → raw group grants with inheritance (no admin
 *       rule, no scope; for workers re-checking snapshots and for diagnostics)
 *   The `permissions=<PermissionName>` list filter:
 *     permissionsFilter(db, raw, build) → Fragment[]; raw is the query value (one name or a
 *     comma-separated list, all required; unknown names 400), build maps a permission to the
 *     resource's where-fragment, e.g. (p) => classWhere(db, auth, p).
 *   Pure helpers (this file): PERMISSIONS, isPermission, sortPermissions, parsePermissionList,
 *     permissionInScope, resourceInScope, relationInScope, isResourceScoped, decide,
 *     requireRootAuthority; identity management: isUnscopedAdmin, assertHumanUnscoped,
 *     assertUnscopedAdmin, mayManageTokens.
 */
import { PERMISSION_NAMES } from '../../generated/operations.ts';
import { ApiError, badRequest, forbidden } from './errors.ts';
import type { PrincipalKind } from './principals.ts';

/** Every collection permission, in the contract's PermissionName enum order (generated from openapi.yaml). */
export const PERMISSIONS = PERMISSION_NAMES;

export type Permission = (typeof PERMISSIONS)[number];

const ORDER = new Map<string, number>(PERMISSIONS.map((p, i) => [p, i]));

export function isPermission(s: unknown): s is Permission {
  return typeof s === 'string' && ORDER.has(s);
}

/** Deduplicated, in enum order. */
export function sortPermissions(list: Iterable<string>): Permission[] {
  return [...new Set(list)].filter(isPermission).sort((a, b) => ORDER.get(a)! - ORDER.get(b)!);
}

/** Parses a comma-separated list of permission names (query values); unknown names are 400. */
export function parsePermissionList(raw: string, param = 'permissions'): Permission[] {
  const parts = raw.split(',').map((s) => s.trim());
  const bad = parts.filter((p) => !isPermission(p));
  if (parts.length === 0 || bad.length > 0) {
    throw badRequest(`unknown permission name in ${param}: ${bad.map((b) => JSON.stringify(b)).join(', ') || '""'}`, [
      { path: `query.${param}`, message: `must be comma-separated PermissionName values` },
    ]);
  }
  return sortPermissions(parts);
}

/** The token scope shape (structurally the stored token scope). */
export interface ScopeValue {
  permissions?: readonly string[];
  resources?: readonly { kind: string; id: number }[];
}

/** What authorization needs to know about a caller; AuthInfo satisfies it, and so can a worker's snapshot. */
export interface Authority {
  principal: { id: number };
  isAdmin: boolean;
  token: { scope: ScopeValue | null };
  /**
   * The principal's grants, when the process knows them: for each permission, the collections where
   * its groups hold it (a grant reaches down the tree; no scope, no admin rule), a permission held
   * nowhere absent. Set for a read request of a non-administrator while the token cache may be used
   * (services/token-cache.ts grantSets); the SQL then tests a collection against these ids instead
   * of reading the grants itself (db/authz.ts). Without it, the SQL reads them.
   */
  grants?: GrantSets;
}

/** Permission name → the collections granted (db/authz.ts readGrantSets). */
export type GrantSets = ReadonlyMap<string, readonly number[]>;

/** A resource as the resource scope sees it. */
export type ScopedResource =
  | { kind: 'collection'; id: number }
  | { kind: 'class'; id: number; collectionId: number }
  | { kind: 'object'; id: number; classId: number; collectionId: number };

export interface ResourceScope {
  collections: number[];
  classes: number[];
  objects: number[];
}

/** The resource dimension of the token scope, split by kind; null when the token has none. */
export function resourceScope(auth: Authority): ResourceScope | null {
  const res = auth.token.scope?.resources;
  if (!res) return null;
  const out: ResourceScope = { collections: [], classes: [], objects: [] };
  for (const r of res) {
    if (r.kind === 'collection') out.collections.push(r.id);
    else if (r.kind === 'class') out.classes.push(r.id);
    else if (r.kind === 'object') out.objects.push(r.id);
  }
  return out;
}

export function isResourceScoped(auth: Authority): boolean {
  return auth.token.scope?.resources !== undefined && auth.token.scope.resources !== null;
}

export function isUnscoped(auth: Authority): boolean {
  return auth.token.scope === null || auth.token.scope === undefined;
}

/** The permission dimension: absent allows every permission; present (even empty) allows only those listed. */
export function permissionInScope(auth: Authority, perm: Permission): boolean {
  const perms = auth.token.scope?.permissions;
  return perms === undefined || perms === null || perms.includes(perm);
}

/** The resource dimension (see the header for what each entry kind covers). */
export function resourceInScope(auth: Authority, r: ScopedResource): boolean {
  const rs = resourceScope(auth);
  if (!rs) return true;
  switch (r.kind) {
    case 'collection':
      return rs.collections.includes(r.id);
    case 'class':
      return rs.collections.includes(r.collectionId) || rs.classes.includes(r.id);
    case 'object':
      return rs.collections.includes(r.collectionId) || rs.classes.includes(r.classId) || rs.objects.includes(r.id);
  }
}

/** A relation is usable only when both endpoints are inside the resource scope. */
export function relationInScope(auth: Authority, from: ScopedResource, to: ScopedResource): boolean {
  return resourceInScope(auth, from) && resourceInScope(auth, to);
}

export type Decision = 'allow' | 'scoped_out' | 'denied';

/**
 * The decision for one permission on one resource, given whether the principal's groups grant it
 * (on the resource's collection or an ancestor). Scope first, then the admin rule, then grants.
 */
export function decide(auth: Authority, perm: Permission, resource: ScopedResource, granted: boolean): Decision {
  if (!permissionInScope(auth, perm) || !resourceInScope(auth, resource)) return 'scoped_out';
  if (auth.isAdmin || granted) return 'allow';
  return 'denied';
}

/** Throws the 403 for a non-allow decision. */
export function enforce(decision: Decision, perm: Permission, what: string): void {
  if (decision === 'allow') return;
  if (decision === 'scoped_out') throw forbidden(`the token's scope does not cover ${perm} on this ${what}`);
  throw forbidden(`you need ${perm} on this ${what}`);
}

/**
 * "Administrator at the top of the tree" (creating top-level collections, moving to or from the
 * top level): an admin whose token is not resource-scoped and whose permission scope, if any,
 * includes the permission (DelegateCollection for the tree operations).
 */
export function requireRootAuthority(auth: Authority, perm: Permission = 'DelegateCollection'): void {
  if (!auth.isAdmin) throw forbidden('only an administrator can create or move collections at the top level');
  if (isResourceScoped(auth) || !permissionInScope(auth, perm)) {
    throw new ApiError('forbidden', `the token's scope does not allow ${perm} at the top level`);
  }
}

// ---- identity management (users, groups, service accounts, tokens, system operations) ----

/** An admin whose token is unscoped (admin fast paths never apply to scoped tokens). */
export function isUnscopedAdmin(auth: Authority): boolean {
  return auth.isAdmin && isUnscoped(auth);
}

/** A caller whose principal kind is known (the Human/IAM rules depend on it). */
export interface IamAuthority extends Authority {
  principal: { id: number; kind: PrincipalKind };
}

/**
 * The Human/IAM family's two gates, in order, before any admin or self check:
 * (1) the principal must be a human; (2) the token must be unscoped.
 */
export function assertHumanUnscoped(auth: IamAuthority): void {
  if (auth.principal.kind !== 'human') throw forbidden('service accounts cannot use identity management operations');
  if (!isUnscoped(auth)) throw forbidden('scoped tokens cannot use identity management operations');
}

/** Unscoped administrator required (backups, admin config, meta, sinks, …). */
export function assertUnscopedAdmin(auth: Authority): void {
  if (!isUnscopedAdmin(auth)) throw forbidden('an unscoped administrator is required');
}

/** A principal whose tokens someone wants to manage. */
export interface TokenOwnerRef {
  id: number;
  kind: PrincipalKind;
  /** For a service account: whether the caller is a member of its owner group. */
  caller_in_owner_group: boolean;
}

/** Who may manage a principal's tokens: an unscoped admin; a human for itself; for a service account a human member of its owner group. */
export function mayManageTokens(auth: IamAuthority, owner: TokenOwnerRef): boolean {
  if (isUnscopedAdmin(auth)) return true;
  if (auth.principal.kind !== 'human') return false;
  return owner.kind === 'human' ? owner.id === auth.principal.id : owner.caller_in_owner_group;
}

/** The 403 of mayManageTokens() saying no. */
export function tokenManagementDenied(owner: TokenOwnerRef): ApiError {
  return forbidden(
    owner.kind === 'human'
      ? "only the user itself or an administrator may manage a user's tokens"
      : "only an administrator or a member of the service account's owner group may manage its tokens",
  );
}
