import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { PagedTable, usePager } from '../pager.tsx';

const PAGE_SIZE = 25;
const ACTIONS = ['created', 'updated', 'deleted', 'staged', 'activated', 'abandoned', 'restored'] as const;

interface Filters {
  collection: string;
  action: string;
}

/** Audit events the caller may see, newest first, filtered by collection and action (the SDK's `pages`). */
export function Audit({ onAuthLost }: { onAuthLost: () => void }) {
  const [collections, setCollections] = useState<Schemas['Collection'][]>([]);
  const [draft, setDraft] = useState<Filters>({ collection: '', action: '' });
  const [filters, setFilters] = useState<Filters>(draft);

  useEffect(() => {
    (async () => {
      const list: Schemas['Collection'][] = [];
      for await (const c of inv.paginate('listCollections', { params: { query: { sort: 'name', limit: 500 } } })) list.push(c);
      setCollections(list);
    })().catch(() => setCollections([]));
  }, []);

  const pager = usePager(
    () =>
      inv.pages('listEvents', {
        params: {
          query: {
            limit: PAGE_SIZE,
            include_total: true,
            ...(filters.collection ? { collection_id: Number(filters.collection) } : {}),
            ...(filters.action ? { action: filters.action } : {}),
          },
        },
      }),
    JSON.stringify(filters),
    onAuthLost,
  );
  const names = new Map(collections.map((c) => [c.id, c.name]));

  return (
    <section>
      <h1>Audit events</h1>
      <form
        class="filter"
        role="search"
        aria-label="Filter audit events"
        onSubmit={(e) => {
          e.preventDefault();
          setFilters({ ...draft });
        }}
      >
        <label for="audit-collection">Collection</label>
        <select id="audit-collection" value={draft.collection} onChange={(e) => setDraft({ ...draft, collection: e.currentTarget.value })}>
          <option value="">any</option>
          {collections.map((c) => (
            <option key={c.id} value={String(c.id)}>
              {c.name}
            </option>
          ))}
        </select>
        <label for="audit-action">Action</label>
        <input
          id="audit-action"
          list="audit-actions"
          value={draft.action}
          placeholder="any"
          onInput={(e) => setDraft({ ...draft, action: e.currentTarget.value.trim() })}
        />
        <datalist id="audit-actions">
          {ACTIONS.map((a) => (
            <option key={a} value={a} />
          ))}
        </datalist>
        <button type="submit">Apply filter</button>
      </form>
      <PagedTable
        pager={pager}
        size={PAGE_SIZE}
        noun="Events"
        id="audit-status"
        columns={['Id', 'When', 'Entity', 'Action', 'Collection', 'Actor']}
        row={(ev) => (
          <tr key={ev.id}>
            <td>{ev.id}</td>
            <td>{new Date(ev.occurred_at).toLocaleString()}</td>
            <td>
              {ev.entity_type} {ev.entity_name ?? ev.entity_id}
            </td>
            <td>{ev.action}</td>
            <td>{ev.collection_id === null ? '—' : (names.get(ev.collection_id) ?? ev.collection_id)}</td>
            <td>
              {ev.actor_kind}
              {ev.actor_user_id !== null ? ` #${ev.actor_user_id}` : ''}
            </td>
          </tr>
        )}
      />
    </section>
  );
}
