// Changing collections from the tree: a new collection (top level for administrators, or under a
// collection where the caller holds DelegateCollection), and per collection a panel with only what
// the caller may do there: edit (UpdateCollection, sent with If-Match), new class (CreateClass),
// group permissions (DelegateCollection), delete with a confirm step (DeleteCollection).
import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { href } from '../router.ts';
import { CHANGED_MEANWHILE, ConfirmStep, FormActions, parseJson, ProblemBox, useAction } from '../admin-ui.tsx';
import { Field } from '../ui.tsx';
import { ValidateCheck } from './ClassSchema.tsx';
import { GroupPermissions } from './GroupPermissions.tsx';

type Collection = Schemas['Collection'];
export type Permission = Schemas['PermissionName'];

export function NewCollectionForm({
  topLevel,
  parents,
  onCreated,
  onAuthLost,
}: {
  /** Whether a top-level collection is offered (administrators only). */
  topLevel: boolean;
  /** Collections where the caller holds DelegateCollection. */
  parents: Collection[];
  onCreated: (c: Collection) => void;
  onAuthLost: () => void;
}) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [parent, setParent] = useState(topLevel ? '' : String(parents[0]?.id ?? ''));
  const w = useAction(onAuthLost, CHANGED_MEANWHILE);

  async function submit(e: Event) {
    e.preventDefault();
    const created = await w.run(() =>
      inv.call('createCollection', { body: { name, description, parent_collection_id: parent === '' ? null : Number(parent) } }),
    );
    if (created) {
      setName('');
      setDescription('');
      onCreated(created);
    }
  }

  return (
    <details class="new">
      <summary>New collection</summary>
      <form class="panel-form" aria-label="New collection" onSubmit={(e) => void submit(e)}>
        <Field id="new-col-name" label="Collection name" required maxLength={255} value={name} onValue={setName} />
        <Field id="new-col-description" label="Collection description" value={description} onValue={setDescription} />
        <label for="new-col-parent">Parent collection</label>
        <select id="new-col-parent" value={parent} onChange={(e) => setParent(e.currentTarget.value)}>
          {topLevel && <option value="">None (top level)</option>}
          {parents.map((p) => (
            <option key={p.id} value={String(p.id)}>
              {p.name}
            </option>
          ))}
        </select>
        <ProblemBox id="new-col-problem" problem={w.problem} validation />
        <FormActions submit={w.busy ? 'Creating…' : 'Create collection'} busy={w.busy} />
      </form>
    </details>
  );
}

export function CollectionManage({
  collection,
  held,
  hasContent,
  onChanged,
  onAuthLost,
}: {
  collection: Collection;
  held: ReadonlySet<Permission>;
  /** Whether the caller sees classes or child collections in it (the service refuses to delete it then). */
  hasContent: boolean;
  onChanged: (message: string, focus?: boolean) => void;
  onAuthLost: () => void;
}) {
  return (
    <div class="manage-body" role="region" aria-label={`Manage ${collection.name}`}>
      {held.has('UpdateCollection') && <EditCollection collection={collection} onChanged={onChanged} onAuthLost={onAuthLost} />}
      {held.has('CreateClass') && <NewClassForm collection={collection} onChanged={onChanged} onAuthLost={onAuthLost} />}
      {held.has('DelegateCollection') && <GroupPermissions collection={collection} onAuthLost={onAuthLost} />}
      {held.has('DeleteCollection') && (
        <DeleteCollection collection={collection} hasContent={hasContent} onChanged={onChanged} onAuthLost={onAuthLost} />
      )}
    </div>
  );
}

/** What a panel of CollectionManage gets: its collection, where to announce a change, and the way back to sign-in. */
interface PanelProps {
  collection: Collection;
  onChanged: (message: string) => void;
  onAuthLost: () => void;
}

