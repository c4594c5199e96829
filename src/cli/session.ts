// One run of a command: configuration, logger, the database (opened on first use, closed at the
// end), the deps the shared API and worker code takes, and how the run appears in audit events.
import { randomUUID } from 'node:crypto';
import pino, { type Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Deps } from '../deps.ts';
import { createLogger } from '../log.ts';
import { createSql, type Sql } from '../db/sql.ts';
import { migrationStatus } from '../db/migrate.ts';
import { tokenHashKey } from '../db/meta.ts';
import type { Actor } from '../domain/actor.ts';
import { principalByKey } from '../db/imports.ts';
import { findSubmitter } from '../db/task-runner.ts';
import { openDatabase, type Database } from './database.ts';
import { Failure } from './errors.ts';
import { Progress } from './progress.ts';

export class Session {
  readonly log: Logger;
  readonly progress: Progress;
  /** request_id of every audit event this run writes directly. */
  readonly requestId = `cli-${randomUUID()}`;
  private database: Database | undefined;
  private sql: Sql | undefined;
  private deps_: Deps | undefined;

  constructor(
    readonly command: string,
    readonly config: Config,
  ) {
    // Log lines go to stderr, and only warnings and worse unless debug is asked for: stdout
    // carries the command's result.
    const level = config.SVC_LOG_LEVEL === 'info' ? 'warn' : config.SVC_LOG_LEVEL;
    this.log = createLogger(level, pino.destination({ fd: 2, sync: true }));
    this.progress = new Progress(`svc ${command}`);
  }

  /** Where the database is (for messages; never the URL). */
  get source(): string {
    return this.database?.source ?? 'the database';
  }

  async db(): Promise<Sql> {
    if (this.sql) return this.sql;
    this.database = await openDatabase(this.config, (m) => this.log.debug({ component: 'embedded-postgres' }, m));
    this.sql = createSql(this.database.url, Object.assign({}, this.config, { SVC_DB_LIST_POOL_MAX: 0 })); // (lists are the API's)
    return this.sql;
  }

  /** The deps of the shared API and worker code, on a database with every migration applied. */
  async deps(): Promise<Deps> {
    if (this.deps_) return this.deps_;
    const sql = await this.db();
    const { pending } = await migrationStatus(sql);
    if (pending.length) {
      throw new Failure(`${this.source} has ${pending.length} pending migration(s) (first: ${pending[0]}); run \`svc migrate\` first`);
    }
    this.deps_ = {
      config: this.config,
      sql,
      log: this.log,
      tokenKey: await tokenHashKey(sql, this.config.SVC_TOKEN_HASH_KEY),
      services: {},
    };
    return this.deps_;
  }

  /**
   * The actor of what this run changes itself: the system (no acting principal; the operator of
   * the host is not an API principal), with this run's request id. `initiator`: the principal a
   * task is submitted in the name of.
   */
  actor(initiator?: { id: number; name: string }): Actor {
    return {
      kind: 'system',
      principalId: null,
      principalName: null,
      initiatorId: initiator?.id ?? null,
      initiatorName: initiator?.name ?? null,
      requestId: this.requestId,
    };
  }

  /**
   * The bootstrap administrator (`admin` in SVC_ADMIN_IDENTITY_SCOPE, still in the admin group):
   * tasks and restore stages need a principal, and the command line acts in its name there.
   */
  async bootstrapAdmin(): Promise<{ id: number; name: string }> {
    const deps = await this.deps();
    const cfg = this.config;
    const p = await principalByKey(deps.sql, 'admin', cfg.SVC_ADMIN_IDENTITY_SCOPE);
    const s = p && (await findSubmitter(deps.sql, p.id, { group: cfg.SVC_ADMIN_GROUPNAME, scope: cfg.SVC_ADMIN_IDENTITY_SCOPE }));
    if (!s || s.kind !== 'human') {
      throw new Failure(
        `the bootstrap administrator "admin" (identity scope ${cfg.SVC_ADMIN_IDENTITY_SCOPE}) does not exist; start the service once to create it`,
      );
    }
    if (!s.is_admin) {
      throw new Failure(
        `the bootstrap administrator "admin" is not in the admin group ${cfg.SVC_ADMIN_GROUPNAME}; this command acts in its name`,
      );
    }
    return { id: s.id, name: s.name };
  }

  async close(): Promise<void> {
    await this.sql?.end({ timeout: 5 }).catch(() => {});
    this.sql = undefined;
    await this.database?.stop().catch((err: unknown) => this.log.warn({ err }, 'stopping the embedded PostgreSQL failed'));
    this.database = undefined;
  }
}
