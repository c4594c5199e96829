// Deleting an object from its detail page, with a confirm step, offered only to callers holding
// DeleteObject on it. The delete carries If-Match (the ETag the page read), so an object changed
// meanwhile is not deleted unseen (412). Afterwards the class's objects table is shown.
import { useEffect, useState } from 'preact/hooks';
import { mayOnObject } from '../access.ts';
import { inv } from '../session.ts';
import { href, navigate } from '../router.ts';
import { CHANGED_MEANWHILE, ConfirmStep, ProblemBox, useAction } from '../admin-ui.tsx';

export function DeleteObject({
  classId,
  objectId,
  name,
  etag,
  onAuthLost,
}: {
  classId: number;
  objectId: number;
  name: string;
  etag: string | null;
  onAuthLost: () => void;
}) {
  // Whether the caller may delete it; null until the service answered.
  const [allowed, setAllowed] = useState<boolean | null>(null);
  const { problem, busy, run } = useAction(onAuthLost, CHANGED_MEANWHILE);

  useEffect(() => {
    mayOnObject(classId, objectId, 'DeleteObject').then(setAllowed, () => setAllowed(false));
  }, [classId, objectId]);

  if (allowed === null) return null;
  if (!allowed)
    return (
      <p id="obj-delete-denied" class="muted">
        You may not delete this object.
      </p>
    );

  async function remove() {
    const done = await run(() =>
      inv
        .call('deleteObject', { params: { path: { class_id: classId, object_id: objectId }, header: etag ? { 'If-Match': etag } : {} } })
        .then(() => true),
    );
    if (done) navigate(href({ view: 'class', classId }));
    return !!done;
  }

  return (
    <section class="panel-form panel-danger" aria-label="Delete object">
      <ConfirmStep
        ask="Delete object"
        label={`Confirm deleting ${name}`}
        question={`Delete object ${name} and its relations? This cannot be undone.`}
        yes={`Yes, delete ${name}`}
        busy={busy}
        onConfirm={remove}
      />
      <ProblemBox id="obj-delete-problem" problem={problem} validation />
    </section>
  );
}
