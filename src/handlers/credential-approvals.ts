import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const credentialApprovalsHandlers = {
  createCredentialApproval: pending('createCredentialApproval'),
  getCredentialApproval: pending('getCredentialApproval'),
} satisfies Partial<HandlerMap>;
