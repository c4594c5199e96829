import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { href } from '../router.ts';
import { ConfirmDelete, EnabledCheck, FormActions, names, ProblemBox, useAction, useProblem } from '../admin-ui.tsx';
import { Field, Loading, OkStatus, Table } from '../ui.tsx';

type Subscription = Schemas['EventSubscription'];
type Sink = Schemas['EventSink'];
const SYSTEM = 'system';

const list = (v: string) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

function destination(s: Subscription): string {
  const r = s.routing;
  if (r.url) return r.url;
  if (r.stream) return `stream ${r.stream}`;
  if (r.recipients) return r.recipients.join(', ');
  return '—';
}

interface Draft {
  name: string;
  sink: string;
  description: string;
  entity_types: string;
  actions: string;
  url: string;
  stream: string;
  recipients: string;
  filter: string;
  enabled: boolean;
}

const BLANK: Draft = {
  name: '',
  sink: '',
  description: '',
  entity_types: 'object',
  actions: 'created, updated, deleted',
  url: '',
  stream: '',
  recipients: '',
  filter: '',
  enabled: true,
};

/**
 * Event subscriptions, system-wide or of one collection: the list (enable/disable, delete, a link to
 * preview or test through the sink) and a form that creates one. Admins only.
 */
export function Subscriptions({ onAuthLost }: { onAuthLost: () => void }) {
  const [scope, setScope] = useState(() => new URLSearchParams(window.location.search).get('collection') ?? SYSTEM);
  const [collections, setCollections] = useState<Schemas['Collection'][]>([]);
  const [sinks, setSinks] = useState<Sink[]>([]);
  const [subs, setSubs] = useState<Subscription[] | null>(null);
  const [generation, setGeneration] = useState(0);
  const [draft, setDraft] = useState<Draft>(BLANK);
  const { problem, setProblem, busy, run } = useAction(onAuthLost);
  const [listProblem, setListProblem, failList] = useProblem(onAuthLost);
  const [message, setMessage] = useState<string | null>(null);

  useEffect(() => {
    (async () => {
      const cs: Schemas['Collection'][] = [];
      for await (const c of inv.paginate('listCollections', { params: { query: { sort: 'name', limit: 500 } } })) cs.push(c);
      setCollections(cs);
      const ss: Sink[] = [];
      for await (const s of inv.paginate('listEventSinks', { params: { query: { sort: 'name', limit: 250 } } })) ss.push(s);
      setSinks(ss);
      setDraft((d) => (d.sink === '' && ss[0] ? { ...d, sink: String(ss[0].id) } : d));
    })().catch(failList);
  }, []);

  useEffect(() => {
    setSubs(null);
    setListProblem(null);
    let live = true;
    (async () => {
      const out: Subscription[] = [];
      const it =
        scope === SYSTEM
          ? inv.paginate('listSystemEventSubscriptions', { params: { query: { sort: 'name', limit: 250 } } })
          : inv.paginate('listCollectionEventSubscriptions', {
              params: { path: { collection_id: Number(scope) }, query: { sort: 'name', limit: 250 } },
            });
      for await (const s of it) out.push(s);
      if (live) setSubs(out);
    })().catch(failList);
    return () => {
      live = false;
    };
  }, [scope, generation]);

  const sinkById = new Map(sinks.map((s) => [s.id, s]));
  const chosen = sinkById.get(Number(draft.sink));
  const scopeName = scope === SYSTEM ? 'system-wide' : (collections.find((c) => String(c.id) === scope)?.name ?? `collection ${scope}`);

  async function create(e: Event) {
    e.preventDefault();
    setProblem(null);
    setMessage(null);
    let filter: Schemas['SubscriptionFilter'] | undefined;
    if (draft.filter.trim() !== '') {
      try {
        filter = JSON.parse(draft.filter) as Schemas['SubscriptionFilter'];
      } catch (err) {
        setProblem({ kind: 'invalid', message: 'The filter is not valid JSON.', details: [{ path: 'filter', message: String(err) }] });
        return;
      }
    }
    const routing: Schemas['SubscriptionRouting'] = {};
    if (chosen?.kind === 'webhook' && draft.url.trim() !== '') routing.url = draft.url.trim();
    if (chosen?.kind === 'redis_stream') routing.stream = draft.stream.trim();
    if (chosen?.kind === 'email') routing.recipients = list(draft.recipients);
    const body: Schemas['NewEventSubscription'] = {
      sink_id: Number(draft.sink),
      name: draft.name.trim(),
      description: draft.description.trim(),
      entity_types: list(draft.entity_types),
      actions: list(draft.actions),
      routing,
      enabled: draft.enabled,
      ...(filter ? { filter } : {}),
    };
    const s = await run(() =>
      scope === SYSTEM
        ? inv.call('createSystemEventSubscription', { body })
        : inv.call('createCollectionEventSubscription', { params: { path: { collection_id: Number(scope) } }, body }),
    );
    if (s) {
      setMessage(`Subscription ${s.name} (id ${s.id}) created.`);
      setDraft({ ...BLANK, sink: draft.sink });
      setGeneration((g) => g + 1);
    }
  }

  async function toggle(s: Subscription) {
    setMessage(null);
    setListProblem(null);
    const body = { enabled: !s.enabled };
    try {
      if (s.collection_id === null) await inv.call('updateSystemEventSubscription', { params: { path: { subscription_id: s.id } }, body });
      else
        await inv.call('updateCollectionEventSubscription', {
          params: { path: { collection_id: s.collection_id, subscription_id: s.id } },
          body,
        });
      setMessage(`Subscription ${s.name} ${body.enabled ? 'enabled' : 'disabled'}.`);
      setGeneration((g) => g + 1);
    } catch (err) {
      failList(err);
    }
  }

  async function remove(s: Subscription) {
    setMessage(null);
    setListProblem(null);
    try {
      if (s.collection_id === null) await inv.call('deleteSystemEventSubscription', { params: { path: { subscription_id: s.id } } });
      else
        await inv.call('deleteCollectionEventSubscription', {
          params: { path: { collection_id: s.collection_id, subscription_id: s.id } },
        });
      setMessage(`Subscription ${s.name} deleted.`);
      setGeneration((g) => g + 1);
    } catch (err) {
      failList(err);
    }
  }

  return (
    <section>
      <h1>Event subscriptions</h1>
      <p class="muted">
        Which events go to which <a href={href({ view: 'sinks' })}>event sink</a>, and where. System-wide subscriptions see collection-less
        events (users, groups, tokens, …); a collection's see the events of that collection.
      </p>
      <div class="filter">
        <label for="subs-scope">Scope</label>
        <select id="subs-scope" value={scope} onChange={(e) => setScope(e.currentTarget.value)}>
          <option value={SYSTEM}>System-wide</option>
          {collections.map((c) => (
            <option key={c.id} value={String(c.id)}>
              Collection {c.name}
            </option>
          ))}
        </select>
      </div>
      <ProblemBox problem={listProblem} />
      <OkStatus message={message} />
      {subs === null ? (
        !listProblem && <Loading />
      ) : subs.length === 0 ? (
        <p>No subscriptions ({scopeName}).</p>
      ) : (
        <Table label={`Subscriptions (${scopeName})`} columns={['Id', 'Name', 'Sink', 'Events', 'Destination', 'Enabled']} actions>
          {subs.map((s) => (
            <tr key={s.id} data-subscription-id={s.id}>
              <td>{s.id}</td>
              <td>{s.name}</td>
              <td>
                <a href={href({ view: 'sink', sinkId: s.sink_id })}>{sinkById.get(s.sink_id)?.name ?? `sink ${s.sink_id}`}</a>
              </td>
              <td>
                {s.entity_types.join(', ')}: {s.actions.join(', ')}
              </td>
              <td class="wrap">{destination(s)}</td>
              <td>{s.enabled ? 'yes' : 'no'}</td>
              <td class="row-actions">
                <button
                  type="button"
                  aria-label={`${s.enabled ? 'Disable' : 'Enable'} subscription ${s.name}`}
                  onClick={() => void toggle(s)}
                >
                  {s.enabled ? 'Disable' : 'Enable'}
                </button>
                <a
                  href={`${href({ view: 'sink', sinkId: s.sink_id })}?subscription=${s.id}`}
                  aria-label={`Preview or test subscription ${s.name}`}
                >
                  Preview or test
                </a>
                <ConfirmDelete what={`subscription ${s.name}`} onConfirm={() => remove(s)} />
              </td>
            </tr>
          ))}
        </Table>
      )}

      <form class="edit admin-form" aria-label="New subscription" onSubmit={(e) => void create(e)}>
        <h2>New subscription ({scopeName})</h2>
        {sinks.length === 0 ? (
          <p>
            Create an <a href={href({ view: 'sinks' })}>event sink</a> first.
          </p>
        ) : (
          <>
            <Field
              id="sub-name"
              label="Name"
              required
              value={draft.name}
              aria-invalid={names(problem, 'name')}
              onValue={(name) => setDraft({ ...draft, name })}
            />
            <label for="sub-sink">Sink</label>
            <select id="sub-sink" value={draft.sink} onChange={(e) => setDraft({ ...draft, sink: e.currentTarget.value })}>
              {sinks.map((s) => (
                <option key={s.id} value={String(s.id)}>
                  {s.name} ({s.kind})
                </option>
              ))}
            </select>
            <Field
              id="sub-description"
              label="Description (optional)"
              value={draft.description}
              onValue={(description) => setDraft({ ...draft, description })}
            />
            <Field
              id="sub-types"
              label="Entity types (comma-separated)"
              required
              value={draft.entity_types}
              aria-invalid={names(problem, 'entity_types')}
              aria-describedby="sub-types-help"
              onValue={(entity_types) => setDraft({ ...draft, entity_types })}
            />
            <p id="sub-types-help" class="muted">
              e.g. collection, class, object, object_relation, user, group, token, task, event_sink
            </p>
            <Field
              id="sub-actions"
              label="Actions (comma-separated)"
              required
              value={draft.actions}
              aria-invalid={names(problem, 'actions')}
              onValue={(actions) => setDraft({ ...draft, actions })}
            />
            {chosen?.kind === 'webhook' && (
              <Field
                id="sub-url"
                label="Destination URL (https://; empty when the sink fixes it)"
                type="url"
                value={draft.url}
                aria-invalid={names(problem, 'routing')}
                onValue={(url) => setDraft({ ...draft, url })}
              />
            )}
            {chosen?.kind === 'redis_stream' && (
              <Field
                id="sub-stream"
                label="Stream key"
                required
                value={draft.stream}
                aria-invalid={names(problem, 'routing')}
                onValue={(stream) => setDraft({ ...draft, stream })}
              />
            )}
            {chosen?.kind === 'email' && (
              <Field
                id="sub-recipients"
                label="Recipients (comma-separated)"
                required
                value={draft.recipients}
                aria-invalid={names(problem, 'routing')}
                onValue={(recipients) => setDraft({ ...draft, recipients })}
              />
            )}
            <label for="sub-filter">Filter (JSON, optional)</label>
            <textarea
              id="sub-filter"
              rows={3}
              spellcheck={false}
              aria-describedby="sub-filter-help"
              value={draft.filter}
              aria-invalid={names(problem, 'filter')}
              onInput={(e) => setDraft({ ...draft, filter: e.currentTarget.value })}
            />
            <p id="sub-filter-help" class="muted">
              Narrows the events, e.g. {'{"entity_names": ["web-1"], "actor_kinds": ["user"]}'}; empty matches every event above.
            </p>
            <EnabledCheck checked={draft.enabled} onChecked={(enabled) => setDraft({ ...draft, enabled })} />
            <FormActions submit="Create subscription" busy={busy} />
          </>
        )}
        <ProblemBox problem={problem} />
      </form>
    </section>
  );
}
