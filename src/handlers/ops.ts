import { storedOutput, type HandlerMap } from '../http/contract.ts';
import { codedDynamicBody, StaticBody } from '../http/compression.ts';
import { openapiDocument } from '../http/openapi.ts';
import { DOCS_HTML } from '../http/docs.ts';
import { isMigrated } from '../db/migrate.ts';
import { ApiError } from '../domain/errors.ts';
import { METRICS_CONTENT_TYPE, renderMetrics } from '../metrics.ts';
import { checkMetricsAccess } from '../http/metrics.ts';

/** This OpenAPI document as JSON, made on the first request for it. */
let openapiJson: StaticBody | undefined;

export const opsHandlers = {
  getHealth: () => ({ status: 200, body: { status: 'ok' } }),

  getReadiness: async (_input, ctx) => {
    const ready = await isMigrated(ctx.deps.sql).catch(() => false);
    if (!ready) throw new ApiError('unavailable', 'the database is not reachable or not migrated');
    return { status: 200, body: { status: 'ready' } };
  },

  // The document's JSON, written once, in the content coding the request prefers: 1.4 MB as it is,
  // 0.1 MB in brotli (http/compression.ts).
  getOpenApiDocument: async (input) => {
    openapiJson ??= new StaticBody(Buffer.from(JSON.stringify(openapiDocument())));
    const coded = await openapiJson.forRequest(input.headers['accept-encoding']);
    return storedOutput<'getOpenApiDocument'>(coded.body, 'application/json', coded.headers);
  },

  getApiReference: async () => ({ status: 200, raw: DOCS_HTML, contentType: 'text/html; charset=utf-8' }),

  getMetrics: async (input, ctx) => {
    checkMetricsAccess(ctx.deps.config, input.headers.authorization, ctx.clientIp);
    // gzipped for a scraper that accepts it, as Prometheus does (http/compression.ts)
    const coded = await codedDynamicBody(await renderMetrics(ctx.deps.sql), input.headers['accept-encoding']);
    return { status: 200, raw: coded.body, contentType: METRICS_CONTENT_TYPE, headers: coded.headers };
  },
} satisfies Partial<HandlerMap>;
