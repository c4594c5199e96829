import type { Ctx, HandlerMap } from '../http/contract.ts';
import { actorOf, authOf } from '../http/contract.ts';
import { forbidden, notFound } from '../domain/errors.ts';
import { isUnscopedAdmin } from '../domain/authz.ts';
import { parseListQuery } from '../domain/list-query.ts';
import { listReply } from '../http/paging.ts';
import { finalFor, withTx } from '../db/tx.ts';
import { consumeApproval } from '../db/approvals.ts';
import { findTask, insertTask } from '../db/tasks.ts';
import { toTaskWire, type TaskRow } from '../domain/views/tasks.ts';
import { IMPORT_RESULT_LIST_SPEC, listImportResultRows } from '../db/imports.ts';
import { importResultWire } from '../domain/views/import-results.ts';
import { canSeeTask } from '../domain/tasks.ts';
import { adminSectionsUsed, isCredentialBearing, type ImportRequest } from '../domain/imports.ts';
import { presentedApproval } from './gates.ts';
import { prepareImport, importTask } from '../mutations/imports.ts';

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
    const prepared = await prepareImport(body, ctx.deps);
    const { task } = await withTx(ctx.deps.sql, async (tx) => {
      if (credentials) await consumeApproval(tx, presentedApproval(ctx, input.headers), { kind: 'import_credentials', import: input.body });
      return insertTask(
        tx,
        actorOf(ctx),
        importTask(
          { principal: auth.principal, token: { id: auth.token.id, scope: auth.token.scope } },
          prepared,
          input.headers['idempotency-key'],
        ),
        { final: finalFor(ctx.deps.sql, tx) }, // COMMIT goes with it
      );
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
