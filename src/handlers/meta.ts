import type { HandlerMap } from '../http/contract.ts';
import { badRequest, notFound } from '../domain/errors.ts';
import { requireUnscopedAdmin } from './gates.ts';
import { DEFAULT_LIMIT, MAX_LIMIT } from '../domain/list-query.ts';
import { dbDiagnostics, taskQueueFigures } from '../db/meta.ts';
import { ENTRY_ID, type LimitScope } from '../domain/rate-limit.ts';
import { loginLimiter } from '../services/login-limiter.ts';

const TASK_STATUSES = ['queued', 'validating', 'running', 'succeeded', 'failed', 'partially_succeeded', 'cancelled'] as const;
const TASK_KINDS = ['import', 'export', 'remote_call', 'backup', 'restore'] as const;

/** One count per key, every key present (the figures of GET /api/v1/meta/tasks). */
function perKey<K extends string>(keys: readonly K[], count: (k: K) => number): Record<K, number> {
  const out = {} as Record<K, number>;
  for (const k of keys) out[k] = count(k);
  return out;
}

export const metaHandlers = {
  getMetaDb: async (_input, ctx) => {
    requireUnscopedAdmin(ctx);
    const d = await dbDiagnostics(ctx.deps.sql);
    return {
      status: 200,
      body: {
        backend: 'postgresql',
        server_version: d.server_version,
        pool_size: ctx.deps.config.SVC_DB_POOL_MAX,
        total_connections: d.total_connections,
        active_connections: d.active_connections,
        idle_connections: d.idle_connections,
        database_size_bytes: Number(d.database_size_bytes),
        last_vacuum_at: d.last_vacuum_at,
        last_autovacuum_at: d.last_autovacuum_at,
      },
    };
  },

  getLoginRateLimitState: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const limiter = loginLimiter(ctx.deps);
    // The contract validated these (enums, q at most 512 characters).
    const query = input.query as { include?: 'locked' | 'all'; scope?: LimitScope; q?: string };
    const snap = await limiter.snapshot({ include: query.include ?? 'locked', scope: query.scope, q: query.q });
    const c = limiter.config;
    return {
      status: 200,
      body: {
        config: {
          backend: limiter.backend,
          max_failures_per_user_ip: c.maxFailuresPerUserIp,
          max_failures_per_ip: c.maxFailuresPerIp,
          max_failures_per_subnet: c.maxFailuresPerSubnet,
          max_failures_per_user: c.maxFailuresPerUser,
          user_interval_seconds: c.userIntervalSeconds,
          subnet_prefix_v4: c.subnetPrefixV4,
          subnet_prefix_v6: c.subnetPrefixV6,
          window_seconds: c.windowSeconds,
          lockout_base_seconds: c.lockoutBaseSeconds,
          lockout_max_seconds: c.lockoutMaxSeconds,
        },
        entries: snap.entries,
        total: snap.total,
        truncated: snap.truncated,
        generated_at: new Date(),
      },
    };
  },

  clearLoginRateLimits: async (_input, ctx) => {
    requireUnscopedAdmin(ctx);
    const cleared = await loginLimiter(ctx.deps).clear();
    return { status: 200, body: { message: `cleared ${cleared} login rate-limit key${cleared === 1 ? '' : 's'}`, cleared } };
  },

  releaseLoginRateLimitEntry: async (input, ctx) => {
    requireUnscopedAdmin(ctx);
    const id = input.params.id;
    if (!ENTRY_ID.test(id)) throw badRequest('invalid login rate-limit entry id', [{ path: 'path.id', message: 'not an entry id' }]);
    if (!(await loginLimiter(ctx.deps).releaseEntry(id))) throw notFound('login rate-limit entry');
    return { status: 200, body: { message: 'login rate-limit entry released', cleared: 1 } };
  },

  getMetaTasks: async (_input, ctx) => {
    requireUnscopedAdmin(ctx);
    const f = await taskQueueFigures(ctx.deps.sql);
    const byStatus = perKey(TASK_STATUSES, (s) => f.by_status.find((r) => r.status === s)?.n ?? 0);
    const byKind = perKey(TASK_KINDS, (k) => f.by_kind.find((r) => r.kind === k)?.n ?? 0);
    const activeByKind = perKey(TASK_KINDS, (k) => f.by_kind.find((r) => r.kind === k)?.active ?? 0);
    const cfg = ctx.deps.config;
    return {
      status: 200,
      body: {
        total: f.by_status.reduce((n, r) => n + r.n, 0),
        by_status: byStatus,
        by_kind: byKind,
        active_by_kind: activeByKind,
        oldest_queued_age_seconds: f.oldest_queued_age_seconds === null ? null : Math.max(0, f.oldest_queued_age_seconds),
        oldest_active_age_seconds: f.oldest_active_age_seconds === null ? null : Math.max(0, f.oldest_active_age_seconds),
        workers: {
          runtime_role: cfg.SVC_RUNTIME_ROLE,
          task_workers: cfg.SVC_RUNTIME_ROLE === 'api' ? 0 : cfg.SVC_TASK_WORKERS,
          poll_interval_ms: cfg.SVC_TASK_POLL_INTERVAL_MS,
        },
      },
    };
  },

  getPublicConfig: async (_input, ctx) => ({
    status: 200,
    body: {
      authentication: {
        default_token_lifetime_hours: ctx.deps.config.SVC_TOKEN_LIFETIME_HOURS,
        max_token_lifetime_hours: ctx.deps.config.SVC_MAX_TOKEN_LIFETIME_HOURS,
      },
      pagination: { default_page_limit: DEFAULT_LIMIT, max_page_limit: MAX_LIMIT },
    },
  }),
} satisfies Partial<HandlerMap>;
