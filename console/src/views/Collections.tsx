import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv, describeError, signedIn } from '../session.ts';
import { href } from '../router.ts';

type Collection = Schemas['Collection'];
type Klass = Schemas['ClassExpanded'];

interface Loaded {
  collections: Collection[];
  classes: Klass[];
}

/** The collections the caller may read, as a tree by parent, each with its classes. */
export function Collections({ onAuthLost }: { onAuthLost: () => void }) {
  const [data, setData] = useState<Loaded | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let live = true;
    (async () => {
      const collections: Collection[] = [];
      for await (const c of inv.paginate('listCollections', { params: { query: { sort: 'name', limit: 500 } } })) collections.push(c);
      const classes: Klass[] = [];
      for await (const c of inv.paginate('listClasses', { params: { query: { sort: 'name', limit: 500 } } })) classes.push(c);
      if (live) setData({ collections, classes });
    })().catch((e: unknown) => {
      if (!live) return;
      setError(describeError(e));
      if (!signedIn()) onAuthLost();
    });
    return () => {
      live = false;
    };
  }, [onAuthLost]);

  if (error)
    return (
      <section>
        <h1>Collections</h1>
        <p class="error" role="alert">
          {error}
        </p>
      </section>
    );
  if (!data)
    return (
      <section aria-busy="true">
        <h1>Collections</h1>
        <p>Loading…</p>
      </section>
    );

  const ids = new Set(data.collections.map((c) => c.id));
  const children = new Map<number | null, Collection[]>();
  for (const c of data.collections) {
    // A collection whose parent the caller cannot see is shown at the top level.
    const parent = c.parent_collection_id !== null && ids.has(c.parent_collection_id) ? c.parent_collection_id : null;
    children.set(parent, [...(children.get(parent) ?? []), c]);
  }
  const classesOf = new Map<number, Klass[]>();
  for (const k of data.classes) classesOf.set(k.collection.id, [...(classesOf.get(k.collection.id) ?? []), k]);

  function branch(parent: number | null, depth: number) {
    const list = children.get(parent) ?? [];
    if (list.length === 0) return null;
    return (
      <ul class={depth === 0 ? 'tree' : undefined}>
        {list.map((c) => (
          <li key={c.id}>
            <span class="collection">
              <strong>{c.name}</strong>
              {c.description && <span class="muted"> — {c.description}</span>}
            </span>
            {(classesOf.get(c.id) ?? []).length > 0 && (
              <ul class="classes" aria-label={`Classes in ${c.name}`}>
                {(classesOf.get(c.id) ?? []).map((k) => (
                  <li key={k.id}>
                    <a href={href({ view: 'class', classId: k.id })}>{k.name}</a>
                    <span class="muted"> class{k.validate_schema ? ', schema enforced' : ''}</span>
                  </li>
                ))}
              </ul>
            )}
            {branch(c.id, depth + 1)}
          </li>
        ))}
      </ul>
    );
  }

  return (
    <section>
      <h1>Collections</h1>
      {data.collections.length === 0 ? (
        <p>No collections you may read.</p>
      ) : (
        <nav aria-label="Collections and classes">{branch(null, 0)}</nav>
      )}
    </section>
  );
}
