import type { Ctx, HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { ApiError, badRequest, forbidden, notFound, type ErrorDetail } from '../http/errors.ts';
import { isUnscopedAdmin } from '../http/gates.ts';
import { parseListQuery } from '../http/list-query.ts';
import { listReply } from '../db/list.ts';
import { withTx } from '../db/tx.ts';
import { consumeApproval } from '../db/approvals.ts';
import { findTask, insertTask, toTaskWire, type TaskRow } from '../db/tasks.ts';
import { IMPORT_RESULT_LIST_SPEC, importResultWire, listImportResultRows } from '../db/imports.ts';
import { canSeeTask } from '../domain/tasks.ts';
import { hashPassword } from '../domain/passwords.ts';
import {
  adminSectionsUsed,
  importPasswordSalt,
  isCredentialBearing,
  planImport,
  scopeOf,
  sinkBody,
  type ImportEventSink,
  type ImportHuman,
  type ImportPlan,
  type ImportRequest,
} from '../domain/imports.ts';
import { templateLimits } from '../domain/templates.ts';
import { validateSinkConfig } from '../sinks/index.ts';
import { sinkFromNew } from '../domain/event-subscriptions.ts';

/**
 * The request as the task stores it: passwords replaced by their Argon2id hashes (with a salt
 * derived from the principal, so an identical submission stores an identical request and
 * Idempotency-Key can compare them). The worker removes the hashes when the import finishes.
 */
async function storedRequest(body: ImportRequest, key: Buffer): Promise<Record<string, unknown>> {
  const copy = structuredClone(body);
  for (const p of (copy.graph.principals ?? []) as unknown as ImportHuman[]) {
    if (p.kind !== 'human' || typeof p.password !== 'string') continue;
    p.password_hash = await hashPassword(p.password, importPasswordSalt(key, scopeOf(p), p.name));
    delete p.password;
  }
  return copy as unknown as Record<string, unknown>;
}

/** Sink items: the sink API's name and per-kind configuration rules (400 with details). */
function validateSinkItems(plan: ImportPlan): void {
  const details: ErrorDetail[] = [];
  for (const item of plan.items.filter((i) => i.section === 'event_sinks')) {
    const f = sinkFromNew(sinkBody(item.body as unknown as ImportEventSink) as Parameters<typeof sinkFromNew>[0]);
    const at = `body.graph.event_sinks[${item.index}]`;
    if (f.name.trim() === '' || f.name.length > 255)
      details.push({ path: `${at}.name`, message: 'must be 1 to 255 characters and not blank' });
    try {
      validateSinkConfig(f.kind, f.config, f.secret_ref);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      for (const d of err.details ?? [{ path: 'body', message: err.message }])
        details.push({ path: at + d.path.replace(/^body/, ''), message: d.message });
    }
  }
  if (details.length) throw badRequest(`the import is invalid: ${details[0]!.path} ${details[0]!.message}`, details);
}

/** The import task the caller may see (its submitter, or an unscoped admin); 404 otherwise. */
async function visibleImport(ctx: Ctx, id: number): Promise<TaskRow> {
  const row = await findTask(ctx.deps.sql, id);
  if (!row || row.kind !== 'import' || !canSeeTask(authOf(ctx), row.submitted_by)) throw notFound('import');
  return row;
}

export const importsHandlers = {
  createImport: async (input, ctx) => {
    const auth = authOf(ctx);
    const body = input.body as unknown as ImportRequest;
    const admin = adminSectionsUsed(body.graph);
    if (admin.length && !isUnscopedAdmin(auth)) throw forbidden(`importing ${admin.join(', ')} needs an unscoped administrator`);
    const credentials = isCredentialBearing(body.graph);
    if (credentials && auth.principal.kind !== 'human') throw forbidden('imports carrying passwords need an unscoped human administrator');
    const plan = planImport(body, templateLimits(ctx.deps.config));
    validateSinkItems(plan);
    const request = await storedRequest(body, ctx.deps.tokenKey);
    const { task } = await withTx(ctx.deps.sql, async (tx) => {
      if (credentials) await consumeApproval(tx, ctx, input.headers, { kind: 'import_credentials', import: input.body });
      return insertTask(tx, actorOf(ctx), {
        kind: 'import',
        auth: { principal: auth.principal, token: { id: auth.token.id, scope: auth.token.scope } },
        request,
        idempotencyKey: input.headers['idempotency-key'],
        progress: { total_items: plan.items.length },
        metadata: {
          dry_run: plan.dryRun,
          atomicity: plan.atomicity,
          collision_policy: plan.collisionPolicy,
          items: plan.items.length,
          credential_bearing: credentials,
        },
      });
    });
    return { status: 202, body: toTaskWire(task), headers: { location: `/api/v1/tasks/${task.id}` } };
  },

  getImport: async (input, ctx) => {
    const row = await visibleImport(ctx, input.params.import_id);
    return { status: 200, body: toTaskWire(row) };
  },

  listImportResults: async (input, ctx) => {
    const parsed = parseListQuery(input.query, IMPORT_RESULT_LIST_SPEC);
    const row = await visibleImport(ctx, input.params.import_id);
    const page = await listImportResultRows(ctx.deps.sql, row.id, parsed);
    return listReply(page, page.rows.map(importResultWire));
  },
} satisfies Partial<HandlerMap>;
