import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { PagedTable, usePager } from '../pager.tsx';
import { href } from '../router.ts';
import { ErrorText, Loading, OkStatus, Table, useError } from '../ui.tsx';

type Health = Schemas['DeliveryHealth'];
const STATUSES = ['pending', 'in_flight', 'succeeded', 'failed', 'dead'] as const;
const PAGE_SIZE = 25;

/** Event delivery health (getEventDeliveryHealth) and the dead deliveries with a retry each. Admins only. */
export function Deliveries({ onAuthLost }: { onAuthLost: () => void }) {
  const [health, setHealth] = useState<Health | null>(null);
  const [error, , fail] = useError(onAuthLost);
  const [generation, setGeneration] = useState(0);
  const [message, setMessage] = useState<string | null>(null);

  useEffect(() => {
    inv.call('getEventDeliveryHealth').then(setHealth, fail);
  }, [generation]);

  const dead = usePager(
    () => inv.pages('listEventDeliveries', { params: { query: { status: 'dead', sort: '-id', limit: PAGE_SIZE, include_total: true } } }),
    String(generation),
    onAuthLost,
  );

  async function retry(id: number) {
    setMessage(null);
    try {
      const d = await inv.call('retryEventDelivery', { params: { path: { delivery_id: id } } });
      setMessage(`Delivery ${d.id} released for retry (now ${d.status}).`);
      setGeneration((g) => g + 1);
    } catch (e) {
      fail(e);
    }
  }

  return (
    <section>
      <h1>Delivery health</h1>
      <p class="muted">
        Manage <a href={href({ view: 'sinks' })}>event sinks</a> and <a href={href({ view: 'subscriptions' })}>subscriptions</a>.
      </p>
      <ErrorText error={error} />
      <OkStatus message={message} />
      {!health ? (
        <Loading />
      ) : (
        <>
          <dl class="counts" aria-label="Deliveries by status">
            {STATUSES.map((s) => (
              <div key={s}>
                <dt>{s.replace('_', ' ')}</dt>
                <dd data-status={s}>{health.delivery.counts[s]}</dd>
              </div>
            ))}
            <div>
              <dt>retryable failed</dt>
              <dd>{health.delivery.retryable_failed}</dd>
            </div>
            <div>
              <dt>events not fanned out</dt>
              <dd>{health.fanout.pending_events}</dd>
            </div>
          </dl>
          <h2>Sinks</h2>
          {health.sinks.length === 0 ? (
            <p>No event sinks.</p>
          ) : (
            <Table label="Sinks" columns={['Sink', 'Kind', 'Enabled', ...STATUSES.map((s) => s.replace('_', ' '))]}>
              {health.sinks.map((s) => (
                <tr key={s.sink_id}>
                  <td>
                    <a href={href({ view: 'sink', sinkId: s.sink_id })}>{s.name}</a>
                  </td>
                  <td>{s.kind}</td>
                  <td>{s.enabled ? 'yes' : 'no'}</td>
                  {STATUSES.map((st) => (
                    <td key={st}>{s.counts[st]}</td>
                  ))}
                </tr>
              ))}
            </Table>
          )}
        </>
      )}
      <h2>Dead deliveries</h2>
      <PagedTable
        pager={dead}
        size={PAGE_SIZE}
        noun="Dead deliveries"
        id="dead-status"
        label="Dead deliveries"
        columns={['Id', 'Sink', 'Subscription', 'Attempts', 'Last error']}
        actions
        row={(d) => (
          <tr key={d.id}>
            <td>{d.id}</td>
            <td>{d.sink_id}</td>
            <td>{d.subscription_id}</td>
            <td>{d.attempts}</td>
            <td>{d.last_error ?? '—'}</td>
            <td>
              <button type="button" aria-label={`Retry delivery ${d.id}`} onClick={() => void retry(d.id)}>
                Retry
              </button>
            </td>
          </tr>
        )}
      />
    </section>
  );
}
