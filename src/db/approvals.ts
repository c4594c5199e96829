import type { Db, TransactionSql } from './sql.ts';
import { appendEvent, eventPerRowCte, isoTimeText, markWritten } from './events.ts';
import type { Fragment } from './list.ts';
import type { Actor } from '../domain/actor.ts';
import { withTx } from './tx.ts';
import { hashToken } from '../domain/token-secret.ts';
import {
  APPROVAL_ID,
  APPROVAL_TTL_SECONDS,
  approvalTargets,
  operationHash,
  reauthenticationRequired,
  type ApprovalOperation,
} from '../domain/credential-approval.ts';
import { type ApprovalRow, approvalSnapshot } from '../domain/views/approvals.ts';
import type { NewEvent } from '../domain/new-event.ts';

/** Who asks for an approval or presents one: the caller's principal and bearer token, and its audit actor. */
export interface Approver {
  principalId: number;
  tokenId: number;
  actor: Actor;
  /** HMAC key of stored approval hashes (the token key). */
  tokenKey: Buffer;
}

/** An approval as a request presents it: the approver and the approval id it names (undefined: none). */
export interface PresentedApproval extends Approver {
  approvalId: string | undefined;
}

/**
 * Consumes the credential approval that authorizes this request, or throws 403 with
 * `reason: "reauthentication_required"`.
 *
 *   consumeApproval(tx, presentedApproval(ctx, input.headers), expected): Promise<ApprovalRow>
 *
 * - `tx`: the transaction of the approved mutation (call it inside your withTx, before the
 *   write): if the mutation fails and rolls back, the approval stays unused.
 * - `presented`: the caller and the approval id of header `X-Svc-Credential-Approval`
 *   (src/handlers/gates.ts presentedApproval reads them from the request).
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
 * appended, in one statement. The returned row carries `token_expires_at` for token kinds.
 */
export async function consumeApproval(tx: TransactionSql, presented: PresentedApproval, expected: ApprovalOperation): Promise<ApprovalRow> {
  const raw = presented.approvalId?.trim();
  if (!raw) throw reauthenticationRequired('this request needs header X-Svc-Credential-Approval naming a fresh credential approval');
  if (!APPROVAL_ID.test(raw))
    throw reauthenticationRequired('the credential approval is missing, expired, used or does not match this request');
  const event: NewEvent = {
    entityType: 'credential_approval',
    entityId: null, // the consumed row's id (eventPerRowCte)
    entityName: expected.kind,
    action: 'consumed',
    summary: `credential approval for ${expected.kind} used`,
    after: {}, // approvalSnapshot of the consumed row, completed by the statement
    metadata: { approval_kind: expected.kind, principal_id: presented.principalId },
  };
  // approvalSnapshot(row) is the row itself, its times as isoTime writes them
  const times = ['token_expires_at', 'created_at', 'expires_at', 'consumed_at'].map((c) => `'${c}', ${isoTimeText(`a.${c}`)}`);
  const [row] = await tx<ApprovalRow[]>`
    with a as (
      update credential_approvals set consumed_at = now()
      where approval_hash = ${hashToken(presented.tokenKey, raw)}
        and consumed_at is null
        and expires_at > now()
        and approved_by = ${presented.principalId}
        and token_id = ${presented.tokenId}
        and kind = ${expected.kind}
        and operation_hash = ${operationHash(expected)}
      returning id, kind, approved_by, token_id, target_principal_id, target_token_id, target_restore_id,
        token_expires_at, created_at, expires_at, consumed_at
    )${eventPerRowCte(tx, presented.actor, 'a', event, {
      entityId: tx`a.id` as Fragment,
      afterPatch: tx`to_jsonb(a) || jsonb_build_object(${tx.unsafe(times.join(', '))})` as Fragment,
    })}
    select * from a`;
  if (!row) throw reauthenticationRequired('the credential approval is missing, expired, used or does not match this request');
  markWritten(tx, event);
  return row;
}

/** Stores a new approval and its `credential_approval.created` event; returns the row. */
export async function insertApproval(
  db: Db,
  approver: Approver,
  a: { raw: string; operation: ApprovalOperation; tokenExpiresAt: Date | null },
): Promise<ApprovalRow> {
  const targets = approvalTargets(a.operation);
  return withTx(db, async (tx) => {
    const [row] = await tx<ApprovalRow[]>`
      insert into credential_approvals (approval_hash, kind, approved_by, token_id, target_principal_id, target_token_id,
        target_restore_id, operation_hash, token_expires_at, expires_at)
      values (${hashToken(approver.tokenKey, a.raw)}, ${a.operation.kind}, ${approver.principalId}, ${approver.tokenId},
        ${targets.principalId}, ${targets.tokenId}, ${targets.restoreId}, ${operationHash(a.operation)}, ${a.tokenExpiresAt},
        now() + make_interval(secs => ${APPROVAL_TTL_SECONDS}))
      returning id, kind, approved_by, token_id, target_principal_id, target_token_id, target_restore_id,
        token_expires_at, created_at, expires_at, consumed_at`;
    await appendEvent(tx, approver.actor, {
      entityType: 'credential_approval',
      entityId: row!.id,
      entityName: row!.kind,
      action: 'created',
      summary: `credential approval for ${row!.kind} granted after password re-authentication`,
      after: approvalSnapshot(row!),
      metadata: { approval_kind: row!.kind, principal_id: approver.principalId },
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
