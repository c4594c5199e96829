import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { href } from '../router.ts';
import { ErrorText, Loading, Table, useError } from '../ui.tsx';

type Task = Schemas['Task'];
const LIMIT = 25;
const POLL_MS = 1000;
const IDLE_POLL_MS = 5000;
export const ACTIVE: ReadonlySet<Task['status']> = new Set(['queued', 'validating', 'running']);
const KINDS: { kind: Task['kind'] | ''; label: string }[] = [
  { kind: '', label: 'all kinds' },
  { kind: 'import', label: 'imports' },
  { kind: 'export', label: 'exports' },
  { kind: 'backup', label: 'backups' },
  { kind: 'restore', label: 'restores' },
  { kind: 'remote_call', label: 'remote calls' },
];

/** Percentage done, or undefined while the total is not known yet (an indeterminate bar). */
export function percent(t: Task): number | undefined {
  if (!ACTIVE.has(t.status)) return 100;
  const { total_items, processed_items } = t.progress;
  return total_items > 0 ? Math.min(100, Math.round((processed_items / total_items) * 100)) : undefined;
}

/** The task's status, and whether a cancel is still pending. */
export function statusText(t: Task): string {
  return `${t.status}${t.cancel_requested && ACTIVE.has(t.status) ? ' (cancel requested)' : ''}`;
}

/** The caller's tasks (all tasks for an admin), newest first; refreshed every second while any is still active (every 5 s otherwise). */
export function Tasks({ onAuthLost }: { onAuthLost: () => void }) {
  const [tasks, setTasks] = useState<Task[] | null>(null);
  const [error, setError, fail] = useError(onAuthLost);
  const [tick, setTick] = useState(0);
  const [kind, setKind] = useState<Task['kind'] | ''>('');

  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    inv.call('listTasks', { params: { query: { sort: '-id', limit: LIMIT, ...(kind ? { filter: [`kind=${kind}`] } : {}) } } }).then(
      (list) => {
        if (!live) return;
        setTasks(list);
        setError(null);
        timer = setTimeout(() => setTick((n) => n + 1), list.some((t) => ACTIVE.has(t.status)) ? POLL_MS : IDLE_POLL_MS);
      },
      (e: unknown) => {
        if (live) fail(e);
      },
    );
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [tick, kind]);

  return (
    <section>
      <h1>Tasks</h1>
      <p class="muted">
        Imports, exports and backups, newest first (the latest {LIMIT}). Progress refreshes by itself; open a task for its details.{' '}
        <button type="button" onClick={() => setTick((n) => n + 1)}>
          Refresh
        </button>
      </p>
      <div class="filter">
        <label for="tasks-kind">Show</label>
        <select id="tasks-kind" value={kind} onChange={(e) => setKind(e.currentTarget.value as Task['kind'] | '')}>
          {KINDS.map((k) => (
            <option key={k.kind} value={k.kind}>
              {k.label}
            </option>
          ))}
        </select>
      </div>
      <ErrorText error={error} />
      {tasks === null ? (
        <Loading />
      ) : tasks.length === 0 ? (
        <p>No tasks.</p>
      ) : (
        <Table label="Tasks" columns={['Id', 'Kind', 'Status', 'Progress', 'Created']}>
          {tasks.map((t) => {
            const pct = percent(t);
            const { processed_items, total_items, failed_items } = t.progress;
            return (
              <tr key={t.id} data-task-id={t.id}>
                <td>
                  <a href={href({ view: 'task', taskId: t.id })} aria-label={`Task ${t.id} (${t.kind})`}>
                    {t.id}
                  </a>
                </td>
                <td>{t.kind}</td>
                <td class="task-status">{statusText(t)}</td>
                <td>
                  <progress max={100} value={pct} aria-label={`Task ${t.id} progress`} />{' '}
                  <span class="muted">
                    {processed_items}/{total_items || '?'} items{failed_items ? `, ${failed_items} failed` : ''}
                  </span>
                </td>
                <td>{new Date(t.created_at).toLocaleString()}</td>
              </tr>
            );
          })}
        </Table>
      )}
    </section>
  );
}
