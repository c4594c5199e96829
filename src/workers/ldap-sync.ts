// The group sync of LDAP identity providers: every SVC_LDAP_<S>_SYNC_INTERVAL_SECONDS each mapped
// group's members are re-read from the directory and the provider-managed group made to match
// (members the directory no longer lists lose the membership and every grant it gave). A group is
// claimed by setting last_sync_attempted_at, so any number of workers share the work; a directory
// that is down leaves the memberships as they were and last_sync_success_at behind.
import type { Deps } from '../deps.ts';
import type { Loop } from './loop.ts';
import { withTx } from '../db/tx.ts';
import { claimGroupsDueForSync, claimProviderUsersDue } from '../db/directory.ts';
import { ensureProviderGroup, applyGroupSync, retireDirectoryUser } from '../mutations/directory.ts';
import { groupMembers, presentUsers } from '../identity/ldap.ts';
import { managedBy, normalizeDn, type LdapProvider } from '../domain/ldap.ts';

const WORKER_ACTOR = { kind: 'worker', principalId: null, principalName: null } as const;

export interface GroupSyncResult {
  group: string;
  ok: boolean;
  added: number;
  removed: number;
}

/**
 * Syncs the provider's groups that are due (every group with `force`): creates the mapped groups
 * that do not exist yet, then per group reads its members and applies them in one transaction.
 */
export async function syncProviderGroups(deps: Deps, p: LdapProvider, force = false): Promise<GroupSyncResult[]> {
  await withTx(deps.sql, async (tx) => {
    for (const g of p.groups) await ensureProviderGroup(tx, WORKER_ACTOR, p, g);
  });
  const due = await claimGroupsDueForSync(deps.sql, p.scope, managedBy(p), p.syncIntervalSeconds, force);
  const results: GroupSyncResult[] = [];
  for (const group of due) {
    const mapping = p.groups.find((g) => group.external_key !== null && g.key === normalizeDn(group.external_key));
    if (!mapping) continue;
    try {
      const members = await groupMembers(deps.config, p, mapping);
      const r = await withTx(deps.sql, (tx) => applyGroupSync(tx, WORKER_ACTOR, p, group.id, members));
      results.push({ group: group.name, ok: true, ...r });
      if (r.added + r.removed > 0) deps.log.info({ identity_scope: p.scope, group: group.name, ...r }, 'directory group synced');
    } catch (err) {
      deps.log.warn({ err, identity_scope: p.scope, group: group.name }, 'directory group sync failed');
      results.push({ group: group.name, ok: false, added: 0, removed: 0 });
    }
  }
  return results;
}

export interface UserSyncResult {
  checked: number;
  retired: string[];
  ok: boolean;
}

/** Users the user pass checks per tick and provider. */
const USER_BATCH = 200;

/**
 * The user pass: provider-managed users the directory has not confirmed within the interval are
 * looked up by DN; those it no longer has (or that no longer meet the user filter) are retired:
 * memberships removed and tokens revoked. A directory that is down retires no one.
 */
export async function syncProviderUsers(deps: Deps, p: LdapProvider, force = false): Promise<UserSyncResult> {
  const due = await claimProviderUsersDue(deps.sql, p.scope, p.syncIntervalSeconds, USER_BATCH, force);
  const withDn = due.filter((u) => u.external_subject !== null);
  if (withDn.length === 0) return { checked: 0, retired: [], ok: true };
  let present: Set<string>;
  try {
    present = await presentUsers(
      deps.config,
      p,
      withDn.map((u) => u.external_subject!),
    );
  } catch (err) {
    deps.log.warn({ err, identity_scope: p.scope }, 'directory user check failed');
    return { checked: withDn.length, retired: [], ok: false };
  }
  const retired: string[] = [];
  for (const u of withDn) {
    if (present.has(normalizeDn(u.external_subject!))) continue;
    const r = await withTx(deps.sql, (tx) => retireDirectoryUser(tx, WORKER_ACTOR, p, u.id));
    deps.log.info({ identity_scope: p.scope, user: u.name, ...r }, 'directory user gone: memberships removed, tokens revoked');
    retired.push(u.name);
  }
  return { checked: withDn.length, retired, ok: true };
}

/** Runs the group and user sync of every configured LDAP provider; each waits for its own interval. */
export const ldapSyncLoop: Loop = {
  name: 'ldap-group-sync',
  intervalMs: 10_000,
  async tick(deps, signal) {
    for (const p of deps.config.ldapProviders) {
      if (signal.aborted) return;
      try {
        await syncProviderGroups(deps, p);
        await syncProviderUsers(deps, p);
      } catch (err) {
        deps.log.warn({ err, identity_scope: p.scope }, 'directory group sync failed');
      }
    }
  },
};
