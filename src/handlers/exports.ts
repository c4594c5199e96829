import type { Ctx, HandlerMap } from '../http/contract.ts';
import { actorOf, authOf, storedOutput } from '../http/contract.ts';
import { ApiError, badRequest, notFound } from '../domain/errors.ts';
import { finalFor, withTx } from '../db/tx.ts';
import { reserveId } from '../db/events.ts';
import { findTask, insertTask } from '../db/tasks.ts';
import { toTaskWire } from '../domain/views/tasks.ts';
import { readExportTemplateAs } from '../db/export-templates.ts';
import { findExportOutput, openExportSource } from '../db/exports.ts';
import { canSeeTask, parseIdempotencyKey } from '../domain/tasks.ts';
import { parseQueryString, parseScope, resolveLimits } from '../domain/exports.ts';

interface ExportBody {
  scope: unknown;
  query?: string;
  limits?: { max_items?: number; max_output_bytes?: number };
  template_id?: number;
}

/**
 * Submits an export task (createExport, runExportTemplate). Everything the worker will need is
 * checked now, so a bad request is a 4xx here rather than a failed task: the template (ReadTemplate,
 * kind export), the limits, the scope's path resource (ReadClass / ReadObject) and the query
 * against the list it applies to. The worker re-checks all of it with the scope snapshot.
 */
export async function submitExport(ctx: Ctx, raw: Record<string, unknown>, headers: Record<string, string>) {
  const auth = authOf(ctx);
  const body = raw as unknown as ExportBody;
  const idempotencyKey = parseIdempotencyKey(headers['idempotency-key']);
  const scope = parseScope(body.scope);
  resolveLimits(body.limits);
  const { task } = await withTx(ctx.deps.sql, async (tx) => {
    // the task's id and created_at, reserved beside the checks (insertTask)
    const reserved = reserveId(tx, 'tasks');
    reserved.catch(() => undefined); // awaited by insertTask, after the checks
    let query = body.query ?? null;
    let templateCollection: number | null = null;
    if (body.template_id !== undefined) {
      const tpl = await readExportTemplateAs(tx, auth, body.template_id, 'ReadTemplate');
      if (tpl.kind !== 'export') {
        throw badRequest('a fragment template cannot be run; run an export template that includes it', [
          { path: 'template_id', message: 'names a fragment' },
        ]);
      }
      query ??= tpl.default_query;
      templateCollection = tpl.collection_id;
    }
    const source = await openExportSource(tx, auth, scope, query === null ? {} : parseQueryString(query));
    const request: Record<string, unknown> = { scope: body.scope };
    if (body.query !== undefined) request.query = body.query;
    if (body.limits !== undefined) request.limits = body.limits;
    if (body.template_id !== undefined) request.template_id = body.template_id;
    const collectionId = templateCollection ?? source.collectionId;
    return insertTask(
      tx,
      actorOf(ctx),
      {
        kind: 'export',
        auth: { principal: auth.principal, token: { id: auth.token.id, scope: auth.token.scope } },
        request,
        idempotencyKey,
        collectionId,
        relatedCollectionIds:
          templateCollection !== null && source.collectionId !== null && source.collectionId !== templateCollection
            ? [source.collectionId]
            : [],
        metadata: { scope_kind: scope.kind, ...(body.template_id !== undefined ? { export_template_id: body.template_id } : {}) },
      },
      { reserved, final: finalFor(ctx.deps.sql, tx) }, // COMMIT goes with it
    );
  });
  return { status: 202 as const, body: toTaskWire(task), headers: { location: `/api/v1/tasks/${task.id}` } };
}

/** The export summary stored on the task (src/workers/export.ts). */
interface ExportSummary {
  truncated?: boolean;
  warnings?: unknown[];
}

export const exportsHandlers = {
  createExport: async (input, ctx) => submitExport(ctx, input.body as Record<string, unknown>, input.headers),

  getExport: async (input, ctx) => {
    const row = await findTask(ctx.deps.sql, input.params.export_id);
    if (!row || row.kind !== 'export' || !canSeeTask(authOf(ctx), row.submitted_by)) throw notFound('export');
    return { status: 200, body: toTaskWire(row) };
  },

  getExportOutput: async (input, ctx) => {
    const row = await findExportOutput(ctx.deps.sql, input.params.export_id);
    if (!row || row.kind !== 'export' || !canSeeTask(authOf(ctx), row.submitted_by)) throw notFound('export');
    if (row.expired) {
      throw new ApiError('gone', 'the export output has expired; submit the export again', { reason: 'export_output_expired' });
    }
    if (row.status !== 'succeeded' || row.output === null) {
      throw new ApiError('not_found', 'the export has no output (it has not finished, or it did not succeed)', {
        reason: 'export_output_unavailable',
      });
    }
    const summary = (row.summary ?? {}) as ExportSummary;
    const type = row.output_content_type ?? 'application/json';
    return storedOutput<'getExportOutput'>(new Uint8Array(row.output), type.startsWith('text/') ? `${type}; charset=utf-8` : type, {
      'x-svc-export-warnings': String(Array.isArray(summary.warnings) ? summary.warnings.length : 0),
      'x-svc-export-truncated': summary.truncated === true ? 'true' : 'false',
      'cache-control': 'no-store',
    });
  },
} satisfies Partial<HandlerMap>;
