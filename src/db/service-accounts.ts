import type { Db, TransactionSql } from './sql.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import { tokenSnapshot, type TokenRow } from '../domain/views/tokens.ts';
import { EVENTS_IN_STATEMENT, appendMany, eventsCte } from './events.ts';
import { writePrincipalWithEvents } from './principals.ts';
import { notFinal, type Final } from './tx.ts';
import type { NewEvent } from '../domain/new-event.ts';
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

/** The account locked for a write, with the transaction's now() (the updated_at of the write). */
export async function lockServiceAccount(tx: TransactionSql, id: number): Promise<(ServiceAccountRow & { svc_now: Date }) | undefined> {
  const [row] = await tx<(ServiceAccountRow & { svc_now: Date })[]>`
    select ${SELECT(tx)}, now() as svc_now from principals p join service_accounts sa on sa.principal_id = p.id where p.id = ${id}
    for update of p, sa`;
  return row;
}

/** Whether `principalId` belongs to the owner group of the account `id` (false when there is no such account). */
export async function managesAccount(db: Db, id: number, principalId: number): Promise<boolean> {
  const rows = await db`
    select 1 from service_accounts sa join group_members gm on gm.group_id = sa.owner_group_id
    where sa.principal_id = ${id} and gm.principal_id = ${principalId}`;
  return rows.length > 0;
}

/** Inserts the account `a` (its id and times reserved: reserveId) with `events`, in one statement. */
export function insertServiceAccount(
  tx: TransactionSql,
  actor: Actor,
  a: ServiceAccountRow,
  events: NewEvent[],
  final?: Final,
): Promise<void> {
  const profile = tx`insert into service_accounts (principal_id, description, owner_group_id, created_by)
    select p.id, ${a.description}, ${a.owner_group_id}::int, ${a.created_by}::int from p` as Fragment;
  return writePrincipalWithEvents(tx, actor, Object.assign({}, a, { kind: 'service_account' as const }), profile, events, final);
}

/** Writes the description and owner of `a` over its locked account (updated_at now(), the revision one up) with `events`, in one statement. */
export function updateServiceAccount(
  tx: TransactionSql,
  actor: Actor,
  a: ServiceAccountRow,
  events: NewEvent[],
  final?: Final,
): Promise<void> {
  const profile = tx`update service_accounts set description = ${a.description}, owner_group_id = ${a.owner_group_id}::int
    where principal_id = ${a.id}::int` as Fragment;
  return writePrincipalWithEvents(tx, actor, a.id, profile, events, final);
}

/**
 * What a disable changes besides the account (the caller holds its lock): its unrevoked tokens and
 * its queued tasks, locked (a worker claims no queued task locked here). Read in one round trip,
 * behind the account's lock when sent with it.
 */
export interface DisableTargets {
  tokens: TokenRow[];
  taskIds: number[];
}

export async function lockDisableTargets(tx: TransactionSql, id: number): Promise<DisableTargets> {
  const tokens = lockTokensOf(tx, id);
  const tasks = lockQueuedTasksOf(tx, id);
  tasks.catch(() => undefined); // awaited below
  return { tokens: await tokens, taskIds: (await tasks).map((r) => r.id) };
}

async function lockTokensOf(tx: TransactionSql, id: number): Promise<TokenRow[]> {
  return await tx<TokenRow[]>`
    select id, principal_id, name, description, issued, expires_at, last_used_at, revoked_at, scope, renewed_from_token_id, revision
    from tokens where principal_id = ${id}::int and revoked_at is null order by id for update`;
}

async function lockQueuedTasksOf(tx: TransactionSql, id: number): Promise<{ id: number }[]> {
  return await tx<{ id: number }[]>`
    select id from tasks where submitted_by = ${id}::int and status = 'queued' order by id for update`;
}

/**
 * Disables an account (the caller holds its row lock; `now` is the transaction's now(), as the lock
 * read it): sets disabled_at, soft-revokes `targets.tokens` and cancels `targets.taskIds` (running
 * tasks are left to finish), with the events of the disable API: the account's, one per revoked
 * token and one per cancelled task, in one statement (`final`: COMMIT goes with it; more events than
 * a statement takes go in statements of their own after it). Returns the disabled account.
 */
export async function disableServiceAccount(
  tx: TransactionSql,
  actor: Actor,
  before: ServiceAccountRow,
  now: Date,
  targets: DisableTargets,
  final: Final = notFinal,
): Promise<ServiceAccountRow> {
  const after: ServiceAccountRow = Object.assign({}, before, { disabled_at: now, updated_at: now, revision: before.revision + 1 });
  const tokenIds = targets.tokens.map((t) => t.id);
  const taskIds = [...targets.taskIds].sort((a, b) => a - b);
  const events: NewEvent[] = [
    {
      entityType: 'service_account',
      entityId: after.id,
      entityName: after.name,
      action: 'disabled',
      summary: `service account ${after.name} disabled`,
      before: serviceAccountView(before),
      after: serviceAccountView(after),
      beforeRevision: before.revision,
      afterRevision: after.revision,
      metadata: { owner_group_id: after.owner_group_id, revoked_token_ids: tokenIds, cancelled_task_ids: taskIds },
    },
    ...targets.tokens.map((t): NewEvent => ({
      entityType: 'token',
      entityId: t.id,
      entityName: t.name,
      action: 'revoked',
      summary: 'token revoked (service account disabled)',
      before: tokenSnapshot(t),
      after: tokenSnapshot(Object.assign({}, t, { revoked_at: now, revision: t.revision + 1 })),
      beforeRevision: t.revision,
      afterRevision: t.revision + 1,
      metadata: { principal_id: after.id, via: 'service_account_disabled' },
    })),
    ...taskIds.map((taskId): NewEvent => ({
      entityType: 'task',
      entityId: taskId,
      action: 'cancelled',
      summary: 'queued task cancelled because its service account was disabled',
      before: { id: taskId, status: 'queued' },
      after: { id: taskId, status: 'cancelled' },
      metadata: { submitted_by: after.id, reason: 'service_account_disabled' },
    })),
  ];
  const fits = events.length <= EVENTS_IN_STATEMENT;
  await (fits ? final : notFinal)(tx`
    with sa as (
      update service_accounts set disabled_at = now() where principal_id = ${after.id}::int
    ), p as (
      update principals set updated_at = now(), revision = revision + 1 where id = ${after.id}::int returning id
    ), t as (
      update tokens set revoked_at = now(), revision = revision + 1 where id = any(${tokenIds}::int[])
    ), k as (
      update tasks set status = 'cancelled', finished_at = now(), updated_at = now() where id = any(${taskIds}::int[])
    ), te as (
      insert into task_events (task_id, event_type, message)
      select unnest(${taskIds}::int[]), 'cancelled', 'cancelled because the submitting service account was disabled'
    )${eventsCte(tx, actor, fits ? events : [])}
    select 1 from p`);
  if (!fits) await appendMany(tx, actor, events);
  return after;
}
