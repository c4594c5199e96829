// Small pieces the administration views share: an API problem shown inline (message and the
// per-member details of a 400), a detail page still loading, a form's submit row, a two-step delete
// confirmation, and the credential approval that creating users and minting or renewing tokens need
// (the caller re-enters its own password).
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { isApiRequestError, type ErrorDetail, type Schemas } from '../../clients/typescript/index.ts';
import { describeError, inv, signedIn } from './session.ts';
import { Field, Loading, OkStatus } from './ui.tsx';

export interface Problem {
  message: string;
  details: ErrorDetail[];
  status: number | null;
}

/** What a failed call says: its message (a 401 also forgets the token, see describeError) and the details of a 400. */
export function problemOf(e: unknown): Problem {
  return {
    message: describeError(e),
    details: isApiRequestError(e) ? e.details : [],
    status: isApiRequestError(e) ? e.status : null,
  };
}

/** A view's problem and `fail`, which sets it from a failed call and on a 401 returns to sign-in (`onAuthLost`). */
export function useProblem(onAuthLost: () => void): [Problem | null, (problem: Problem | null) => void, (e: unknown) => void] {
  const [problem, setProblem] = useState<Problem | null>(null);
  function fail(e: unknown) {
    setProblem(problemOf(e));
    if (!signedIn()) onAuthLost();
  }
  return [problem, setProblem, fail];
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

export function ProblemBox({ problem, id }: { problem: Problem | null; id?: string }) {
  if (!problem) return null;
  return (
    <div class="error" role="alert" id={id}>
      <p>{problem.message}</p>
      {problem.details.length > 0 && (
        <ul aria-label="Problems">
          {problem.details.map((d, i) => (
            <li key={i}>
              {d.path ? <code>{d.path}</code> : null} {d.message}
            </li>
          ))}
        </ul>
      )}
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
