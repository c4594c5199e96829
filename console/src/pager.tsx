// A cursor pager over one of the SDK's `pages` walks: keeps the pages seen so far (Previous is
// local), fetches the next one on demand, and restarts whenever `key` changes.
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Page, PageItem, PagedOperationId } from '../../clients/typescript/index.ts';
import { ErrorText, Table, useError } from './ui.tsx';

export interface Pager<K extends PagedOperationId> {
  page: Page<K> | undefined;
  index: number;
  busy: boolean;
  error: string | null;
  hasNext: boolean;
  next: () => Promise<void>;
  prev: () => void;
}

export function usePager<K extends PagedOperationId>(
  start: () => AsyncGenerator<Page<K>, void, undefined>,
  key: string,
  onAuthLost: () => void,
): Pager<K> {
  const [pages, setPages] = useState<Page<K>[]>([]);
  const [index, setIndex] = useState(0);
  const [busy, setBusy] = useState(false);
  const [error, setError, fail] = useError(onAuthLost);
  const iterator = useRef<AsyncGenerator<Page<K>, void, undefined> | null>(null);

  useEffect(() => {
    const it = start();
    iterator.current = it;
    setPages([]);
    setIndex(0);
    setError(null);
    setBusy(true);
    it.next().then(
      (r) => {
        if (iterator.current !== it) return;
        setPages(r.done ? [] : [r.value]);
        setBusy(false);
      },
      (e: unknown) => {
        setBusy(false);
        fail(e);
      },
    );
    return () => void it.return(undefined);
  }, [key]);

  async function next() {
    if (index + 1 < pages.length) {
      setIndex(index + 1);
      return;
    }
    const it = iterator.current;
    if (!it) return;
    setBusy(true);
    try {
      const r = await it.next();
      if (iterator.current !== it) return;
      if (!r.done) {
        setPages((ps) => [...ps, r.value]);
        setIndex(index + 1);
      }
    } catch (e) {
      fail(e);
    } finally {
      setBusy(false);
    }
  }

  const page = pages[index];
  return {
    page,
    index,
    busy,
    error,
    hasNext: index + 1 < pages.length || (page?.next ?? null) !== null,
    next,
    prev: () => setIndex(Math.max(0, index - 1)),
  };
}

/** Previous/Next buttons and a live status line ("<noun> 1–25 of 30"). */
export function PagerControls<K extends PagedOperationId>({
  pager,
  size,
  noun,
  id,
}: {
  pager: Pager<K>;
  size: number;
  noun: string;
  id: string;
}) {
  const { page, index } = pager;
  const first = index * size + 1;
  const last = index * size + (page?.items.length ?? 0);
  const text = !page
    ? pager.busy
      ? 'Loading…'
      : ''
    : page.items.length === 0
      ? `No ${noun.toLowerCase()}`
      : `${noun} ${first}–${last}${page.total !== null ? ` of ${page.total}` : ''}`;
  return (
    <div class="pager">
      <button type="button" disabled={index === 0 || pager.busy} onClick={pager.prev}>
        Previous page
      </button>
      <p id={id} role="status" tabIndex={-1}>
        {text}
      </p>
      <button type="button" disabled={!pager.hasNext || pager.busy} onClick={() => void pager.next()}>
        Next page
      </button>
    </div>
  );
}

/** The pager's current page as a table (`row` draws one item), its error above and its controls below. */
export function PagedTable<K extends PagedOperationId>({
  pager,
  size,
  noun,
  id,
  label,
  columns,
  actions,
  row,
}: {
  pager: Pager<K>;
  size: number;
  noun: string;
  /** the status line's id (the table is described by it) */
  id: string;
  label?: string;
  columns: string[];
  actions?: boolean;
  row: (item: PageItem<K>) => JSX.Element;
}) {
  return (
    <>
      <ErrorText error={pager.error} />
      <Table label={label} describedBy={id} busy={pager.busy} columns={columns} actions={actions}>
        {(pager.page?.items ?? []).map(row)}
      </Table>
      <PagerControls pager={pager} size={size} noun={noun} id={id} />
    </>
  );
}
