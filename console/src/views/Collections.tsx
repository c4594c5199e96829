import { useEffect, useRef, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv, describeError, signedIn } from '../session.ts';
import { href } from '../router.ts';
import { collectionPermissions, loadAccess, PERMISSIONS } from '../access.ts';
import { CollectionManage, NewCollectionForm, type Permission } from './CollectionManage.tsx';

type Collection = Schemas['Collection'];
type Klass = Schemas['ClassExpanded'];

interface Loaded {
  collections: Collection[];
  classes: Klass[];
  /** What the caller holds on each collection (as the service decides it). */
  held: Map<number, Set<Permission>>;
  admin: boolean;
}

const NOUNS: Record<string, string> = { ClassRelation: 'Class relation', ObjectRelation: 'Object relation', RemoteTarget: 'Remote target' };
const EVENT_SUBSCRIPTIONS = 'Event subscriptions';

/** "Collection: read, update · Class: create, read · …" in PermissionName order; "all permissions" when every one is held. */
export function summarize(held: Set<Permission>): string {
  if (PERMISSIONS.every((p) => held.has(p))) return 'all permissions';
  const groups = new Map<string, string[]>();
  for (const p of PERMISSIONS) {
    if (!held.has(p)) continue;
    const m = /^(Read|Update|Delete|Delegate|Create|Execute|Manage)(.+)$/.exec(p);
    const [noun, verb] =
      p === 'ManageEventSubscription' ? [EVENT_SUBSCRIPTIONS, 'manage'] : [NOUNS[m![2]!] ?? m![2]!, m![1]!.toLowerCase()];
    groups.set(noun, [...(groups.get(noun) ?? []), verb]);
  }
  if (groups.size === 0) return 'nothing';
  return [...groups].map(([noun, verbs]) => `${noun}: ${verbs.join(', ')}`).join(' · ');
}

/** The collections the caller may read, as a tree by parent, each with its classes and what the caller may do there. */
export function Collections({ onAuthLost }: { onAuthLost: () => void }) {
  const [data, setData] = useState<Loaded | null>(null);
  const [error, setError] = useState<string | null>(null);
  // Bumped after a change made here: the tree reloads in place (open panels stay open).
  const [version, setVersion] = useState(0);
  const [open, setOpen] = useState<ReadonlySet<number>>(new Set());
  const [status, setStatus] = useState('');
  const statusRef = useRef<HTMLParagraphElement>(null);

  useEffect(() => {
    let live = true;
    (async () => {
      const collections: Collection[] = [];
      for await (const c of inv.paginate('listCollections', { params: { query: { sort: 'name', limit: 500 } } })) collections.push(c);
      const classes: Klass[] = [];
      for await (const c of inv.paginate('listClasses', { params: { query: { sort: 'name', limit: 500 } } })) classes.push(c);
      const [held, access] = await Promise.all([collectionPermissions(collections.map((c) => c.id)), loadAccess()]);
      if (live) setData({ collections, classes, held, admin: access.admin });
    })().catch((e: unknown) => {
      if (!live) return;
      setError(describeError(e));
      if (!signedIn()) onAuthLost();
    });
    return () => {
      live = false;
    };
  }, [onAuthLost, version]);

  /** A change succeeded: announce it, reload the tree; `focus` moves focus to the announcement (the control is gone). */
  function changed(message: string, focus = false) {
    setStatus(message);
    setVersion((v) => v + 1);
    if (focus) setTimeout(() => statusRef.current?.focus(), 0);
  }

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
  const heldOn = (id: number) => data.held.get(id) ?? new Set<Permission>();
  // The panel is offered only when it has something the service would allow.
  const manageable = (id: number) =>
    (['UpdateCollection', 'DeleteCollection', 'DelegateCollection', 'CreateClass'] as const).some((p) => heldOn(id).has(p));

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
            <p class="perms" data-collection-perms={c.id}>
              <span class="muted">You may: </span>
              {summarize(heldOn(c.id))}
              {data!.admin && <span class="muted"> (administrator)</span>}
            </p>
            {manageable(c.id) && (
              <details
                class="manage"
                onToggle={(e) => {
                  const isOpen = e.currentTarget.open;
                  setOpen((s) => {
                    const n = new Set(s);
                    if (isOpen) n.add(c.id);
                    else n.delete(c.id);
                    return n;
                  });
                }}
              >
                {/* named for the screen reader; the visible text leaves the collection's name to the tree */}
                <summary aria-label={`Manage ${c.name}`}>Manage</summary>
                {open.has(c.id) && (
                  <CollectionManage
                    key={c.id}
                    collection={c}
                    held={heldOn(c.id)}
                    hasContent={(classesOf.get(c.id) ?? []).length > 0 || (children.get(c.id) ?? []).length > 0}
                    onChanged={changed}
                    onAuthLost={onAuthLost}
                  />
                )}
              </details>
            )}
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

  const parents = data.collections.filter((c) => heldOn(c.id).has('DelegateCollection'));
  return (
    <section>
      <h1>Collections</h1>
      <p id="collections-status" role="status" tabIndex={-1} ref={statusRef} class={status ? 'ok' : 'visually-hidden'}>
        {status}
      </p>
      {(data.admin || parents.length > 0) && (
        <NewCollectionForm
          topLevel={data.admin}
          parents={parents}
          onCreated={(c) => changed(`Created collection ${c.name}.`)}
          onAuthLost={onAuthLost}
        />
      )}
      {data.collections.length === 0 ? (
        <p>No collections you may read.</p>
      ) : (
        <nav aria-label="Collections and classes">{branch(null, 0)}</nav>
      )}
    </section>
  );
}
