// Plain-text search (searchPlainText): one text matched against the names and descriptions of
// collections, classes and objects. Paged (each next page asks only for the kinds that have more),
// or streamed (searchPlainTextStream: each kind's batch appears as it completes, page after page).
import { useEffect, useRef, useState } from 'preact/hooks';
import type { CallInit, Page } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { CheckField, ErrorText, useError } from '../ui.tsx';
import { HitItem, StreamResults, hitKey, useStream, type Hit, type StreamSink } from './SearchHits.tsx';

type Kind = 'collection' | 'class' | 'object';
type Query = NonNullable<CallInit<'searchPlainTextStream'>['params']>['query'];
const GROUP = { collection: 'collections', class: 'classes', object: 'objects' } as const;
const LIMIT_PER_KIND = 25;
const SCOPES: { value: string; label: string; kinds: Kind[] }[] = [
  { value: 'all', label: 'collections, classes and objects', kinds: ['collection', 'class', 'object'] },
  { value: 'collection', label: 'collections only', kinds: ['collection'] },
  { value: 'class', label: 'classes only', kinds: ['class'] },
  { value: 'object', label: 'objects only', kinds: ['object'] },
];

interface Draft {
  q: string;
  scope: string;
  data: boolean;
  stream: boolean;
}

/** Every page of a streamed plain-text search, following each kind's `next` until none has more. */
async function streamPlain(base: Query, signal: AbortSignal, sink: StreamSink): Promise<void> {
  const asked: Kind[] = base.kinds ?? ['collection', 'class', 'object'];
  let next: Record<(typeof GROUP)[Kind], string | null> | null = null;
  do {
    const prev = next;
    const kinds = prev ? asked.filter((k) => prev[GROUP[k]] !== null) : asked;
    const cursors = Object.fromEntries(prev ? kinds.map((k) => [`cursor_${GROUP[k]}`, prev[GROUP[k]]]) : []);
    const page = { collections: null, classes: null, objects: null } as Record<(typeof GROUP)[Kind], string | null>;
    let finished = false;
    for await (const e of inv.stream('searchPlainTextStream', { params: { query: { ...base, ...cursors, kinds } }, signal })) {
      if (e.event === 'batch') {
        const d = e.data;
        sink.push([
          ...d.collections.map((resource) => ({ kind: 'collection' as const, resource })),
          ...d.classes.map((resource) => ({ kind: 'class' as const, resource })),
          ...d.objects.map((resource) => ({ kind: 'object' as const, resource })),
        ]);
        page[d.kind] = d.next;
      } else if (e.event === 'error') throw new Error(e.data.message);
      else if (e.event === 'done') finished = true;
    }
    if (!finished) throw new Error('the stream ended before its last event');
    next = Object.values(page).some((c) => c !== null) ? page : null;
  } while (next && !signal.aborted);
}

export function PlainSearch({ onAuthLost }: { onAuthLost: () => void }) {
  const [draft, setDraft] = useState<Draft>({ q: '', scope: 'all', data: false, stream: false });
  const [mode, setMode] = useState<'paged' | 'stream' | null>(null);
  const stream = useStream(onAuthLost);
  // The paged mode: the hits of the pages loaded so far, and the walk that loads the next one.
  const [hits, setHits] = useState<Hit[]>([]);
  const [more, setMore] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError, fail] = useError(onAuthLost);
  const walk = useRef<AsyncGenerator<Page<'searchPlainText'>, void, undefined> | null>(null);

  useEffect(() => () => void walk.current?.return(undefined), []);

  async function loadNext() {
    const it = walk.current;
    if (!it) return;
    setBusy(true);
    try {
      const r = await it.next();
      if (walk.current !== it) return;
      if (!r.done) setHits((hs) => [...hs, ...r.value.items]);
      setMore(!r.done && r.value.next !== null);
    } catch (e) {
      if (walk.current !== it) return;
      setMore(false);
      fail(e);
    } finally {
      if (walk.current === it) setBusy(false);
    }
  }

  function submit(e: Event) {
    e.preventDefault();
    const query: Query = {
      q: draft.q,
      kinds: SCOPES.find((s) => s.value === draft.scope)?.kinds ?? SCOPES[0]!.kinds,
      limit_per_kind: LIMIT_PER_KIND,
      ...(draft.data ? { search_object_data: true } : {}),
    };
    void walk.current?.return(undefined);
    walk.current = null;
    setError(null);
    if (draft.stream) {
      stream.stop();
      setMode('stream');
      stream.start((signal, sink) => streamPlain(query, signal, sink));
    } else {
      stream.stop();
      setMode('paged');
      setHits([]);
      setMore(false);
      walk.current = inv.pages('searchPlainText', { params: { query } });
      void loadNext();
    }
  }

  return (
    <section aria-labelledby="plain-heading">
      <h2 id="plain-heading">Plain-text search</h2>
      <form class="filter" role="search" aria-label="Plain-text search" onSubmit={submit}>
        <label for="plain-q">Text to find</label>
        <input
          id="plain-q"
          type="search"
          value={draft.q}
          required
          maxLength={256}
          aria-describedby="plain-hint"
          onInput={(e) => setDraft({ ...draft, q: e.currentTarget.value })}
        />
        <label for="plain-scope">Look in</label>
        <select id="plain-scope" value={draft.scope} onChange={(e) => setDraft({ ...draft, scope: e.currentTarget.value })}>
          {SCOPES.map((s) => (
            <option key={s.value} value={s.value}>
              {s.label}
            </option>
          ))}
        </select>
        <CheckField
          id="plain-data"
          label="Also match text inside object data"
          checked={draft.data}
          onChecked={(data) => setDraft({ ...draft, data })}
        />
        <CheckField
          id="plain-stream"
          label="Stream results as they arrive"
          checked={draft.stream}
          onChecked={(stream) => setDraft({ ...draft, stream })}
        />
        <button type="submit">Find text</button>
      </form>
      <p id="plain-hint" class="muted">
        Names and descriptions, any case; every match of every page when streamed.
      </p>
      {mode === 'paged' && (
        <>
          <ErrorText error={error} />
          <ul class="results" aria-label="Plain-text results" aria-describedby="plain-status" aria-busy={busy}>
            {hits.map((h) => (
              <HitItem key={hitKey(h)} hit={h} />
            ))}
          </ul>
          <div class="pager">
            <p id="plain-status" role="status">
              {busy && hits.length === 0
                ? 'Loading…'
                : hits.length === 0
                  ? 'No matches'
                  : `${hits.length} match${hits.length === 1 ? '' : 'es'} shown`}
            </p>
            {more && (
              <button type="button" disabled={busy} onClick={() => void loadNext()}>
                Show more matches
              </button>
            )}
          </div>
        </>
      )}
      {mode === 'stream' && stream.state && (
        <StreamResults
          search="plain-text search"
          state={stream.state}
          stop={stream.stop}
          id="plain-stream-status"
          label="Streamed plain-text results"
        />
      )}
    </section>
  );
}
