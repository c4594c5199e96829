// Deleting a class from its page, with a confirm step that says how many objects go with it; offered
// only to callers holding DeleteClass on it (ClassObjects asks the service). The delete carries If-Match
// (the ETag of the class as read when the step was confirmed), and the collections tree is shown after.
import { useState } from 'preact/hooks';
import { inv } from '../session.ts';
import { href, navigate } from '../router.ts';
import { CHANGED_MEANWHILE, ConfirmStep, ProblemBox, useAction } from '../admin-ui.tsx';

export function DeleteClass({
  classId,
  name,
  objects,
  onAuthLost,
}: {
  classId: number;
  name: string;
  /** The number of objects the table counted, when known. */
  objects: number | null;
  onAuthLost: () => void;
}) {
  const [etag, setEtag] = useState<string | null>(null);
  const { problem, busy, run } = useAction(onAuthLost, CHANGED_MEANWHILE);

  async function ask() {
    const got = await run(() => inv.callWithResponse('getClass', { params: { path: { class_id: classId } } }));
    if (got) setEtag(got.response.headers.get('etag'));
    return !!got;
  }

  async function remove() {
    const done = await run(() =>
      inv.call('deleteClass', { params: { path: { class_id: classId }, header: etag ? { 'If-Match': etag } : {} } }).then(() => true),
    );
    if (done) navigate(href({ view: 'collections' }));
    return !!done;
  }

  const what = objects === null ? 'its objects' : objects === 1 ? 'its 1 object' : `its ${objects} objects`;
  return (
    <section class="panel-form panel-danger delete-class" aria-label="Delete class">
      <ConfirmStep
        ask={`Delete class ${name}`}
        label={`Confirm deleting class ${name}`}
        question={`Delete class ${name}, ${what} and their relations? This cannot be undone.`}
        yes={`Yes, delete class ${name}`}
        busy={busy}
        onAsk={ask}
        onConfirm={remove}
      />
      <ProblemBox id="class-delete-problem" problem={problem} validation />
    </section>
  );
}
