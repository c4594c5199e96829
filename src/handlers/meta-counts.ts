import type { HandlerMap } from '../http/contract.ts';
import { authOf } from '../http/contract.ts';
import { metaCounts } from '../db/aggregates.ts';

export const metaCountsHandlers = {
  // Any authenticated caller: the counts cover only what the caller can read (see openapi.yaml).
  getMetaCounts: async (_input, ctx) => ({ status: 200, body: await metaCounts(ctx.deps.sql, authOf(ctx)) }),
} satisfies Partial<HandlerMap>;
