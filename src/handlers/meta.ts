import type { HandlerMap } from '../http/contract.ts';
import { pending } from './not-implemented.ts';

export const metaHandlers = {
  getMetaDb: pending('getMetaDb'),
  getLoginRateLimitState: pending('getLoginRateLimitState'),
  clearLoginRateLimits: pending('clearLoginRateLimits'),
  releaseLoginRateLimitEntry: pending('releaseLoginRateLimitEntry'),
  getMetaTasks: pending('getMetaTasks'),
  getPublicConfig: pending('getPublicConfig'),
} satisfies Partial<HandlerMap>;
