import type { HandlerMap } from '../http/contract.ts';
import { actorOf, authOf, type Ctx } from '../http/contract.ts';
import { isUnscopedAdmin } from '../domain/authz.ts';
import { ApiError, notFound } from '../domain/errors.ts';
import { checkIfMatch, etagHeader } from '../http/preconditions.ts';
import { parseIfMatch } from '../domain/preconditions.ts';
import { withTx } from '../db/tx.ts';
import { appendEvent } from '../db/events.ts';
import { findSettings, lockSettings, writeSettings, type SettingsRow } from '../db/settings.ts';
import { JsonPatchError } from '../domain/json-patch.ts';
import { checkSettingsDocument, JSON_PATCH_MEDIA_TYPE, patchSettings } from '../domain/settings.ts';

type Operation = 'replace' | 'merge_patch' | 'json_patch' | 'reset';

const settingsNotFound = () => notFound('principal settings');

/**
 * The principal whose document is addressed. Self access works for every valid token (scoped
 * tokens and service accounts included); another principal's document needs an unscoped human
 * admin, and a denial is 404 so that it reveals nothing.
 */
function targetOf(ctx: Ctx, pathId: number | null): number {
  const auth = authOf(ctx);
  if (pathId === null || pathId === auth.principal.id) return auth.principal.id;
  if (auth.principal.kind === 'human' && isUnscopedAdmin(auth)) return pathId;
  throw settingsNotFound();
}

function reply(row: SettingsRow) {
  return {
    status: 200 as const,
    body: { revision: row.settings_revision, settings: row.settings },
    headers: etagHeader('settings', row.id, row.settings_revision),
  };
}

/** JsonPatchError → 400 (malformed, limits, non-object result) or 409 (an operation failed). */
function toApiError(err: unknown): unknown {
  if (!(err instanceof JsonPatchError)) return err;
  return new ApiError(err.errorKind, err.message, { reason: err.kind });
}

async function getSettings(ctx: Ctx, pathId: number | null) {
  const row = await findSettings(ctx.deps.sql, targetOf(ctx, pathId));
  if (!row) throw settingsNotFound();
  return reply(row);
}

/**
 * One settings mutation: lock the principal, check If-Match, compute the new document from the
 * current one, and write it with a `principal.updated` event unless nothing changes.
 */
async function mutateSettings(
  ctx: Ctx,
  pathId: number | null,
  headers: Record<string, string>,
  operation: Operation,
  compute: (current: Record<string, unknown>) => Record<string, unknown>,
) {
  const id = targetOf(ctx, pathId);
  parseIfMatch(headers['if-match']);
  const row = await withTx(ctx.deps.sql, async (tx) => {
    const before = await lockSettings(tx, id);
    if (!before) throw settingsNotFound();
    checkIfMatch(headers, 'settings', id, before.settings_revision);
    let next: Record<string, unknown>;
    try {
      next = compute(before.settings);
    } catch (err) {
      throw toApiError(err);
    }
    const after = await writeSettings(tx, id, next);
    if (!after) return before;
    await appendEvent(tx, actorOf(ctx), {
      entityType: 'principal',
      entityId: id,
      entityName: after.name,
      action: 'updated',
      summary: `settings of ${after.name} updated (${operation})`,
      before: { settings: before.settings },
      after: { settings: after.settings },
      beforeRevision: before.settings_revision,
      afterRevision: after.settings_revision,
      metadata: { document: 'settings', operation },
    });
    return after;
  });
  return reply(row);
}

function replaceSettings(ctx: Ctx, pathId: number | null, input: { body: unknown; headers: Record<string, string> }) {
  let doc: Record<string, unknown>;
  try {
    doc = checkSettingsDocument(input.body);
  } catch (err) {
    throw toApiError(err);
  }
  return mutateSettings(ctx, pathId, input.headers, 'replace', () => doc);
}

function patchSettingsFor(ctx: Ctx, pathId: number | null, input: { body: unknown; headers: Record<string, string>; contentType: string }) {
  const operation: Operation = input.contentType === JSON_PATCH_MEDIA_TYPE ? 'json_patch' : 'merge_patch';
  return mutateSettings(ctx, pathId, input.headers, operation, (current) => patchSettings(current, input.contentType, input.body));
}

function resetSettings(ctx: Ctx, pathId: number | null, headers: Record<string, string>) {
  return mutateSettings(ctx, pathId, headers, 'reset', () => ({}));
}

export const settingsHandlers = {
  getMySettings: async (_input, ctx) => getSettings(ctx, null),
  replaceMySettings: async (input, ctx) => replaceSettings(ctx, null, input),
  resetMySettings: async (input, ctx) => resetSettings(ctx, null, input.headers),
  patchMySettings: async (input, ctx) => patchSettingsFor(ctx, null, input),
  getPrincipalSettings: async (input, ctx) => getSettings(ctx, input.params.principal_id),
  replacePrincipalSettings: async (input, ctx) => replaceSettings(ctx, input.params.principal_id, input),
  resetPrincipalSettings: async (input, ctx) => resetSettings(ctx, input.params.principal_id, input.headers),
  patchPrincipalSettings: async (input, ctx) => patchSettingsFor(ctx, input.params.principal_id, input),
} satisfies Partial<HandlerMap>;
