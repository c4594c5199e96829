import type { HandlerMap } from '../http/contract.ts';
import { actorOf } from '../http/contract.ts';
import { badRequest, forbidden, notFound } from '../domain/errors.ts';
import { requireHumanUnscoped, requireUnscopedAdmin, presentedApproval } from './gates.ts';
import { consumeApproval } from '../db/approvals.ts';
import { findStage } from '../db/restores.ts';
import { capabilityMatches, confirmStagedRestore, stageRestore, statusWire } from '../mutations/restores.ts';

export const restoresHandlers = {
  createRestore: async (input, ctx) => {
    const auth = requireUnscopedAdmin(ctx);
    const { stage, capability } = await stageRestore(ctx.deps, actorOf(ctx), auth.principal.id, input.body);
    return {
      status: 201,
      body: { id: stage.id, status: 'validated', sha256: stage.sha256, restore_capability: capability, expires_at: stage.expires_at },
      headers: { location: `/api/v1/restores/${stage.id}/status`, 'cache-control': 'no-store' },
    };
  },

  confirmRestore: async (input, ctx) => {
    const auth = requireHumanUnscoped(ctx);
    if (!auth.isAdmin) throw forbidden('an unscoped administrator is required');
    const id = input.params.restore_id;
    const body = input.body;
    const finished = await confirmStagedRestore(ctx.deps, actorOf(ctx), auth.principal.id, id, body, async (tx) => {
      const approval = await consumeApproval(tx, presentedApproval(ctx, input.headers), {
        kind: 'confirm_restore',
        restore_id: id,
        confirmation: body,
      });
      return approval.id;
    });
    return { status: 200, body: statusWire(finished), headers: { 'cache-control': 'no-store' } };
  },

  getRestoreStatus: async (input, ctx) => {
    const raw = input.headers['x-svc-restore-capability'];
    if (!raw)
      throw badRequest('header X-Svc-Restore-Capability is required', [{ path: 'header.X-Svc-Restore-Capability', message: 'required' }]);
    const stage = await findStage(ctx.deps.sql, input.params.restore_id);
    if (!stage) throw notFound('restore');
    if (!capabilityMatches(ctx.deps.tokenKey, stage, raw)) throw forbidden('the restore capability does not match this restore');
    return { status: 200, body: statusWire(stage), headers: { 'cache-control': 'no-store' } };
  },
} satisfies Partial<HandlerMap>;
