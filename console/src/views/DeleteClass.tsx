// Deleting a class from its page, with a confirm step that says how many objects go with it; offered
// only to callers holding DeleteClass on it (ClassObjects asks the service). The delete carries If-Match
// (the ETag of the class as read when the step was confirmed), and the collections tree is shown after.
import { useEffect, useRef, useState } from 'preact/hooks';
import { inv, signedIn } from '../session.ts';
import { href, navigate } from '../router.ts';
import { ProblemView, toProblem, type Problem } from '../problem.tsx';

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
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem | null>(null);
  const confirmRef = useRef<HTMLButtonElement>(null);
  const askRef = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    if (confirming) confirmRef.current?.focus();
  }, [confirming]);

  function fail(e: unknown) {
    setProblem(toProblem(e));
    setConfirming(false);
    if (!signedIn()) onAuthLost();
  }

  async function ask() {
    setProblem(null);
    try {
      const { response } = await inv.callWithResponse('getClass', { params: { path: { class_id: classId } } });
      setEtag(response.headers.get('etag'));
      setConfirming(true);
    } catch (e) {
      fail(e);
    }
  }

  async function remove() {
    setBusy(true);
    try {
      await inv.call('deleteClass', { params: { path: { class_id: classId }, header: etag ? { 'If-Match': etag } : {} } });
      navigate(href({ view: 'collections' }));
    } catch (e) {
      fail(e);
      askRef.current?.focus();
    } finally {
      setBusy(false);
    }
  }

  const what = objects === null ? 'its objects' : objects === 1 ? 'its 1 object' : `its ${objects} objects`;
  return (
    <section class="panel-form panel-danger delete-class" aria-label="Delete class">
      {!confirming ? (
        <div class="actions">
          <button type="button" ref={askRef} onClick={() => void ask()}>
            Delete class {name}
          </button>
        </div>
      ) : (
        <div class="confirm-step" role="group" aria-label={`Confirm deleting class ${name}`}>
          <p>
            Delete class {name}, {what} and their relations? This cannot be undone.
          </p>
          <div class="actions">
            <button type="button" ref={confirmRef} class="destructive" disabled={busy} onClick={() => void remove()}>
              Yes, delete class {name}
            </button>
            <button
              type="button"
              onClick={() => {
                setConfirming(false);
                setTimeout(() => askRef.current?.focus(), 0);
              }}
            >
              Cancel
            </button>
          </div>
        </div>
      )}
      {problem && <ProblemView id="class-delete-problem" problem={problem} />}
    </section>
  );
}
