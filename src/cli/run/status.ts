import type { Sql } from '../../db/sql.ts';
import { migrationStatus } from '../../db/migrate.ts';
import { deliveriesBySinkKind, fanoutLag, taskDepths } from '../../db/queue-status.ts';
import { EXIT_FAILURE } from '../errors.ts';
import type { Session } from '../session.ts';

/** svc status's checked arguments. */
export interface StatusArgs {
  json: boolean;
}

/** A figure of a table an unmigrated database may not have yet: null then. */
async function figure<T>(read: () => Promise<T>): Promise<T | null> {
  try {
    return await read();
  } catch (err) {
    if ((err as { code?: string }).code === '42P01') return null;
    throw err;
  }
}

export async function run(session: Session, args: StatusArgs): Promise<number> {
  let sql: Sql;
  let version: string;
  try {
    sql = await session.db();
    const [row] = await sql<{ v: string }[]>`select current_setting('server_version') as v`;
    version = row!.v;
  } catch (err) {
    const error = err instanceof Error ? err.message : String(err);
    if (args.json) process.stdout.write(JSON.stringify({ database: { reachable: false, source: session.source, error } }, null, 2) + '\n');
    else process.stdout.write(`database     unreachable (${session.source}): ${error}\n`);
    return EXIT_FAILURE;
  }
  const migrations = await migrationStatus(sql);
  const tasks = await figure(() => taskDepths(sql));
  const fanout = await figure(() => fanoutLag(sql));
  const deliveries = await figure(() => deliveriesBySinkKind(sql));
  const report = {
    database: { reachable: true, source: session.source, server_version: version },
    migrations: { applied: migrations.applied.length, pending: migrations.pending },
    tasks,
    event_fanout: fanout,
    deliveries_by_sink_kind: deliveries,
  };
  if (args.json) {
    process.stdout.write(JSON.stringify(report, null, 2) + '\n');
  } else {
    const out: string[] = [];
    out.push(`database     reachable, PostgreSQL ${version} (${session.source})`);
    out.push(
      `migrations   ${migrations.applied.length} applied, ${migrations.pending.length} pending` +
        (migrations.pending.length ? `: ${migrations.pending.join(', ')} (run \`svc migrate\`)` : ''),
    );
    if (tasks) {
      out.push(`tasks        ${tasks.length ? '' : 'none'}`);
      for (const t of tasks) out.push(`  ${t.kind.padEnd(12)} ${t.status.padEnd(20)} ${t.count}`);
    }
    if (fanout) {
      out.push(
        `fan-out      newest event ${fanout.newest_event_id}, ${fanout.pending_events} waiting, lag ${fanout.lag_events} event(s)` +
          (fanout.oldest_pending_age_seconds !== null ? `, oldest waiting ${fanout.oldest_pending_age_seconds}s` : ''),
      );
    }
    if (deliveries) {
      out.push(`deliveries   ${deliveries.length ? 'by sink kind' : 'no sinks'}`);
      for (const d of deliveries) {
        out.push(
          `  ${d.sink_kind.padEnd(12)} backlog ${d.backlog} (pending ${d.pending}, in flight ${d.in_flight}, failed ${d.failed}), dead ${d.dead}`,
        );
      }
    }
    process.stdout.write(out.join('\n') + '\n');
  }
  return migrations.pending.length ? EXIT_FAILURE : 0;
}
