// The `export` task executor. Order: re-check the request; in one read-only snapshot load the
// template (ReadTemplate for the submitter, now: live grants ∩ the token scope snapshot, failing
// closed) and the fragments it can reach, open the list of the scope (ReadClass / ReadObject on its
// path resource) and read it page by page, filtered in SQL by what the submitter may read, with a
// cancel checkpoint and a progress update per page, keeping each page only as encoded JSON output
// (or template context items); then finish the output (the JSON envelope or the rendered
// template), check its size and store it on the task with its expiry.
//
// Failures end the task `failed` with details {reason, message}: invalid_request, not_found,
// permission_denied (403 of a re-check), render_failed, output_too_large, submitter_missing.
import { Buffer } from 'node:buffer';
import type { Template } from 'liquidjs';
import { ApiError, isClientError } from '../domain/errors.ts';
import { withTx } from '../db/tx.ts';
import type { TransactionSql } from '../db/sql.ts';
import { requireCollectionPermission } from '../db/authz.ts';
import { readSnapshot } from '../db/traversal.ts';
import { findExportTemplate, fragmentSources } from '../db/export-templates.ts';
import { type ExportTemplateRow } from '../domain/views/export-templates.ts';
import {
  clearExpiredExportOutputs,
  openExportSource,
  principalKind,
  setExportProgress,
  storeExportOutput,
  type Exporter,
} from '../db/exports.ts';
import {
  JsonOutputWriter,
  exportTemplateScope,
  parseQueryString,
  parseScope,
  resolveLimits,
  templateContextItem,
  type ExportScope,
  type ResolvedLimits,
} from '../domain/exports.ts';
import {
  MAX_RENDERED_OUTPUT,
  TemplateError,
  compileExportTemplate,
  renderExportTemplate,
  templateLimits as templateLimitsOf,
  type TemplateLimits,
} from '../domain/templates.ts';
import { MAX_LIMIT } from '../domain/list-query.ts';
import type { TaskOutcome, TaskRunContext } from './task-context.ts';

type Failure = 'invalid_request' | 'not_found' | 'permission_denied' | 'render_failed' | 'output_too_large' | 'submitter_missing';

class ExportFailure extends Error {
  constructor(
    readonly reason: Failure,
    message: string,
  ) {
    super(message);
  }
}

function failed(reason: Failure, message: string): TaskOutcome {
  return { status: 'failed', details: { reason, message }, message: `export task failed: ${message}` };
}

/** ApiErrors of the shared checks and list parsers, as task failures. */
function asFailure(err: ApiError): ExportFailure {
  const reason: Failure = err.kind === 'forbidden' ? 'permission_denied' : err.kind === 'not_found' ? 'not_found' : 'invalid_request';
  return new ExportFailure(reason, err.message);
}

interface StoredRequest {
  scope?: unknown;
  query?: string;
  limits?: { max_items?: number; max_output_bytes?: number };
  template_id?: number;
}

interface LoadedTemplate {
  row: ExportTemplateRow;
  templates: Template[];
  fragments: Map<string, Template[]>;
}

function compile(source: string, limits: TemplateLimits, what: string) {
  try {
    return compileExportTemplate(source, limits);
  } catch (err) {
    if (err instanceof TemplateError) throw new ExportFailure('render_failed', `${what}: ${err.message}`);
    throw err;
  }
}

/** The template and every fragment of its collection it can reach by name (missing names fail only when rendered). */
async function loadTemplate(tx: TransactionSql, who: Exporter, id: number, limits: TemplateLimits): Promise<LoadedTemplate> {
  const row = await findExportTemplate(tx, id);
  if (!row) throw new ExportFailure('not_found', 'the export template no longer exists');
  await requireCollectionPermission(tx, who, row.collection_id, 'ReadTemplate');
  if (row.kind !== 'export') throw new ExportFailure('invalid_request', 'the template is a fragment now and cannot be run');
  const main = compile(row.template, limits, `export template ${row.name}`);
  const fragments = new Map<string, Template[]>();
  const seen = new Set<string>();
  let pending = main.includes;
  while (pending.length) {
    const names = pending.filter((n) => !seen.has(n));
    names.forEach((n) => seen.add(n));
    if (names.length === 0) break;
    const sources = await fragmentSources(tx, row.collection_id, names);
    const next: string[] = [];
    for (const [name, source] of sources) {
      const c = compile(source, limits, `fragment ${name}`);
      fragments.set(name, c.templates);
      next.push(...c.includes);
    }
    pending = next;
  }
  return { row, templates: main.templates, fragments };
}

interface ReadResult {
  count: number;
  total: number;
  /** Without a template the encoded JSON output; with one, the rows as its context holds them. */
  out: { json: JsonOutputWriter } | { template: LoadedTemplate; items: Record<string, unknown>[] };
}

