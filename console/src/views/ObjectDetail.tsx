import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { may } from '../access.ts';
import { inv } from '../session.ts';
import { parseJson, ProblemBox, useAction } from '../admin-ui.tsx';
import { ErrorText, Field, useError } from '../ui.tsx';
import { href } from '../router.ts';
import { ObjectNeighbourhood } from './Relations.tsx';
import { DeleteObject } from './DeleteObject.tsx';

type Obj = Schemas['InventoryObject'];

const pretty = (v: unknown) => JSON.stringify(v, null, 2);

/** One object: its JSON data beside the class's schema; edits are sent with If-Match. */
export function ObjectDetail({ classId, objectId, onAuthLost }: { classId: number; objectId: number; onAuthLost: () => void }) {
  const [obj, setObj] = useState<Obj | null>(null);
  const [etag, setEtag] = useState<string | null>(null);
  const [klass, setKlass] = useState<Schemas['ClassExpanded'] | null>(null);
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [json, setJson] = useState('');
  const { problem, setProblem, busy, run } = useAction(
    onAuthLost,
    'Conflict: this object was changed by someone else after you opened it (revision ' +
      `${obj?.revision ?? '?'} is no longer current). Your edit was not saved. Reload to see the latest version, then edit again.`,
  );
  const [saved, setSaved] = useState<string | null>(null);
  const [loadError, , failLoad] = useError(onAuthLost);
  // Whether the caller may change the object (UpdateObject on its collection); false until known.
  const [canEdit, setCanEdit] = useState(false);

  function show(o: Obj, tag: string | null) {
    setObj(o);
    setEtag(tag);
    setName(o.name);
    setDescription(o.description);
    setJson(pretty(o.json_data));
  }

  async function load() {
    try {
      const { data, response } = await inv.callWithResponse('getObject', { params: { path: { class_id: classId, object_id: objectId } } });
      show(data, response.headers.get('etag'));
      setProblem(null);
    } catch (e) {
      failLoad(e);
    }
  }

  useEffect(() => {
    void load();
    inv.call('getClass', { params: { path: { class_id: classId } } }).then(
      (k) => {
        setKlass(k);
        may(k.collection.id, 'UpdateObject').then(setCanEdit, () => setCanEdit(false));
      },
      () => setKlass(null),
    );
  }, [classId, objectId]);

  async function save(e: Event) {
    e.preventDefault();
    setSaved(null);
    const parsed = parseJson(json, 'JSON data');
    if (!parsed.ok) return setProblem(parsed.problem);
    const got = await run(() =>
      inv.callWithResponse('updateObject', {
        params: { path: { class_id: classId, object_id: objectId }, header: etag ? { 'If-Match': etag } : {} },
        body: { name, description, json_data: parsed.value },
      }),
    );
    if (got) {
      show(got.data, got.response.headers.get('etag'));
      setSaved(`Saved: revision ${got.data.revision}.`);
    }
  }

  if (loadError)
    return (
      <section>
        <h1>Object {objectId}</h1>
        <ErrorText error={loadError} />
      </section>
    );
  if (!obj)
    return (
      <section aria-busy="true">
        <h1>Object {objectId}</h1>
        <p>Loading…</p>
      </section>
    );

  const jsonProblem = problem?.kind === 'invalid';
  return (
    <section>
      <p class="crumbs">
        <a href={href({ view: 'collections' })}>Collections</a> /{' '}
        <a href={href({ view: 'class', classId })}>{klass?.name ?? `Class ${classId}`}</a>
      </p>
      <h1>{obj.name}</h1>
      <p class="muted">
        Object {obj.id} · revision {obj.revision} · updated {new Date(obj.updated_at).toLocaleString()}
      </p>
      <div class="detail">
        <form class="edit" onSubmit={(e) => void save(e)} aria-label="Edit object">
          <Field id="obj-name" label="Name" value={name} readOnly={!canEdit} required onValue={setName} />
          <Field id="obj-description" label="Description" value={description} readOnly={!canEdit} onValue={setDescription} />
          <label for="obj-json">JSON data</label>
          <textarea
            id="obj-json"
            rows={14}
            readOnly={!canEdit}
            spellcheck={false}
            value={json}
            aria-invalid={jsonProblem}
            aria-describedby={problem ? 'obj-problem' : undefined}
            onInput={(e) => setJson(e.currentTarget.value)}
          />
          <ProblemBox id="obj-problem" problem={problem} validation>
            {problem?.kind === 'conflict' && (
              <button type="button" onClick={() => void load()}>
                Reload latest version
              </button>
            )}
          </ProblemBox>
          <div class="actions">
            {!canEdit && klass && (
              <span id="obj-readonly" class="muted">
                Read only: you may not change objects in {klass.collection.name}.
              </span>
            )}
            <button type="submit" disabled={busy || !canEdit} aria-describedby={!canEdit && klass ? 'obj-readonly' : undefined}>
              {busy ? 'Saving…' : 'Save'}
            </button>
            {saved && (
              <span role="status" class="ok">
                {saved}
              </span>
            )}
          </div>
        </form>
        <aside aria-label="Class schema">
          <h2>Schema{klass ? ` of ${klass.name}` : ''}</h2>
          {klass && <p class="muted">{klass.validate_schema ? 'Enforced on every write.' : 'Not enforced (validate_schema is off).'}</p>}
          <pre tabIndex={0}>{klass ? pretty(klass.json_schema) : '…'}</pre>
        </aside>
      </div>
      {klass && <ObjectNeighbourhood key={obj.id} obj={obj} klass={klass} onAuthLost={onAuthLost} />}
      <DeleteObject classId={classId} objectId={objectId} name={obj.name} etag={etag} onAuthLost={onAuthLost} />
    </section>
  );
}
