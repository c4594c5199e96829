// One task (getTask), refreshed every second while it is queued or running: its fields, progress,
// summary and details (results and errors), its events (listTaskEvents), an import's per-item
// results (listImportResults), the stored output of a succeeded export or backup to download, and
// Cancel while it may still be cancelled (cancelTask: its submitter, or an administrator with an
// unscoped token; anyone else does not see the task at all).
import { useEffect, useState } from 'preact/hooks';
import { isApiRequestError, type Schemas } from '../../../clients/typescript/index.ts';
import { loadAccess } from '../access.ts';
import { inv } from '../session.ts';
import { href } from '../router.ts';
import { PagerControls, usePager } from '../pager.tsx';
import { ErrorText, Table, useError } from '../ui.tsx';
import { ACTIVE, percent, statusText } from './Tasks.tsx';

type Task = Schemas['Task'];
const POLL_MS = 1000;
const PAGE_SIZE = 25;

const when = (t: string | null) => (t ? new Date(t).toLocaleString() : '—');
const pretty = (v: unknown) => JSON.stringify(v, null, 2);

/** Saves a response body as a file: the name from Content-Disposition, else `<fallback>.<ext of the media type>`. */
function save(blob: Blob, response: Response, fallback: string): string {
  const disposition = response.headers.get('content-disposition') ?? '';
  const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
  const ext = { 'application/json': 'json', 'text/csv': 'csv', 'text/html': 'html', 'text/plain': 'txt' }[type] ?? 'bin';
  const name = /filename="?([^";]+)"?/.exec(disposition)?.[1] ?? `${fallback}.${ext}`;
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return name;
}

export function TaskDetail({ taskId, onAuthLost }: { taskId: number; onAuthLost: () => void }) {
  const [task, setTask] = useState<Task | null>(null);
  const [missing, setMissing] = useState(false);
  const [error, setError, fail] = useError(onAuthLost);
  const [status, setStatus] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [mayCancel, setMayCancel] = useState(false);
  const [unscopedAdmin, setUnscopedAdmin] = useState(false);
  const [meId, setMeId] = useState<number | null>(null);
  const [tick, setTick] = useState(0);

  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    inv.call('getTask', { params: { path: { task_id: taskId } } }).then(
      (t) => {
        if (!live) return;
        setTask(t);
        setError(null);
        if (ACTIVE.has(t.status)) timer = setTimeout(() => setTick((n) => n + 1), POLL_MS);
      },
      (e: unknown) => {
        if (!live) return;
        if (isApiRequestError(e, 404)) setMissing(true);
        else fail(e);
      },
    );
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [taskId, tick]);

  // Cancelling is for the submitter and for administrators with an unscoped token (as reading is).
  useEffect(() => {
    if (!task) return;
    loadAccess().then(
      ({ me, admin }) => {
        const unscoped = admin && !me.token.scope;
        setUnscopedAdmin(unscoped);
        setMeId(me.principal.id);
        setMayCancel(me.principal.id === task.submitted_by || unscoped);
      },
      () => setMayCancel(false),
    );
  }, [task?.submitted_by]);

  async function cancel() {
    setBusy(true);
    setStatus(null);
    try {
      const t = await inv.call('cancelTask', { params: { path: { task_id: taskId } } });
      setTask(t);
      setStatus(t.status === 'cancelled' ? `Task ${t.id} cancelled.` : `Cancel requested: task ${t.id} stops at its next checkpoint.`);
      setTick((n) => n + 1);
    } catch (e) {
      fail(e);
      setTick((n) => n + 1);
    } finally {
      setBusy(false);
    }
  }

  async function download(kind: 'export' | 'backup') {
    setBusy(true);
    setStatus(null);
    try {
      const { data, response } =
        kind === 'export'
          ? await inv.api.GET('/api/v1/exports/{export_id}/output', { params: { path: { export_id: taskId } }, parseAs: 'blob' })
          : await inv.api.GET('/api/v1/backups/{task_id}/output', { params: { path: { task_id: taskId } }, parseAs: 'blob' });
      if (!data) throw new Error(`the ${kind} output is empty`);
      const name = save(data, response, `${kind}-${taskId}`);
      setStatus(`Downloaded ${name} (${data.size} bytes).`);
    } catch (e) {
      fail(e);
    } finally {
      setBusy(false);
    }
  }

  const crumbs = (
    <p class="crumbs">
      <a href={href({ view: 'tasks' })}>Tasks</a>
    </p>
  );
  if (missing)
    return (
      <section>
        {crumbs}
        <h1>Task {taskId}</h1>
        <p role="alert" class="error">
          There is no task {taskId} that you may see (only its submitter and administrators see a task).
        </p>
      </section>
    );
  if (!task)
    return (
      <section aria-busy={!error}>
        {crumbs}
        <h1>Task {taskId}</h1>
        {error ? <ErrorText error={error} /> : <p>Loading…</p>}
      </section>
    );

  const active = ACTIVE.has(task.status);
  const { total_items, processed_items, success_items, failed_items } = task.progress;
  const pct = percent(task);
  const canCancel = mayCancel && active && !task.cancel_requested;
  return (
    <section>
      {crumbs}
      <h1>
        Task {task.id}: {task.kind}
      </h1>
      <dl class="fields">
        <div>
          <dt>Kind</dt>
          <dd>{task.kind}</dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd id="task-status">{statusText(task)}</dd>
        </div>
        <div>
          <dt>Submitted by</dt>
          <dd>{task.submitted_by === meId ? `you (principal ${task.submitted_by})` : `principal ${task.submitted_by}`}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>{when(task.created_at)}</dd>
        </div>
        <div>
          <dt>Started</dt>
          <dd>{when(task.started_at)}</dd>
        </div>
        <div>
          <dt>Finished</dt>
          <dd>{when(task.finished_at)}</dd>
        </div>
      </dl>
      <p>
        <label for="task-progress">Progress</label> <progress id="task-progress" max={100} value={pct} />{' '}
        <span id="task-items">
          {processed_items}/{total_items || '?'} items processed, {success_items} succeeded, {failed_items} failed
        </span>
      </p>
      <div class="actions">
        {canCancel && (
          <button type="button" disabled={busy} onClick={() => void cancel()}>
            Cancel task
          </button>
        )}
        {task.kind === 'export' && task.status === 'succeeded' && task.links.export_output && (
          <button type="button" disabled={busy} onClick={() => void download('export')}>
            Download export output
          </button>
        )}
        {task.kind === 'backup' && task.status === 'succeeded' && unscopedAdmin && (
          <button type="button" disabled={busy} onClick={() => void download('backup')}>
            Download backup
          </button>
        )}
        {status && (
          <span role="status" class="ok">
            {status}
          </span>
        )}
      </div>
      <ErrorText error={error} />
      <div class="detail">
        <div>
          <h2>Summary</h2>
          <pre tabIndex={0} aria-label="Task summary">
            {task.summary == null ? (active ? 'None yet.' : 'None.') : pretty(task.summary)}
          </pre>
          {task.details != null && (
            <>
              <h2>Details</h2>
              <pre tabIndex={0} aria-label="Task details">
                {pretty(task.details)}
              </pre>
            </>
          )}
          {task.kind === 'import' && (
            <ImportResults taskId={task.id} version={`${task.status}:${processed_items}`} onAuthLost={onAuthLost} />
          )}
        </div>
        <TaskEvents taskId={task.id} version={`${task.status}:${task.cancel_requested}:${processed_items}`} onAuthLost={onAuthLost} />
      </div>
    </section>
  );
}

