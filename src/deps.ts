import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Sql } from './db/sql.ts';

/** Everything a handler or worker may use, built once by main.ts (or a test). */
export interface Deps {
  config: Config;
  sql: Sql;
  log: Logger;
  /** HMAC key of stored token hashes. */
  tokenKey: Buffer;
  /** Extra services (login limiter, sinks, …) register themselves here by name. */
  services: Record<string, unknown>;
}
