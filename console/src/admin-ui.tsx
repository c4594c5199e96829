// Small pieces the administration and editing views share: an API problem shown inline (message and the
// per-member details of a 400, or a stale edit's conflict), the problem and busy state of a form's call,
// a detail page still loading, a form's submit row, a two-step delete confirmation, and the credential
// approval that creating users and minting or renewing tokens need (the caller re-enters its own password).
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { isApiRequestError, type ErrorDetail, type Schemas } from '../../clients/typescript/index.ts';
import { describeError, inv, signedIn } from './session.ts';
import { Field, Loading, OkStatus } from './ui.tsx';

export interface Problem {
  /** invalid: the input was refused (400/409/422); conflict: a stale If-Match (412), when the view says how; error: anything else. */
  kind: 'invalid' | 'conflict' | 'error';
  message: string;
  details: ErrorDetail[];
}

/** A stale If-Match (412) on an edit of inventory data. */
export const CHANGED_MEANWHILE =
  'Conflict: this was changed by someone else after you opened it. Your change was not saved; reload and try again.';

/**
 * What a failed call says: its message (a 401 also forgets the token, see describeError) and the details of a 400.
 * With `conflict`, a 412 (a stale If-Match) is a conflict with that message.
 */
export function problemOf(e: unknown, conflict?: string): Problem {
  if (conflict !== undefined && isApiRequestError(e, 412)) return { kind: 'conflict', message: conflict, details: [] };
  const invalid = isApiRequestError(e, 400) || isApiRequestError(e, 409) || isApiRequestError(e, 422);
  return { kind: invalid ? 'invalid' : 'error', message: describeError(e), details: isApiRequestError(e) ? e.details : [] };
}

/** A view's problem and `fail`, which sets it from a failed call (see problemOf) and on a 401 returns to sign-in (`onAuthLost`). */
export function useProblem(
  onAuthLost: () => void,
  conflict?: string,
): [Problem | null, (problem: Problem | null) => void, (e: unknown) => void] {
  const [problem, setProblem] = useState<Problem | null>(null);
  function fail(e: unknown) {
    setProblem(problemOf(e, conflict));
    if (!signedIn()) onAuthLost();
  }
  return [problem, setProblem, fail];
}

/**
 * A view's problem and busy flag, and `run`, which clears the problem, is busy while `action` runs and turns its
 * failure into the problem (see useProblem); it returns what the action returned, or undefined when it failed.
 */
export function useAction(onAuthLost: () => void, conflict?: string) {
  const [problem, setProblem, fail] = useProblem(onAuthLost, conflict);
  const [busy, setBusy] = useState(false);
  async function run<T>(action: () => Promise<T>): Promise<T | undefined> {
    setProblem(null);
    setBusy(true);
    try {
      return await action();
    } catch (e) {
      fail(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  }
  return { problem, setProblem, fail, busy, run };
}

/** JSON text from a textarea, or the problem it has. */
export function parseJson(text: string, what: string): { ok: true; value: unknown } | { ok: false; problem: Problem } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, problem: { kind: 'invalid', message: `The ${what} is not valid JSON: ${(err as Error).message}`, details: [] } };
  }
}