function TaskEvents({ taskId, version, onAuthLost }: { taskId: number; version: string; onAuthLost: () => void }) {
  const pager = usePager(
    () => inv.pages('listTaskEvents', { params: { path: { task_id: taskId }, query: { limit: PAGE_SIZE, include_total: true } } }),
    `${taskId}:${version}`,
    onAuthLost,
  );
  return (
    <aside aria-labelledby="task-events-heading">
      <h2 id="task-events-heading">Events</h2>
      <ErrorText error={pager.error} />
      <ol class="events" aria-label="Task events" aria-busy={pager.busy}>
        {(pager.page?.items ?? []).map((e) => (
          <li key={e.id}>
            <span class="muted">{when(e.created_at)}</span> <strong>{e.event_type}</strong> {e.message}
          </li>
        ))}
      </ol>
      <PagerControls pager={pager} size={PAGE_SIZE} noun="Events" id="task-events-status" />
    </aside>
  );
}

function ImportResults({ taskId, version, onAuthLost }: { taskId: number; version: string; onAuthLost: () => void }) {
  const pager = usePager(
    () => inv.pages('listImportResults', { params: { path: { import_id: taskId }, query: { limit: PAGE_SIZE, include_total: true } } }),
    `${taskId}:${version}`,
    onAuthLost,
  );
  return (
    <>
      <h2>Import results</h2>
      <ErrorText error={pager.error} />
      <Table label="Import results" describedBy="import-results-status" columns={['Item', 'Kind', 'Action', 'Outcome', 'Error']}>
        {(pager.page?.items ?? []).map((r, i) => (
          <tr key={`${r.item_ref}-${i}`}>
            <td>{r.item_ref}</td>
            <td>{r.entity_kind}</td>
            <td>{r.action}</td>
            <td>{r.outcome}</td>
            <td>{r.error ?? ''}</td>
          </tr>
        ))}
      </Table>
      <PagerControls pager={pager} size={PAGE_SIZE} noun="Results" id="import-results-status" />
    </>
  );
}
