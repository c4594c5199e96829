import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const tokensHandlers = {
  listPrincipalTokens: pending('listPrincipalTokens'),
  createPrincipalToken: pending('createPrincipalToken'),
  getPrincipalToken: pending('getPrincipalToken'),
  renewPrincipalToken: pending('renewPrincipalToken'),
  revokePrincipalToken: pending('revokePrincipalToken'),
} satisfies Partial<HandlerMap>;
