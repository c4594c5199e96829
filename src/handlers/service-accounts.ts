import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const serviceAccountsHandlers = {
  listServiceAccounts: pending('listServiceAccounts'),
  createServiceAccount: pending('createServiceAccount'),
  getServiceAccount: pending('getServiceAccount'),
  deleteServiceAccount: pending('deleteServiceAccount'),
  updateServiceAccount: pending('updateServiceAccount'),
  disableServiceAccount: pending('disableServiceAccount'),
} satisfies Partial<HandlerMap>;
