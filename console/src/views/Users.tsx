import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv, signedIn } from '../session.ts';
import { PagerControls, usePager } from '../pager.tsx';
import { href, navigate } from '../router.ts';
import { approve, ConfirmDelete, ConfirmPassword, names, orNull, ProblemBox, problemOf, type Problem } from '../admin-ui.tsx';
import { TokenPanel } from './Tokens.tsx';

type User = Schemas['User'];
const PAGE_SIZE = 25;

/**
 * Provider-managed (directory) users are read-only through the local operations (403). The User schema does not
 * say who manages a user; users outside scope `local` come from a directory provider, so they are shown read-only.
 */
export const managedUser = (u: User) => u.identity_scope !== 'local';

/** Users (paged by cursor) and a form that creates a local user (confirmed with the caller's password). Admins only. */
export function Users({ onAuthLost }: { onAuthLost: () => void }) {
  const [generation, setGeneration] = useState(0);
  const [form, setForm] = useState({ name: '', password: '', proper_name: '', email: '', confirm: '' });
  const [problem, setProblem] = useState<Problem | null>(null);
  const [created, setCreated] = useState<User | null>(null);
  const [busy, setBusy] = useState(false);

  const pager = usePager(
    () => inv.pages('listUsers', { params: { query: { sort: 'name', limit: PAGE_SIZE, include_total: true } } }),
    String(generation),
    onAuthLost,
  );

  async function create(e: Event) {
    e.preventDefault();
    setProblem(null);
    setCreated(null);
    setBusy(true);
    try {
      const user: Schemas['NewUser'] = {
        name: form.name.trim(),
        password: form.password,
        ...(orNull(form.proper_name) !== null ? { proper_name: form.proper_name.trim() } : {}),
        ...(orNull(form.email) !== null ? { email: form.email.trim() } : {}),
      };
      const approval = await approve(form.confirm, { kind: 'create_user', user });
      const u = await inv.call('createUser', { params: { header: { 'X-Svc-Credential-Approval': approval } }, body: user });
      setCreated(u);
      setForm({ name: '', password: '', proper_name: '', email: '', confirm: '' });
      setGeneration((g) => g + 1);
    } catch (err) {
      setProblem(problemOf(err));
      if (!signedIn()) onAuthLost();
    } finally {
      setBusy(false);
    }
  }

  return (
    <section>
      <h1>Users</h1>
      {pager.error && (
        <p class="error" role="alert">
          {pager.error}
        </p>
      )}
      <div class="table-wrap">
        <table aria-label="Users" aria-describedby="users-status" aria-busy={pager.busy}>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Proper name</th>
              <th scope="col">E-mail</th>
              <th scope="col">Identity scope</th>
            </tr>
          </thead>
          <tbody>
            {(pager.page?.items ?? []).map((u) => (
              <tr key={u.id}>
                <td>
                  <a href={href({ view: 'user', userId: u.id })}>{u.name}</a>
                </td>
                <td>{u.proper_name ?? '—'}</td>
                <td>{u.email ?? '—'}</td>
                <td>
                  {u.identity_scope}
                  {managedUser(u) && <span class="muted"> (directory, read-only)</span>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <PagerControls pager={pager} size={PAGE_SIZE} noun="Users" id="users-status" />

      <form class="edit admin-form" aria-label="New user" onSubmit={(e) => void create(e)}>
        <h2>New user</h2>
        <label for="user-name">Name</label>
        <input
          id="user-name"
          required
          autocomplete="off"
          value={form.name}
          aria-invalid={names(problem, 'user.name') || names(problem, 'name')}
          onInput={(e) => setForm({ ...form, name: e.currentTarget.value })}
        />
        <label for="user-password">Initial password</label>
        <input
          id="user-password"
          type="password"
          autocomplete="new-password"
          required
          value={form.password}
          onInput={(e) => setForm({ ...form, password: e.currentTarget.value })}
        />
        <label for="user-proper-name">Proper name (optional)</label>
        <input id="user-proper-name" value={form.proper_name} onInput={(e) => setForm({ ...form, proper_name: e.currentTarget.value })} />
        <label for="user-email">E-mail (optional)</label>
        <input id="user-email" type="email" value={form.email} onInput={(e) => setForm({ ...form, email: e.currentTarget.value })} />
        <ConfirmPassword id="user-confirm" value={form.confirm} onInput={(confirm) => setForm({ ...form, confirm })} />
        <div class="actions">
          <button type="submit" disabled={busy}>
            Create user
          </button>
        </div>
        <ProblemBox problem={problem} />
        {created && (
          <p class="ok" role="status">
            User <a href={href({ view: 'user', userId: created.id })}>{created.name}</a> created.
          </p>
        )}
      </form>
    </section>
  );
}

/** One user: profile (editable unless directory-managed), delete, groups and tokens. Admins only. */
export function UserDetail({ userId, onAuthLost }: { userId: number; onAuthLost: () => void }) {
  const [user, setUser] = useState<User | null>(null);
  const [groups, setGroups] = useState<Schemas['Group'][] | null>(null);
  const [form, setForm] = useState({ proper_name: '', email: '', password: '', confirm: '' });
  const [problem, setProblem] = useState<Problem | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  function fail(e: unknown) {
    setProblem(problemOf(e));
    if (!signedIn()) onAuthLost();
  }

  function show(u: User) {
    setUser(u);
    setForm({ proper_name: u.proper_name ?? '', email: u.email ?? '', password: '', confirm: '' });
  }

  useEffect(() => {
    inv.call('getUser', { params: { path: { id: userId } } }).then(show, fail);
    (async () => {
      const list: Schemas['Group'][] = [];
      for await (const g of inv.paginate('listPrincipalGroups', { params: { path: { principal_id: userId }, query: { sort: 'name' } } }))
        list.push(g);
      setGroups(list);
    })().catch(fail);
  }, [userId]);

  async function save(e: Event) {
    e.preventDefault();
    if (!user) return;
    setProblem(null);
    setMessage(null);
    setBusy(true);
    try {
      const body: Schemas['UpdateUser'] = {};
      if (orNull(form.proper_name) !== user.proper_name) body.proper_name = orNull(form.proper_name);
      if (orNull(form.email) !== user.email) body.email = orNull(form.email);
      if (form.password !== '') body.password = form.password;
      const header =
        body.password !== undefined
          ? { 'X-Svc-Credential-Approval': await approve(form.confirm, { kind: 'update_user', user_id: user.id, user: body }) }
          : undefined;
      const u = await inv.call('updateUser', { params: { path: { id: user.id }, ...(header ? { header } : {}) }, body });
      show(u);
      setMessage(Object.keys(body).length === 0 ? 'Nothing changed.' : 'Saved.');
    } catch (err) {
      fail(err);
    } finally {
      setBusy(false);
    }
  }

  async function remove() {
    if (!user) return;
    setProblem(null);
    try {
      await inv.call('deleteUser', { params: { path: { id: user.id } } });
      navigate(href({ view: 'users' }));
    } catch (err) {
      fail(err);
    }
  }

  if (!user)
    return (
      <section>
        <p>
          <a href={href({ view: 'users' })}>Users</a>
        </p>
        <h1>User {userId}</h1>
        <ProblemBox problem={problem} />
        {!problem && <p aria-busy="true">Loading…</p>}
      </section>
    );

  const managed = managedUser(user);
  return (
    <section>
      <p class="crumbs">
        <a href={href({ view: 'users' })}>Users</a> /
      </p>
      <h1>{user.name}</h1>
      <p class="muted">
        User {user.id}, identity scope {user.identity_scope}, created {new Date(user.created_at).toLocaleString()}.
      </p>
      {managed && (
        <p class="conflict" id="user-managed">
          This user comes from the {user.identity_scope} directory: its profile, password and memberships are managed there and are
          read-only here.
        </p>
      )}
      <ProblemBox problem={problem} />
      {message && (
        <p class="ok" role="status">
          {message}
        </p>
      )}
      <form class="edit admin-form" aria-label="Profile" onSubmit={(e) => void save(e)}>
        <h2>Profile</h2>
        <fieldset disabled={managed}>
          <label for="edit-proper-name">Proper name</label>
          <input id="edit-proper-name" value={form.proper_name} onInput={(e) => setForm({ ...form, proper_name: e.currentTarget.value })} />
          <label for="edit-email">E-mail</label>
          <input id="edit-email" type="email" value={form.email} onInput={(e) => setForm({ ...form, email: e.currentTarget.value })} />
          <label for="edit-password">New password (leave empty to keep it)</label>
          <input
            id="edit-password"
            type="password"
            autocomplete="new-password"
            value={form.password}
            onInput={(e) => setForm({ ...form, password: e.currentTarget.value })}
          />
          {form.password !== '' && (
            <ConfirmPassword id="edit-confirm" value={form.confirm} onInput={(confirm) => setForm({ ...form, confirm })} />
          )}
          <div class="actions">
            <button type="submit" disabled={busy}>
              Save profile
            </button>
            <ConfirmDelete what={`user ${user.name}`} onConfirm={remove} />
          </div>
        </fieldset>
      </form>
      <h2>Groups</h2>
      {groups === null ? (
        <p aria-busy="true">Loading…</p>
      ) : groups.length === 0 ? (
        <p>Not a member of any group.</p>
      ) : (
        <ul aria-label={`Groups of ${user.name}`}>
          {groups.map((g) => (
            <li key={g.id}>
              <a href={href({ view: 'group', groupId: g.id })}>{g.name}</a>
            </li>
          ))}
        </ul>
      )}
      <h2>Tokens</h2>
      <TokenPanel principalId={user.id} who={user.name} onAuthLost={onAuthLost} />
    </section>
  );
}
