import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const backupsHandlers = {
  createBackup: pending('createBackup'),
  getBackup: pending('getBackup'),
  getBackupOutput: pending('getBackupOutput'),
} satisfies Partial<HandlerMap>;
