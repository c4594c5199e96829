import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const settingsHandlers = {
  getMySettings: pending('getMySettings'),
  replaceMySettings: pending('replaceMySettings'),
  resetMySettings: pending('resetMySettings'),
  patchMySettings: pending('patchMySettings'),
  getPrincipalSettings: pending('getPrincipalSettings'),
  replacePrincipalSettings: pending('replacePrincipalSettings'),
  resetPrincipalSettings: pending('resetPrincipalSettings'),
  patchPrincipalSettings: pending('patchPrincipalSettings'),
} satisfies Partial<HandlerMap>;
