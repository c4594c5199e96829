import { useEffect, useState } from 'preact/hooks';
import { isApiRequestError, type ErrorDetail, type Schemas } from '../../../clients/typescript/index.ts';
import { may } from '../access.ts';
import { inv, describeError, signedIn } from '../session.ts';
import { href } from '../router.ts';
import { ObjectNeighbourhood } from './Relations.tsx';
import { DeleteObject } from './DeleteObject.tsx';

type Obj = Schemas['InventoryObject'];

interface Problem {
  kind: 'invalid' | 'conflict' | 'error';
  message: string;
  details: ErrorDetail[];
}

const pretty = (v: unknown) => JSON.stringify(v, null, 2);

/** One object: its JSON data beside the class's schema; edits are sent with If-Match. */
export function ObjectDetail({ classId, objectId, onAuthLost }: { classId: number; objectId: number; onAuthLost: () => void }) {
  const [obj, setObj] = useState<Obj | null>(null);
  const [etag, setEtag] = useState<string | null>(null);
  const [klass, setKlass] = useState<Schemas['ClassExpanded'] | null>(null);
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [json, setJson] = useState('');
  const [problem, setProblem] = useState<Problem | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [loadError, setLoadError] = useState<string | null>(null);
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
      setLoadError(describeError(e));
      if (!signedIn()) onAuthLost();
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
    let data: unknown;
    try {
      data = JSON.parse(json);
    } catch (err) {
      setProblem({ kind: 'invalid', message: `The JSON data is not valid JSON: ${(err as Error).message}`, details: [] });
      return;
    }
    setBusy(true);
    try {
      const { data: updated, response } = await inv.callWithResponse('updateObject', {
        params: { path: { class_id: classId, object_id: objectId }, header: etag ? { 'If-Match': etag } : {} },
        body: { name, description, json_data: data },
      });
      show(updated, response.headers.get('etag'));
      setProblem(null);
      setSaved(`Saved: revision ${updated.revision}.`);
    } catch (err) {
      if (isApiRequestError(err, 412)) {
        setProblem({
          kind: 'conflict',
          message:
            'Conflict: this object was changed by someone else after you opened it (revision ' +
            `${obj?.revision ?? '?'} is no longer current). Your edit was not saved. Reload to see the latest version, then edit again.`,
          details: [],
        });
      } else if (isApiRequestError(err, 400) || isApiRequestError(err, 422)) {
        setProblem({ kind: 'invalid', message: describeError(err), details: err.details });
      } else {
        setProblem({ kind: 'error', message: describeError(err), details: [] });
        if (!signedIn()) onAuthLost();
      }
    } finally {
      setBusy(false);
    }
  }

  if (loadError)
    return (
      <section>
        <h1>Object {objectId}</h1>
        <p class="error" role="alert">
          {loadError}
        </p>
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
          <label for="obj-name">Name</label>
          <input id="obj-name" value={name} readOnly={!canEdit} required onInput={(e) => setName(e.currentTarget.value)} />
          <label for="obj-description">Description</label>
          <input id="obj-description" value={description} readOnly={!canEdit} onInput={(e) => setDescription(e.currentTarget.value)} />
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
          {problem && (
            <div id="obj-problem" class={problem.kind === 'conflict' ? 'conflict' : 'error'} role="alert">
              <p>{problem.message}</p>
              {problem.details.length > 0 && (
                <ul aria-label="Validation errors">
                  {problem.details.map((d, i) => (
                    <li key={i}>
                      <code>{d.path || '/'}</code>: {d.message}
                    </li>
                  ))}
                </ul>
              )}
              {problem.kind === 'conflict' && (
                <button type="button" onClick={() => void load()}>
                  Reload latest version
                </button>
              )}
            </div>
          )}
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
