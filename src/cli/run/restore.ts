import { confirmStagedRestore, stageRestore } from '../../mutations/restores.ts';
import { checkSchema, readJsonFile } from '../documents.ts';
import { Failure } from '../errors.ts';
import { askLine } from '../prompt.ts';
import type { Session } from '../session.ts';

/** svc restore's checked arguments. */
export interface RestoreArgs {
  file: string;
  yes: boolean;
}

const CONFIRMATION = 'REPLACE ALL DATA';

export async function run(session: Session, args: RestoreArgs): Promise<number> {
  const progress = session.progress;
  const doc = await readJsonFile(args.file, progress);
  checkSchema(doc, 'BackupDocument', args.file);
  const deps = await session.deps();
  const admin = await session.bootstrapAdmin();
  const actor = session.actor();
  progress.step('validating and staging the document');
  const { stage, capability } = await progress.during(stageRestore(deps, actor, admin.id, doc));
  const rows = Object.values(stage.item_counts).reduce((a, b) => a + b, 0);
  progress.end(`restore ${stage.id} staged: backup format ${stage.backup_version}, ${rows} rows, sha256 ${stage.sha256}`);
  if (!args.yes) {
    const answer = await askLine(`This replaces ALL data of ${session.source}. Type ${CONFIRMATION} to go on: `, false);
    if (answer.trim() !== CONFIRMATION)
      throw new Failure(`not confirmed; nothing changed (restore ${stage.id} stays staged until it expires)`);
  }
  progress.step(`applying restore ${stage.id} (one transaction)`);
  const done = await progress.during(
    confirmStagedRestore(deps, actor, admin.id, stage.id, { restore_capability: capability, sha256: stage.sha256 }, async () => null),
  );
  if (done.status !== 'succeeded')
    throw new Failure(`restore ${stage.id} ${done.status}; nothing changed: ${done.error ?? 'no reason recorded'}`);
  progress.end(`restore ${stage.id} succeeded: all data replaced from ${args.file}`);
  process.stdout.write(`restored ${args.file} (sha256 ${stage.sha256})\n`);
  return 0;
}
