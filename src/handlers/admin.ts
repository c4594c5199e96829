import type { HandlerMap } from '../http/contract.ts';
import { requireUnscopedAdmin } from './gates.ts';
import { openapiDocument } from '../http/openapi.ts';
import { redactedConfig } from '../config.ts';

export const adminHandlers = {
  getAdminConfig: async (_input, ctx) => {
    requireUnscopedAdmin(ctx);
    const cfg = ctx.deps.config;
    return {
      status: 200,
      body: { version: openapiDocument().info.version, runtime_role: cfg.SVC_RUNTIME_ROLE, settings: redactedConfig(cfg) },
      headers: { 'cache-control': 'no-store' },
    };
  },
} satisfies Partial<HandlerMap>;
