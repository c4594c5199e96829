import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { PagedTable, usePager } from '../pager.tsx';
import { href, navigate } from '../router.ts';
import { ConfirmAction, ConfirmDelete, CreateFooter, DetailLoading, FormActions, orNull, ProblemBox, useAction } from '../admin-ui.tsx';
import { Field, Loading, OkStatus, Table } from '../ui.tsx';

type Group = Schemas['Group'];
type Member = Schemas['GroupMember'];
const PAGE_SIZE = 25;

/** Groups owned by a directory provider are read-only through the local operations (403). */
const managedGroup = (g: Group) => g.managed_by !== null || g.identity_scope !== 'local';

/** Groups (paged) and a form that creates a local group. Admins only. */
export function Groups({ onAuthLost }: { onAuthLost: () => void }) {
  const [generation, setGeneration] = useState(0);
  const [form, setForm] = useState({ name: '', description: '' });
  const { problem, busy, run } = useAction(onAuthLost);
  const [created, setCreated] = useState<Group | null>(null);

  const pager = usePager(
    () => inv.pages('listGroups', { params: { query: { sort: 'name', limit: PAGE_SIZE, include_total: true } } }),
    String(generation),
    onAuthLost,
  );

  async function create(e: Event) {
    e.preventDefault();
    setCreated(null);
    const g = await run(() => inv.call('createGroup', { body: { name: form.name.trim(), description: orNull(form.description) } }));
    if (g) {
      setCreated(g);
      setForm({ name: '', description: '' });
      setGeneration((n) => n + 1);
    }
  }

  return (
    <section>
      <h1>Groups</h1>
      <PagedTable
        pager={pager}
        size={PAGE_SIZE}
        noun="Groups"
        id="groups-status"
        label="Groups"
        columns={['Name', 'Description', 'Identity scope']}
        row={(g) => (
          <tr key={g.id}>
            <td>
              <a href={href({ view: 'group', groupId: g.id })}>{g.name}</a>
            </td>
            <td>{g.description || '—'}</td>
            <td>
              {g.identity_scope}
              {managedGroup(g) && <span class="muted"> (directory, read-only)</span>}
            </td>
          </tr>
        )}
      />

      <form class="edit admin-form" aria-label="New group" onSubmit={(e) => void create(e)}>
        <h2>New group</h2>
        <Field id="group-name" label="Name" required value={form.name} onValue={(name) => setForm({ ...form, name })} />
        <Field
          id="group-description"
          label="Description (optional)"
          value={form.description}
          onValue={(description) => setForm({ ...form, description })}
        />
        <CreateFooter
          submit="Create group"
          busy={busy}
          problem={problem}
          created={created && { what: 'Group', href: href({ view: 'group', groupId: created.id }), name: created.name }}
        />
      </form>
    </section>
  );
}

