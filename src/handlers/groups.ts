import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const groupsHandlers = {
  listGroups: pending('listGroups'),
  createGroup: pending('createGroup'),
  getGroup: pending('getGroup'),
  deleteGroup: pending('deleteGroup'),
  updateGroup: pending('updateGroup'),
  listGroupMembers: pending('listGroupMembers'),
  addGroupMember: pending('addGroupMember'),
  removeGroupMember: pending('removeGroupMember'),
} satisfies Partial<HandlerMap>;
