import type { OperationId } from '../../generated/operations.ts';
import type { Reply } from '../http/contract.ts';
import { notImplemented } from '../domain/errors.ts';

/** The handler of an operation not built yet: 501 with the error body. */
export function pending(operationId: OperationId): () => Promise<Reply> {
  const handler = async (): Promise<Reply> => {
    throw notImplemented(operationId);
  };
  PENDING.add(handler);
  return handler;
}

/** The handlers that are still pending (the foundation test counts and checks them). */
export const PENDING = new Set<unknown>();
