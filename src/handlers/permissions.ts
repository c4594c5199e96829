import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const permissionsHandlers = {
  listCollectionPermissions: pending('listCollectionPermissions'),
  listEffectiveCollectionPrincipalPermissions: pending('listEffectiveCollectionPrincipalPermissions'),
  getCollectionGroupPermissions: pending('getCollectionGroupPermissions'),
  replaceCollectionGroupPermissions: pending('replaceCollectionGroupPermissions'),
  addCollectionGroupPermissions: pending('addCollectionGroupPermissions'),
  revokeAllCollectionGroupPermissions: pending('revokeAllCollectionGroupPermissions'),
  grantCollectionGroupPermission: pending('grantCollectionGroupPermission'),
  revokeCollectionGroupPermission: pending('revokeCollectionGroupPermission'),
  listCollectionPrincipalPermissions: pending('listCollectionPrincipalPermissions'),
} satisfies Partial<HandlerMap>;
