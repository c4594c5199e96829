// An object's direct relations: each object relation in either direction (listObjectRelations by
// from_object_id and to_object_id) named by its class relation's alias, the related object linked
// (its name from listRelatedObjects at depth 1, with ignore_self_class=false so that objects of the
// same class are listed too). Creating one (a class relation of this class, then an object of the
// other class) is offered with CreateObjectRelation on both collections, removing one with
// DeleteObjectRelation on both.
import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { may } from '../access.ts';
import { inv } from '../session.ts';
import { href } from '../router.ts';
import { ErrorText, Loading, OkStatus, Table, useError } from '../ui.tsx';
import { RelationGraph } from './RelationGraph.tsx';

type Obj = Schemas['InventoryObject'];
type Klass = Schemas['ClassExpanded'];
type ClassRelation = Schemas['ClassRelation'];
type ObjectRelation = Schemas['ObjectRelation'];
type Related = Schemas['RelatedObject'];
const OPTION_LIMIT = 200;

/** One way of relating this object: a class relation, seen from this object's side. */
interface Way {
  relation: ClassRelation;
  /** Whether this object is the relation's `from` side. */
  outgoing: boolean;
  other: Klass | null;
}

/** The label of a class relation seen from one side: its alias there, else the direction and the other class. */
export function wayLabel(relation: ClassRelation, outgoing: boolean, otherName: string): string {
  const alias = outgoing ? relation.forward_alias : relation.reverse_alias;
  return alias ? `${alias} (${otherName})` : `${outgoing ? 'to' : 'from'} ${otherName}`;
}

