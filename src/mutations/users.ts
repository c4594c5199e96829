// Users: the one write path of a human user, for the API and the import worker alike. A user an
// identity provider manages is read-only here. A password arrives in plain text from the API
// (hashed here, after the caller's credential approval) or hashed from an import (hashed when the
// import was submitted; the same hash again is no change).
import { forbidden, notFound } from '../domain/errors.ts';
import { hashPassword } from '../domain/passwords.ts';
import { reserveId } from '../db/events.ts';
import type { TransactionSql } from '../db/sql.ts';
import { findUserPasswordHash } from '../db/approvals.ts';
import { insertUser, lockUser, updateUser as updateUserRow } from '../db/users.ts';
import { userCreatedEvent, userUpdatedEvent, userView, type UserRow } from '../domain/views/users.ts';
import { deletePrincipalRecorded } from './principals.ts';
import { requireMatch, skipWhenUnchanged, type MutationContext, type Written } from './context.ts';

const KIND = 'user';

const providerManaged = () => forbidden('this user is managed by an identity provider and is read-only here');

export type PasswordInput = { plain: string } | { hash: string };

/**
 * Runs in the mutation's transaction right before a given password is used: the API consumes the
 * caller's credential approval there.
 */
export type ApprovePassword = (tx: TransactionSql) => Promise<unknown>;

export interface NewUser {
  name: string;
  identity_scope: string;
  email?: string | null;
  proper_name?: string | null;
  password?: PasswordInput;
}

/** Members to change; an omitted member keeps its value. */
export interface UserChanges {
  email?: string | null;
  proper_name?: string | null;
  password?: PasswordInput;
}

/** The hash to store for a given password; null when none is given or it is the stored one. */
async function passwordHashOf(m: MutationContext, userId: number | null, p: PasswordInput | undefined) {
  if (p === undefined) return null;
  if ('plain' in p) return hashPassword(p.plain);
  if (userId !== null && p.hash === (await findUserPasswordHash(m.tx, userId))) return null;
  return p.hash;
}

async function lockForWrite(m: MutationContext, id: number, ifMatch: string | undefined): Promise<{ before: UserRow; now: Date }> {
  const locked = await lockUser(m.tx, id);
  if (!locked) throw notFound('user');
  if (locked.provider_managed) throw providerManaged();
  requireMatch(ifMatch, KIND, id, locked.revision);
  const { svc_now: now, ...before } = locked;
  return { before, now };
}

/**
 * `password_set` in the event says whether the user can log in with a password. The user's id and
 * created_at are reserved beside the credential approval's consumption; the two rows and the event
 * are one statement (with COMMIT).
 */
export async function createUser(m: MutationContext, v: NewUser, approve?: ApprovePassword): Promise<UserRow> {
  const reserved = reserveId(m.tx, 'principals');
  reserved.catch(() => undefined); // awaited below, after the approval and the password
  if (v.password !== undefined) await approve?.(m.tx);
  const passwordHash = await passwordHashOf(m, null, v.password);
  const { id, now } = await reserved;
  const created: UserRow = {
    id,
    name: v.name,
    identity_scope: v.identity_scope,
    proper_name: v.proper_name ?? null,
    email: v.email ?? null,
    created_at: now,
    updated_at: now,
    revision: 1,
    provider_managed: false,
  };
  await insertUser(m.tx, m.actor, created, passwordHash, [userCreatedEvent(created, { password_set: passwordHash !== null })], m.final);
  return created;
}

/**
 * Two round trips (the lock, with a new password's approval beside it; the change with its event
 * and COMMIT), and a new password's hashing between them.
 */
export async function updateUser(
  m: MutationContext,
  id: number,
  changes: UserChanges,
  ifMatch?: string,
  approve?: ApprovePassword,
): Promise<Written<UserRow>> {
  // the lock and a password's approval go out together (one round trip); the lock decides first
  const locking = lockForWrite(m, id, ifMatch);
  const approved = changes.password === undefined ? undefined : approve?.(m.tx);
  approved?.catch(() => undefined); // awaited below, after the lock
  const { before, now } = await locking;
  await approved;
  const passwordHash = await passwordHashOf(m, id, changes.password);
  const email = changes.email === undefined ? before.email : changes.email;
  const properName = changes.proper_name === undefined ? before.proper_name : changes.proper_name;
  const same = passwordHash === null && email === before.email && properName === before.proper_name;
  return skipWhenUnchanged(before, same, async () => {
    const after: UserRow = Object.assign({}, before, { email, proper_name: properName, updated_at: now, revision: before.revision + 1 });
    await updateUserRow(m.tx, m.actor, after, passwordHash, [userUpdatedEvent(before, after, passwordHash !== null)], m.final);
    return after;
  });
}

/** Deletes a user; its profile, memberships, tokens and settings go with it. */
export async function deleteUser(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  await deletePrincipalRecorded(
    m,
    { entityType: KIND, label: 'user' },
    id,
    async () => (await lockForWrite(m, id, ifMatch)).before,
    userView,
  );
}
