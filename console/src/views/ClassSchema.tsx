// A class's JSON schema and validate_schema flag. Someone holding UpdateClass edits both here; the
// save is sent with If-Match (the ETag the class was read with), so a concurrent change is a 412
// conflict instead of a silent overwrite. The service's refusals are shown inline: an invalid schema
// (400) and, when validation is on, the stored objects the new schema would make invalid (409).
import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { CHANGED_MEANWHILE, FormActions, parseJson, ProblemBox, useAction } from '../admin-ui.tsx';

type Klass = Schemas['ClassExpanded'];

const pretty = (v: unknown) => (v === null || v === undefined ? '' : JSON.stringify(v, null, 2));

/** The validate_schema check box of a class. */
export function ValidateCheck({ checked, onChecked }: { checked: boolean; onChecked: (checked: boolean) => void }) {
  return (
    <label class="check">
      <input type="checkbox" checked={checked} onChange={(e) => onChecked(e.currentTarget.checked)} />
      Validate objects against the schema
    </label>
  );
}

export function ClassSchema({
  classId,
  canEdit,
  onChanged,
  onAuthLost,
}: {
  classId: number;
  /** Whether the caller holds UpdateClass on the class (ClassObjects asks the service). */
  canEdit: boolean;
  onChanged: (k: Klass) => void;
  onAuthLost: () => void;
}) {
  const [klass, setKlass] = useState<Klass | null>(null);
  const [etag, setEtag] = useState<string | null>(null);
  const [text, setText] = useState('');
  const [validate, setValidate] = useState(false);
  const { problem, setProblem, fail, busy, run } = useAction(onAuthLost, CHANGED_MEANWHILE);
  const [saved, setSaved] = useState('');

  function show(k: Klass, tag: string | null) {
    setKlass(k);
    setEtag(tag);
    setText(pretty(k.json_schema));
    setValidate(k.validate_schema);
  }

  async function load() {
    try {
      const { data, response } = await inv.callWithResponse('getClass', { params: { path: { class_id: classId } } });
      show(data, response.headers.get('etag'));
      setProblem(null);
    } catch (e) {
      fail(e);
    }
  }

  useEffect(() => {
    void load();
  }, [classId]);

  async function save(e: Event) {
    e.preventDefault();
    setSaved('');
    let json_schema: unknown = null;
    if (text.trim() !== '') {
      const parsed = parseJson(text, 'JSON schema');
      if (!parsed.ok) return setProblem(parsed.problem);
      json_schema = parsed.value;
    }
    const got = await run(() =>
      inv.callWithResponse('updateClass', {
        params: { path: { class_id: classId }, header: etag ? { 'If-Match': etag } : {} },
        body: { json_schema, validate_schema: validate },
      }),
    );
    if (got) {
      show(got.data, got.response.headers.get('etag'));
      setSaved(`Schema saved: revision ${got.data.revision}.`);
      onChanged(got.data);
    }
  }

  return (
    <section class="schema" aria-labelledby="schema-heading">
      <h2 id="schema-heading">Schema</h2>
      {klass && (
        <p class="muted" id="schema-enforced">
          {klass.validate_schema ? 'Enforced on every write.' : 'Not enforced (validate_schema is off).'} Class revision {klass.revision}.
        </p>
      )}
      {!canEdit ? (
        <pre tabIndex={0} aria-label="Class JSON schema">
          {klass ? pretty(klass.json_schema) || '(no schema)' : '…'}
        </pre>
      ) : (
        <form class="panel-form" aria-label="Edit schema" onSubmit={(e) => void save(e)}>
          <label for="class-schema">Class JSON schema (empty: no schema)</label>
          <textarea
            id="class-schema"
            rows={12}
            spellcheck={false}
            disabled={!klass}
            value={text}
            aria-invalid={problem?.kind === 'invalid'}
            aria-describedby={problem ? 'class-schema-problem' : undefined}
            onInput={(e) => setText(e.currentTarget.value)}
          />
          <ValidateCheck checked={validate} onChecked={setValidate} />
          <ProblemBox id="class-schema-problem" problem={problem} validation>
            {problem?.kind === 'conflict' && (
              <button type="button" onClick={() => void load()}>
                Reload latest schema
              </button>
            )}
          </ProblemBox>
          <FormActions submit={busy ? 'Saving…' : 'Save schema'} busy={busy || !klass}>
            <span role="status" class="ok">
              {saved}
            </span>
          </FormActions>
        </form>
      )}
      {!canEdit && <ProblemBox id="class-schema-problem" problem={problem} validation />}
    </section>
  );
}
