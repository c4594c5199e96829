// A collection's direct group grants (listCollectionPermissions), with grant and revoke of one
// permission for one group. Shown to callers holding DelegateCollection there (administrators hold it
// everywhere), which is what the service asks for both writes.
import { useEffect, useState } from 'preact/hooks';
import { isApiRequestError, type Schemas } from '../../../clients/typescript/index.ts';
import { PERMISSIONS } from '../access.ts';
import { inv } from '../session.ts';
import { CHANGED_MEANWHILE, ProblemBox, useAction } from '../admin-ui.tsx';

type Permission = Schemas['PermissionName'];
type Row = Schemas['CollectionPermissionRow'];

export function GroupPermissions({ collection, onAuthLost }: { collection: Schemas['Collection']; onAuthLost: () => void }) {
  const id = collection.id;
  const [rows, setRows] = useState<Row[] | null>(null);
  // Group names by id; null when the caller may not list groups (service accounts, scoped tokens), undefined while loading.
  const [groups, setGroups] = useState<Map<number, string> | null | undefined>(undefined);
  const [group, setGroup] = useState('');
  const [permission, setPermission] = useState<Permission>('ReadCollection');
  const { problem, fail, busy, run } = useAction(onAuthLost, CHANGED_MEANWHILE);
  const [status, setStatus] = useState('');

  async function loadRows() {
    const list: Row[] = [];
    for await (const r of inv.paginate('listCollectionPermissions', { params: { path: { collection_id: id }, query: { limit: 500 } } }))
      list.push(r);
    setRows(list);
  }

  useEffect(() => {
    loadRows().catch(fail);
    (async () => {
      const names = new Map<number, string>();
      try {
        for await (const g of inv.paginate('listGroups', { params: { query: { sort: 'name', limit: 500 } } })) names.set(g.id, g.name);
      } catch (e) {
        if (isApiRequestError(e, 403)) return setGroups(null);
        throw e;
      }
      setGroups(names);
      setGroup((cur) => cur || String(names.keys().next().value ?? ''));
    })().catch(fail);
  }, [id]);

  const groupName = (gid: number) => groups?.get(gid) ?? `group ${gid}`;

  async function change(kind: 'grant' | 'revoke', gid: number, p: Permission) {
    setStatus('');
    const path = { collection_id: id, group_id: gid, permission: p };
    const done = await run(async () => {
      if (kind === 'grant') await inv.call('grantCollectionGroupPermission', { params: { path } });
      else await inv.call('revokeCollectionGroupPermission', { params: { path } });
      await loadRows();
      return true;
    });
    if (done)
      setStatus(
        kind === 'grant'
          ? `Granted ${p} to ${groupName(gid)} on ${collection.name}.`
          : `Revoked ${p} from ${groupName(gid)} on ${collection.name}.`,
      );
  }

  const byGroup = new Map<number, Permission[]>();
  for (const r of rows ?? []) byGroup.set(r.group_id, [...(byGroup.get(r.group_id) ?? []), r.permission]);

  return (
    <section class="panel-form" aria-label={`Group permissions on ${collection.name}`}>
      <h2>Group permissions</h2>
      {rows === null ? (
        <p>Loading…</p>
      ) : byGroup.size === 0 ? (
        <p class="muted">No group holds a permission directly on {collection.name} (grants on ancestors still apply).</p>
      ) : (
        <div class="table-wrap">
          <table class="grants" aria-label={`Direct grants on ${collection.name}`}>
            <thead>
              <tr>
                <th scope="col">Group</th>
                <th scope="col">Permissions (direct)</th>
              </tr>
            </thead>
            <tbody>
              {[...byGroup].map(([gid, perms]) => (
                <tr key={gid} data-group-id={gid}>
                  <th scope="row">{groupName(gid)}</th>
                  <td>
                    <ul class="chips">
                      {perms.map((p) => (
                        <li key={p}>
                          {p}
                          <button
                            type="button"
                            class="chip-x"
                            disabled={busy}
                            aria-label={`Revoke ${p} from ${groupName(gid)}`}
                            title={`Revoke ${p} from ${groupName(gid)}`}
                            onClick={() => void change('revoke', gid, p)}
                          >
                            ×
                          </button>
                        </li>
                      ))}
                    </ul>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form
        class="grant"
        aria-label={`Grant a permission on ${collection.name}`}
        onSubmit={(e) => {
          e.preventDefault();
          const gid = Number(group);
          if (Number.isInteger(gid) && gid > 0) void change('grant', gid, permission);
        }}
      >
        <label for={`col-${id}-grant-group`}>{groups === null ? 'Group id' : 'Group'}</label>
        {groups !== null ? (
          <select id={`col-${id}-grant-group`} value={group} required onChange={(e) => setGroup(e.currentTarget.value)}>
            {[...(groups ?? [])].map(([gid, name]) => (
              <option key={gid} value={String(gid)}>
                {name}
              </option>
            ))}
          </select>
        ) : (
          <input
            id={`col-${id}-grant-group`}
            type="number"
            min={1}
            required
            value={group}
            onInput={(e) => setGroup(e.currentTarget.value)}
          />
        )}
        <label for={`col-${id}-grant-permission`}>Permission</label>
        <select id={`col-${id}-grant-permission`} value={permission} onChange={(e) => setPermission(e.currentTarget.value as Permission)}>
          {PERMISSIONS.map((p) => (
            <option key={p} value={p}>
              {p}
            </option>
          ))}
        </select>
        <button type="submit" disabled={busy || groups === undefined}>
          Grant
        </button>
      </form>
      <ProblemBox id={`col-${id}-grant-problem`} problem={problem} validation />
      <p role="status" class="ok">
        {status}
      </p>
    </section>
  );
}
