// The `remote_call` task executor. Execution order (interface specification): load the target and
// the subject; re-check the submitter's subject read permission and ExecuteRemoteTarget (live
// grants ∩ the token scope snapshot); render; validate the URL and screen the destination;
// resolve secrets; perform the call; store the sanitized result; finalize. 2xx → succeeded;
// everything else (non-2xx, timeout, connection failure, render failure, missing secret,
// disabled or deleted target, blocked destination, permission failure) → failed.
//
// Secrets: alias <alias> resolves with SVC_SECRET_SOURCE=env to the variable
// SVC_REMOTE_TARGET_SECRET_<ALIAS_UPPERCASE>, with SVC_SECRET_SOURCE=file to the file
// <SVC_SECRET_FILE_ROOT>/remote-target/<alias> (the file holds only the value; one trailing
// newline is ignored). A secret is sent only to the origins approved for it beside its value
// (SVC_REMOTE_TARGET_ORIGINS_<ALIAS_UPPERCASE>, comma-separated, or remote-target/<alias>.origins,
// one per line): the rendered URL's origin is checked before the secret is read, and a call to
// any other origin fails as a blocked destination with nothing sent. Secret values appear only in
// the outbound request: never in templates, results, task details, events or logs.
import type { Deps } from '../deps.ts';
import { ApiError } from '../domain/errors.ts';
import {
  findRemoteTarget,
  insertRemoteCallResult,
  loadSubjectContext,
  requireRemoteCallPermissions,
  type RemoteCallResult,
} from '../db/remote-targets.ts';
import { withTx } from '../db/tx.ts';
import {
  TemplateError,
  renderCall,
  subjectId,
  templateScope,
  type Method,
  type RenderedCall,
  type Subject,
  type SubjectType,
} from '../domain/remote-targets.ts';
import { templateLimits } from '../domain/templates.ts';
import { mergeMembers } from '../domain/json-patch.ts';
import {
  OutboundError,
  outboundRequest,
  parseOutboundUrl,
  resolveAndScreen,
  type OutboundResponse,
  type ResolvedAddress,
} from '../outbound/http.ts';
import type { TaskOutcome, TaskRunContext } from './task-context.ts';
import { approvedRemoteTargetOrigins, REMOTE_TARGET_SECRETS, resolveSecretAlias, type SecretLookup } from '../sinks/secrets.ts';

/** Bytes of the response body kept in the result row and task details. */
export const BODY_PREVIEW_BYTES = 16_384;

export type { SecretLookup };

/** Resolves a remote-target secret alias through the configured secret source. */
export function resolveRemoteTargetSecret(deps: Deps, alias: string): Promise<SecretLookup> {
  return resolveSecretAlias(deps.config, REMOTE_TARGET_SECRETS, alias);
}

interface Request {
  target_id: number;
  subject: Subject;
  parameters?: Record<string, unknown>;
  body_override?: Record<string, unknown>;
}

/** The value of a settled read, or its error thrown. */
function valueOf<T>(r: PromiseSettledResult<T>): T {
  if (r.status === 'rejected') throw r.reason;
  return r.value;
}

function preview(body: Buffer): { text: string; truncated: boolean } {
  const cut = body.subarray(0, BODY_PREVIEW_BYTES);
  return { text: cut.toString('utf8'), truncated: body.length > BODY_PREVIEW_BYTES };
}

