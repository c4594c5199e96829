import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { PagedTable, usePager } from '../pager.tsx';
import { href, navigate } from '../router.ts';
import {
  approve,
  ConfirmDelete,
  ConfirmPassword,
  CreateFooter,
  DetailLoading,
  FormActions,
  names,
  orNull,
  ProblemBox,
  useAction,
} from '../admin-ui.tsx';
import { Field, Loading, OkStatus } from '../ui.tsx';
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
  const { problem, busy, run } = useAction(onAuthLost);
  const [created, setCreated] = useState<User | null>(null);

  const pager = usePager(
    () => inv.pages('listUsers', { params: { query: { sort: 'name', limit: PAGE_SIZE, include_total: true } } }),
    String(generation),
    onAuthLost,
  );

  async function create(e: Event) {
    e.preventDefault();
    setCreated(null);
    const user: Schemas['NewUser'] = {
      name: form.name.trim(),
      password: form.password,
      ...(orNull(form.proper_name) !== null ? { proper_name: form.proper_name.trim() } : {}),
      ...(orNull(form.email) !== null ? { email: form.email.trim() } : {}),
    };
    const u = await run(async () => {
      const approval = await approve(form.confirm, { kind: 'create_user', user });
      return inv.call('createUser', { params: { header: { 'X-Svc-Credential-Approval': approval } }, body: user });
    });
    if (u) {
      setCreated(u);
      setForm({ name: '', password: '', proper_name: '', email: '', confirm: '' });
      setGeneration((g) => g + 1);
    }
  }

  return (
    <section>
      <h1>Users</h1>
      <PagedTable
        pager={pager}
        size={PAGE_SIZE}
        noun="Users"
        id="users-status"
        label="Users"
        columns={['Name', 'Proper name', 'E-mail', 'Identity scope']}
        row={(u) => (
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
        )}
      />

      <form class="edit admin-form" aria-label="New user" onSubmit={(e) => void create(e)}>
        <h2>New user</h2>
        <Field
          id="user-name"
          label="Name"
          required
          autocomplete="off"
          value={form.name}
          aria-invalid={names(problem, 'user.name') || names(problem, 'name')}
          onValue={(name) => setForm({ ...form, name })}
        />
        <Field
          id="user-password"
          label="Initial password"
          type="password"
          autocomplete="new-password"
          required
          value={form.password}
          onValue={(password) => setForm({ ...form, password })}
        />
        <Field
          id="user-proper-name"
          label="Proper name (optional)"
          value={form.proper_name}
          onValue={(proper_name) => setForm({ ...form, proper_name })}
        />
        <Field id="user-email" label="E-mail (optional)" type="email" value={form.email} onValue={(email) => setForm({ ...form, email })} />
        <ConfirmPassword id="user-confirm" value={form.confirm} onInput={(confirm) => setForm({ ...form, confirm })} />
        <CreateFooter
          submit="Create user"
          busy={busy}
          problem={problem}
          created={created && { what: 'User', href: href({ view: 'user', userId: created.id }), name: created.name }}
        />
      </form>
    </section>
  );
}

/** One user: profile (editable unless directory-managed), delete, groups and tokens. Admins only. */
export function UserDetail({ userId, onAuthLost }: { userId: number; onAuthLost: () => void }) {
  const [user, setUser] = useState<User | null>(null);
  const [groups, setGroups] = useState<Schemas['Group'][] | null>(null);
  const [form, setForm] = useState({ proper_name: '', email: '', password: '', confirm: '' });
  const { problem, setProblem, fail, busy, run } = useAction(onAuthLost);
  const [message, setMessage] = useState<string | null>(null);

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
    setMessage(null);
    const body: Schemas['UpdateUser'] = {};
    if (orNull(form.proper_name) !== user.proper_name) body.proper_name = orNull(form.proper_name);
    if (orNull(form.email) !== user.email) body.email = orNull(form.email);
    if (form.password !== '') body.password = form.password;
    const u = await run(async () => {
      const header =
        body.password !== undefined
          ? { 'X-Svc-Credential-Approval': await approve(form.confirm, { kind: 'update_user', user_id: user.id, user: body }) }
          : undefined;
      return inv.call('updateUser', { params: { path: { id: user.id }, ...(header ? { header } : {}) }, body });
    });
    if (u) {
      show(u);
      setMessage(Object.keys(body).length === 0 ? 'Nothing changed.' : 'Saved.');
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

  if (!user) return <DetailLoading back={{ href: href({ view: 'users' }), label: 'Users' }} title={`User ${userId}`} problem={problem} />;

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
      <OkStatus message={message} />
      <form class="edit admin-form" aria-label="Profile" onSubmit={(e) => void save(e)}>
        <h2>Profile</h2>
        <fieldset disabled={managed}>
          <Field
            id="edit-proper-name"
            label="Proper name"
            value={form.proper_name}
            onValue={(proper_name) => setForm({ ...form, proper_name })}
          />
          <Field id="edit-email" label="E-mail" type="email" value={form.email} onValue={(email) => setForm({ ...form, email })} />
          <Field
            id="edit-password"
            label="New password (leave empty to keep it)"
            type="password"
            autocomplete="new-password"
            value={form.password}
            onValue={(password) => setForm({ ...form, password })}
          />
          {form.password !== '' && (
            <ConfirmPassword id="edit-confirm" value={form.confirm} onInput={(confirm) => setForm({ ...form, confirm })} />
          )}
          <FormActions submit="Save profile" busy={busy}>
            <ConfirmDelete what={`user ${user.name}`} onConfirm={remove} />
          </FormActions>
        </fieldset>
      </form>
      <h2>Groups</h2>
      {groups === null ? (
        <Loading />
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
