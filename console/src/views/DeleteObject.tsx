// Deleting an object from its detail page, with a confirm step, offered only to callers holding
// DeleteObject on it. The delete carries If-Match (the ETag the page read), so an object changed
// meanwhile is not deleted unseen (412). Afterwards the class's objects table is shown.
import { useEffect, useRef, useState } from 'preact/hooks';
import { mayOnObject } from '../access.ts';
import { inv, signedIn } from '../session.ts';
import { href, navigate } from '../router.ts';
import { ProblemView, toProblem, type Problem } from '../problem.tsx';

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
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem | null>(null);
  const confirmRef = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    mayOnObject(classId, objectId, 'DeleteObject').then(setAllowed, () => setAllowed(false));
  }, [classId, objectId]);
  useEffect(() => {
    if (confirming) confirmRef.current?.focus();
  }, [confirming]);

  if (allowed === null) return null;
  if (!allowed)
    return (
      <p id="obj-delete-denied" class="muted">
        You may not delete this object.
      </p>
    );

  async function remove() {
    setBusy(true);
    setProblem(null);
    try {
      await inv.call('deleteObject', {
        params: { path: { class_id: classId, object_id: objectId }, header: etag ? { 'If-Match': etag } : {} },
      });
      navigate(href({ view: 'class', classId }));
    } catch (e) {
      setProblem(toProblem(e));
      setConfirming(false);
      if (!signedIn()) onAuthLost();
    } finally {
      setBusy(false);
    }
  }

  return (
    <section class="panel-form panel-danger" aria-label="Delete object">
      {!confirming ? (
        <div class="actions">
          <button type="button" onClick={() => setConfirming(true)}>
            Delete object
          </button>
        </div>
      ) : (
        <div class="confirm-step" role="group" aria-label={`Confirm deleting ${name}`}>
          <p>Delete object {name} and its relations? This cannot be undone.</p>
          <div class="actions">
            <button type="button" ref={confirmRef} class="destructive" disabled={busy} onClick={() => void remove()}>
              Yes, delete {name}
            </button>
            <button type="button" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </div>
        </div>
      )}
      {problem && <ProblemView id="obj-delete-problem" problem={problem} />}
    </section>
  );
}
