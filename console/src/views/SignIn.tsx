import { useEffect, useState } from 'preact/hooks';
import { inv, describeError, signIn } from '../session.ts';

export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [providers, setProviders] = useState<string[]>(['local']);
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [scope, setScope] = useState('local');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    inv.call('listAuthProviders').then(
      (r) => setProviders(r.providers),
      () => setProviders(['local']),
    );
  }, []);

  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(name, password, scope);
      onSignedIn();
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" class="signin">
      <h1>Sign in to the inventory</h1>
      <form onSubmit={(e) => void submit(e)} aria-describedby={error ? 'signin-error' : undefined}>
        <label for="signin-name">Name</label>
        <input id="signin-name" name="name" autocomplete="username" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <label for="signin-password">Password</label>
        <input
          id="signin-password"
          name="password"
          type="password"
          autocomplete="current-password"
          required
          value={password}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
        <label for="signin-scope">Identity scope</label>
        <select id="signin-scope" name="identity_scope" value={scope} onChange={(e) => setScope(e.currentTarget.value)}>
          {providers.map((p) => (
            <option key={p} value={p}>
              {p}
            </option>
          ))}
        </select>
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {error && (
          <p id="signin-error" class="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}
