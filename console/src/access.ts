// What the signed-in caller may do, so views hide or disable what the API would refuse. Admin
// authority is implicit (no grant rows), so it is found by asking an admin-only read
// (getEventDeliveryHealth: 403 for anyone else). Per-collection rights are the caller's effective
// group grants there (listEffectiveCollectionPrincipalPermissions), narrowed by the token's scope.
import { isApiRequestError, type Schemas } from '../../clients/typescript/index.ts';
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

/** Whether the caller holds `permission` on the collection (admins hold every permission). */
export async function may(collectionId: number, permission: Permission): Promise<boolean> {
  const { me, admin } = await loadAccess();
  const scoped = me.token.scope?.permissions;
  if (scoped && !scoped.includes(permission)) return false;
  if (admin) return true;
  for await (const row of inv.paginate('listEffectiveCollectionPrincipalPermissions', {
    params: { path: { collection_id: collectionId, principal_id: me.principal.id } },
  }))
    if (row.permission === permission) return true;
  return false;
}

/** Every collection permission, in the contract's PermissionName enum order. */
export const PERMISSIONS: readonly Permission[] = [
  'ReadCollection',
  'UpdateCollection',
  'DeleteCollection',
  'DelegateCollection',
  'CreateClass',
  'ReadClass',
  'UpdateClass',
  'DeleteClass',
  'CreateObject',
  'ReadObject',
  'UpdateObject',
  'DeleteObject',
  'CreateClassRelation',
  'ReadClassRelation',
  'UpdateClassRelation',
  'DeleteClassRelation',
  'CreateObjectRelation',
  'ReadObjectRelation',
  'UpdateObjectRelation',
  'DeleteObjectRelation',
  'CreateTemplate',
  'ReadTemplate',
  'UpdateTemplate',
  'DeleteTemplate',
  'CreateRemoteTarget',
  'ReadRemoteTarget',
  'UpdateRemoteTarget',
  'DeleteRemoteTarget',
  'ExecuteRemoteTarget',
  'ReadAudit',
  'ManageEventSubscription',
];

/**
 * What the caller holds on each readable collection, decided by the service itself: one
 * `listCollections?permissions=<name>` walk per permission (the filter applies the admin rule, the
 * group grants with inheritance and both token-scope dimensions, exactly as the point checks do).
 * An unscoped administrator holds everything everywhere, so that case asks nothing.
 */
export async function collectionPermissions(collectionIds: number[]): Promise<Map<number, Set<Permission>>> {
  const { admin } = await loadAccess();
  const held = new Map<number, Set<Permission>>(collectionIds.map((id) => [id, new Set<Permission>()]));
  if (admin) {
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
  if ((await loadAccess()).admin) return true;
  const [hit] = await inv.call('listClasses', { params: { query: { id: classId, permissions: permission, limit: 1 } } });
  return hit !== undefined;
}

/** Whether the caller holds `permission` on one object, as the service decides it (`listObjects?id=…&permissions=…`). */
export async function mayOnObject(classId: number, objectId: number, permission: Permission): Promise<boolean> {
  if ((await loadAccess()).admin) return true;
  const [hit] = await inv.call('listObjects', {
    params: { path: { class_id: classId }, query: { id: objectId, permissions: permission, limit: 1 } },
  });
  return hit !== undefined;
}
