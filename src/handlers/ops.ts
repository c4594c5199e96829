import type { HandlerMap } from '../http/contract.ts';
import { openapiDocument } from '../http/openapi.ts';
import { DOCS_HTML } from '../http/docs.ts';
import { isMigrated } from '../db/migrate.ts';
import { ApiError } from '../domain/errors.ts';
import { METRICS_CONTENT_TYPE, renderMetrics } from '../metrics.ts';
import { checkMetricsAccess } from '../http/metrics.ts';

export const opsHandlers = {
  getHealth: () => ({ status: 200, body: { status: 'ok' } }),

  getReadiness: async (_input, ctx) => {
    const ready = await isMigrated(ctx.deps.sql).catch(() => false);
    if (!ready) throw new ApiError('unavailable', 'the database is not reachable or not migrated');
    return { status: 200, body: { status: 'ready' } };
  },

  // The contract declares an open object; openapi-backend's Document is an interface (no index
  // signature), so its members are copied into a plain object (a shallow copy of the parsed file).
  getOpenApiDocument: async () => ({ status: 200, body: { ...openapiDocument() } }),

  getApiReference: async () => ({ status: 200, raw: DOCS_HTML, contentType: 'text/html; charset=utf-8' }),

  getMetrics: async (input, ctx) => {
    checkMetricsAccess(ctx.deps.config, input.headers.authorization, ctx.clientIp);
    return { status: 200, raw: await renderMetrics(ctx.deps.sql), contentType: METRICS_CONTENT_TYPE };
  },
} satisfies Partial<HandlerMap>;
