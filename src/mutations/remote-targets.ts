// Remote targets: the one write path, for the API and the import worker alike (the shared shape of
// collection-owned resources, src/mutations/collection-resources.ts, with the remote-target rules).
import { badRequest, notFound } from '../domain/errors.ts';
import { applyPatch, literalOrigin, sameFields, validateTarget, type TargetFields } from '../domain/remote-targets.ts';
import { templateLimits } from '../domain/templates.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/sql.ts';
import {
  classCollectionId,
  insertRemoteTarget,
  lockRemoteTargetAs,
  updateRemoteTarget as updateRemoteTargetRow,
} from '../db/remote-targets.ts';
import { remoteTargetEvent, remoteTargetFields, type RemoteTargetRow } from '../domain/views/remote-targets.ts';
import { approvedRemoteTargetOrigins } from '../sinks/secrets.ts';
import { createInCollection, deleteInCollection, updateInCollection, type CollectionResource } from './collection-resources.ts';
import type { MutationContext, Written } from './context.ts';

/** What the remote-target rules read from the settings: template limits and the secret source. */
export type RemoteTargetConfig = Pick<
  Config,
  'SVC_EXPORT_TEMPLATE_FUEL' | 'SVC_EXPORT_TEMPLATE_RECURSION_LIMIT' | 'SVC_SECRET_SOURCE' | 'SVC_SECRET_FILE_ROOT'
>;

/**
 * Every rule of a saved target, including those that need the database or the secret source: the
 * class exists (404) and belongs to collection_id (400), and a target that names a secret points
 * at an origin approved for it (400; unchecked while this process cannot see the alias's
 * approvals, the worker checks every call).
 */
async function validate(db: Db, f: TargetFields, config: RemoteTargetConfig): Promise<void> {
  validateTarget(f, templateLimits(config));
  const auth = f.auth_config;
  if (auth.type !== 'none') {
    const origin = literalOrigin(f.url_template)!; // validateTarget requires a literal origin here
    const approval = await approvedRemoteTargetOrigins(config, auth.secret);
    if (approval.known && !approval.origins.includes(origin)) {
      throw badRequest(`the origin ${origin} is not approved for the secret alias ${auth.secret}`, [
        {
          path: 'body.url_template',
          message:
            `the origin ${origin} is not among the origins an operator approved for the secret alias ${auth.secret} ` +
            '(SVC_REMOTE_TARGET_ORIGINS_<ALIAS> or remote-target/<alias>.origins beside the secret)',
        },
      ]);
    }
  }
  if (f.class_id !== null) {
    const cid = await classCollectionId(db, f.class_id);
    if (cid === undefined) throw notFound('class');
    if (cid !== f.collection_id) {
      throw badRequest('the remote target is invalid', [{ path: 'body.class_id', message: 'must name a class of collection_id' }]);
    }
  }
}

const REMOTE_TARGET: CollectionResource<RemoteTargetRow, TargetFields> = {
  kind: 'remote_target',
  table: 'remote_targets',
  perms: { create: 'CreateRemoteTarget', update: 'UpdateRemoteTarget', delete: 'DeleteRemoteTarget' },
  lockAs: lockRemoteTargetAs,
  fields: remoteTargetFields,
  applyPatch: (f, body) => applyPatch(f, body as Parameters<typeof applyPatch>[1]),
  same: sameFields,
  insert: insertRemoteTarget,
  update: updateRemoteTargetRow,
  event: remoteTargetEvent,
};

export type RemoteTargetPatch = Parameters<typeof applyPatch>[1];

export function createRemoteTarget(m: MutationContext, fields: TargetFields, config: RemoteTargetConfig): Promise<RemoteTargetRow> {
  return createInCollection(m, REMOTE_TARGET, fields, (tx, f) => validate(tx, f, config));
}

export function updateRemoteTarget(
  m: MutationContext,
  id: number,
  patch: RemoteTargetPatch,
  config: RemoteTargetConfig,
  ifMatch?: string,
): Promise<Written<RemoteTargetRow>> {
  return updateInCollection(m, REMOTE_TARGET, id, patch, (tx, f) => validate(tx, f, config), ifMatch);
}

export function deleteRemoteTarget(m: MutationContext, id: number, ifMatch?: string): Promise<void> {
  return deleteInCollection(m, REMOTE_TARGET, id, ifMatch);
}
