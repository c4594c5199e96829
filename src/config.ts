// Every SVC_* setting, parsed and validated once. A bad value stops start-up naming the setting.
// The README's configuration table lists the same settings (a test keeps the two in step).
import { parseTrustedProxies } from './domain/address-list.ts';
import { parseLdapProviders, type LdapProvider } from './domain/ldap.ts';

type Kind = 'string' | 'int' | 'bool' | 'enum' | 'optional';

interface Setting {
  kind: Kind;
  default?: string;
  min?: number;
  max?: number;
  values?: readonly string[];
  secret?: boolean;
  doc: string;
}

export const SETTINGS = {
  SVC_BIND: { kind: 'string', default: '127.0.0.1:8080', doc: 'host:port the API listens on' },
  SVC_DATABASE_URL: {
    kind: 'optional',
    secret: true,
    doc: 'PostgreSQL URL; unset = embedded PostgreSQL in SVC_DATA_DIR (DATABASE_URL is also read)',
  },
  SVC_DATA_DIR: { kind: 'string', default: './data', doc: 'directory of the embedded PostgreSQL and local files' },
  SVC_RUNTIME_ROLE: { kind: 'enum', default: 'all', values: ['all', 'api', 'worker'], doc: 'all = API and workers; api; worker' },
  SVC_MIGRATE: {
    kind: 'enum',
    default: 'auto',
    values: ['auto', 'apply', 'wait'],
    doc: 'migrations at start: apply them, or wait (readyz 503) until bin/svc migrate or another process has; auto = api waits, all and worker apply',
  },
  SVC_SHUTDOWN_DRAIN_MS: {
    kind: 'int',
    default: '10000',
    min: 0,
    doc: 'on SIGTERM, how long requests in flight may finish (readyz 503 meanwhile) before their connections are cut',
  },
  SVC_LOG_LEVEL: {
    kind: 'enum',
    default: 'info',
    values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    doc: 'log level (JSON lines on stdout)',
  },
  SVC_BODY_LIMIT_BYTES: {
    kind: 'int',
    default: '16777216',
    min: 1024,
    doc: 'largest accepted request body (a larger one is a 413, before it is read when its length is declared; the connection is then closed)',
  },
  SVC_HTTP_HEADERS_TIMEOUT_MS: {
    kind: 'int',
    default: '60000',
    min: 100,
    doc: "how long a request's headers may take to arrive, for a connection's first request from its opening (then 408, and the connection is closed)",
  },
  SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS: {
    kind: 'int',
    default: '5000',
    min: 0,
    doc: "how long an idle connection is kept open for its next request (0 = until the client closes it); behind a gateway that reuses idle connections, set it above the gateway's idle timeout",
  },
  SVC_TRUSTED_PROXIES: {
    kind: 'string',
    default: '',
    doc: 'comma-separated proxy addresses and CIDR blocks (IPv4, IPv6) whose X-Forwarded-For is trusted',
  },
  SVC_METRICS_TOKEN: {
    kind: 'optional',
    secret: true,
    doc: 'when set, /metrics needs Authorization: Bearer <this value> (401 otherwise); unset = no token asked',
  },
  SVC_METRICS_ALLOW: {
    kind: 'string',
    default: '',
    doc: 'comma-separated addresses and CIDR blocks that may read /metrics (403 otherwise); unset = any address',
  },
  SVC_METRICS_BIND: {
    kind: 'optional',
    doc: 'host:port of a listener serving GET /metrics only (how worker processes are scraped); unset = none',
  },
  SVC_ADMIN_PASSWORD: {
    kind: 'optional',
    secret: true,
    doc: 'password of the bootstrap user admin; unset = generated and printed once at first start',
  },
  SVC_ADMIN_GROUPNAME: { kind: 'string', default: 'admins', doc: 'name of the admin group' },
  SVC_ADMIN_IDENTITY_SCOPE: { kind: 'string', default: 'local', doc: 'identity scope of the admin group' },
  SVC_TOKEN_HASH_KEY: { kind: 'optional', secret: true, doc: 'HMAC key for token hashes; unset = generated once and kept in the database' },
  SVC_TOKEN_LIFETIME_HOURS: { kind: 'int', default: '24', min: 1, doc: 'default token lifetime' },
  SVC_MAX_TOKEN_LIFETIME_HOURS: { kind: 'int', default: '8760', min: 1, doc: 'longest token lifetime' },
  SVC_TOKEN_CACHE_SIZE: {
    kind: 'int',
    default: '10000',
    min: 0,
    doc: 'validated tokens an api process keeps in memory (0 = no cache: every request reads its token from the database)',
  },
  SVC_TOKEN_CACHE_GRANT_IDS: {
    kind: 'int',
    default: '500000',
    min: 0,
    doc: "(permission, collection) pairs of principals' grants an api process keeps in memory, all together (0 = none kept: every read tests the grants in SQL)",
  },
  SVC_TOKEN_CACHE_MAX_AGE_MS: {
    kind: 'int',
    default: '30000',
    min: 0,
    doc: 'longest time a validated token is used from the cache before it is read again (0 = no cache)',
  },
  SVC_TOKEN_RETENTION_DAYS: { kind: 'int', default: '30', min: 0, doc: 'days a revoked or expired token is kept' },
  SVC_TOKEN_RETENTION_PURGE_ENABLED: { kind: 'bool', default: 'true', doc: 'run the token purge worker' },
  SVC_TOKEN_RETENTION_PURGE_BATCH_SIZE: { kind: 'int', default: '1000', min: 10, doc: 'tokens purged per batch' },
  SVC_TOKEN_RETENTION_PURGE_INTERVAL_SECONDS: { kind: 'int', default: '3600', min: 1, doc: 'token purge interval' },
  SVC_LOGIN_RATE_LIMIT_REDIS_URL: {
    kind: 'optional',
    secret: true,
    doc: 'Redis URL sharing login rate limits across instances; unset = in memory',
  },
  SVC_LOGIN_RATE_LIMIT_MAX_FAILURES_PER_USER: {
    kind: 'int',
    default: '20',
    min: 1,
    doc: 'failed logins of one name (from any address) in the 300 s window before its attempts are spaced out',
  },
  SVC_LOGIN_RATE_LIMIT_USER_INTERVAL_SECONDS: {
    kind: 'int',
    default: '5',
    min: 1,
    max: 60,
    doc: 'spacing of the attempts on a name over that bound (429 with Retry-After; never a lockout)',
  },
  SVC_DB_POOL_MAX: { kind: 'int', default: '10', min: 1, doc: 'database connections per process' },
  SVC_DB_LIST_POOL_MAX: {
    kind: 'int',
    default: '4',
    min: 0,
    doc: 'more connections per api process, for list pages with filters (planned for their values); 0: none',
  },
  SVC_DB_STATEMENT_TIMEOUT_MS: { kind: 'int', default: '30000', min: 100, doc: 'statement timeout' },
  SVC_DB_POOL_ACQUIRE_TIMEOUT_MS: { kind: 'int', default: '10000', min: 100, doc: 'time to wait for a connection' },
  SVC_REMOTE_CALL_TIMEOUT_MS: { kind: 'int', default: '10000', min: 1, doc: 'remote call timeout cap' },
  SVC_REMOTE_CALL_MAX_RESPONSE_BYTES: { kind: 'int', default: '262144', min: 1, doc: 'remote call response bytes read' },
  SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: { kind: 'bool', default: 'false', doc: 'admit private and loopback remote-call destinations' },
  SVC_REMOTE_CALL_MAX_ACTIVE_TASKS_PER_USER: { kind: 'int', default: '100', min: 1, doc: 'active remote-call tasks per user' },
  SVC_EXPORT_TEMPLATE_RECURSION_LIMIT: { kind: 'int', default: '64', min: 1, doc: 'template include depth' },
  SVC_EXPORT_TEMPLATE_FUEL: { kind: 'int', default: '50000', min: 1, doc: 'template rendering work budget' },
  SVC_EXPORT_OUTPUT_RETENTION_HOURS: { kind: 'int', default: '24', min: 1, doc: 'hours an export output stays readable' },
  SVC_BACKUP_OUTPUT_RETENTION_HOURS: { kind: 'int', default: '24', min: 1, doc: 'hours a backup output stays readable' },
  SVC_BACKUP_MAX_ACTIVE_TASKS: { kind: 'int', default: '2', min: 1, doc: 'queued or running backup tasks at once (429 beyond)' },
  SVC_TASK_WORKERS: { kind: 'int', default: '2', min: 0, doc: 'task workers per worker process' },
  SVC_TASK_POLL_INTERVAL_MS: { kind: 'int', default: '2000', min: 10, doc: 'task queue poll fallback' },
  SVC_TASK_LEASE_MS: {
    kind: 'int',
    default: '60000',
    min: 1000,
    doc: 'task claim lease, renewed every third of it while the task runs; a task whose lease ran out (its worker died) is failed (worker_lost)',
  },
  SVC_EVENT_FANOUT_WORKERS: { kind: 'int', default: '1', min: 0, doc: 'event fan-out workers' },
  SVC_EVENT_FANOUT_BATCH_SIZE: { kind: 'int', default: '100', min: 1, doc: 'events per fan-out batch' },
  SVC_EVENT_FANOUT_POLL_INTERVAL_MS: { kind: 'int', default: '5000', min: 10, doc: 'fan-out poll fallback' },
  SVC_EVENT_FANOUT_LOCK_TIMEOUT_MS: { kind: 'int', default: '30000', min: 100, doc: 'fan-out claim lifetime' },
  SVC_EVENT_DELIVERY_WORKERS: { kind: 'int', default: '0', min: 0, doc: 'delivery workers (0 = delivery disabled)' },
  SVC_EVENT_DELIVERY_BATCH_SIZE: { kind: 'int', default: '100', min: 1, doc: 'deliveries per batch (at most 8 claimed at once)' },
  SVC_EVENT_DELIVERY_POLL_INTERVAL_MS: { kind: 'int', default: '5000', min: 10, doc: 'delivery poll fallback' },
  SVC_EVENT_DELIVERY_LOCK_TIMEOUT_MS: { kind: 'int', default: '30000', min: 100, doc: 'delivery claim lifetime' },
  SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS: { kind: 'int', default: '25000', min: 1, doc: 'transport timeout (below the lock timeout)' },
  SVC_EVENT_DELIVERY_RETRY_BACKOFF_BASE_MS: { kind: 'int', default: '1000', min: 1, doc: 'first retry delay' },
  SVC_EVENT_DELIVERY_RETRY_BACKOFF_MAX_MS: { kind: 'int', default: '300000', min: 1, doc: 'longest retry delay' },
  SVC_EVENT_DELIVERY_MAX_ATTEMPTS: { kind: 'int', default: '10', min: 1, doc: 'attempts before dead' },
  SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: { kind: 'bool', default: 'false', doc: 'admit private and loopback sink destinations' },
  SVC_OUTBOUND_CA_FILE: { kind: 'optional', doc: 'extra trusted CA certificates (PEM) for outbound TLS' },
  SVC_SECRET_SOURCE: { kind: 'enum', default: 'env', values: ['env', 'file'], doc: 'where secret aliases resolve' },
  SVC_SECRET_FILE_ROOT: { kind: 'optional', doc: 'root directory of the file secret source' },
  SVC_EVENT_RETENTION_PURGE_ENABLED: { kind: 'bool', default: 'false', doc: 'run the event retention purge' },
  SVC_EVENT_RETENTION_DAYS: { kind: 'int', default: '365', min: 1, doc: 'days events are kept when purge is enabled' },
  SVC_EVENT_DELIVERY_RETENTION_DAYS: { kind: 'int', default: '30', min: 1, doc: 'days terminal deliveries are kept' },
  SVC_EVENT_RETENTION_PURGE_INTERVAL_SECONDS: { kind: 'int', default: '3600', min: 1, doc: 'event purge interval' },
  SVC_EVENT_RETENTION_PURGE_BATCH_SIZE: { kind: 'int', default: '1000', min: 1, doc: 'events per purge batch' },
  SVC_EVENT_RETENTION_FILE_ARCHIVE_ENABLED: { kind: 'bool', default: 'false', doc: 'archive purged events to files' },
  SVC_EVENT_RETENTION_ARCHIVE_PATH: { kind: 'optional', doc: 'directory of event archive files' },
  SVC_HISTORY_RETENTION_DAYS: { kind: 'int', default: '0', min: 0, doc: 'days closed entity versions are kept (0 = forever)' },
  SVC_GIN_PENDING_FLUSH_INTERVAL_MS: {
    kind: 'int',
    default: '1000',
    min: 0,
    doc: "how often a worker merges the GIN indexes' pending entries into them (0 = never: left to autovacuum and the writers)",
  },
  SVC_LDAP_PROVIDERS: {
    kind: 'string',
    default: '',
    doc: 'comma-separated identity scopes served by LDAP directories, each configured by SVC_LDAP_<SCOPE>_* (README)',
  },
} as const satisfies Record<string, Setting>;

