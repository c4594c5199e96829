import type { Config } from '../config.ts';
import type { Deps } from '../deps.ts';
import { ApiError } from '../domain/errors.ts';
import { DEFAULT_LIMITER_CONFIG, type LimiterConfig } from '../domain/rate-limit.ts';
import { MemoryLoginLimiter, type LoginLimiter } from './login-limiter-memory.ts';
import { RedisLoginLimiter } from './login-limiter-redis.ts';
import { loginLimiterBlocks } from '../metrics.ts';

/** The limiter rules with the account bound from the settings. */
export function limiterConfig(
  config: Pick<Config, 'SVC_LOGIN_RATE_LIMIT_MAX_FAILURES_PER_USER' | 'SVC_LOGIN_RATE_LIMIT_USER_INTERVAL_SECONDS'>,
): LimiterConfig {
  const d = DEFAULT_LIMITER_CONFIG;
  return {
    maxFailuresPerUserIp: d.maxFailuresPerUserIp,
    maxFailuresPerIp: d.maxFailuresPerIp,
    maxFailuresPerSubnet: d.maxFailuresPerSubnet,
    maxFailuresPerUser: config.SVC_LOGIN_RATE_LIMIT_MAX_FAILURES_PER_USER,
    userIntervalSeconds: config.SVC_LOGIN_RATE_LIMIT_USER_INTERVAL_SECONDS,
    subnetPrefixV4: d.subnetPrefixV4,
    subnetPrefixV6: d.subnetPrefixV6,
    windowSeconds: d.windowSeconds,
    lockoutBaseSeconds: d.lockoutBaseSeconds,
    lockoutMaxSeconds: d.lockoutMaxSeconds,
    reservationSeconds: d.reservationSeconds,
  };
}

/** The limiter of this process, created on first use from the configuration. */
export function loginLimiter(deps: Deps): LoginLimiter {
  const existing = deps.services.loginLimiter as LoginLimiter | undefined;
  if (existing) return existing;
  const url = deps.config.SVC_LOGIN_RATE_LIMIT_REDIS_URL;
  const config = limiterConfig(deps.config);
  const limiter: LoginLimiter = url ? new RedisLoginLimiter({ url, log: deps.log, config }) : new MemoryLoginLimiter(config);
  deps.services.loginLimiter = limiter;
  return limiter;
}

/** Closes the limiter's connections (shutdown). */
export async function closeLoginLimiter(deps: Deps): Promise<void> {
  const existing = deps.services.loginLimiter as LoginLimiter | undefined;
  delete deps.services.loginLimiter;
  await existing?.close();
}

/**
 * Runs one password check under the login rate limit of (name, ip): 429 with Retry-After before
 * any work when a key is locked (or already has as many attempts in flight as it may fail), else
 * `check` runs and its verdict is recorded. `check` returns true for a correct password.
 */
export async function underLoginLimit(limiter: LoginLimiter, name: string, ip: string, check: () => Promise<boolean>): Promise<boolean> {
  const admission = await limiter.admit(name, ip);
  if (!admission.ok) {
    loginLimiterBlocks.inc();
    throw new ApiError('too_many_requests', 'too many failed login attempts; try again later', {
      reason: 'login_rate_limited',
      retryAfterSeconds: admission.retryAfter,
    });
  }
  let ok: boolean;
  try {
    ok = await check();
  } catch (err) {
    await limiter.abandon(admission.ticket);
    throw err;
  }
  if (ok) await limiter.succeeded(admission.ticket);
  else await limiter.failed(admission.ticket);
  return ok;
}