/** Whether a problem's details name `member` (e.g. `config`; paths come as `/config/uri`, `body.config.uri` or `config`), for aria-invalid. */
export function names(problem: Problem | null, member: string): boolean {
  return !!problem?.details.some((d) => {
    const path = d.path
      .replace(/^\//, '')
      .replace(/^body[./]/, '')
      .replace(/\//g, '.');
    return path === member || path.startsWith(`${member}.`);
  });
}

/**
 * A problem as an alert (a conflict styled as one) with its details listed as "Problems", or with `validation`
 * (the service checked submitted JSON) as "Validation errors", each JSON path (the root as /) and its message;
 * `children` (e.g. a reload button) follow.
 */
export function ProblemBox({
  problem,
  id,
  validation,
  children,
}: {
  problem: Problem | null;
  id?: string;
  validation?: boolean;
  children?: ComponentChildren;
}) {
  if (!problem) return null;
  return (
    <div class={problem.kind === 'conflict' ? 'conflict' : 'error'} role="alert" id={id}>
      <p>{problem.message}</p>
      {problem.details.length > 0 && (
        <ul aria-label={validation ? 'Validation errors' : 'Problems'}>
          {problem.details.map((d, i) => (
            <li key={i}>
              {validation ? (
                <>
                  <code>{d.path || '/'}</code>: {d.message}
                </>
              ) : (
                <>
                  {d.path ? <code>{d.path}</code> : null} {d.message}
                </>
              )}
            </li>
          ))}
        </ul>
      )}
      {children}
    </div>
  );
}

/** A detail page before its record has loaded: the way back, a heading, and the problem or "Loading…". */
export function DetailLoading({ back, title, problem }: { back: { href: string; label: string }; title: string; problem: Problem | null }) {
  return (
    <section>
      <p>
        <a href={back.href}>{back.label}</a>
      </p>
      <h1>{title}</h1>
      <ProblemBox problem={problem} />
      {!problem && <Loading />}
    </section>
  );
}

/** A form's submit button (disabled while `busy`), and any further buttons after it. */
export function FormActions({ submit, busy, children }: { submit: string; busy: boolean; children?: ComponentChildren }) {
  return (
    <div class="actions">
      <button type="submit" disabled={busy}>
        {submit}
      </button>
      {children}
    </div>
  );
}

/** The end of a form that creates something: its submit row, the problem, and once created a link to what was made. */
export function CreateFooter({
  submit,
  busy,
  problem,
  created,
}: {
  submit: string;
  busy: boolean;
  problem: Problem | null;
  /** e.g. { what: 'Group', href, name }: "Group <name> created." */
  created: { what: string; href: string; name: string } | null;
}) {
  return (
    <>
      <FormActions submit={submit} busy={busy} />
      <ProblemBox problem={problem} />
      <OkStatus
        message={
          created && (
            <>
              {created.what} <a href={created.href}>{created.name}</a> created.
            </>
          )
        }
      />
    </>
  );
}

/** The Enabled check box of a sink or a subscription. */
export function EnabledCheck({ checked, onChecked }: { checked: boolean; onChecked: (checked: boolean) => void }) {
  return (
    <label class="check">
      <input type="checkbox" checked={checked} onChange={(e) => onChecked(e.currentTarget.checked)} /> Enabled
    </label>
  );
}

/** A button (Delete, Revoke, ...) that asks once more in place before calling `onConfirm`. */
export function ConfirmAction({
  verb,
  what,
  onConfirm,
  disabled,
}: {
  verb: string;
  what: string;
  onConfirm: () => Promise<void>;
  disabled?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) yes.current?.focus();
  }, [asking]);
  if (!asking)
    return (
      <button type="button" class="danger" disabled={disabled} aria-label={`${verb} ${what}`} onClick={() => setAsking(true)}>
        {verb}
      </button>
    );
  return (
    <span class="confirm" role="group" aria-label={`Confirm: ${verb.toLowerCase()} ${what}`}>
      <span>
        {verb} {what}?
      </span>
      <button
        type="button"
        class="danger"
        disabled={busy}
        ref={yes}
        onClick={() => {
          setBusy(true);
          void onConfirm().finally(() => {
            setBusy(false);
            setAsking(false);
          });
        }}
      >
        Yes, {verb.toLowerCase()}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

export function ConfirmDelete(props: { what: string; onConfirm: () => Promise<void>; disabled?: boolean }) {
  return <ConfirmAction verb="Delete" {...props} />;
}

/**
 * A delete behind a confirm step: the `ask` button, then (once `onAsk`, e.g. reading an ETag, said yes) the
 * `question` in a group named `label` with the destructive `yes` button, which gets the focus, and Cancel. On
 * Cancel, or when `onConfirm` says it did not delete, the ask button is back and has the focus.
 */
export function ConfirmStep({
  ask,
  label,
  question,
  yes,
  busy,
  disabled,
  describedBy,
  onAsk,
  onConfirm,
}: {
  ask: string;
  label: string;
  question: ComponentChildren;
  yes: string;
  busy: boolean;
  disabled?: boolean;
  describedBy?: string;
  onAsk?: () => Promise<boolean>;
  onConfirm: () => Promise<boolean>;
}) {
  const [confirming, setConfirming] = useState(false);
  const askRef = useRef<HTMLButtonElement>(null);
  const yesRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (confirming) yesRef.current?.focus();
  }, [confirming]);
  function back() {
    setConfirming(false);
    setTimeout(() => askRef.current?.focus(), 0);
  }
  if (!confirming)
    return (
      <div class="actions">
        <button
          type="button"
          ref={askRef}
          disabled={disabled}
          aria-describedby={describedBy}
          onClick={() => void (onAsk ? onAsk() : Promise.resolve(true)).then((ok) => ok && setConfirming(true))}
        >
          {ask}
        </button>
      </div>
    );
  return (
    <div class="confirm-step" role="group" aria-label={label}>
      <p>{question}</p>
      <div class="actions">
        <button
          type="button"
          ref={yesRef}
          class="destructive"
          disabled={busy}
          onClick={() => void onConfirm().then((done) => done || back())}
        >
          {yes}
        </button>
        <button type="button" onClick={back}>
          Cancel
        </button>
      </div>
    </div>
  );
}

type Operation = Schemas['CredentialApprovalRequest']['operation'];

/** A one-use approval for `operation` (the exact later request), confirmed with the caller's password. */
export async function approve(password: string, operation: Operation): Promise<string> {
  const created = await inv.call('createCredentialApproval', { body: { password, operation } });
  return created.approval;
}

/** The password field that confirms a credential operation. */
export function ConfirmPassword({ id, value, onInput }: { id: string; value: string; onInput: (v: string) => void }) {
  return (
    <Field
      id={id}
      label="Your password (confirms this change)"
      type="password"
      autocomplete="current-password"
      required
      value={value}
      onValue={onInput}
    />
  );
}

/** Text of an optional form field: empty means null. */
export function orNull(v: string): string | null {
  const t = v.trim();
  return t === '' ? null : t;
}
