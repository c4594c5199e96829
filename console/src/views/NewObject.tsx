// Creating an object from a class's objects table, offered only to callers holding CreateObject on the
// class (ClassObjects asks the service). Data the class schema refuses comes back as a 400 whose details name the JSON paths: shown inline.
import { useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { href } from '../router.ts';
import { CHANGED_MEANWHILE, FormActions, parseJson, ProblemBox, useAction } from '../admin-ui.tsx';
import { Field } from '../ui.tsx';

type Obj = Schemas['InventoryObject'];

export function NewObject({
  classId,
  allowed,
  onCreated,
  onAuthLost,
}: {
  classId: number;
  /** Whether the caller holds CreateObject on the class (the form is not offered otherwise). */
  allowed: boolean;
  onCreated: (o: Obj) => void;
  onAuthLost: () => void;
}) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [json, setJson] = useState('{}');
  const { problem, setProblem, busy, run } = useAction(onAuthLost, CHANGED_MEANWHILE);
  const [created, setCreated] = useState<Obj | null>(null);

  if (!allowed) return null;

  async function submit(e: Event) {
    e.preventDefault();
    setCreated(null);
    const parsed = parseJson(json, 'JSON data');
    if (!parsed.ok) return setProblem(parsed.problem);
    const o = await run(() =>
      inv.call('createObject', { params: { path: { class_id: classId } }, body: { name, description, json_data: parsed.value } }),
    );
    if (o) {
      setCreated(o);
      setName('');
      setDescription('');
      onCreated(o);
    }
  }

  return (
    <details class="new">
      <summary>New object</summary>
      <form class="panel-form" aria-label="New object" onSubmit={(e) => void submit(e)}>
        <Field id="new-obj-name" label="Object name" required value={name} onValue={setName} />
        <Field id="new-obj-description" label="Object description" value={description} onValue={setDescription} />
        <label for="new-obj-json">Object JSON data</label>
        <textarea
          id="new-obj-json"
          rows={8}
          spellcheck={false}
          value={json}
          aria-invalid={problem?.kind === 'invalid'}
          aria-describedby={problem ? 'new-obj-problem' : undefined}
          onInput={(e) => setJson(e.currentTarget.value)}
        />
        <ProblemBox id="new-obj-problem" problem={problem} validation />
        <FormActions submit={busy ? 'Creating…' : 'Create object'} busy={busy}>
          <span role="status" class="ok">
            {created && (
              <>
                Created <a href={href({ view: 'object', classId, objectId: created.id })}>{created.name}</a> (object {created.id}).
              </>
            )}
          </span>
        </FormActions>
      </form>
    </details>
  );
}
