import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { PagedTable, usePager } from '../pager.tsx';
import { href, navigate } from '../router.ts';
import {
  ConfirmDelete,
  CreateFooter,
  DetailLoading,
  EnabledCheck,
  FormActions,
  names,
  orNull,
  ProblemBox,
  useAction,
  useProblem,
  type Problem,
} from '../admin-ui.tsx';
import { Field, OkStatus } from '../ui.tsx';

type Sink = Schemas['EventSink'];
type Kind = Sink['kind'];
const KINDS: Kind[] = ['webhook', 'amqp', 'redis_stream', 'email'];
const PAGE_SIZE = 25;

/** A starting configuration per kind (the members the server requires; see EventSinkConfig). */
const CONFIG_TEMPLATES: Record<Kind, Schemas['EventSinkConfig']> = {
  webhook: { timeout_ms: 10000 },
  amqp: { uri: 'amqps://broker.example.com/inventory', exchange: 'inventory' },
  redis_stream: { uri: 'rediss://redis.example.com/0' },
  email: {
    uri: 'smtps://smtp.example.com',
    from: 'Inventory <inventory@example.com>',
    subject_template: '{{ test_marker }}{{ entity_type }} {{ entity_name }} {{ action }}',
    body_template: '{{ entity_type }} {{ entity_name }} was {{ action }}.',
  },
};

interface SinkFields {
  name: string;
  kind: Kind;
  enabled: boolean;
  secret_ref: string;
  min_interval_ms: string;
  config: string;
}

const pretty = (v: unknown) => JSON.stringify(v, null, 2);

function fieldsOf(s: Sink): SinkFields {
  return {
    name: s.name,
    kind: s.kind,
    enabled: s.enabled,
    secret_ref: s.secret_ref ?? '',
    min_interval_ms: s.delivery_policy.min_interval_ms === null ? '' : String(s.delivery_policy.min_interval_ms),
    config: pretty(s.config),
  };
}

/** The form's values as API members; a malformed config or interval is a local problem (nothing is sent). */
function parseFields(
  f: SinkFields,
): { value: Schemas['NewEventSink'] & { delivery_policy: Schemas['DeliveryPolicy'] } } | { problem: Problem } {
  let config: unknown;
  try {
    config = f.config.trim() === '' ? {} : JSON.parse(f.config);
  } catch (e) {
    return {
      problem: { kind: 'invalid', message: 'The configuration is not valid JSON.', details: [{ path: 'config', message: String(e) }] },
    };
  }
  if (typeof config !== 'object' || config === null || Array.isArray(config))
    return {
      problem: {
        kind: 'invalid',
        message: 'The configuration must be a JSON object.',
        details: [{ path: 'config', message: 'not an object' }],
      },
    };
  const interval = f.min_interval_ms.trim();
  if (interval !== '' && !/^\d+$/.test(interval))
    return {
      problem: {
        kind: 'invalid',
        message: 'The minimum interval must be a whole number of milliseconds.',
        details: [{ path: 'delivery_policy', message: 'not a number' }],
      },
    };
  return {
    value: {
      name: f.name.trim(),
      kind: f.kind,
      enabled: f.enabled,
      secret_ref: orNull(f.secret_ref),
      config: config as Schemas['EventSinkConfig'],
      delivery_policy: { min_interval_ms: interval === '' ? null : Number(interval) },
    },
  };
}

