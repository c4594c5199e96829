// Imports: the submission checks and the import task as stored. Used by createImport and the
// admin command line; the import worker (src/workers/import.ts) applies the items through the
// entities' write paths.
import { ApiError, badRequest, type ErrorDetail } from '../domain/errors.ts';
import type { NewTask } from '../db/tasks.ts';
import type { Deps } from '../deps.ts';
import { hashPassword } from '../domain/passwords.ts';
import {
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

export interface PreparedImport {
  plan: ImportPlan;
  /** The request as the task stores it (see storedRequest). */
  request: Record<string, unknown>;
  credentials: boolean;
}

/**
 * The submission checks that need no caller (the plan, sink items; 400) and the request as
 * stored. Shared by createImport and the admin command line.
 */
export async function prepareImport(body: ImportRequest, deps: Deps): Promise<PreparedImport> {
  const plan = planImport(body, templateLimits(deps.config));
  validateSinkItems(plan);
  return { plan, request: await storedRequest(body, deps.tokenKey), credentials: isCredentialBearing(body.graph) };
}

/** The import task row for insertTask. */
export function importTask(submitter: NewTask['auth'], p: PreparedImport, idempotencyKey: string | undefined): NewTask {
  return {
    kind: 'import',
    auth: submitter,
    request: p.request,
    idempotencyKey,
    progress: { total_items: p.plan.items.length },
    metadata: {
      dry_run: p.plan.dryRun,
      atomicity: p.plan.atomicity,
      collision_policy: p.plan.collisionPolicy,
      items: p.plan.items.length,
      credential_bearing: p.credentials,
    },
  };
}
