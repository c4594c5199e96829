// A refused or failed write shown next to its form: the service's message and, when it names them,
// the offending JSON paths (a schema error's `details`), in an alert the screen reader announces.
import type { ComponentChildren } from 'preact';
import { isApiRequestError, type ErrorDetail } from '../../clients/typescript/index.ts';
import { describeError } from './session.ts';

export interface Problem {
  /** invalid: the input was refused (400/409/422); conflict: a stale If-Match (412); error: anything else. */
  kind: 'invalid' | 'conflict' | 'error';
  message: string;
  details: ErrorDetail[];
}

/** The problem of a failed call (describeError also forgets the token on a 401). */
export function toProblem(e: unknown): Problem {
  if (isApiRequestError(e, 412))
    return {
      kind: 'conflict',
      message: 'Conflict: this was changed by someone else after you opened it. Your change was not saved; reload and try again.',
      details: [],
    };
  if (isApiRequestError(e, 400) || isApiRequestError(e, 409) || isApiRequestError(e, 422))
    return { kind: 'invalid', message: describeError(e), details: e.details };
  return { kind: 'error', message: describeError(e), details: [] };
}

/** JSON text from a textarea, or the problem it has; an empty text is `empty` (callers decide what that means). */
export function parseJson(text: string, what: string): { ok: true; value: unknown } | { ok: false; problem: Problem } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, problem: { kind: 'invalid', message: `The ${what} is not valid JSON: ${(err as Error).message}`, details: [] } };
  }
}

export function ProblemView({ id, problem, children }: { id: string; problem: Problem; children?: ComponentChildren }) {
  return (
    <div id={id} class={problem.kind === 'conflict' ? 'conflict' : 'error'} role="alert">
      <p>{problem.message}</p>
      {problem.details.length > 0 && (
        <ul aria-label="Validation errors">
          {problem.details.map((d, i) => (
            <li key={i}>
              <code>{d.path || '/'}</code>: {d.message}
            </li>
          ))}
        </ul>
      )}
      {children}
    </div>
  );
}
