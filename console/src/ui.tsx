// Small pieces every view shares: an error shown as an alert, a status message, the loading line,
// a labelled text field and a check box, a table with its column headers, and the error state of a
// view (a 401 forgets the token and returns to sign-in).
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { useState } from 'preact/hooks';
import { describeError, signedIn } from './session.ts';

/** An error message as an alert; nothing without one. */
export function ErrorText({ error }: { error: string | null | undefined }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error}
    </p>
  );
}

/** A status message ("Saved.", "Group … created."); nothing without one. */
export function OkStatus({ message }: { message: ComponentChildren }) {
  if (!message) return null;
  return (
    <p class="ok" role="status">
      {message}
    </p>
  );
}

export function Loading() {
  return <p aria-busy="true">Loading…</p>;
}

/**
 * A view's error message and `fail`, which sets it from a failed call (describeError) and, when that
 * call was a 401 (the token is forgotten), calls `onAuthLost` to show the sign-in form again.
 */
export function useError(onAuthLost: () => void): [string | null, (error: string | null) => void, (e: unknown) => void] {
  const [error, setError] = useState<string | null>(null);
  function fail(e: unknown) {
    setError(describeError(e));
    if (!signedIn()) onAuthLost();
  }
  return [error, setError, fail];
}

/** What a Field passes on to its input. */
interface InputProps {
  type?: 'text' | 'email' | 'url' | 'search' | 'password' | 'datetime-local';
  required?: boolean;
  disabled?: boolean;
  readOnly?: boolean;
  autocomplete?: string;
  pattern?: string;
  inputMode?: 'numeric' | 'text';
  spellcheck?: boolean;
  list?: string;
  placeholder?: string;
  maxLength?: number;
  'aria-invalid'?: boolean;
  'aria-describedby'?: string;
}

/** A label and its text input; `onValue` gets the text on each input. */
export function Field({
  id,
  label,
  value,
  onValue,
  ...input
}: { id: string; label: string; value: string; onValue: (value: string) => void } & InputProps) {
  return (
    <>
      <label for={id}>{label}</label>
      <input id={id} value={value} {...(input as InputHTMLAttributes)} onInput={(e) => onValue(e.currentTarget.value)} />
    </>
  );
}

/** A check box followed by its label. */
export function CheckField({
  id,
  label,
  checked,
  onChecked,
}: {
  id: string;
  label: string;
  checked: boolean;
  onChecked: (checked: boolean) => void;
}) {
  return (
    <span class="check">
      <input id={id} type="checkbox" checked={checked} onChange={(e) => onChecked(e.currentTarget.checked)} />
      <label for={id}>{label}</label>
    </span>
  );
}

/** The column header of a row's buttons: named for screen readers only. */
function ActionsHeader() {
  return (
    <th scope="col">
      <span class="visually-hidden">Actions</span>
    </th>
  );
}

/** A scrollable table: `columns` as its header row (and an Actions column when `actions`), `children` its rows. */
export function Table({
  label,
  describedBy,
  busy,
  columns,
  actions,
  children,
}: {
  label?: string;
  describedBy?: string;
  busy?: boolean;
  columns: string[];
  actions?: boolean;
  children: ComponentChildren;
}) {
  return (
    <div class="table-wrap">
      <table aria-label={label} aria-describedby={describedBy} aria-busy={busy}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
            {actions && <ActionsHeader />}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}