async function readExport(
  ctx: TaskRunContext,
  who: Exporter,
  req: StoredRequest,
  scope: ExportScope,
  limits: ResolvedLimits,
  templateLimits: TemplateLimits,
): Promise<ReadResult> {
  const { deps, task } = ctx;
  return withTx(deps.sql, async (tx) => {
    readSnapshot(tx);
    const template = req.template_id === undefined ? null : await loadTemplate(tx, who, req.template_id, templateLimits);
    const query = req.query ?? template?.row.default_query ?? null;
    const source = await openExportSource(tx, who, scope, query === null ? {} : parseQueryString(query));
    // Rows are not kept: each page is encoded (or converted to template context items) as it is read.
    const out: ReadResult['out'] = template ? { template, items: [] } : { json: new JsonOutputWriter() };
    let count = 0;
    let total = 0;
    let after: unknown[] | null = null;
    for (let first = true; ; first = false) {
      await ctx.checkpoint();
      const page = await source.page(after, Math.min(MAX_LIMIT, limits.maxItems - count), first);
      if (first) total = page.total ?? 0;
      count += page.rows.length;
      if ('json' in out) {
        out.json.add(page.rows);
        // The output is these rows as JSON: stop early once they cannot fit.
        if (out.json.itemBytes > limits.maxOutputBytes) {
          throw new ExportFailure(
            'output_too_large',
            `the output exceeds limits.max_output_bytes (${limits.maxOutputBytes} bytes); narrow the query or lower limits.max_items`,
          );
        }
      } else {
        for (const row of page.rows) out.items.push(templateContextItem(scope.kind, row));
      }
      await setExportProgress(deps.sql, task.id, task.claim_token!, {
        total_items: Math.min(total, limits.maxItems),
        processed_items: count,
        success_items: count,
        failed_items: 0,
      });
      if (page.next === null || count >= limits.maxItems) break;
      after = page.next;
    }
    return { count, total, out };
  });
}

export async function executeExport(ctx: TaskRunContext): Promise<TaskOutcome> {
  const { deps, task } = ctx;
  if (!ctx.authority) return failed('submitter_missing', 'the submitting principal no longer exists');
  const kind = await principalKind(deps.sql, task.submitted_by);
  if (!kind) return failed('submitter_missing', 'the submitting principal no longer exists');
  const who: Exporter = Object.assign({}, ctx.authority, { principal: { id: ctx.authority.principal.id, kind } });
  const req = task.request as StoredRequest;
  const templateLimits = templateLimitsOf(deps.config);

  let scope: ExportScope;
  let limits: ResolvedLimits;
  let read: ReadResult;
  try {
    scope = parseScope(req.scope);
    limits = resolveLimits(req.limits);
    read = await readExport(ctx, who, req, scope, limits, templateLimits);
  } catch (err) {
    if (err instanceof ExportFailure) return failed(err.reason, err.message);
    if (isClientError(err)) {
      const f = asFailure(err);
      return failed(f.reason, f.message);
    }
    throw err;
  }

  const { count, total, out } = read;
  const template = 'template' in out ? out.template : null;
  const truncated = total > count;
  const warnings = [...limits.warnings];
  if (truncated) warnings.push(`the result was cut at limits.max_items: ${count} of ${total} rows exported`);
  const meta = { count, truncated };
  await ctx.event('progress', `read ${count} of ${total} rows`, { count, total });

  let pieces: Buffer[];
  let contentType: string;
  if ('template' in out) {
    contentType = out.template.row.content_type;
    let output: string;
    try {
      output = renderExportTemplate(
        out.template.templates,
        exportTemplateScope(out.items, meta, warnings, scope),
        out.template.fragments,
        templateLimits,
        Math.max(MAX_RENDERED_OUTPUT, 2 * limits.maxOutputBytes),
      );
    } catch (err) {
      if (err instanceof TemplateError) return failed('render_failed', err.message);
      throw err;
    }
    if (contentType === 'application/json') {
      try {
        JSON.parse(output);
      } catch {
        return failed('render_failed', 'the template has content_type application/json but its output is not valid JSON');
      }
    }
    pieces = [Buffer.from(output, 'utf8')];
  } else {
    contentType = 'application/json';
    pieces = out.json.finish(meta, warnings);
  }
  const outputBytes = pieces.reduce((n, p) => n + p.length, 0);
  if (outputBytes > limits.maxOutputBytes) {
    return failed('output_too_large', `the output is ${outputBytes} bytes, more than limits.max_output_bytes (${limits.maxOutputBytes})`);
  }
  const progress = { total_items: count, processed_items: count, success_items: count, failed_items: 0 };
  return {
    status: 'succeeded',
    progress,
    summary: {
      scope_kind: scope.kind,
      template_id: template?.row.id ?? null,
      count,
      total_matches: total,
      truncated,
      warnings,
      content_type: contentType,
      output_bytes: outputBytes,
    },
    message: `export task succeeded: ${count} rows, ${outputBytes} bytes`,
    finalize: async (tx) => {
      await storeExportOutput(tx, task.id, pieces, contentType, deps.config.SVC_EXPORT_OUTPUT_RETENTION_HOURS);
      await clearExpiredExportOutputs(tx);
    },
  };
}
