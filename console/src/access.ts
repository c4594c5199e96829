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
