import { useEffect, useRef, useState } from 'preact/hooks';
import type { CallInit, Schemas } from '../../../clients/typescript/index.ts';
import { inv, describeError, signedIn } from '../session.ts';
import { href } from '../router.ts';
import { usePager } from '../pager.tsx';
import { mayOnClass } from '../access.ts';
import { ClassSchema } from './ClassSchema.tsx';
import { NewObject } from './NewObject.tsx';
import { DeleteClass } from './DeleteClass.tsx';

type Query = NonNullable<NonNullable<CallInit<'listObjects'>['params']>['query']>;

const PAGE_SIZE = 25;
const COLUMNS = [
  { field: 'id', label: 'Id' },
  { field: 'name', label: 'Name' },
  { field: 'description', label: 'Description' },
  { field: 'revision', label: 'Revision' },
  { field: 'updated_at', label: 'Updated' },
] as const;
type SortField = (typeof COLUMNS)[number]['field'];
const FILTER_FIELDS = ['name', 'description'] as const;
const FILTER_OPS = [
  { op: 'contains', label: 'contains' },
  { op: 'icontains', label: 'contains (any case)' },
  { op: 'startswith', label: 'starts with' },
  { op: 'equals', label: 'equals' },
] as const;

interface Filter {
  field: (typeof FILTER_FIELDS)[number];
  op: (typeof FILTER_OPS)[number]['op'];
  value: string;
}