export type SettingName = keyof typeof SETTINGS;

type ValueOf<S> = S extends { kind: 'int' }
  ? number
  : S extends { kind: 'bool' }
    ? boolean
    : S extends { kind: 'optional' }
      ? string | undefined
      : S extends { kind: 'enum'; values: readonly (infer V)[] }
        ? V
        : string;

export type Config = { [K in SettingName]: ValueOf<(typeof SETTINGS)[K]> } & {
  /** The LDAP identity providers SVC_LDAP_PROVIDERS names, parsed from their SVC_LDAP_<SCOPE>_* settings. */
  ldapProviders: readonly LdapProvider[];
};

export class ConfigError extends Error {}

function parseOne(name: string, s: Setting, raw: string | undefined): unknown {
  const value = raw === undefined || raw === '' ? s.default : raw.trim();
  if (s.kind === 'optional') return value === undefined || value === '' ? undefined : value;
  if (value === undefined) throw new ConfigError(`${name} is required`);
  switch (s.kind) {
    case 'string':
      return value;
    case 'bool':
      if (/^(true|1|yes|on)$/i.test(value)) return true;
      if (/^(false|0|no|off)$/i.test(value)) return false;
      throw new ConfigError(`${name} must be true or false, got "${value}"`);
    case 'enum':
      if (!s.values?.includes(value)) throw new ConfigError(`${name} must be one of ${s.values?.join(', ')}, got "${value}"`);
      return value;
    case 'int': {
      if (!/^-?\d+$/.test(value)) throw new ConfigError(`${name} must be an integer, got "${value}"`);
      const n = Number(value);
      if (!Number.isSafeInteger(n) || (s.min !== undefined && n < s.min) || (s.max !== undefined && n > s.max)) {
        throw new ConfigError(
          `${name} must be an integer${s.min !== undefined ? ` >= ${s.min}` : ''}${s.max !== undefined ? ` <= ${s.max}` : ''}, got "${value}"`,
        );
      }
      return n;
    }
  }
}