/** The fields of a sink (create and edit share them). */
function SinkForm({
  id,
  fields,
  onChange,
  problem,
  kindChangesConfig,
}: {
  id: string;
  fields: SinkFields;
  onChange: (f: SinkFields) => void;
  problem: Problem | null;
  kindChangesConfig: boolean;
}) {
  return (
    <>
      <Field
        id={`${id}-name`}
        label="Name"
        required
        value={fields.name}
        aria-invalid={names(problem, 'name')}
        onValue={(name) => onChange({ ...fields, name })}
      />
      <label for={`${id}-kind`}>Kind</label>
      <select
        id={`${id}-kind`}
        value={fields.kind}
        aria-invalid={names(problem, 'kind')}
        onChange={(e) => {
          const kind = e.currentTarget.value as Kind;
          onChange({ ...fields, kind, ...(kindChangesConfig ? { config: pretty(CONFIG_TEMPLATES[kind]) } : {}) });
        }}
      >
        {KINDS.map((k) => (
          <option key={k} value={k}>
            {k}
          </option>
        ))}
      </select>
      <label for={`${id}-config`}>Configuration (JSON)</label>
      <textarea
        id={`${id}-config`}
        rows={8}
        spellcheck={false}
        value={fields.config}
        aria-invalid={names(problem, 'config')}
        aria-describedby={`${id}-config-help`}
        onInput={(e) => onChange({ ...fields, config: e.currentTarget.value })}
      />
      <p id={`${id}-config-help`} class="muted">
        webhook: all optional (headers, timeout_ms, body_template, response, allowed_routing.urls, url_secret_ref); amqp: uri (amqps://) and
        exchange; redis_stream: uri (rediss://); email: uri (smtps://), from, subject_template, body_template. Each subscription names its
        own destination.
      </p>
      <Field
        id={`${id}-secret`}
        label="Secret alias (optional)"
        value={fields.secret_ref}
        pattern="[A-Za-z0-9_]+"
        aria-invalid={names(problem, 'secret_ref')}
        onValue={(secret_ref) => onChange({ ...fields, secret_ref })}
      />
      <Field
        id={`${id}-interval`}
        label="Minimum interval between sends, ms (optional)"
        inputMode="numeric"
        value={fields.min_interval_ms}
        aria-invalid={names(problem, 'delivery_policy')}
        onValue={(min_interval_ms) => onChange({ ...fields, min_interval_ms })}
      />
      <EnabledCheck checked={fields.enabled} onChecked={(enabled) => onChange({ ...fields, enabled })} />
    </>
  );
}

/** Event sinks (paged) and a form that creates one. Admins only. */
export function Sinks({ onAuthLost }: { onAuthLost: () => void }) {
  const blank: SinkFields = {
    name: '',
    kind: 'webhook',
    enabled: true,
    secret_ref: '',
    min_interval_ms: '',
    config: pretty(CONFIG_TEMPLATES.webhook),
  };
  const [fields, setFields] = useState<SinkFields>(blank);
  const { problem, setProblem, busy, run } = useAction(onAuthLost);
  const [created, setCreated] = useState<Sink | null>(null);
  const [generation, setGeneration] = useState(0);

  const pager = usePager(
    () => inv.pages('listEventSinks', { params: { query: { sort: 'name', limit: PAGE_SIZE, include_total: true } } }),
    String(generation),
    onAuthLost,
  );

  async function create(e: Event) {
    e.preventDefault();
    setProblem(null);
    setCreated(null);
    const parsed = parseFields(fields);
    if ('problem' in parsed) {
      setProblem(parsed.problem);
      return;
    }
    const s = await run(() => inv.call('createEventSink', { body: parsed.value }));
    if (s) {
      setCreated(s);
      setFields(blank);
      setGeneration((g) => g + 1);
    }
  }

  return (
    <section>
      <h1>Event sinks</h1>
      <p class="muted">
        Where events are delivered. <a href={href({ view: 'subscriptions' })}>Subscriptions</a> choose the events and the destination;{' '}
        <a href={href({ view: 'deliveries' })}>Delivery health</a> shows how deliveries fare.
      </p>
      <PagedTable
        pager={pager}
        size={PAGE_SIZE}
        noun="Sinks"
        id="sinks-status"
        label="Event sinks"
        columns={['Name', 'Kind', 'Enabled', 'Secret alias']}
        row={(s) => (
          <tr key={s.id}>
            <td>
              <a href={href({ view: 'sink', sinkId: s.id })}>{s.name}</a>
            </td>
            <td>{s.kind}</td>
            <td>{s.enabled ? 'yes' : 'no'}</td>
            <td>{s.secret_ref ?? '—'}</td>
          </tr>
        )}
      />
      <form class="edit admin-form" aria-label="New event sink" onSubmit={(e) => void create(e)}>
        <h2>New event sink</h2>
        <SinkForm id="sink" fields={fields} onChange={setFields} problem={problem} kindChangesConfig />
        <CreateFooter
          submit="Create sink"
          busy={busy}
          problem={problem}
          created={created && { what: 'Sink', href: href({ view: 'sink', sinkId: created.id }), name: created.name }}
        />
      </form>
    </section>
  );
}

type Outcome = { kind: 'preview'; preview: Schemas['SinkPreview'] } | { kind: 'test'; delivery: Schemas['EventDelivery'] };

/** One sink: edit (If-Match on its revision), delete, and a preview or test send of an event through one of its subscriptions. */
export function SinkDetail({ sinkId, onAuthLost }: { sinkId: number; onAuthLost: () => void }) {
  const [sink, setSink] = useState<{ sink: Sink; etag: string | null } | null>(null);
  const [fields, setFields] = useState<SinkFields | null>(null);
  const { problem, setProblem, fail, busy, run } = useAction(onAuthLost);
  const [message, setMessage] = useState<string | null>(null);
  const [events, setEvents] = useState<Schemas['AuditEvent'][]>([]);
  const [trial, setTrial] = useState({
    subscription: new URLSearchParams(window.location.search).get('subscription') ?? '',
    event: '',
  });
  const [trialProblem, setTrialProblem, failTrial] = useProblem(onAuthLost);
  const [outcome, setOutcome] = useState<Outcome | null>(null);

  function show(s: Sink, etag: string | null) {
    setSink({ sink: s, etag });
    setFields(fieldsOf(s));
  }

  useEffect(() => {
    inv
      .callWithResponse('getEventSink', { params: { path: { sink_id: sinkId } } })
      .then(({ data, response }) => show(data, response.headers.get('etag')), fail);
    inv.call('listEvents', { params: { query: { limit: 20 } } }).then(setEvents, () => setEvents([]));
  }, [sinkId]);

  async function save(e: Event) {
    e.preventDefault();
    if (!sink || !fields) return;
    setProblem(null);
    setMessage(null);
    const parsed = parseFields(fields);
    if ('problem' in parsed) {
      setProblem(parsed.problem);
      return;
    }
    const before = sink.sink;
    const after = parsed.value;
    const body: Schemas['UpdateEventSink'] = {};
    if (after.name !== before.name) body.name = after.name;
    if (after.kind !== before.kind) body.kind = after.kind;
    if (after.enabled !== before.enabled) body.enabled = after.enabled;
    if ((after.secret_ref ?? null) !== before.secret_ref) body.secret_ref = after.secret_ref ?? null;
    if (JSON.stringify(after.config) !== JSON.stringify(before.config)) body.config = after.config;
    if (after.delivery_policy.min_interval_ms !== before.delivery_policy.min_interval_ms) body.delivery_policy = after.delivery_policy;
    if (Object.keys(body).length === 0) {
      setMessage('Nothing changed.');
      return;
    }
    const saved = await run(() =>
      inv.callWithResponse('updateEventSink', {
        params: { path: { sink_id: sinkId }, ...(sink.etag ? { header: { 'If-Match': sink.etag } } : {}) },
        body,
      }),
    );
    if (saved) {
      show(saved.data, saved.response.headers.get('etag'));
      setMessage('Saved.');
    }
  }

  async function remove() {
    setProblem(null);
    try {
      await inv.call('deleteEventSink', { params: { path: { sink_id: sinkId } } });
      navigate(href({ view: 'sinks' }));
    } catch (err) {
      fail(err);
    }
  }

  async function tryOut(kind: Outcome['kind']) {
    setTrialProblem(null);
    setOutcome(null);
    const body = { subscription_id: Number(trial.subscription), event_id: trial.event.trim() };
    try {
      if (kind === 'preview') {
        const preview = await inv.call('previewEventSink', { params: { path: { sink_id: sinkId } }, body });
        setOutcome({ kind, preview });
      } else {
        const delivery = await inv.call('testEventSink', { params: { path: { sink_id: sinkId } }, body });
        setOutcome({ kind, delivery });
      }
    } catch (err) {
      failTrial(err);
    }
  }

  if (!sink || !fields)
    return (
      <DetailLoading back={{ href: href({ view: 'sinks' }), label: 'Event sinks' }} title={`Event sink ${sinkId}`} problem={problem} />
    );

  return (
    <section>
      <p class="crumbs">
        <a href={href({ view: 'sinks' })}>Event sinks</a> /
      </p>
      <h1>{sink.sink.name}</h1>
      <p class="muted">
        Sink {sink.sink.id}, revision {sink.sink.revision}. <a href={href({ view: 'subscriptions' })}>Subscriptions</a> ·{' '}
        <a href={href({ view: 'deliveries' })}>Delivery health</a>
      </p>
      <form class="edit admin-form" aria-label="Edit event sink" onSubmit={(e) => void save(e)}>
        <SinkForm id="edit-sink" fields={fields} onChange={setFields} problem={problem} kindChangesConfig={false} />
        <FormActions submit="Save sink" busy={busy}>
          <ConfirmDelete what={`sink ${sink.sink.name}`} onConfirm={remove} />
        </FormActions>
        <ProblemBox problem={problem} />
        <OkStatus message={message} />
      </form>

      <form
        class="edit admin-form"
        aria-label="Preview or test"
        onSubmit={(e) => {
          e.preventDefault();
          void tryOut('preview');
        }}
      >
        <h2>Preview or test</h2>
        <p class="muted">
          Renders (Preview) or queues a test delivery of (Send test) one existing event through one subscription that uses this sink. Pick
          the subscription's id on the <a href={href({ view: 'subscriptions' })}>Subscriptions</a> page.
        </p>
        <Field
          id="trial-subscription"
          label="Subscription id"
          inputMode="numeric"
          required
          value={trial.subscription}
          onValue={(subscription) => setTrial({ ...trial, subscription })}
        />
        <Field
          id="trial-event"
          label="Event id (UUID)"
          list="trial-events"
          required
          spellcheck={false}
          value={trial.event}
          onValue={(event) => setTrial({ ...trial, event })}
        />
        <datalist id="trial-events">
          {events.map((ev) => (
            <option key={ev.id} value={ev.event_id}>
              {`${ev.entity_type} ${ev.entity_name ?? ev.entity_id ?? ''} ${ev.action}`}
            </option>
          ))}
        </datalist>
        <div class="actions">
          <button type="submit">Preview</button>
          <button type="button" onClick={() => void tryOut('test')}>
            Send test
          </button>
        </div>
        <ProblemBox problem={trialProblem} />
        {outcome?.kind === 'preview' && (
          <div role="status" aria-label="Preview result">
            <p class="ok">Rendered {outcome.preview.sink_kind} payload (nothing was sent):</p>
            <pre class="payload">{pretty(outcome.preview.payload)}</pre>
          </div>
        )}
        {outcome?.kind === 'test' && (
          <p class="ok" role="status">
            Test delivery {outcome.delivery.id} queued ({outcome.delivery.status}); follow it on{' '}
            <a href={href({ view: 'deliveries' })}>Delivery health</a>.
          </p>
        )}
      </form>
    </section>
  );
}