/** A class's objects: a sortable, filterable table paged by cursor (the SDK's `pages`). */
export function ClassObjects({ classId, onAuthLost }: { classId: number; onAuthLost: () => void }) {
  const [klass, setKlass] = useState<Schemas['ClassExpanded'] | null>(null);
  const [sort, setSort] = useState<{ field: SortField; desc: boolean }>({ field: 'id', desc: false });
  const [draft, setDraft] = useState<Filter>({ field: 'name', op: 'contains', value: '' });
  const [filter, setFilter] = useState<Filter | null>(null);
  const [error, setError] = useState<string | null>(null);
  // Bumped when an object was created here: the table restarts from its first page.
  const [version, setVersion] = useState(0);
  // What the caller may change here, as the service decides it; null until known.
  const [rights, setRights] = useState<{ createObject: boolean; updateClass: boolean; deleteClass: boolean } | null>(null);
  const status = useRef<HTMLParagraphElement>(null);

  function fail(e: unknown) {
    setError(describeError(e));
    if (!signedIn()) onAuthLost();
  }

  useEffect(() => {
    inv.call('getClass', { params: { path: { class_id: classId } } }).then(setKlass, fail);
    Promise.all([mayOnClass(classId, 'CreateObject'), mayOnClass(classId, 'UpdateClass'), mayOnClass(classId, 'DeleteClass')]).then(
      ([createObject, updateClass, deleteClass]) => setRights({ createObject, updateClass, deleteClass }),
      () => setRights({ createObject: false, updateClass: false, deleteClass: false }),
    );
  }, [classId]);

  // A new sort or filter starts a new walk from the first page.
  const pager = usePager(
    () => {
      const query = {
        limit: PAGE_SIZE,
        include_total: true,
        sort: `${sort.desc ? '-' : ''}${sort.field}`,
        ...(filter && filter.value !== '' ? { [`${filter.field}__${filter.op}`]: filter.value } : {}),
      } as Query;
      return inv.pages('listObjects', { params: { path: { class_id: classId }, query } });
    },
    JSON.stringify([classId, sort, filter, version]),
    onAuthLost,
  );
  const { page, index, busy } = pager;

  function toggleSort(field: SortField) {
    setSort((s) => (s.field === field ? { field, desc: !s.desc } : { field, desc: false }));
  }

  const total = page?.total ?? null;
  const first = index * PAGE_SIZE + 1;
  const last = index * PAGE_SIZE + (page?.items.length ?? 0);

  return (
    <section>
      <p class="crumbs">
        <a href={href({ view: 'collections' })}>Collections</a>
        {klass && <> / {klass.collection.name}</>}
      </p>
      <h1>{klass ? klass.name : `Class ${classId}`}</h1>
      {klass?.description && <p class="muted">{klass.description}</p>}

      {rights && !rights.createObject && !rights.updateClass && !rights.deleteClass && (
        <p id="class-readonly" class="muted">
          Read only: you may not create objects in this class, change its schema or delete it.
        </p>
      )}
      <NewObject
        classId={classId}
        allowed={rights?.createObject ?? false}
        onCreated={() => setVersion((v) => v + 1)}
        onAuthLost={onAuthLost}
      />

      <form
        class="filter"
        role="search"
        aria-label="Filter objects"
        onSubmit={(e) => {
          e.preventDefault();
          setFilter({ ...draft });
        }}
      >
        <label for="filter-field">Field</label>
        <select
          id="filter-field"
          value={draft.field}
          onChange={(e) => setDraft({ ...draft, field: e.currentTarget.value as Filter['field'] })}
        >
          {FILTER_FIELDS.map((f) => (
            <option key={f} value={f}>
              {f}
            </option>
          ))}
        </select>
        <label for="filter-op">Match</label>
        <select id="filter-op" value={draft.op} onChange={(e) => setDraft({ ...draft, op: e.currentTarget.value as Filter['op'] })}>
          {FILTER_OPS.map((o) => (
            <option key={o.op} value={o.op}>
              {o.label}
            </option>
          ))}
        </select>
        <label for="filter-value">Filter value</label>
        <input id="filter-value" type="search" value={draft.value} onInput={(e) => setDraft({ ...draft, value: e.currentTarget.value })} />
        <button type="submit">Apply filter</button>
        {filter && filter.value !== '' && (
          <button
            type="button"
            onClick={() => {
              setDraft({ ...draft, value: '' });
              setFilter(null);
            }}
          >
            Clear filter
          </button>
        )}
      </form>

      {(error ?? pager.error) && (
        <p class="error" role="alert">
          {error ?? pager.error}
        </p>
      )}

      <div class="table-wrap">
        <table aria-describedby="objects-status" aria-busy={busy}>
          <caption class="visually-hidden">Objects of this class</caption>
          <thead>
            <tr>
              {COLUMNS.map((c) => (
                <th key={c.field} scope="col" aria-sort={sort.field === c.field ? (sort.desc ? 'descending' : 'ascending') : undefined}>
                  <button type="button" class="sort" onClick={() => toggleSort(c.field)}>
                    {c.label}
                    <span aria-hidden="true">{sort.field === c.field ? (sort.desc ? ' ▼' : ' ▲') : ''}</span>
                  </button>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {page?.items.map((o) => (
              <tr key={o.id}>
                <td>{o.id}</td>
                <td>
                  <a href={href({ view: 'object', classId, objectId: o.id })}>{o.name}</a>
                </td>
                <td>{o.description}</td>
                <td>{o.revision}</td>
                <td>{new Date(o.updated_at).toLocaleString()}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div class="pager">
        <button type="button" disabled={busy || index === 0} onClick={pager.prev}>
          Previous page
        </button>
        <p id="objects-status" ref={status} tabIndex={-1} aria-live="polite">
          {busy && !page
            ? 'Loading…'
            : page && page.items.length > 0
              ? `Objects ${first}–${last}${total !== null ? ` of ${total}` : ''}`
              : 'No objects match.'}
        </p>
        <button
          type="button"
          disabled={busy || !page || !pager.hasNext}
          onClick={() => void pager.next().then(() => status.current?.focus())}
        >
          Next page
        </button>
      </div>

      <ClassSchema classId={classId} canEdit={rights?.updateClass ?? false} onChanged={setKlass} onAuthLost={onAuthLost} />
      {rights?.deleteClass && klass && (
        <DeleteClass
          classId={classId}
          name={klass.name}
          objects={filter && filter.value !== '' ? null : (page?.total ?? null)}
          onAuthLost={onAuthLost}
        />
      )}
    </section>
  );
}