/** One group: name and description, delete, and its direct members (add a user by name, remove). Admins only. */
export function GroupDetail({ groupId, onAuthLost }: { groupId: number; onAuthLost: () => void }) {
  const [group, setGroup] = useState<Group | null>(null);
  const [members, setMembers] = useState<Member[] | null>(null);
  const [generation, setGeneration] = useState(0);
  const [form, setForm] = useState({ name: '', description: '' });
  const [memberName, setMemberName] = useState('');
  const { problem, setProblem, fail, busy, run } = useAction(onAuthLost);
  const [message, setMessage] = useState<string | null>(null);

  function show(g: Group) {
    setGroup(g);
    setForm({ name: g.name, description: g.description ?? '' });
  }

  useEffect(() => {
    inv.call('getGroup', { params: { path: { group_id: groupId } } }).then(show, fail);
  }, [groupId]);

  useEffect(() => {
    (async () => {
      const list: Member[] = [];
      for await (const m of inv.paginate('listGroupMembers', {
        params: { path: { group_id: groupId }, query: { sort: 'name', limit: 250 } },
      }))
        list.push(m);
      setMembers(list);
    })().catch(fail);
  }, [groupId, generation]);

  async function save(e: Event) {
    e.preventDefault();
    if (!group) return;
    setMessage(null);
    const body: Schemas['UpdateGroup'] = {};
    if (form.name.trim() !== group.name) body.name = form.name.trim();
    if (form.description.trim() !== (group.description ?? '')) body.description = orNull(form.description);
    const g = await run(() => inv.call('updateGroup', { params: { path: { group_id: group.id } }, body }));
    if (g) {
      show(g);
      setMessage(Object.keys(body).length === 0 ? 'Nothing changed.' : 'Saved.');
    }
  }

  async function remove() {
    if (!group) return;
    setProblem(null);
    try {
      await inv.call('deleteGroup', { params: { path: { group_id: group.id } } });
      navigate(href({ view: 'groups' }));
    } catch (err) {
      fail(err);
    }
  }

  async function add(e: Event) {
    e.preventDefault();
    setProblem(null);
    setMessage(null);
    const name = memberName.trim();
    try {
      const [user] = await inv.call('listUsers', { params: { query: { name, identity_scope: 'local', limit: 1 } } });
      if (!user) {
        setProblem({ kind: 'invalid', message: `No local user is named “${name}”.`, details: [] });
        return;
      }
      const m = await inv.call('addGroupMember', { params: { path: { group_id: groupId, principal_id: user.id } } });
      setMessage(`${m.name} added.`);
      setMemberName('');
      setGeneration((n) => n + 1);
    } catch (err) {
      fail(err);
    }
  }

  async function removeMember(m: Member) {
    setProblem(null);
    setMessage(null);
    try {
      await inv.call('removeGroupMember', { params: { path: { group_id: groupId, principal_id: m.id } } });
      setMessage(`${m.name} removed.`);
      setGeneration((n) => n + 1);
    } catch (err) {
      fail(err);
    }
  }

  if (!group)
    return <DetailLoading back={{ href: href({ view: 'groups' }), label: 'Groups' }} title={`Group ${groupId}`} problem={problem} />;

  const managed = managedGroup(group);
  return (
    <section>
      <p class="crumbs">
        <a href={href({ view: 'groups' })}>Groups</a> /
      </p>
      <h1>{group.name}</h1>
      {managed && (
        <p class="conflict" id="group-managed">
          This group is managed by {group.managed_by ?? group.identity_scope}: its name, description and members are read-only here.
        </p>
      )}
      <ProblemBox problem={problem} />
      <OkStatus message={message} />
      <form class="edit admin-form" aria-label="Group" onSubmit={(e) => void save(e)}>
        <fieldset disabled={managed}>
          <Field id="edit-group-name" label="Name" required value={form.name} onValue={(name) => setForm({ ...form, name })} />
          <Field
            id="edit-group-description"
            label="Description"
            value={form.description}
            onValue={(description) => setForm({ ...form, description })}
          />
          <FormActions submit="Save group" busy={busy}>
            <ConfirmDelete what={`group ${group.name}`} onConfirm={remove} />
          </FormActions>
        </fieldset>
      </form>
      <h2>Members</h2>
      {members === null ? (
        <Loading />
      ) : members.length === 0 ? (
        <p>No members.</p>
      ) : (
        <Table label={`Members of ${group.name}`} columns={['Name', 'Kind', 'Identity scope']} actions>
          {members.map((m) => (
            <tr key={m.id}>
              <td>{m.kind === 'human' ? <a href={href({ view: 'user', userId: m.id })}>{m.name}</a> : m.name}</td>
              <td>{m.kind === 'human' ? 'user' : 'service account'}</td>
              <td>{m.identity_scope}</td>
              <td>
                <ConfirmAction verb="Remove" what={`${m.name} from ${group.name}`} disabled={managed} onConfirm={() => removeMember(m)} />
              </td>
            </tr>
          ))}
        </Table>
      )}
      <form class="filter" aria-label="Add a member" onSubmit={(e) => void add(e)}>
        <Field id="member-name" label="User name" required disabled={managed} value={memberName} onValue={setMemberName} />
        <button type="submit" disabled={managed}>
          Add member
        </button>
      </form>
    </section>
  );
}