export function loadConfig(env: Record<string, string | undefined> = process.env, overrides: Partial<Config> = {}): Config {
  const out: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(SETTINGS) as [string, Setting][]) {
    let raw = env[name];
    if (name === 'SVC_DATABASE_URL' && !raw) raw = env.DATABASE_URL;
    out[name] = parseOne(name, s, raw);
  }
  try {
    out.ldapProviders = parseLdapProviders(env);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  const cfg: Config = Object.assign({}, out as Config, overrides);
  bind(cfg.SVC_BIND);
  if (cfg.SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS >= cfg.SVC_EVENT_DELIVERY_LOCK_TIMEOUT_MS) {
    throw new ConfigError('SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS must be less than SVC_EVENT_DELIVERY_LOCK_TIMEOUT_MS');
  }
  if (cfg.SVC_TOKEN_LIFETIME_HOURS > cfg.SVC_MAX_TOKEN_LIFETIME_HOURS) {
    throw new ConfigError('SVC_TOKEN_LIFETIME_HOURS must not exceed SVC_MAX_TOKEN_LIFETIME_HOURS');
  }
  try {
    parseTrustedProxies(cfg.SVC_TRUSTED_PROXIES);
  } catch (err) {
    throw new ConfigError(`SVC_TRUSTED_PROXIES: ${(err as Error).message}`);
  }
  try {
    parseTrustedProxies(cfg.SVC_METRICS_ALLOW);
  } catch (err) {
    throw new ConfigError(`SVC_METRICS_ALLOW: ${(err as Error).message}`);
  }
  if (cfg.SVC_METRICS_BIND) {
    const metrics = bind(cfg.SVC_METRICS_BIND, 'SVC_METRICS_BIND');
    const api = bind(cfg.SVC_BIND);
    if (cfg.SVC_RUNTIME_ROLE !== 'worker' && metrics.port === api.port && metrics.port !== 0) {
      throw new ConfigError('SVC_METRICS_BIND must use another port than SVC_BIND (the API serves /metrics itself)');
    }
  }
  if (cfg.SVC_SECRET_SOURCE === 'file' && !cfg.SVC_SECRET_FILE_ROOT) {
    throw new ConfigError('SVC_SECRET_FILE_ROOT is required when SVC_SECRET_SOURCE=file');
  }
  return cfg;
}

/** Splits SVC_BIND into host and port. */
export function bind(value: string, setting = 'SVC_BIND'): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) throw new ConfigError(`${setting} must be host:port, got "${value}"`);
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}

/** The effective configuration with secrets redacted, for /api/v1/admin/config. */
export function redactedConfig(cfg: Config): Record<string, string | number | boolean | null> {
  const out: Record<string, string | number | boolean | null> = {};
  for (const [name, s] of Object.entries(SETTINGS) as [SettingName, Setting][]) {
    const v = cfg[name];
    out[name] = v === undefined ? null : s.secret ? '[redacted]' : v;
  }
  return out;
}
