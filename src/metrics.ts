import type { Deps } from './deps.ts';

/** Prometheus text exposition; labels never carry ids, names or addresses. */
export async function renderMetrics(deps: Deps): Promise<string> {
  const lines: string[] = [];
  const gauge = (name: string, help: string, samples: [Record<string, string>, number][]) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const [labels, value] of samples) {
      const l = Object.entries(labels)
        .map(([k, v]) => `${k}="${v}"`)
        .join(',');
      lines.push(`${name}${l ? `{${l}}` : ''} ${value}`);
    }
  };
  const mem = process.memoryUsage();
  gauge('svc_process_resident_memory_bytes', 'Resident memory of this process.', [[{}, mem.rss]]);
  gauge('svc_process_uptime_seconds', 'Seconds since this process started.', [[{}, Math.round(process.uptime())]]);
  const tasks = await deps.sql<{ kind: string; status: string; n: number }[]>`
    select kind, status, count(*)::int as n from tasks group by kind, status order by kind, status`;
  gauge(
    'svc_tasks',
    'Tasks by kind and status.',
    tasks.map((r) => [{ kind: r.kind, status: r.status }, r.n]),
  );
  const [ev] = await deps.sql<{ n: number }[]>`select coalesce(max(id), 0)::bigint as n from events`;
  gauge('svc_events_last_id', 'Id of the newest audit event.', [[{}, ev?.n ?? 0]]);
  return lines.join('\n') + '\n';
}