export async function executeRemoteCall(ctx: TaskRunContext): Promise<TaskOutcome> {
  const { deps, task } = ctx;
  const db = deps.sql;
  const cfg = deps.config;
  const req = task.request as unknown as Request;
  const subject = req.subject;
  const base = {
    remote_target_id: req.target_id,
    subject_type: subject.type as SubjectType,
    subject_id: subjectId(subject),
  };
  let method: Method = 'get';
  let url: string | null = null;

  const result = (r: Partial<RemoteCallResult> & { success: boolean }): RemoteCallResult => ({
    taskId: task.id,
    targetId: req.target_id,
    subjectType: base.subject_type,
    subjectId: base.subject_id,
    method,
    url,
    status: null,
    headers: {},
    bodyPreview: null,
    bodyTruncated: false,
    durationMs: null,
    error: null,
    ...r,
  });

  const fail = (reason: string, message: string, extra: Partial<RemoteCallResult> = {}): TaskOutcome => {
    const row = result({ success: false, error: message, ...extra });
    // Object.assign and members assigned in order, not members after a spread (eslint.config.js)
    const details: Record<string, unknown> = Object.assign({}, base, {
      method: row.method,
      url: row.url,
      success: false,
      error: { reason, message },
    });
    if (row.status !== null) {
      details.response = { status: row.status, headers: row.headers, body_preview: row.bodyPreview, body_truncated: row.bodyTruncated };
    }
    details.duration_ms = row.durationMs;
    return {
      status: 'failed',
      message: `remote call failed: ${message}`,
      summary: { success: false, response_status: row.status, reason },
      details,
      progress: { total_items: 1, processed_items: 1, success_items: 0, failed_items: 1 },
      finalize: async (tx) => {
        await insertRemoteCallResult(tx, row);
      },
    };
  };

  // 1–2. The target, the subject's context and the submitter's permissions (live grants ∩ the
  // token scope snapshot) are read together on one connection (one round trip, then COMMIT), and
  // decided in the order that picks a failure's reason.
  const authority = ctx.authority;
  const read = await withTx(db, (tx) =>
    Promise.allSettled([
      findRemoteTarget(tx, req.target_id),
      loadSubjectContext(tx, subject),
      authority ? requireRemoteCallPermissions(tx, authority, req.target_id, subject) : Promise.resolve(),
    ] as const),
  );
  const target = valueOf(read[0]);
  if (!target) return fail('target_not_found', 'the remote target no longer exists');
  method = target.method;
  if (!target.enabled) return fail('target_disabled', 'the remote target is disabled');
  if (!target.allowed_subject_types.includes(subject.type))
    return fail('subject_not_allowed', `the remote target no longer accepts ${subject.type} subjects`);
  if (subject.type === 'object' && subject.class_id !== target.class_id)
    return fail('subject_not_allowed', 'the object is not of the target class');
  const sc = valueOf(read[1]);
  if (!sc) return fail('subject_not_found', 'the subject no longer exists');
  if (!sc.collectionIds.includes(target.collection_id))
    return fail('subject_not_allowed', "the target's collection is not one of the subject's collections");
  if (!authority) return fail('permission_denied', 'the submitter no longer exists');
  try {
    valueOf(read[2]);
  } catch (err) {
    if (err instanceof ApiError && err.kind === 'not_found') return fail('subject_not_found', 'the subject no longer exists');
    if (err instanceof ApiError && err.kind === 'bad_request') return fail('subject_not_allowed', 'the object is not of the target class');
    if (err instanceof ApiError && err.kind === 'forbidden') {
      return fail('permission_denied', 'the submitter no longer holds ExecuteRemoteTarget on the target or read permission on the subject');
    }
    throw err;
  }

  // 3. render
  let call: RenderedCall;
  try {
    call = renderCall(target, templateScope(sc, req.parameters, req.body_override), templateLimits(cfg));
  } catch (err) {
    if (err instanceof TemplateError) return fail('render_failed', err.message);
    throw err;
  }
  url = call.url;

  // 4. URL and destination: a secret goes only to an origin approved for its alias (checked on
  // the rendered URL, before any name resolution and before the secret is read)
  const auth = target.auth_config;
  let pinned: ResolvedAddress;
  try {
    const parsed = parseOutboundUrl(call.url);
    if (auth.type !== 'none') {
      const approval = await approvedRemoteTargetOrigins(cfg, auth.secret);
      if (!approval.origins.includes(parsed.origin)) {
        return fail(
          'blocked_destination',
          approval.origins.length === 0
            ? `no destination origin is approved for the secret alias ${auth.secret}`
            : `the destination origin is not approved for the secret alias ${auth.secret}`,
        );
      }
    }
    pinned = await resolveAndScreen(parsed, { allowPrivate: cfg.SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS });
  } catch (err) {
    if (err instanceof OutboundError) {
      if (err.code === 'invalid_url')
        return fail('invalid_url', err.message.replace('the destination URL', 'the rendered URL'), { url: null });
      return fail(err.code, err.message);
    }
    throw err;
  }

  // 5. secrets
  // a copy by assignment: headers added to a spread's copy would each make a new hidden class (eslint.config.js)
  const headers: Record<string, string> = mergeMembers(call.headers);
  if (auth.type !== 'none') {
    const secret = await resolveRemoteTargetSecret(deps, auth.secret);
    if (!secret.ok) return fail('missing_secret', `the secret alias ${auth.secret} is not available`);
    if (auth.type === 'bearer_secret') headers.Authorization = `Bearer ${secret.value}`;
    else headers[auth.header] = secret.value;
  }

  // 6. the call (last cancel checkpoint before anything leaves the process)
  await ctx.checkpoint();
  await ctx.event('remote_call.request', `sending ${call.method.toUpperCase()} request`, { method: call.method, url: call.url });
  let res: OutboundResponse;
  const started = performance.now();
  try {
    res = await outboundRequest({
      url: call.url,
      method: call.method,
      headers,
      body: call.body,
      timeoutMs: Math.min(target.timeout_ms, cfg.SVC_REMOTE_CALL_TIMEOUT_MS),
      maxResponseBytes: cfg.SVC_REMOTE_CALL_MAX_RESPONSE_BYTES,
      allowPrivate: cfg.SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS,
      caFile: cfg.SVC_OUTBOUND_CA_FILE,
      resolved: pinned,
      signal: ctx.signal,
    });
  } catch (err) {
    if (err instanceof OutboundError) return fail(err.code, err.message, { durationMs: Math.round(performance.now() - started) });
    throw err;
  }

  // 7–8. result and outcome
  const p = preview(res.body);
  const success = res.status >= 200 && res.status < 300;
  const response = { status: res.status, headers: res.headers, body_preview: p.text, body_truncated: res.truncated || p.truncated };
  const common = {
    status: res.status,
    headers: res.headers,
    bodyPreview: p.text,
    bodyTruncated: response.body_truncated,
    durationMs: res.durationMs,
  };
  await ctx.event('remote_call.response', `received HTTP ${res.status}`, { status: res.status, duration_ms: res.durationMs });
  if (!success) return fail('http_status', `the destination answered HTTP ${res.status}`, common);
  const row = result({ success: true, ...common });
  return {
    status: 'succeeded',
    message: `remote call succeeded: HTTP ${res.status}`,
    summary: { success: true, response_status: res.status },
    details: Object.assign({}, base, { method: call.method, url: call.url, success: true, response, duration_ms: res.durationMs }),
    progress: { total_items: 1, processed_items: 1, success_items: 1, failed_items: 0 },
    finalize: async (tx) => {
      await insertRemoteCallResult(tx, row);
    },
  };
}
