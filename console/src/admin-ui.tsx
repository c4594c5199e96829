// Small pieces the administration views share: an API problem shown inline (message and the
// per-member details of a 400), a two-step delete confirmation, and the credential approval that
// creating users and minting or renewing tokens need (the caller re-enters its own password).
import { useEffect, useRef, useState } from 'preact/hooks';
import { isApiRequestError, type ErrorDetail, type Schemas } from '../../clients/typescript/index.ts';
import { describeError, inv } from './session.ts';

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
    <>
      <label for={id}>Your password (confirms this change)</label>
      <input
        id={id}
        type="password"
        autocomplete="current-password"
        required
        value={value}
        onInput={(e) => onInput(e.currentTarget.value)}
      />
    </>
  );
}

/** Text of an optional form field: empty means null. */
export function orNull(v: string): string | null {
  const t = v.trim();
  return t === '' ? null : t;
}
