import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { PagedTable, usePager } from '../pager.tsx';
import { loadAccess } from '../access.ts';
import { approve, ConfirmAction, ConfirmPassword, FormActions, orNull, ProblemBox, useAction, useProblem } from '../admin-ui.tsx';
import { Field, Loading, OkStatus } from '../ui.tsx';

type Token = Schemas['Token'];
type State = 'active' | 'all' | 'expired' | 'revoked';
const PAGE_SIZE = 25;

function when(ts: string | null): string {
  return ts === null ? '—' : new Date(ts).toLocaleString();
}

function stateOf(t: Token): string {
  return t.revoked_at !== null ? 'revoked' : t.expired ? 'expired' : t.active ? 'active' : 'inactive';
}

/** A freshly issued secret: shown once, kept only in this component's state, never stored. */
function Secret({ issued, onDone }: { issued: { token: string; expires_at: string; label: string }; onDone: () => void }) {
  const [copied, setCopied] = useState<string | null>(null);
  async function copy() {
    try {
      await navigator.clipboard.writeText(issued.token);
      setCopied('Copied to the clipboard.');
    } catch {
      const input = document.getElementById('token-secret') as HTMLInputElement | null;
      input?.focus();
      input?.select();
      setCopied('Selected: press Ctrl+C (⌘C) to copy.');
    }
  }
  return (
    <div class="secret" role="region" aria-label="New token secret">
      <p role="status">
        {issued.label} (expires {when(issued.expires_at)}). <strong>Copy it now: it is shown only once</strong> and the console does not
        keep it.
      </p>
      <label for="token-secret">Token secret</label>
      <div class="secret-row">
        <input id="token-secret" readOnly value={issued.token} onFocus={(e) => e.currentTarget.select()} spellcheck={false} />
        <button type="button" onClick={() => void copy()}>
          Copy
        </button>
        <button type="button" onClick={onDone}>
          Done, hide it
        </button>
      </div>
      {copied && <p class="muted">{copied}</p>}
    </div>
  );
}

/**
 * A principal's tokens: the list (by state, paged), minting one (its secret shown once), renewing
 * (a new token, secret shown once) and revoking. Minting and renewing need the caller's password
 * (a credential approval for that exact request).
 */