async function all<T>(it: AsyncGenerator<T, void, undefined>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** The object's relations, and below them its neighbourhood graph (drawn again after each change). */
export function ObjectNeighbourhood({ obj, klass, onAuthLost }: { obj: Obj; klass: Klass; onAuthLost: () => void }) {
  const [version, setVersion] = useState(0);
  return (
    <div class="explore">
      <ObjectRelations obj={obj} klass={klass} onChanged={() => setVersion((n) => n + 1)} onAuthLost={onAuthLost} />
      <RelationGraph classId={klass.id} objectId={obj.id} version={version} onAuthLost={onAuthLost} />
    </div>
  );
}

function ObjectRelations({ obj, klass, onChanged, onAuthLost }: { obj: Obj; klass: Klass; onChanged: () => void; onAuthLost: () => void }) {
  const [rows, setRows] = useState<ObjectRelation[] | null>(null);
  const [related, setRelated] = useState<Map<number, Related>>(new Map());
  const [ways, setWays] = useState<Way[] | null>(null);
  const [classes, setClasses] = useState<Map<number, Klass>>(new Map([[klass.id, klass]]));
  const [canDelete, setCanDelete] = useState<Set<number>>(new Set());
  const [error, setError, fail] = useError(onAuthLost);
  const [status, setStatus] = useState<string | null>(null);
  const [tick, setTick] = useState(0);

  /** Class names by id, fetched once each (classes the caller may not read stay unnamed). */
  async function classOf(id: number, known: Map<number, Klass>): Promise<Klass | null> {
    const hit = known.get(id);
    if (hit) return hit;
    try {
      const k = await inv.call('getClass', { params: { path: { class_id: id } } });
      known.set(id, k);
      return k;
    } catch {
      return null;
    }
  }

  useEffect(() => {
    let live = true;
    (async () => {
      const [from, to, near, outgoing, incoming] = await Promise.all([
        all(inv.paginate('listObjectRelations', { params: { query: { from_object_id: obj.id, limit: 500 } } })),
        all(inv.paginate('listObjectRelations', { params: { query: { to_object_id: obj.id, limit: 500 } } })),
        all(
          inv.paginate('listRelatedObjects', {
            params: { path: { object_class_id: klass.id, object_id: obj.id }, query: { depth: 1, ignore_self_class: false, limit: 500 } },
          }),
        ),
        all(inv.paginate('listClassRelations', { params: { query: { from_class_id: klass.id, limit: 500 } } })),
        all(inv.paginate('listClassRelations', { params: { query: { to_class_id: klass.id, limit: 500 } } })),
      ]);
      const known = new Map(classes);
      const found: Way[] = [];
      for (const relation of outgoing) found.push({ relation, outgoing: true, other: await classOf(relation.to_class_id, known) });
      // (a relation of the class to itself is both: this object may be either end)
      for (const relation of incoming) found.push({ relation, outgoing: false, other: await classOf(relation.from_class_id, known) });
      const all_ = [...from, ...to.filter((r) => !from.some((f) => f.id === r.id))].sort((a, b) => a.id - b.id);
      const byId = new Map(near.map((o) => [o.id, o]));
      // Removing needs DeleteObjectRelation on the collections of both objects.
      const deletable = new Set<number>();
      const checks = new Map<number, Promise<boolean>>();
      const mayDelete = (collectionId: number) => {
        let p = checks.get(collectionId);
        if (!p) checks.set(collectionId, (p = may(collectionId, 'DeleteObjectRelation').catch(() => false)));
        return p;
      };
      for (const r of all_) {
        const other = byId.get(r.from_object_id === obj.id ? r.to_object_id : r.from_object_id);
        if (other && (await mayDelete(obj.collection_id)) && (await mayDelete(other.collection_id))) deletable.add(r.id);
      }
      if (!live) return;
      setClasses(known);
      setWays(found);
      setRelated(byId);
      setRows(all_);
      setCanDelete(deletable);
      setError(null);
    })().catch((e: unknown) => {
      if (live) fail(e);
    });
    return () => {
      live = false;
    };
  }, [obj.id, tick]);

  async function remove(r: ObjectRelation, otherName: string) {
    setStatus(null);
    try {
      await inv.call('deleteObjectRelation', { params: { path: { relation_id: r.id } } });
      setStatus(`Removed the relation to ${otherName}.`);
      setTick((n) => n + 1);
      onChanged();
    } catch (e) {
      fail(e);
    }
  }

  const relationById = new Map((ways ?? []).map((w) => [w.relation.id, w.relation]));
  return (
    <section class="relations" aria-labelledby="relations-heading">
      <h2 id="relations-heading">Relations</h2>
      <ErrorText error={error} />
      {rows === null ? (
        !error && <Loading />
      ) : rows.length === 0 ? (
        <p id="relations-none">No relations.</p>
      ) : (
        <Table label="Relations" columns={['Relation', 'Related object']} actions>
          {rows.map((r) => {
            const outgoing = r.from_object_id === obj.id;
            const otherId = outgoing ? r.to_object_id : r.from_object_id;
            const other = related.get(otherId);
            const otherClass = other ? classes.get(other.svc_class_id) : undefined;
            const cr = relationById.get(r.class_relation_id);
            const name = other?.name ?? `object ${otherId}`;
            return (
              <tr key={r.id} data-relation-id={r.id}>
                <td>
                  {cr
                    ? wayLabel(cr, outgoing, otherClass?.name ?? 'another class')
                    : `${outgoing ? 'to' : 'from'} (relation ${r.class_relation_id})`}
                </td>
                <td>
                  {other ? <a href={href({ view: 'object', classId: other.svc_class_id, objectId: other.id })}>{name}</a> : name}
                  {otherClass && <span class="muted"> · {otherClass.name}</span>}
                </td>
                <td>
                  {canDelete.has(r.id) && (
                    <button type="button" aria-label={`Remove relation to ${name}`} onClick={() => void remove(r, name)}>
                      Remove
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </Table>
      )}
      <OkStatus message={status} />
      <NewRelation
        obj={obj}
        ways={ways}
        onCreated={(name) => {
          setStatus(`Related to ${name}.`);
          setTick((n) => n + 1);
          onChanged();
        }}
        onAuthLost={onAuthLost}
      />
    </section>
  );
}

/** The form to relate this object to another one; shown only for the ways the caller may use. */
function NewRelation({
  obj,
  ways,
  onCreated,
  onAuthLost,
}: {
  obj: Obj;
  /** null until loaded */
  ways: Way[] | null;
  onCreated: (name: string) => void;
  onAuthLost: () => void;
}) {
  const [usable, setUsable] = useState<Way[]>([]);
  const [checked, setChecked] = useState(false);
  const [way, setWay] = useState('');
  const [filter, setFilter] = useState('');
  const [candidates, setCandidates] = useState<Obj[]>([]);
  const [target, setTarget] = useState('');
  const [busy, setBusy] = useState(false);
  const [problem, setProblem, fail] = useError(onAuthLost);

  const key = (w: Way) => `${w.relation.id}:${w.outgoing ? 'out' : 'in'}`;

  // Creating needs CreateObjectRelation on this object's collection and on the other class's.
  useEffect(() => {
    if (ways === null) return;
    let live = true;
    (async () => {
      const ok: Way[] = [];
      if (await may(obj.collection_id, 'CreateObjectRelation'))
        for (const w of ways) if (w.other && (await may(w.other.collection.id, 'CreateObjectRelation'))) ok.push(w);
      if (!live) return;
      setUsable(ok);
      setChecked(true);
      setWay((cur) => (ok.some((w) => key(w) === cur) ? cur : ok[0] ? key(ok[0]) : ''));
    })().catch(() => {
      if (!live) return;
      setUsable([]);
      setChecked(true);
    });
    return () => {
      live = false;
    };
  }, [ways]);

  const chosen = usable.find((w) => key(w) === way);

  // The other class's objects (by name, narrowed by the filter), this object left out.
  useEffect(() => {
    if (!chosen?.other) return setCandidates([]);
    let live = true;
    const timer = setTimeout(() => {
      inv
        .call('listObjects', {
          params: {
            path: { class_id: chosen.other!.id },
            query: { sort: 'name', limit: OPTION_LIMIT, ...(filter.trim() ? { name__icontains: filter.trim() } : {}) },
          },
        })
        .then(
          (list) => {
            if (!live) return;
            const others = list.filter((o) => o.id !== obj.id);
            setCandidates(others);
            setTarget((cur) => (others.some((o) => String(o.id) === cur) ? cur : others[0] ? String(others[0].id) : ''));
          },
          (e: unknown) => {
            if (live) fail(e);
          },
        );
    }, 200);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [way, filter, usable]);

  if (!checked) return null;
  if (usable.length === 0)
    return (
      <p id="relations-readonly" class="muted">
        {ways?.length === 0 ? 'No class relation allows relating objects of this class.' : 'You may not add relations to this object.'}
      </p>
    );

  async function create(e: Event) {
    e.preventDefault();
    if (!chosen || target === '') return;
    const other = candidates.find((o) => String(o.id) === target);
    setBusy(true);
    setProblem(null);
    try {
      await inv.call('createObjectRelation', {
        body: {
          class_relation_id: chosen.relation.id,
          from_object_id: chosen.outgoing ? obj.id : Number(target),
          to_object_id: chosen.outgoing ? Number(target) : obj.id,
        },
      });
      onCreated(other?.name ?? `object ${target}`);
    } catch (err) {
      fail(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form class="filter" aria-labelledby="rel-new-heading" onSubmit={(e) => void create(e)}>
      <h3 id="rel-new-heading">Add a relation</h3>
      <label for="rel-way">Relation</label>
      <select id="rel-way" value={way} onChange={(e) => setWay(e.currentTarget.value)}>
        {usable.map((w) => (
          <option key={key(w)} value={key(w)}>
            {wayLabel(w.relation, w.outgoing, w.other?.name ?? 'another class')}
          </option>
        ))}
      </select>
      <label for="rel-filter">Narrow the object list</label>
      <input id="rel-filter" type="search" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} />
      <label for="rel-target">Related object</label>
      <select id="rel-target" value={target} required onChange={(e) => setTarget(e.currentTarget.value)}>
        {candidates.map((o) => (
          <option key={o.id} value={String(o.id)}>
            {o.name}
          </option>
        ))}
      </select>
      <button type="submit" disabled={busy || target === ''}>
        {busy ? 'Adding…' : 'Add relation'}
      </button>
      <ErrorText error={problem} />
    </form>
  );
}
