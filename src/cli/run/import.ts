import { withTx } from '../../db/tx.ts';
import { insertTask } from '../../db/tasks.ts';
import { IMPORT_RESULT_LIST_SPEC, listImportResultRows } from '../../db/imports.ts';
import { parseListQuery } from '../../domain/list-query.ts';
import type { ImportRequest } from '../../domain/imports.ts';
import { mergeMembers } from '../../domain/json-patch.ts';
import { importTask, prepareImport } from '../../mutations/imports.ts';
import { checkSchema, readJsonFile } from '../documents.ts';
import { EXIT_FAILURE } from '../errors.ts';
import { runTask } from '../run-task.ts';
import type { Session } from '../session.ts';

/** svc import's checked arguments. */
export interface ImportArgs {
  file: string;
  atomicity: 'strict' | 'best_effort' | undefined;
  dryRun: boolean;
}

/** Failed items listed after the run (all of them are in GET /api/v1/imports/{id}/results). */
const SHOWN_FAILURES = 20;

export async function run(session: Session, args: ImportArgs): Promise<number> {
  const progress = session.progress;
  const doc = await readJsonFile(args.file, progress);
  checkSchema(doc, 'ImportRequest', args.file);
  const body = doc as ImportRequest;
  if (args.atomicity) {
    body.mode = mergeMembers(body.mode, { atomicity: args.atomicity });
  }
  if (args.dryRun) body.dry_run = true;
  const deps = await session.deps();
  const admin = await session.bootstrapAdmin();
  progress.step('checking the import');
  const prepared = await prepareImport(body, deps);
  const { plan } = prepared;
  const { task } = await withTx(deps.sql, (tx) =>
    insertTask(
      tx,
      session.actor(admin),
      importTask({ principal: { id: admin.id }, token: { id: null, scope: null } }, prepared, undefined),
    ),
  );
  const mode = `${plan.atomicity.replace('_', '-')}${plan.dryRun ? ', dry run' : ''}`;
  progress.step(`import task ${task.id}, ${mode}`, plan.items.length, 'items');
  const done = await runTask(deps, task.id, (t) => progress.update(t.progress?.processed_items ?? 0, t.progress?.total_items ?? undefined));
  const summary = done.summary as { outcomes?: Record<string, number> } | null;
  const counts = Object.entries(summary?.outcomes ?? {})
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${n} ${k.replace('_', ' ')}`)
    .join(', ');
  progress.end(`import task ${task.id} ${done.status}${counts ? `: ${counts}` : ''}`);
  if (done.status !== 'succeeded') {
    const failed = await listImportResultRows(
      deps.sql,
      task.id,
      parseListQuery({ outcome: 'failed', limit: SHOWN_FAILURES }, IMPORT_RESULT_LIST_SPEC),
    );
    for (const r of failed.rows) process.stderr.write(`  ${r.item_ref} (${r.entity_kind}): ${r.error ?? 'failed'}\n`);
    const why = (done.details as { message?: string } | null)?.message;
    if (failed.rows.length === 0 && why) process.stderr.write(`  ${why}\n`);
  }
  process.stdout.write(JSON.stringify({ task_id: task.id, status: done.status, summary: done.summary }) + '\n');
  return done.status === 'succeeded' ? 0 : EXIT_FAILURE;
}
