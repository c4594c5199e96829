// Service accounts: the one write path, for the API and the import worker alike. An account is
// managed by an administrator or a human member of its owner group, and can be owned only by a
// group the caller belongs to (administrators: any group). Disabling is one-way.
import { badRequest, forbidden, notFound } from '../domain/errors.ts';
import type { Authority } from '../domain/authz.ts';
import type { Db } from '../db/sql.ts';
import { appendEvent } from '../db/events.ts';
import { isMember, shareLockGroup } from '../db/groups.ts';
import {
  disableServiceAccount as disableAccountRow,
  insertServiceAccount,
  lockServiceAccount,
  updateServiceAccountRow,
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

/** 403 unless the caller is an administrator or a member of the account's owner group (reads use it too). */
export async function requireAccountManager(db: Db, auth: Authority, account: ServiceAccountRow): Promise<void> {
  if (!auth.isAdmin && !(await isMember(db, account.owner_group_id, auth.principal.id))) {
    throw forbidden("only an administrator or a member of the service account's owner group may manage it");
  }
}

/** The owner group exists (404) and a non-admin caller belongs to it (403); locked against deletion. */
async function requireOwnerGroup(m: MutationContext, groupId: number): Promise<void> {
  const group = await shareLockGroup(m.tx, groupId);
  if (!group) throw notFound('owner group');
  if (!m.auth.isAdmin && !(await isMember(m.tx, groupId, m.auth.principal.id))) {
    throw forbidden('a service account can be owned only by a group you belong to');
  }
}

async function lockForWrite(m: MutationContext, id: number, ifMatch: string | undefined): Promise<ServiceAccountRow> {
  const before = await lockServiceAccount(m.tx, id);
  if (!before) throw notFound('service account');
  await requireAccountManager(m.tx, m.auth, before);
  requireMatch(ifMatch, KIND, id, before.revision);
  return before;
}

export async function createServiceAccount(m: MutationContext, v: NewServiceAccount): Promise<ServiceAccountRow> {
  await requireOwnerGroup(m, v.owner_group_id);
  const created = await insertServiceAccount(m.tx, {
    name: v.name,
    identityScope: v.identity_scope,
    description: v.description ?? '',
    ownerGroupId: v.owner_group_id,
    createdBy: m.auth.principal.id,
  });
  // COMMIT goes with the event, unless the account is disabled after it
  await appendEvent(m.tx, m.actor, serviceAccountEvent('created', created, null), v.disabled === true ? undefined : m.final);
  return v.disabled === true ? disableAccountRow(m.tx, m.actor, created) : created;
}

export async function updateServiceAccount(
  m: MutationContext,
  id: number,
  changes: ServiceAccountChanges,
  ifMatch?: string,
): Promise<Written<ServiceAccountRow>> {
  const before = await lockForWrite(m, id, ifMatch);
  if (changes.disabled === false && before.disabled_at !== null) throw badRequest('a disabled service account cannot be enabled again');
  const description = changes.description === undefined ? before.description : (changes.description ?? '');
  const ownerGroupId = changes.owner_group_id ?? before.owner_group_id;
  if (ownerGroupId !== before.owner_group_id) await requireOwnerGroup(m, ownerGroupId);
  const changed = description !== before.description || ownerGroupId !== before.owner_group_id;
  const disabling = changes.disabled === true && before.disabled_at === null;
  return skipWhenUnchanged(before, !changed && !disabling, async () => {
    let current = before;
    if (changed) {
      current = await updateServiceAccountRow(m.tx, id, { description, ownerGroupId });
      await appendEvent(m.tx, m.actor, serviceAccountEvent('updated', current, before), disabling ? undefined : m.final);
    }
    return disabling ? disableAccountRow(m.tx, m.actor, current) : current;
  });
}

/** Disables an account: its tokens are revoked and its queued tasks cancelled; unchanged when it already is. */
export async function disableServiceAccount(m: MutationContext, id: number, ifMatch?: string): Promise<Written<ServiceAccountRow>> {
  const before = await lockForWrite(m, id, ifMatch);
  return skipWhenUnchanged(before, before.disabled_at !== null, () => disableAccountRow(m.tx, m.actor, before));
}

export async function deleteServiceAccount(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  const before = await lockForWrite(m, id, ifMatch);
  await deletePrincipalRecorded(m, { entityType: KIND, label: 'service account' }, before, serviceAccountView(before), {
    owner_group_id: before.owner_group_id,
  });
}
