import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const principalsHandlers = {
  listPrincipalGroups: pending('listPrincipalGroups'),
  listPrincipalPermissions: pending('listPrincipalPermissions'),
} satisfies Partial<HandlerMap>;
