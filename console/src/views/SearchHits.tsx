// What the searches share: a hit as a link to its page, and streamed results (the SDK's inv.stream)
// that appear as they arrive, with a running count and a Stop button.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { PlainSearchHit, Schemas } from '../../../clients/typescript/index.ts';
import { describeError, signedIn } from '../session.ts';
import { ErrorText } from '../ui.tsx';
import { href } from '../router.ts';

/** A hit of either search: the plain-text search's tagged hits, or a structured search result. */
export type Hit = PlainSearchHit | Schemas['SearchResult'];

export function hitKey(h: Hit): string {
  return `${h.kind}-${h.resource.id}`;
}

/** One hit: its kind, a link to its page (objects and classes; collections open the collections tree) and its description. */
export function HitItem({ hit }: { hit: Hit }) {
  let link;
  let description = '';
  switch (hit.kind) {
    case 'object':
      link = <a href={href({ view: 'object', classId: hit.resource.svc_class_id, objectId: hit.resource.id })}>{hit.resource.name}</a>;
      description = hit.resource.description;
      break;
    case 'class':
      link = <a href={href({ view: 'class', classId: hit.resource.id })}>{hit.resource.name}</a>;
      description = hit.resource.description;
      break;
    case 'collection':
      link = <a href={href({ view: 'collections' })}>{hit.resource.name}</a>;
      description = hit.resource.description;
      break;
    default:
      link = <span>{`${hit.kind} ${hit.resource.id}`}</span>;
  }
  return (
    <li data-kind={hit.kind}>
      <span class="kind">{hit.kind}</span> {link}
      {description && <span class="muted"> — {description}</span>}
    </li>
  );
}

export interface StreamState {
  hits: Hit[];
  /** The number of matches the server counted, when it did (the structured stream with include_total). */
  total: number | null;
  phase: 'streaming' | 'done' | 'stopped' | 'failed';
  error: string | null;
}

/** Hands results to the view as they arrive; `total` when the server counted the matches. */
export interface StreamSink {
  push(hits: Hit[]): void;
  total(n: number | null): void;
}

/** Runs one streamed search at a time: start() aborts the one before, stop() aborts the current one. */
export function useStream(onAuthLost: () => void) {
  const [state, setState] = useState<StreamState | null>(null);
  const current = useRef<AbortController | null>(null);

  useEffect(() => () => current.current?.abort(), []);

  function start(run: (signal: AbortSignal, sink: StreamSink) => Promise<void>) {
    current.current?.abort();
    const ctl = new AbortController();
    current.current = ctl;
    const mine = (f: (s: StreamState) => StreamState) => {
      if (current.current === ctl) setState((s) => (s ? f(s) : s));
    };
    setState({ hits: [], total: null, phase: 'streaming', error: null });
    run(ctl.signal, {
      push: (hits) => mine((s) => ({ ...s, hits: [...s.hits, ...hits] })),
      total: (n) => mine((s) => ({ ...s, total: n })),
    }).then(
      () => mine((s) => ({ ...s, phase: ctl.signal.aborted ? 'stopped' : 'done' })),
      (e: unknown) => {
        if (ctl.signal.aborted) return mine((s) => ({ ...s, phase: 'stopped' }));
        mine((s) => ({ ...s, phase: 'failed', error: describeError(e) }));
        if (!signedIn()) onAuthLost();
      },
    );
  }

  return { state, start, stop: () => current.current?.abort() };
}

/** The streamed results: a live count, a Stop button while the stream runs, and the hits in arrival order. */
export function StreamResults({
  state,
  stop,
  id,
  label,
  search,
}: {
  state: StreamState;
  stop: () => void;
  id: string;
  /** The accessible name of the results list. */
  label: string;
  /** Which search this is, for the Stop button's name ("Stop streaming the <search>"). */
  search: string;
}) {
  const n = state.hits.length;
  const counted = `${n}${state.total !== null ? ` of ${state.total}` : ''} result${(state.total ?? n) === 1 ? '' : 's'}`;
  const text =
    state.phase === 'streaming'
      ? `Streaming… ${counted} so far`
      : state.phase === 'done'
        ? `Done: ${counted}`
        : state.phase === 'stopped'
          ? `Stopped: ${counted}`
          : `Failed after ${counted}`;
  return (
    <div class="stream">
      <div class="pager">
        <p id={id} role="status" data-phase={state.phase}>
          {text}
        </p>
        <button type="button" aria-label={`Stop streaming the ${search}`} disabled={state.phase !== 'streaming'} onClick={stop}>
          Stop streaming
        </button>
      </div>
      <ErrorText error={state.error} />
      <ul class="results" aria-label={label} aria-describedby={id} aria-busy={state.phase === 'streaming'}>
        {state.hits.map((h) => (
          <HitItem key={hitKey(h)} hit={h} />
        ))}
      </ul>
    </div>
  );
}