function EditCollection({ collection, onChanged, onAuthLost }: PanelProps) {
  const id = collection.id;
  const [name, setName] = useState(collection.name);
  const [description, setDescription] = useState(collection.description);
  // The ETag of the version the form was filled from: a save sends it as If-Match.
  const [etag, setEtag] = useState<string | null>(null);
  const w = useAction(onAuthLost, CHANGED_MEANWHILE);

  async function load() {
    const got = await w.run(() => inv.callWithResponse('getCollection', { params: { path: { collection_id: id } } }));
    if (got) {
      setName(got.data.name);
      setDescription(got.data.description);
      setEtag(got.response.headers.get('etag'));
    }
  }
  useEffect(() => void load(), [id]);

  async function save(e: Event) {
    e.preventDefault();
    const saved = await w.run(() =>
      inv.callWithResponse('updateCollection', {
        params: { path: { collection_id: id }, header: etag ? { 'If-Match': etag } : {} },
        body: { name, description },
      }),
    );
    if (saved) {
      setEtag(saved.response.headers.get('etag'));
      onChanged(`Saved collection ${saved.data.name} (revision ${saved.data.revision}).`);
    }
  }

  return (
    <form class="panel-form" aria-label={`Edit ${collection.name}`} onSubmit={(e) => void save(e)}>
      <h2>Edit</h2>
      {/* disabled until the current version (and its ETag) is read, so nothing typed is overwritten by the load */}
      <Field id={`col-${id}-name`} label="Name" required maxLength={255} disabled={etag === null} value={name} onValue={setName} />
      <Field id={`col-${id}-description`} label="Description" disabled={etag === null} value={description} onValue={setDescription} />
      <ProblemBox id={`col-${id}-edit-problem`} problem={w.problem} validation>
        {w.problem?.kind === 'conflict' && (
          <button type="button" onClick={() => void load()}>
            Reload latest version
          </button>
        )}
      </ProblemBox>
      <FormActions submit="Save collection" busy={w.busy || etag === null} />
    </form>
  );
}

function NewClassForm({ collection, onChanged, onAuthLost }: PanelProps) {
  const id = collection.id;
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [schema, setSchema] = useState('');
  const [validate, setValidate] = useState(false);
  const [created, setCreated] = useState<Schemas['ClassExpanded'] | null>(null);
  const w = useAction(onAuthLost, CHANGED_MEANWHILE);

  async function submit(e: Event) {
    e.preventDefault();
    setCreated(null);
    let json_schema: unknown = null;
    if (schema.trim() !== '') {
      const parsed = parseJson(schema, 'JSON schema');
      if (!parsed.ok) return w.setProblem(parsed.problem);
      json_schema = parsed.value;
    }
    const k = await w.run(() =>
      inv.call('createClass', { body: { name, description, collection_id: id, json_schema, validate_schema: validate } }),
    );
    if (k) {
      setCreated(k);
      setName('');
      setDescription('');
      setSchema('');
      setValidate(false);
      onChanged(`Created class ${k.name} in ${collection.name}.`);
    }
  }

  const invalid = w.problem?.kind === 'invalid';
  return (
    <form class="panel-form" aria-label={`New class in ${collection.name}`} onSubmit={(e) => void submit(e)}>
      <h2>New class</h2>
      <Field id={`col-${id}-class-name`} label="Class name" required value={name} onValue={setName} />
      <Field id={`col-${id}-class-description`} label="Class description" value={description} onValue={setDescription} />
      <label for={`col-${id}-class-schema`}>JSON schema (optional)</label>
      <textarea
        id={`col-${id}-class-schema`}
        rows={8}
        spellcheck={false}
        value={schema}
        placeholder='{"type": "object", "properties": {…}}'
        aria-invalid={invalid}
        aria-describedby={w.problem ? `col-${id}-class-problem` : undefined}
        onInput={(e) => setSchema(e.currentTarget.value)}
      />
      <ValidateCheck checked={validate} onChecked={setValidate} />
      <ProblemBox id={`col-${id}-class-problem`} problem={w.problem} validation />
      <FormActions submit={w.busy ? 'Creating…' : 'Create class'} busy={w.busy}>
        {created && (
          <a href={href({ view: 'class', classId: created.id })} class="ok">
            Open class {created.name}
          </a>
        )}
      </FormActions>
    </form>
  );
}

function DeleteCollection({
  collection,
  hasContent,
  onChanged,
  onAuthLost,
}: {
  collection: Collection;
  hasContent: boolean;
  onChanged: (message: string, focus?: boolean) => void;
  onAuthLost: () => void;
}) {
  const id = collection.id;
  const w = useAction(onAuthLost, CHANGED_MEANWHILE);

  async function remove() {
    const done = await w.run(() => inv.call('deleteCollection', { params: { path: { collection_id: id } } }).then(() => true));
    if (done) onChanged(`Deleted collection ${collection.name}.`, true);
    return !!done;
  }

  return (
    <div class="panel-form panel-danger">
      <h2>Delete</h2>
      {hasContent && (
        <p class="muted" id={`col-${id}-delete-note`}>
          It still has classes or child collections: the service deletes only an empty collection.
        </p>
      )}
      <ConfirmStep
        ask={`Delete collection ${collection.name}`}
        label={`Confirm deleting ${collection.name}`}
        question={`Delete collection ${collection.name} and its permission grants? This cannot be undone.`}
        yes={`Yes, delete ${collection.name}`}
        busy={w.busy}
        disabled={hasContent}
        describedBy={hasContent ? `col-${id}-delete-note` : undefined}
        onConfirm={remove}
      />
      <ProblemBox id={`col-${id}-delete-problem`} problem={w.problem} validation />
    </div>
  );
}
