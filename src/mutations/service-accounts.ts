// Service accounts: the one write path, for the API and the import worker alike. An account is
// managed by an administrator or a human member of its owner group, and can be owned only by a
// group the caller belongs to (administrators: any group). Disabling is one-way.
import { badRequest, forbidden, notFound } from '../domain/errors.ts';
import type { Authority } from '../domain/authz.ts';
import type { Db } from '../db/sql.ts';
import { reserveId } from '../db/events.ts';
import { isMember, shareLockGroup } from '../db/groups.ts';
import {
  disableServiceAccount as disableAccountRow,
  insertServiceAccount,
  lockDisableTargets,
  lockServiceAccount,
  managesAccount,
  updateServiceAccount as updateAccountRow,
  type DisableTargets,
} from '../db/service-accounts.ts';
import { serviceAccountEvent, serviceAccountView, type ServiceAccountRow } from '../domain/views/service-accounts.ts';
import { deletePrincipalRecorded } from './principals.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

const KIND = 'service_account';

export interface NewServiceAccount {
  name: string;
  identity_scope: string;
  description?: string | null;
  owner_group_id: number;
  /** true: disabled as soon as it is created. */
  disabled?: boolean;
}

/** Members to change; an omitted member keeps its value, a null description clears it. */
export interface ServiceAccountChanges {
  description?: string | null;
  owner_group_id?: number;
  /** true disables the account; false is refused for a disabled one (disabling is one-way). */
  disabled?: boolean;
}

const NOT_MANAGER = "only an administrator or a member of the service account's owner group may manage it";

/** 403 unless the caller is an administrator or a member of the account's owner group (reads use it too). */
export async function requireAccountManager(db: Db, auth: Authority, account: ServiceAccountRow): Promise<void> {
  if (!auth.isAdmin && !(await isMember(db, account.owner_group_id, auth.principal.id))) throw forbidden(NOT_MANAGER);
}

/**
 * The owner group exists (404) and a non-admin caller belongs to it (403); locked against deletion.
 * The membership test goes out behind the lock, in the same round trip.
 */
async function requireOwnerGroup(m: MutationContext, groupId: number): Promise<void> {
  const locking = shareLockGroup(m.tx, groupId);
  const member = m.auth.isAdmin ? undefined : isMember(m.tx, groupId, m.auth.principal.id);
  member?.catch(() => undefined); // awaited below, once the group is known to exist
  if (!(await locking)) throw notFound('owner group');
  if (member && !(await member)) throw forbidden('a service account can be owned only by a group you belong to');
}

/**
 * Locks the account, with the test that a non-admin caller belongs to its owner group behind the
 * lock (one round trip: the test reads the locked row's owner); then If-Match.
 */
async function lockForWrite(
  m: MutationContext,
  id: number,
  ifMatch: string | undefined,
  disabling = false,
): Promise<{ before: ServiceAccountRow; now: Date; targets: Promise<DisableTargets> }> {
  const locking = lockServiceAccount(m.tx, id);
  const managing = m.auth.isAdmin ? undefined : managesAccount(m.tx, id, m.auth.principal.id);
  // a disable's tokens and queued tasks, locked behind the account (one round trip for all)
  const targets = disabling ? lockDisableTargets(m.tx, id) : Promise.resolve(NO_TARGETS);
  for (const p of [managing, targets]) p?.catch(() => undefined); // awaited below (targets: by the caller), once the account is known
  const locked = await locking;
  if (!locked) throw notFound('service account');
  if (managing && !(await managing)) throw forbidden(NOT_MANAGER);
  requireMatch(ifMatch, KIND, id, locked.revision);
  const { svc_now: now, ...before } = locked;
  return { before, now, targets };
}

const NO_TARGETS: DisableTargets = { tokens: [], taskIds: [] };

/** Two round trips: the owner group's lock and test with the new id and now(); then the account with its event (and COMMIT). */
export async function createServiceAccount(m: MutationContext, v: NewServiceAccount): Promise<ServiceAccountRow> {
  const owner = requireOwnerGroup(m, v.owner_group_id);
  const reserved = reserveId(m.tx, 'principals');
  reserved.catch(() => undefined); // awaited below, after the owner group's checks
  await owner;
  const { id, now } = await reserved;
  const created: ServiceAccountRow = {
    id,
    name: v.name,
    description: v.description ?? '',
    identity_scope: v.identity_scope,
    owner_group_id: v.owner_group_id,
    created_by: m.auth.principal.id,
    disabled_at: null,
    created_at: now,
    updated_at: now,
    revision: 1,
  };
  const events = [serviceAccountEvent('created', created, null)];
  if (v.disabled !== true) {
    await insertServiceAccount(m.tx, m.actor, created, events, m.final); // COMMIT goes with it
    return created;
  }
  await insertServiceAccount(m.tx, m.actor, created, events);
  return disableAccountRow(m.tx, m.actor, created, now, NO_TARGETS, m.final); // a new account has no tokens or tasks
}

/** Two round trips when the owner stays: the lock with the test; then the change with its event (and COMMIT). */
export async function updateServiceAccount(
  m: MutationContext,
  id: number,
  changes: ServiceAccountChanges,
  ifMatch?: string,
): Promise<Written<ServiceAccountRow>> {
  const { before, now, targets } = await lockForWrite(m, id, ifMatch, changes.disabled === true);
  if (changes.disabled === false && before.disabled_at !== null) throw badRequest('a disabled service account cannot be enabled again');
  const description = changes.description === undefined ? before.description : (changes.description ?? '');
  const ownerGroupId = changes.owner_group_id ?? before.owner_group_id;
  if (ownerGroupId !== before.owner_group_id) await requireOwnerGroup(m, ownerGroupId);
  const changed = description !== before.description || ownerGroupId !== before.owner_group_id;
  const disabling = changes.disabled === true && before.disabled_at === null;
  return skipWhenUnchanged(before, !changed && !disabling, async () => {
    let current = before;
    if (changed) {
      current = Object.assign({}, before, { description, owner_group_id: ownerGroupId, updated_at: now, revision: before.revision + 1 });
      const events = [serviceAccountEvent('updated', current, before)];
      await updateAccountRow(m.tx, m.actor, current, events, disabling ? undefined : m.final); // COMMIT goes with it, unless disabling follows
    }
    return disabling ? disableAccountRow(m.tx, m.actor, current, now, await targets, m.final) : current;
  });
}

/**
 * Disables an account: its tokens are revoked and its queued tasks cancelled; unchanged when it
 * already is. Two round trips: the lock with the test, the tokens and the tasks; then the changes
 * with their events (and COMMIT).
 */
export async function disableServiceAccount(m: MutationContext, id: number, ifMatch?: string): Promise<Written<ServiceAccountRow>> {
  const { before, now, targets } = await lockForWrite(m, id, ifMatch, true);
  return skipWhenUnchanged(before, before.disabled_at !== null, async () =>
    disableAccountRow(m.tx, m.actor, before, now, await targets, m.final),
  );
}

/** Two round trips: the lock with the test and the account's groups; then the delete with its event (and COMMIT). */
export async function deleteServiceAccount(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  await deletePrincipalRecorded(
    m,
    { entityType: KIND, label: 'service account' },
    id,
    async () => (await lockForWrite(m, id, ifMatch)).before,
    serviceAccountView,
    (before) => ({ owner_group_id: before.owner_group_id }),
  );
}