export function TokenPanel({ principalId, who, onAuthLost }: { principalId: number; who: string; onAuthLost: () => void }) {
  const [state, setState] = useState<State>('active');
  const [generation, setGeneration] = useState(0);
  const { problem, setProblem, fail, busy, run } = useAction(onAuthLost);
  const [message, setMessage] = useState<string | null>(null);
  const [issued, setIssued] = useState<{ token: string; expires_at: string; label: string } | null>(null);
  const [current, setCurrent] = useState<number | null>(null);
  const [form, setForm] = useState({ name: '', description: '', expires: '', password: '' });
  const [renewing, setRenewing] = useState<Token | null>(null);
  const [renewPassword, setRenewPassword] = useState('');

  useEffect(() => {
    loadAccess().then(
      (a) => setCurrent(a.me.token.id),
      () => setCurrent(null),
    );
  }, []);

  const pager = usePager(
    () =>
      inv.pages('listPrincipalTokens', {
        params: { path: { principal_id: principalId }, query: { state, limit: PAGE_SIZE, include_total: true } },
      }),
    `${principalId}/${state}/${generation}`,
    onAuthLost,
  );

  async function mint(e: Event) {
    e.preventDefault();
    setMessage(null);
    const body: Schemas['TokenMintRequest'] = {
      ...(orNull(form.name) !== null ? { name: form.name.trim() } : {}),
      ...(orNull(form.description) !== null ? { description: form.description.trim() } : {}),
      ...(form.expires ? { expires_at: new Date(form.expires).toISOString() } : {}),
    };
    const res = await run(async () => {
      const approval = await approve(form.password, { kind: 'create_token', principal_id: principalId, token: body });
      return inv.call('createPrincipalToken', {
        params: { path: { principal_id: principalId }, header: { 'X-Svc-Credential-Approval': approval } },
        body,
      });
    });
    if (res) {
      setIssued({ token: res.token, expires_at: res.expires_at, label: `New token${body.name ? ` “${body.name}”` : ''} for ${who}` });
      setForm({ name: '', description: '', expires: '', password: '' });
      setGeneration((g) => g + 1);
    }
  }

  async function renew(e: Event) {
    e.preventDefault();
    if (!renewing) return;
    setMessage(null);
    const token = renewing;
    const res = await run(async () => {
      const approval = await approve(renewPassword, { kind: 'renew_token', principal_id: principalId, token_id: token.id, token: {} });
      return inv.call('renewPrincipalToken', {
        params: { path: { principal_id: principalId, token_id: token.id }, header: { 'X-Svc-Credential-Approval': approval } },
        body: {},
      });
    });
    if (res) {
      setIssued({ token: res.token, expires_at: res.expires_at, label: `Renewal of token ${token.id} for ${who}` });
      setRenewing(null);
      setRenewPassword('');
      setGeneration((g) => g + 1);
    }
  }

  async function revoke(t: Token) {
    setProblem(null);
    setMessage(null);
    try {
      await inv.call('revokePrincipalToken', { params: { path: { principal_id: principalId, token_id: t.id } } });
      setMessage(`Token ${t.id} revoked.`);
      setGeneration((g) => g + 1);
    } catch (err) {
      fail(err);
    }
  }

  return (
    <div class="tokens">
      {issued && <Secret issued={issued} onDone={() => setIssued(null)} />}
      <ProblemBox problem={problem} />
      <OkStatus message={message} />
      <div class="filter">
        <label for={`token-state-${principalId}`}>Show</label>
        <select id={`token-state-${principalId}`} value={state} onChange={(e) => setState(e.currentTarget.value as State)}>
          <option value="active">active tokens</option>
          <option value="expired">expired tokens</option>
          <option value="revoked">revoked tokens</option>
          <option value="all">all tokens</option>
        </select>
      </div>
      <PagedTable
        pager={pager}
        size={PAGE_SIZE}
        noun="Tokens"
        id="tokens-status"
        label={`Tokens of ${who}`}
        columns={['Id', 'Name', 'Issued', 'Expires', 'Last used', 'State']}
        actions
        row={(t) => (
          <tr key={t.id} data-token-id={t.id}>
            <td>{t.id}</td>
            <td>
              {t.name ?? '—'}
              {t.id === current && <span class="muted"> (this session)</span>}
            </td>
            <td>{when(t.issued)}</td>
            <td>{when(t.expires_at)}</td>
            <td>{when(t.last_used_at)}</td>
            <td class="token-state">{stateOf(t)}</td>
            <td class="row-actions">
              {t.revoked_at === null && (
                <>
                  <button
                    type="button"
                    aria-label={`Renew token ${t.id}`}
                    onClick={() => {
                      setRenewing(t);
                      setRenewPassword('');
                    }}
                  >
                    Renew
                  </button>
                  <ConfirmAction verb="Revoke" what={`token ${t.id}`} onConfirm={() => revoke(t)} />
                </>
              )}
            </td>
          </tr>
        )}
      />
      {renewing && (
        <form class="edit admin-form" aria-label={`Renew token ${renewing.id}`} onSubmit={(e) => void renew(e)}>
          <h3>Renew token {renewing.id}</h3>
          <p class="muted">A new token with the same name and scope; this one stays as it is until it expires or is revoked.</p>
          <ConfirmPassword id="renew-password" value={renewPassword} onInput={setRenewPassword} />
          <FormActions submit="Renew" busy={busy}>
            <button type="button" onClick={() => setRenewing(null)}>
              Cancel
            </button>
          </FormActions>
        </form>
      )}
      <form class="edit admin-form" aria-label="New token" onSubmit={(e) => void mint(e)}>
        <h3>New token</h3>
        <Field id="token-name" label="Name (optional)" value={form.name} onValue={(name) => setForm({ ...form, name })} />
        <Field
          id="token-description"
          label="Description (optional)"
          value={form.description}
          onValue={(description) => setForm({ ...form, description })}
        />
        <Field
          id="token-expires"
          label="Expires (optional; default: the service's token lifetime)"
          type="datetime-local"
          value={form.expires}
          onValue={(expires) => setForm({ ...form, expires })}
        />
        <ConfirmPassword id="token-password" value={form.password} onInput={(password) => setForm({ ...form, password })} />
        <FormActions submit="Create token" busy={busy} />
      </form>
    </div>
  );
}

/** The signed-in person's own tokens (every human may manage their own). */
export function MyTokens({ onAuthLost }: { onAuthLost: () => void }) {
  const [me, setMe] = useState<Schemas['Me'] | null>(null);
  const [problem, , fail] = useProblem(onAuthLost);
  useEffect(() => {
    loadAccess().then((a) => setMe(a.me), fail);
  }, []);
  return (
    <section>
      <h1>My tokens</h1>
      <ProblemBox problem={problem} />
      {!me ? (
        !problem && <Loading />
      ) : me.principal.kind !== 'human' || me.token.scope !== null ? (
        <p>Tokens are managed by a person signed in with an unscoped token.</p>
      ) : (
        <>
          <p class="muted">
            Bearer tokens of {me.principal.name} for scripts and the SDK. The console's own session is one of them (marked “this session”):
            revoking it signs you out.
          </p>
          <TokenPanel principalId={me.principal.id} who={me.principal.name} onAuthLost={onAuthLost} />
        </>
      )}
    </section>
  );
}
