import type { Db, TransactionSql } from './sql.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import { tokenSnapshot, type TokenRow } from '../domain/views/tokens.ts';
import { appendEvent } from './events.ts';
import type { Actor } from '../domain/actor.ts';
import { type ServiceAccountRow, serviceAccountView } from '../domain/views/service-accounts.ts';

export const SERVICE_ACCOUNT_LIST: ListSpec = {
  fields: {
    id: { type: 'integer', column: 'p.id', notNull: true },
    name: { type: 'text', column: 'p.name', notNull: true },
    description: { type: 'text', column: 'sa.description', sortable: false },
    identity_scope: { type: 'text', column: 'p.identity_scope', notNull: true },
    owner_group_id: { type: 'integer', column: 'sa.owner_group_id', sortable: false },
    created_by: { type: 'integer', column: 'sa.created_by', sortable: false },
    disabled_at: { type: 'timestamp', column: 'sa.disabled_at', sortable: false },
    created_at: { type: 'timestamp', column: 'p.created_at', notNull: true },
    updated_at: { type: 'timestamp', column: 'p.updated_at', notNull: true },
    revision: { type: 'integer', column: 'p.revision', notNull: true },
  },
  defaultSort: [{ field: 'id', desc: false }],
};

const SELECT = (db: Db) =>
  db`p.id, p.name, sa.description, p.identity_scope, sa.owner_group_id, sa.created_by, sa.disabled_at,
    p.created_at, p.updated_at, p.revision`;

/** Lists accounts; `memberOf` (a principal id) limits them to accounts owned by that principal's groups. */
export function listServiceAccounts(db: Db, parsed: ParsedList, memberOf: number | null): Promise<ListPage<ServiceAccountRow>> {
  const where: Fragment[] = [];
  if (memberOf !== null) {
    where.push(db`sa.owner_group_id in (select gm.group_id from group_members gm where gm.principal_id = ${memberOf})` as Fragment);
  }
  return runList<ServiceAccountRow & Record<string, unknown>>(db, {
    from: db`principals p join service_accounts sa on sa.principal_id = p.id`,
    select: SELECT(db),
    where,
    parsed,
    spec: SERVICE_ACCOUNT_LIST,
  });
}

export async function findServiceAccount(db: Db, id: number): Promise<ServiceAccountRow | undefined> {
  const [row] = await db<ServiceAccountRow[]>`
    select ${SELECT(db)} from principals p join service_accounts sa on sa.principal_id = p.id where p.id = ${id}`;
  return row;
}

export async function lockServiceAccount(tx: TransactionSql, id: number): Promise<ServiceAccountRow | undefined> {
  const [row] = await tx<ServiceAccountRow[]>`
    select ${SELECT(tx)} from principals p join service_accounts sa on sa.principal_id = p.id where p.id = ${id}
    for update of p, sa`;
  return row;
}

export async function insertServiceAccount(
  tx: TransactionSql,
  s: { name: string; identityScope: string; description: string; ownerGroupId: number; createdBy: number | null },
): Promise<ServiceAccountRow> {
  const [p] = await tx<{ id: number }[]>`
    insert into principals (kind, name, identity_scope) values ('service_account', ${s.name}, ${s.identityScope}) returning id`;
  await tx`
    insert into service_accounts (principal_id, description, owner_group_id, created_by)
    values (${p!.id}, ${s.description}, ${s.ownerGroupId}, ${s.createdBy})`;
  return (await findServiceAccount(tx, p!.id))!;
}

export async function updateServiceAccountRow(
  tx: TransactionSql,
  id: number,
  s: { description: string; ownerGroupId: number },
): Promise<ServiceAccountRow> {
  await tx`update service_accounts set description = ${s.description}, owner_group_id = ${s.ownerGroupId} where principal_id = ${id}`;
  await tx`update principals set updated_at = now(), revision = revision + 1 where id = ${id}`;
  return (await findServiceAccount(tx, id))!;
}

