import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const usersHandlers = {
  listUsers: pending('listUsers'),
  createUser: pending('createUser'),
  getUser: pending('getUser'),
  deleteUser: pending('deleteUser'),
  updateUser: pending('updateUser'),
} satisfies Partial<HandlerMap>;
