import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.ts';
import { ApiError } from './errors.ts';

/** Approval lifetime: one use within this many seconds of creation. */
export const APPROVAL_TTL_SECONDS = 120;

export const APPROVAL_KINDS = [
  'create_token',
  'renew_token',
  'create_user',
  'update_user',
  'import_credentials',
  'confirm_restore',
] as const;
export type ApprovalKind = (typeof APPROVAL_KINDS)[number];

/**
 * The approved operation exactly as in `CredentialApprovalRequest.operation`: its kind, its path
 * ids and its body, e.g. `{kind: 'update_user', user_id: 7, user: {password: '…'}}`.
 */
export type ApprovalOperation = { kind: ApprovalKind } & Record<string, unknown>;

/** The ids the approval record exposes (`target_*`), taken from the operation. */
export function approvalTargets(op: ApprovalOperation): {
  principalId: number | null;
  tokenId: number | null;
  restoreId: number | null;
} {
  const num = (v: unknown) => (typeof v === 'number' ? v : null);
  switch (op.kind) {
    case 'create_token':
      return { principalId: num(op.principal_id), tokenId: null, restoreId: null };
    case 'renew_token':
      return { principalId: num(op.principal_id), tokenId: num(op.token_id), restoreId: null };
    case 'update_user':
      return { principalId: num(op.user_id), tokenId: null, restoreId: null };
    case 'confirm_restore':
      return { principalId: null, tokenId: null, restoreId: num(op.restore_id) };
    default:
      return { principalId: null, tokenId: null, restoreId: null };
  }
}

/** The binding between an approval and the later request: SHA-256 of the canonical operation. */
export function operationHash(op: ApprovalOperation): Buffer {
  return createHash('sha256').update(canonicalJson(op), 'utf8').digest();
}

/** Approval ids: 256 random bits, base64url (the header value is checked against this shape). */
export const APPROVAL_ID = /^[A-Za-z0-9_-]{43}$/;

/** The 403 of a request that needs a fresh credential approval and did not present a usable one. */
export const reauthenticationRequired = (detail = 'a fresh credential approval for exactly this request is required') =>
  new ApiError('forbidden', detail, {
    reason: 'reauthentication_required',
    guidance:
      'POST /api/v1/iam/credential-approvals with your password and this operation, then repeat this request ' +
      'with the same bearer token, the same body and header X-Svc-Credential-Approval within 120 seconds',
  });
