import type { Db, TransactionSql } from './sql.ts';
import { appendEvent } from './events.ts';
import { withTx } from './tx.ts';
import { actorOf, authOf, type Ctx } from '../http/contract.ts';
import { ApiError } from '../http/errors.ts';
import { hashToken } from '../domain/token-secret.ts';
import {
  APPROVAL_ID,
  APPROVAL_TTL_SECONDS,
  approvalTargets,
  operationHash,
  type ApprovalKind,
  type ApprovalOperation,
} from '../domain/credential-approval.ts';

export const APPROVAL_HEADER = 'x-svc-credential-approval';

export interface ApprovalRow {
  id: number;
  kind: ApprovalKind;
  approved_by: number;
  token_id: number;
  target_principal_id: number | null;
  target_token_id: number | null;
  target_restore_id: number | null;
  token_expires_at: Date | null;
  created_at: Date;
  expires_at: Date;
  consumed_at: Date | null;
}

export const reauthenticationRequired = (detail = 'a fresh credential approval for exactly this request is required') =>
  new ApiError(403, detail, {
    reason: 'reauthentication_required',
    guidance:
      'POST /api/v1/iam/credential-approvals with your password and this operation, then repeat this request ' +
      'with the same bearer token, the same body and header X-Svc-Credential-Approval within 120 seconds',
  });

/**
 * Consumes the credential approval that authorizes this request, or throws 403 with
 * `reason: "reauthentication_required"`.
 *
 *   consumeApproval(tx, ctx, input.headers, expected): Promise<ApprovalRow>
 *
 * - `tx`: the transaction of the approved mutation (call it inside your withTx, before the
 *   write): if the mutation fails and rolls back, the approval stays unused.
 * - `input.headers`: the request headers (lowercased names, as in Input); the approval id is read
 *   from `X-Svc-Credential-Approval`.
 * - `expected`: the operation exactly as a client names it in `CredentialApprovalRequest.operation`,
 *   built from the later request: path ids from input.params and the body exactly as received
 *   (input.body, not a normalized copy). For example
 *     `{kind: 'create_user', user: input.body}`
 *     `{kind: 'update_user', user_id: input.params.user_id, user: input.body}`
 *     `{kind: 'import_credentials', import: input.body}`
 *     `{kind: 'confirm_restore', restore_id: input.params.restore_id, confirmation: input.body}`
 *
 * The approval must exist, be unused and unexpired (at most 120 s old), have been created by the
 * calling principal with the same bearer token, and match `expected` (kind, ids and body, compared
 * as canonical JSON). On success it is marked consumed and a `credential_approval.consumed` event is
 * appended in the same transaction. The returned row carries `token_expires_at` for token kinds.
 */
export async function consumeApproval(
  tx: TransactionSql,
  ctx: Ctx,
  headers: Record<string, string | undefined>,
  expected: ApprovalOperation,
): Promise<ApprovalRow> {
  const auth = authOf(ctx);
  const raw = headers[APPROVAL_HEADER]?.trim();
  if (!raw) throw reauthenticationRequired('this request needs header X-Svc-Credential-Approval naming a fresh credential approval');
  if (!APPROVAL_ID.test(raw))
    throw reauthenticationRequired('the credential approval is missing, expired, used or does not match this request');
  const [row] = await tx<ApprovalRow[]>`
    update credential_approvals set consumed_at = now()
    where approval_hash = ${hashToken(ctx.deps.tokenKey, raw)}
      and consumed_at is null
      and expires_at > now()
      and approved_by = ${auth.principal.id}
      and token_id = ${auth.token.id}
      and kind = ${expected.kind}
      and operation_hash = ${operationHash(expected)}
    returning id, kind, approved_by, token_id, target_principal_id, target_token_id, target_restore_id,
      token_expires_at, created_at, expires_at, consumed_at`;
  if (!row) throw reauthenticationRequired('the credential approval is missing, expired, used or does not match this request');
  await appendEvent(tx, actorOf(ctx), {
    entityType: 'credential_approval',
    entityId: row.id,
    entityName: row.kind,
    action: 'consumed',
    summary: `credential approval for ${row.kind} used`,
    after: approvalSnapshot(row),
    metadata: { approval_kind: row.kind, principal_id: auth.principal.id },
  });
  return row;
}

