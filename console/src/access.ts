// What the signed-in caller may do, so views hide or disable what the API would refuse. Admin
// authority is implicit (no grant rows), so it is found by asking an admin-only read
// (getEventDeliveryHealth: 403 for anyone else). Every other right is asked of the service through
// the `permissions=` filter of the lists, which applies the admin rule, inherited grants and the
// token's scope exactly as the point checks do.
import { isApiRequestError, PERMISSION_NAMES, type Schemas } from '../../clients/typescript/index.ts';
import { inv } from './session.ts';

type Permission = Schemas['PermissionName'];

export interface Access {
  me: Schemas['Me'];
  admin: boolean;
}

let cached: Promise<Access> | null = null;

export function loadAccess(): Promise<Access> {
  cached ??= (async () => {
    const me = await inv.call('getMe');
    let admin = true;
    try {
      await inv.call('getEventDeliveryHealth');
    } catch (e) {
      if (!isApiRequestError(e, 403)) throw e;
      admin = false;
    }
    return { me, admin };
  })();
  cached.catch(() => {
    cached = null;
  });
  return cached;
}

/** Forget what was learnt (on sign-in and sign-out). */
export function resetAccess(): void {
  cached = null;
}

/** An administrator whose token has no scope: holds every permission everywhere, so nothing needs asking. */
async function unscopedAdmin(): Promise<boolean> {
  const { me, admin } = await loadAccess();
  return admin && !me.token.scope;
}

/**
 * Whether the caller holds `permission` on the collection, as the service decides it
 * (`listCollections?id=<collection>&permissions=<name>`: admin rule, inherited grants, token scope).
 */
export async function may(collectionId: number, permission: Permission): Promise<boolean> {
  if (await unscopedAdmin()) return true;
  const [hit] = await inv.call('listCollections', { params: { query: { id: collectionId, permissions: permission, limit: 1 } } });
  return hit !== undefined;
}

/** Every collection permission, in the contract's PermissionName enum order. */
export const PERMISSIONS: readonly Permission[] = PERMISSION_NAMES;

/**
 * What the caller holds on each readable collection, decided by the service itself: one
 * `listCollections?permissions=<name>` walk per permission (the filter applies the admin rule, the
 * group grants with inheritance and both token-scope dimensions, exactly as the point checks do).
 * An unscoped administrator holds everything everywhere, so that case asks nothing.
 */
export async function collectionPermissions(collectionIds: number[]): Promise<Map<number, Set<Permission>>> {
  const held = new Map<number, Set<Permission>>(collectionIds.map((id) => [id, new Set<Permission>()]));
  if (await unscopedAdmin()) {
    for (const set of held.values()) for (const p of PERMISSIONS) set.add(p);
    return held;
  }
  const queue = [...PERMISSIONS];
  const worker = async () => {
    for (let p = queue.shift(); p; p = queue.shift())
      for await (const c of inv.paginate('listCollections', { params: { query: { permissions: p, limit: 500 } } })) held.get(c.id)?.add(p);
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return held;
}

/**
 * Whether the caller holds `permission` on the class (class and object permissions), as the service
 * decides it: `listClasses?id=<class>&permissions=<name>` (admin rule, grants, token scope including
 * class-scoped tokens).
 */
export async function mayOnClass(classId: number, permission: Permission): Promise<boolean> {
  if (await unscopedAdmin()) return true;
  const [hit] = await inv.call('listClasses', { params: { query: { id: classId, permissions: permission, limit: 1 } } });
  return hit !== undefined;
}

/** Whether the caller holds `permission` on one object, as the service decides it (`listObjects?id=…&permissions=…`). */
export async function mayOnObject(classId: number, objectId: number, permission: Permission): Promise<boolean> {
  if (await unscopedAdmin()) return true;
  const [hit] = await inv.call('listObjects', {
    params: { path: { class_id: classId }, query: { id: objectId, permissions: permission, limit: 1 } },
  });
  return hit !== undefined;
}
