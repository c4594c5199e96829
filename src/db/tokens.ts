import type { Db, TransactionSql } from './sql.ts';
import { runList, type Fragment, type ListPage } from './list.ts';
import { eventPerRowCte, isoTimeText, markWritten } from './events.ts';
import { notFinal, type Final } from './tx.ts';
import type { Actor } from '../domain/actor.ts';
import type { NewEvent } from '../domain/new-event.ts';
import type { ListSpec, ParsedList } from '../domain/list-query.ts';
import type { PrincipalKind } from '../domain/principals.ts';
import type { ValidatedTokenRow } from '../domain/tokens.ts';
import type { TokenScopeValue } from '../domain/scope.ts';
import { type TokenRow, type TokenView } from '../domain/views/tokens.ts';

export type { TokenScopeValue } from '../domain/scope.ts';

/**
 * Finds the token with this hash and, in the same statement, checks every validation rule
 * (not revoked; unexpired, or for a legacy row without expires_at issued within the default
 * lifetime; owner not a disabled service account) and advances last_used_at.
 */
export async function validateTokenHash(
  db: Db,
  hash: Buffer,
  legacyLifetimeHours: number,
  admin: { group: string; scope: string },
): Promise<ValidatedTokenRow | undefined> {
  const [row] = await db<ValidatedTokenRow[]>`
    with t as (
      update tokens set last_used_at = now()
      where token_hash = ${hash}
        and revoked_at is null
        and coalesce(expires_at, issued + make_interval(hours => ${legacyLifetimeHours})) > now()
        and not exists (
          select 1 from service_accounts sa where sa.principal_id = tokens.principal_id and sa.disabled_at is not null)
      returning id, principal_id, name, description, issued, expires_at, last_used_at, revision, scope
    )
    select t.id as token_id, t.name as token_name, t.description as token_description, t.issued, t.expires_at,
      t.last_used_at, t.revision as token_revision, t.scope,
      p.id as principal_id, p.kind, p.name, p.identity_scope, p.created_at, p.updated_at, p.revision,
      exists (select 1 from group_members gm join groups g on g.id = gm.group_id
              where gm.principal_id = p.id and g.name = ${admin.group} and g.identity_scope = ${admin.scope}) as is_admin
    from t join principals p on p.id = t.principal_id`;
  return row;
}

/** A token to insert (its hash; the raw value is never stored). */
export interface NewToken {
  /** The id when reserved (reserveId); else the insert gives it. */
  id?: number;
  principalId: number;
  hash: Buffer;
  name?: string | null;
  description?: string | null;
  expiresAt: Date;
  scope?: TokenScopeValue | null;
  renewedFrom?: number | null;
}

/** The insert of a token, returning its row. */
function tokenInsert(db: Db, t: NewToken): Fragment {
  return db`
    insert into tokens (${t.id === undefined ? db`` : db`id, `}principal_id, token_hash, name, description, expires_at, scope,
      renewed_from_token_id)
    values (${t.id === undefined ? db`` : db`${t.id}::int, `}${t.principalId}::int, ${t.hash}, ${t.name ?? null},
      ${t.description ?? null}, ${t.expiresAt}, ${t.scope ? db.json(t.scope as never) : null}, ${t.renewedFrom ?? null}::int)
    returning id, principal_id, name, description, issued, expires_at, last_used_at, revoked_at, scope, renewed_from_token_id,
      revision` as Fragment;
}

/**
 * Inserts a token and appends its `created` (or `renewed`) audit event in one statement: the event's
 * entity_id is the new token's id, and its `after` snapshot (`event.after`, a snapshot of the token
 * before the insert, as tokenSnapshot builds it) gets the token's id and issued time from the insert
 * (ISO 8601 UTC, milliseconds). Returns the stored row.
 */
export async function insertTokenWithEvent(
  tx: TransactionSql,
  actor: Actor,
  t: NewToken,
  event: NewEvent,
  final: Final = notFinal,
): Promise<TokenRow> {
  const [row] = await final(tx<TokenRow[]>`
    with r as (${tokenInsert(tx, t)})${eventPerRowCte(tx, actor, 'r', event, {
      afterPatch: tx`jsonb_build_object('id', r.id, 'issued', ${tx.unsafe(isoTimeText('r.issued'))})` as Fragment,
      entityId: tx`r.id` as Fragment,
    })}
    select * from r`);
  markWritten(tx, event);
  return row!;
}

/** Inserts a token without an event (test fixtures; every write of the service records one: insertTokenWithEvent). */
export async function insertToken(db: Db, t: NewToken): Promise<TokenRow> {
  const [row] = await db<TokenRow[]>`${tokenInsert(db, t)}`;
  return row!;
}