/** Stores a new approval and its `credential_approval.created` event; returns the row. */
export async function insertApproval(
  db: Db,
  ctx: Ctx,
  a: { raw: string; operation: ApprovalOperation; tokenExpiresAt: Date | null },
): Promise<ApprovalRow> {
  const auth = authOf(ctx);
  const targets = approvalTargets(a.operation);
  return withTx(db, async (tx) => {
    const [row] = await tx<ApprovalRow[]>`
      insert into credential_approvals (approval_hash, kind, approved_by, token_id, target_principal_id, target_token_id,
        target_restore_id, operation_hash, token_expires_at, expires_at)
      values (${hashToken(ctx.deps.tokenKey, a.raw)}, ${a.operation.kind}, ${auth.principal.id}, ${auth.token.id},
        ${targets.principalId}, ${targets.tokenId}, ${targets.restoreId}, ${operationHash(a.operation)}, ${a.tokenExpiresAt},
        now() + make_interval(secs => ${APPROVAL_TTL_SECONDS}))
      returning id, kind, approved_by, token_id, target_principal_id, target_token_id, target_restore_id,
        token_expires_at, created_at, expires_at, consumed_at`;
    await appendEvent(tx, actorOf(ctx), {
      entityType: 'credential_approval',
      entityId: row!.id,
      entityName: row!.kind,
      action: 'created',
      summary: `credential approval for ${row!.kind} granted after password re-authentication`,
      after: approvalSnapshot(row!),
      metadata: { approval_kind: row!.kind, principal_id: auth.principal.id },
    });
    return row!;
  });
}

/** The approval with this raw id, if it was created by this principal. */
export async function findApproval(db: Db, key: Buffer, raw: string, principalId: number): Promise<ApprovalRow | undefined> {
  const [row] = await db<ApprovalRow[]>`
    select id, kind, approved_by, token_id, target_principal_id, target_token_id, target_restore_id,
      token_expires_at, created_at, expires_at, consumed_at
    from credential_approvals
    where approval_hash = ${hashToken(key, raw)} and approved_by = ${principalId}`;
  return row;
}

/** Deletes approvals that expired before `before` (housekeeping by the token purge worker). */
export async function deleteExpiredApprovals(db: Db, before: Date, limit: number): Promise<number> {
  const rows = await db`
    delete from credential_approvals
    where id in (select id from credential_approvals where expires_at < ${before} order by id limit ${limit})
    returning id`;
  return rows.length;
}

/** The audit snapshot of an approval: never the approval id, the password or the approved body. */
export function approvalSnapshot(r: ApprovalRow): Record<string, unknown> {
  return {
    id: r.id,
    kind: r.kind,
    approved_by: r.approved_by,
    token_id: r.token_id,
    target_principal_id: r.target_principal_id,
    target_token_id: r.target_token_id,
    target_restore_id: r.target_restore_id,
    token_expires_at: r.token_expires_at,
    created_at: r.created_at,
    expires_at: r.expires_at,
    consumed_at: r.consumed_at,
  };
}

/** The password hash of a human (null when none is set or the principal is not a human). */
export async function findUserPasswordHash(db: Db, principalId: number): Promise<string | null> {
  const [row] = await db<{ password_hash: string | null }[]>`select password_hash from users where principal_id = ${principalId}`;
  return row?.password_hash ?? null;
}

export async function userExists(db: Db, principalId: number): Promise<boolean> {
  const [row] = await db<{ id: number }[]>`
    select p.id from principals p join users u on u.principal_id = p.id where p.id = ${principalId}`;
  return !!row;
}
