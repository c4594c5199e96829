// Credential approvals: the row as the database returns it, its wire view and its audit snapshot.
// Neither holds the raw approval id (the wire view shows the one the caller presented), the password
// or the approved body. Pure functions (no SQL); src/db reads and writes the rows.
import type { ApprovalKind } from '../credential-approval.ts';
import type { ResponseBody } from '../wire.ts';

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

/** What the wire view and the audit snapshot both show. */
function approvalFields(r: ApprovalRow) {
  return {
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

/** The audit snapshot of an approval: its row id, never the approval id, the password or the approved body. */
export function approvalSnapshot(r: ApprovalRow): Record<string, unknown> {
  return { id: r.id, ...approvalFields(r) };
}

/** The public representation (components.schemas.CredentialApprovalRecord) under the id the caller presented. */
export function approvalRecordWire(raw: string, r: ApprovalRow, now = Date.now()): ResponseBody<'getCredentialApproval', 200> {
  const status = r.consumed_at ? 'consumed' : r.expires_at.getTime() <= now ? 'expired' : 'pending';
  return { id: raw, status, ...approvalFields(r) };
}
