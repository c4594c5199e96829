import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { href } from '../router.ts';
import { PagerControls, usePager } from '../pager.tsx';
import { CheckField, ErrorText } from '../ui.tsx';
import { PlainSearch } from './PlainSearch.tsx';
import { StreamResults, useStream, type StreamSink } from './SearchHits.tsx';

type Klass = Schemas['ClassExpanded'];
type Operator = Schemas['SearchFieldPredicate']['operator'];
const PAGE_SIZE = 25;
const FIELDS = [
  { field: 'name', label: 'name' },
  { field: 'description', label: 'description' },
  { field: 'json_data', label: 'JSON data at path' },
] as const;
const OPERATORS: { op: Operator; label: string }[] = [
  { op: 'equals', label: 'equals' },
  { op: 'contains', label: 'contains' },
  { op: 'icontains', label: 'contains (any case)' },
  { op: 'startswith', label: 'starts with' },
];

interface Query {
  classId: string;
  field: (typeof FIELDS)[number]['field'];
  path: string;
  op: Operator;
  value: string;
  stream: boolean;
}

type Body = Schemas['StructuredSearchRequest'];

function requestOf(query: Query): Body {
  const predicate: Schemas['SearchFieldPredicate'] = {
    field: query.field,
    operator: query.op,
    value: query.value,
    ...(query.field === 'json_data' ? { path: query.path } : {}),
  };
  return {
    version: 1,
    target: { kind: 'object', class: { id: Number(query.classId) } },
    filter: { op: 'field', predicate },
    sort: [{ field: 'name' }],
    limit: PAGE_SIZE,
    include_total: true,
  };
}

/**
 * Plain-text search (PlainSearch.tsx) and structured search (searchStructured, DSL v1): the objects
 * of one class matching one field predicate, paged, or streamed page after page
 * (searchStructuredStream) with a running count and Stop.
 */
export function Search({ onAuthLost }: { onAuthLost: () => void }) {
  return (
    <>
      <h1>Search</h1>
      <PlainSearch onAuthLost={onAuthLost} />
      <StructuredSearch onAuthLost={onAuthLost} />
    </>
  );
}

/** Every page of a streamed structured search, following `next` of each page's `done`. */
async function streamStructured(body: Body, signal: AbortSignal, sink: StreamSink): Promise<void> {
  let cursor: string | null = null;
  do {
    const page: Body = { ...body, ...(cursor ? { cursor } : {}) };
    cursor = null;
    let finished = false;
    for await (const e of inv.stream('searchStructuredStream', { body: page, signal })) {
      if (e.event === 'result') sink.push([e.data]);
      else if (e.event === 'error') throw new Error(e.data.message);
      else if (e.event === 'done') {
        finished = true;
        cursor = e.data.next;
        sink.total(e.data.total);
      }
    }
    if (!finished) throw new Error('the stream ended before its last event');
  } while (cursor && !signal.aborted);
}

function StructuredSearch({ onAuthLost }: { onAuthLost: () => void }) {
  const [classes, setClasses] = useState<Klass[]>([]);
  const [draft, setDraft] = useState<Query>({ classId: '', field: 'name', path: '', op: 'contains', value: '', stream: false });
  const [query, setQuery] = useState<Query | null>(null);
  const stream = useStream(onAuthLost);

  useEffect(() => {
    (async () => {
      const list: Klass[] = [];
      for await (const c of inv.paginate('listClasses', { params: { query: { sort: 'name', limit: 500 } } })) list.push(c);
      setClasses(list);
      setDraft((d) => (d.classId === '' && list[0] ? { ...d, classId: String(list[0].id) } : d));
    })().catch(() => setClasses([]));
  }, []);

  const pager = usePager(
    async function* () {
      if (!query || query.stream) return;
      yield* inv.pages('searchStructured', { body: requestOf(query) });
    },
    JSON.stringify(query),
    onAuthLost,
  );

  return (
    <section aria-labelledby="structured-heading">
      <h2 id="structured-heading">Structured search</h2>
      <form
        class="filter"
        role="search"
        aria-label="Structured search"
        onSubmit={(e) => {
          e.preventDefault();
          const q = { ...draft };
          setQuery(q);
          stream.stop();
          if (q.stream) stream.start((signal, sink) => streamStructured(requestOf(q), signal, sink));
        }}
      >
        <label for="search-class">Class</label>
        <select id="search-class" value={draft.classId} required onChange={(e) => setDraft({ ...draft, classId: e.currentTarget.value })}>
          {classes.map((c) => (
            <option key={c.id} value={String(c.id)}>
              {c.collection.name} / {c.name}
            </option>
          ))}
        </select>
        <label for="search-field">Field</label>
        <select
          id="search-field"
          value={draft.field}
          onChange={(e) => setDraft({ ...draft, field: e.currentTarget.value as Query['field'] })}
        >
          {FIELDS.map((f) => (
            <option key={f.field} value={f.field}>
              {f.label}
            </option>
          ))}
        </select>
        {draft.field === 'json_data' && (
          <>
            <label for="search-path">JSON path</label>
            <input
              id="search-path"
              value={draft.path}
              required
              placeholder="e.g. rack"
              onInput={(e) => setDraft({ ...draft, path: e.currentTarget.value })}
            />
          </>
        )}
        <label for="search-op">Operator</label>
        <select id="search-op" value={draft.op} onChange={(e) => setDraft({ ...draft, op: e.currentTarget.value as Operator })}>
          {OPERATORS.map((o) => (
            <option key={o.op} value={o.op}>
              {o.label}
            </option>
          ))}
        </select>
        <label for="search-value">Value</label>
        <input id="search-value" value={draft.value} onInput={(e) => setDraft({ ...draft, value: e.currentTarget.value })} />
        <CheckField
          id="search-stream"
          label="Stream all pages as they arrive"
          checked={draft.stream}
          onChecked={(stream) => setDraft({ ...draft, stream })}
        />
        <button type="submit" disabled={draft.classId === ''}>
          Search
        </button>
      </form>
      <ErrorText error={pager.error} />
      {query?.stream && stream.state && (
        <StreamResults
          search="structured search"
          state={stream.state}
          stop={stream.stop}
          id="search-stream-status"
          label="Streamed search results"
        />
      )}
      {query && !query.stream && (
        <>
          <ul class="results" aria-label="Search results" aria-describedby="search-status" aria-busy={pager.busy}>
            {(pager.page?.items ?? []).map((r) =>
              r.kind === 'object' ? (
                <li key={r.resource.id}>
                  <a href={href({ view: 'object', classId: Number(query.classId), objectId: r.resource.id })}>{r.resource.name}</a>
                  {r.resource.description && <span class="muted"> — {r.resource.description}</span>}
                </li>
              ) : null,
            )}
          </ul>
          <PagerControls pager={pager} size={PAGE_SIZE} noun="Results" id="search-status" />
        </>
      )}
    </section>
  );
}
