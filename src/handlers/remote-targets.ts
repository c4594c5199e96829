import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const remoteTargetsHandlers = {
  listRemoteTargets: pending('listRemoteTargets'),
  createRemoteTarget: pending('createRemoteTarget'),
  getRemoteTarget: pending('getRemoteTarget'),
  deleteRemoteTarget: pending('deleteRemoteTarget'),
  updateRemoteTarget: pending('updateRemoteTarget'),
  invokeRemoteTarget: pending('invokeRemoteTarget'),
} satisfies Partial<HandlerMap>;
