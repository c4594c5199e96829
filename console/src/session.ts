// The console's one SDK client (the shipped TypeScript SDK, clients/typescript) and its token. The
// token lives in sessionStorage only: it is gone when the tab closes, and the API never takes it
// from a cookie.
import { createClient, isApiRequestError, type InventoryClient } from '../../clients/typescript/index.ts';

const KEY = 'inventory-console-token';

// The requests on their way, so that signing out can stop them first: a load still in flight when
// the token is revoked would answer 401 (and the browser log it as a failed load).
const inFlight = new Set<AbortController>();

function trackedFetch(request: Request): Promise<Response> {
  const ctl = new AbortController();
  // the caller's own signal (a stream's Stop) still ends the request
  if (request.signal.aborted) ctl.abort();
  else request.signal.addEventListener('abort', () => ctl.abort(), { once: true });
  inFlight.add(ctl);
  return fetch(new Request(request, { signal: ctl.signal })).finally(() => inFlight.delete(ctl));
}

export const inv: InventoryClient = createClient({
  baseUrl: window.location.origin,
  token: sessionStorage.getItem(KEY) ?? undefined,
  fetch: trackedFetch,
});

export function signedIn(): boolean {
  return inv.token !== undefined;
}

export async function signIn(name: string, password: string, scope: string): Promise<void> {
  const res = await inv.login(name, password, scope);
  sessionStorage.setItem(KEY, res.token);
}

export async function signOut(): Promise<void> {
  for (const ctl of inFlight) ctl.abort();
  try {
    await inv.logout();
  } catch {
    // the token may already be expired or revoked: forget it all the same
  }
  forget();
}

export function forget(): void {
  inv.setToken(undefined);
  sessionStorage.removeItem(KEY);
}

/** A readable message for a failed call; a 401 also forgets the token (the caller then shows sign-in). */
export function describeError(e: unknown): string {
  if (isApiRequestError(e)) {
    if (e.status === 401) forget();
    const body = e.body;
    return body ? `${body.message}${body.reason ? ` (${body.reason})` : ''}` : `the service answered ${e.status}`;
  }
  return e instanceof Error ? e.message : String(e);
}