/**
 * The select list of a token view over alias `t` (legacy rows without expires_at expire
 * legacyLifetimeHours after issue, as in validation).
 */
export function tokenViewSelect(db: Db, legacyLifetimeHours: number) {
  const effective = db`coalesce(t.expires_at, t.issued + make_interval(hours => ${legacyLifetimeHours}))`;
  return db`t.id, t.principal_id, t.name, t.description, t.issued, t.expires_at, t.last_used_at, t.revoked_at, t.scope,
    t.renewed_from_token_id, t.revision,
    (${effective} <= now()) as expired,
    (t.revoked_at is null and ${effective} > now() and not exists (
      select 1 from service_accounts sa where sa.principal_id = t.principal_id and sa.disabled_at is not null)) as active`;
}

/** The condition of a token list `state` over alias `t`. */
export function tokenStateWhere(db: Db, state: TokenState, legacyLifetimeHours: number) {
  const effective = db`coalesce(t.expires_at, t.issued + make_interval(hours => ${legacyLifetimeHours}))`;
  switch (state) {
    case 'active':
      return db`t.revoked_at is null and ${effective} > now() and not exists (
        select 1 from service_accounts sa where sa.principal_id = t.principal_id and sa.disabled_at is not null)`;
    case 'expired':
      return db`${effective} <= now()`;
    case 'revoked':
      return db`t.revoked_at is not null`;
    default:
      return db`true`;
  }
}

/** The list query language on a principal's tokens (listPrincipalTokens; `state` is its extra parameter). */
export const TOKEN_LIST_SPEC: ListSpec = {
  fields: {
    id: { type: 'integer', column: 't.id' },
    name: { type: 'text', column: 't.name' },
    issued: { type: 'timestamp', column: 't.issued' },
    expires_at: { type: 'timestamp', column: 't.expires_at' },
    last_used_at: { type: 'timestamp', column: 't.last_used_at' },
  },
  defaultSort: [{ field: 'issued', desc: true }],
  extraParams: ['state'],
};

export const TOKEN_STATES = ['active', 'expired', 'revoked', 'all'] as const;
export type TokenState = (typeof TOKEN_STATES)[number];

/** One page of principal `principalId`'s tokens in `state`. */
export function listTokensOfPrincipal(
  db: Db,
  principalId: number,
  state: TokenState,
  legacyLifetimeHours: number,
  parsed: ParsedList,
): Promise<ListPage<TokenView & Record<string, unknown>>> {
  return runList<TokenView & Record<string, unknown>>(db, {
    from: db`tokens t`,
    select: tokenViewSelect(db, legacyLifetimeHours),
    where: [db`t.principal_id = ${principalId}`, tokenStateWhere(db, state, legacyLifetimeHours)],
    parsed,
    spec: TOKEN_LIST_SPEC,
  });
}

/** The token `tokenId` of principal `principalId` (404 material when absent); `lock` takes a row lock. */
export async function getTokenOfPrincipal(
  db: Db,
  principalId: number,
  tokenId: number,
  legacyLifetimeHours: number,
  lock = false,
): Promise<TokenView | undefined> {
  const [row] = lock
    ? await db<TokenView[]>`select ${tokenViewSelect(db, legacyLifetimeHours)} from tokens t
        where t.id = ${tokenId} and t.principal_id = ${principalId} for update of t`
    : await db<TokenView[]>`select ${tokenViewSelect(db, legacyLifetimeHours)} from tokens t
        where t.id = ${tokenId} and t.principal_id = ${principalId}`;
  return row;
}

/** The token with this hash, locked. */
export async function lockTokenByHash(db: Db, hash: Buffer, legacyLifetimeHours: number): Promise<TokenView | undefined> {
  const [row] = await db<TokenView[]>`select ${tokenViewSelect(db, legacyLifetimeHours)} from tokens t
    where t.token_hash = ${hash} for update of t`;
  return row;
}

/** The token with this id, locked. */
export async function lockToken(db: Db, tokenId: number, legacyLifetimeHours: number): Promise<TokenView | undefined> {
  const [row] = await db<TokenView[]>`select ${tokenViewSelect(db, legacyLifetimeHours)} from tokens t
    where t.id = ${tokenId} for update of t`;
  return row;
}

/**
 * Soft-revokes one token and appends `event`, its audit event, in one statement: the event's `after`
 * snapshot gets the revocation's time as its revoked_at (ISO 8601 UTC, milliseconds, as isoTime
 * writes it). False when it was revoked already: nothing is written.
 */