export interface DisableOutcome {
  account: ServiceAccountRow;
  /** Each token revoked now, before and after. */
  revokedTokens: { before: TokenRow; after: TokenRow }[];
  cancelledTaskIds: number[];
}

/**
 * Disables an account: sets disabled_at, soft-revokes every unrevoked token and cancels its
 * queued tasks (running tasks are left to finish). The caller holds the account's row lock.
 */
async function disableServiceAccountRow(tx: TransactionSql, id: number): Promise<DisableOutcome> {
  await tx`update service_accounts set disabled_at = now() where principal_id = ${id}`;
  await tx`update principals set updated_at = now(), revision = revision + 1 where id = ${id}`;
  const before = await tx<TokenRow[]>`
    select id, principal_id, name, description, issued, expires_at, last_used_at, revoked_at, scope, renewed_from_token_id, revision
    from tokens where principal_id = ${id} and revoked_at is null order by id for update`;
  const after = await tx<TokenRow[]>`
    update tokens set revoked_at = now(), revision = revision + 1
    where id = any(${before.map((t) => t.id)}::int[])
    returning id, principal_id, name, description, issued, expires_at, last_used_at, revoked_at, scope, renewed_from_token_id, revision`;
  const afterById = new Map(after.map((t) => [t.id, t]));
  const tasks = await tx<{ id: number }[]>`
    update tasks set status = 'cancelled', finished_at = now(), updated_at = now()
    where submitted_by = ${id} and status = 'queued'
    returning id`;
  if (tasks.length > 0) {
    await tx`
      insert into task_events (task_id, event_type, message)
      select unnest(${tasks.map((r) => r.id)}::int[]), 'cancelled', 'cancelled because the submitting service account was disabled'`;
  }
  return {
    account: (await findServiceAccount(tx, id))!,
    revokedTokens: before.map((b) => ({ before: b, after: afterById.get(b.id)! })),
    cancelledTaskIds: tasks.map((r) => r.id).sort((a, b) => a - b),
  };
}

/**
 * Disables an account (the caller holds its row lock) with the events of the disable API: the
 * account's, one per revoked token and one per cancelled queued task. Returns the disabled account.
 */
export async function disableServiceAccount(tx: TransactionSql, actor: Actor, before: ServiceAccountRow): Promise<ServiceAccountRow> {
  const { account: after, revokedTokens, cancelledTaskIds } = await disableServiceAccountRow(tx, before.id);
  await appendEvent(tx, actor, {
    entityType: 'service_account',
    entityId: after.id,
    entityName: after.name,
    action: 'disabled',
    summary: `service account ${after.name} disabled`,
    before: serviceAccountView(before),
    after: serviceAccountView(after),
    beforeRevision: before.revision,
    afterRevision: after.revision,
    metadata: {
      owner_group_id: after.owner_group_id,
      revoked_token_ids: revokedTokens.map((r) => r.after.id),
      cancelled_task_ids: cancelledTaskIds,
    },
  });
  for (const t of revokedTokens) {
    await appendEvent(tx, actor, {
      entityType: 'token',
      entityId: t.after.id,
      entityName: t.after.name,
      action: 'revoked',
      summary: 'token revoked (service account disabled)',
      before: tokenSnapshot(t.before),
      after: tokenSnapshot(t.after),
      beforeRevision: t.before.revision,
      afterRevision: t.after.revision,
      metadata: { principal_id: after.id, via: 'service_account_disabled' },
    });
  }
  for (const taskId of cancelledTaskIds) {
    await appendEvent(tx, actor, {
      entityType: 'task',
      entityId: taskId,
      action: 'cancelled',
      summary: 'queued task cancelled because its service account was disabled',
      before: { id: taskId, status: 'queued' },
      after: { id: taskId, status: 'cancelled' },
      metadata: { submitted_by: after.id, reason: 'service_account_disabled' },
    });
  }
  return after;
}
