import { badRequest, type ErrorDetail } from './errors.ts';
import type { components } from '../../generated/openapi.ts';
import { PERMISSIONS, type Permission } from './authz.ts';

type ScopePermissionName = components['schemas']['ScopePermissionName'];

/** Collection permissions a token scope may not list (the contract's ScopePermissionName omits them). */
const UNSCOPABLE: ReadonlySet<Permission> = new Set<Permission>(['ReadAudit', 'ManageEventSubscription']);

/** The permission names a token scope may list (the contract's ScopePermissionName). */
export const SCOPE_PERMISSIONS: ReadonlySet<string> = new Set<ScopePermissionName>(
  PERMISSIONS.filter((p): p is ScopePermissionName => !UNSCOPABLE.has(p)),
);

/** A token's scope as stored (tokens.scope) and as the contract's TokenScope carries it. */
export interface TokenScopeValue {
  permissions?: string[];
  resources?: { kind: 'collection' | 'class' | 'object'; id: number }[];
}

export const MAX_SCOPE_RESOURCES = 1000;
const RESOURCE_KINDS = new Set(['collection', 'class', 'object']);
const MAX_INT32 = 2 ** 31 - 1;

/**
 * Checks the shape rules of a requested token scope (everything except resource existence, which
 * needs the database): a present object has at least one member; `permissions` is a non-empty
 * list of known, distinct scope permission names; `resources` is a non-empty list of at most
 * 1,000 distinct `{kind, id}` entries with positive ids. Returns the scope as stored (null =
 * unscoped), or throws 400 naming every problem found.
 */
export function validateScopeShape(scope: unknown): TokenScopeValue | null {
  if (scope === undefined || scope === null) return null;
  const details: ErrorDetail[] = [];
  const at = (path: string, message: string) => details.push({ path: `scope${path}`, message });
  if (typeof scope !== 'object' || Array.isArray(scope))
    throw badRequest('scope must be an object or null', [{ path: 'scope', message: 'must be an object or null' }]);
  const s = scope as Record<string, unknown>;
  for (const k of Object.keys(s)) if (k !== 'permissions' && k !== 'resources') at(`.${k}`, `unknown member "${k}"`);
  if (s.permissions === undefined && s.resources === undefined) at('', 'a scope object needs permissions or resources');
  const out: TokenScopeValue = {};
  if (s.permissions !== undefined) {
    if (!Array.isArray(s.permissions) || s.permissions.length === 0) at('.permissions', 'must be a non-empty array');
    else {
      const seen = new Set<string>();
      s.permissions.forEach((p, i) => {
        if (typeof p !== 'string' || !SCOPE_PERMISSIONS.has(p)) at(`.permissions.${i}`, `unknown permission name ${JSON.stringify(p)}`);
        else if (seen.has(p)) at(`.permissions.${i}`, `duplicate permission ${p}`);
        else seen.add(p);
      });
      out.permissions = [...seen];
    }
  }
  if (s.resources !== undefined) {
    if (!Array.isArray(s.resources) || s.resources.length === 0) at('.resources', 'must be a non-empty array');
    else if (s.resources.length > MAX_SCOPE_RESOURCES) at('.resources', `at most ${MAX_SCOPE_RESOURCES} entries`);
    else {
      const seen = new Set<string>();
      const list: NonNullable<TokenScopeValue['resources']> = [];
      s.resources.forEach((r, i) => {
        const e = r as { kind?: unknown; id?: unknown } | null;
        if (!e || typeof e !== 'object' || Array.isArray(e)) return at(`.resources.${i}`, 'must be an object {kind, id}');
        if (typeof e.kind !== 'string' || !RESOURCE_KINDS.has(e.kind))
          return at(`.resources.${i}.kind`, 'must be collection, class or object');
        if (typeof e.id !== 'number' || !Number.isInteger(e.id) || e.id < 1) return at(`.resources.${i}.id`, 'must be a positive integer');
        if (e.id > MAX_INT32) return at(`.resources.${i}.id`, `${e.kind} ${e.id} does not exist`);
        const key = `${e.kind}:${e.id}`;
        if (seen.has(key)) return at(`.resources.${i}`, `duplicate resource ${e.kind} ${e.id}`);
        seen.add(key);
        list.push({ kind: e.kind as 'collection' | 'class' | 'object', id: e.id });
      });
      out.resources = list;
    }
  }
  if (details.length) throw badRequest(`invalid token scope: ${details[0]!.path} ${details[0]!.message}`, details.slice(0, 50));
  return out;
}

/** 400 for scope resources that do not exist (found by the caller in the database). */
export function missingResourcesError(missing: { kind: string; id: number }[], scope: TokenScopeValue): Error {
  const index = (m: { kind: string; id: number }) => (scope.resources ?? []).findIndex((r) => r.kind === m.kind && r.id === m.id);
  return badRequest(
    `invalid token scope: ${missing[0]!.kind} ${missing[0]!.id} does not exist`,
    missing.slice(0, 50).map((m) => ({ path: `scope.resources.${index(m)}.id`, message: `${m.kind} ${m.id} does not exist` })),
  );
}