export async function revokeTokenWithEvent(
  tx: TransactionSql,
  actor: Actor,
  tokenId: number,
  event: NewEvent,
  final: Final = notFinal,
): Promise<boolean> {
  const [row] = await final(tx<{ n: number }[]>`
    with r as (
      update tokens set revoked_at = now(), revision = revision + 1 where id = ${tokenId}::int and revoked_at is null returning revoked_at
    )${eventPerRowCte(tx, actor, 'r', event, {
      afterPatch: tx`jsonb_build_object('revoked_at', ${tx.unsafe(isoTimeText('r.revoked_at'))})` as Fragment,
    })}
    select count(*)::int as n from r`);
  const changed = row!.n > 0;
  if (changed) markWritten(tx, event);
  return changed;
}

/** Locks and returns every unrevoked token of a principal (oldest first). */
export async function lockUnrevokedTokens(db: Db, principalId: number): Promise<TokenRow[]> {
  return db<TokenRow[]>`
    select id, principal_id, name, description, issued, expires_at, last_used_at, revoked_at, scope, renewed_from_token_id, revision
    from tokens where principal_id = ${principalId} and revoked_at is null order by id for update`;
}

/** Who owns tokens: the principal, its kind, and for a service account its owner group and state. */
export interface TokenOwner {
  id: number;
  kind: PrincipalKind;
  name: string;
  owner_group_id: number | null;
  disabled_at: Date | null;
  /** Whether `callerId` is a member of the service account's owner group. */
  caller_in_owner_group: boolean;
}

export async function findTokenOwner(db: Db, principalId: number, callerId: number, lock = false): Promise<TokenOwner | undefined> {
  const [row] = lock
    ? await db<TokenOwner[]>`
        select p.id, p.kind, p.name, sa.owner_group_id, sa.disabled_at,
          exists (select 1 from group_members gm where gm.group_id = sa.owner_group_id and gm.principal_id = ${callerId})
            as caller_in_owner_group
        from principals p left join service_accounts sa on sa.principal_id = p.id
        where p.id = ${principalId} for share of p`
    : await db<TokenOwner[]>`
        select p.id, p.kind, p.name, sa.owner_group_id, sa.disabled_at,
          exists (select 1 from group_members gm where gm.group_id = sa.owner_group_id and gm.principal_id = ${callerId})
            as caller_in_owner_group
        from principals p left join service_accounts sa on sa.principal_id = p.id
        where p.id = ${principalId}`;
  return row;
}

/** The scope resources (of a validated scope) that do not exist. */
export async function missingScopeResources(db: Db, resources: { kind: string; id: number }[]): Promise<{ kind: string; id: number }[]> {
  if (resources.length === 0) return [];
  return db<{ kind: string; id: number }[]>`
    select r.kind, r.id
    from unnest(${resources.map((r) => r.kind)}::text[], ${resources.map((r) => r.id)}::int[]) with ordinality as r(kind, id, n)
    where not case r.kind
      when 'collection' then exists (select 1 from collections c where c.id = r.id)
      when 'class' then exists (select 1 from classes k where k.id = r.id)
      when 'object' then exists (select 1 from objects o where o.id = r.id)
      else false end
    order by r.n`;
}

/**
 * Locks up to `batch` tokens whose terminal time (the earlier of revocation and effective expiry)
 * is older than `cutoff`, skipping rows locked by others.
 */
export async function lockPurgeableTokens(db: Db, cutoff: Date, legacyLifetimeHours: number, batch: number): Promise<TokenRow[]> {
  return db<TokenRow[]>`
    select id, principal_id, name, description, issued, expires_at, last_used_at, revoked_at, scope, renewed_from_token_id, revision
    from tokens t
    where least(t.revoked_at, coalesce(t.expires_at, t.issued + make_interval(hours => ${legacyLifetimeHours})))
      < ${cutoff.toISOString()}::text::timestamptz
    order by t.id
    limit ${batch}
    for update skip locked`;
}

export async function deleteTokens(db: Db, ids: number[]): Promise<void> {
  if (ids.length) await db`delete from tokens where id = any(${ids}::int[])`;
}

/**
 * Writes batched token uses (services/token-cache.ts): each token's last_used_at becomes the later
 * of its stored value and the use given (uses reach here out of order across processes).
 */
export async function recordTokenUses(db: Db, uses: { id: number; at: Date }[]): Promise<void> {
  if (uses.length === 0) return;
  await db`
    update tokens t set last_used_at = u.at_text::timestamptz
    from unnest(${uses.map((u) => u.id)}::int[], ${uses.map((u) => u.at.toISOString())}::text[]) as u(id, at_text)
    where t.id = u.id and (t.last_used_at is null or t.last_used_at < u.at_text::timestamptz)`;
}
