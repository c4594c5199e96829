// The webhook transport (interface spec, "Transports / Webhook"): always POST through the one
// outbound client (HTTPS only, DNS screening with a pinned address, no redirects, time and byte
// caps). The body is the event envelope as JSON, or config.body_template rendered with the shared
// template engine (it must render valid JSON; it never sees secrets). Headers: config.headers,
// Content-Type, Idempotency-Key and X-Svc-Event-Id (the event UUID; tests use the key
// `<event_uuid>-test-<delivery_id>` and add X-Svc-Delivery-Purpose: test), and a bearer token from
// secret_ref. The destination is routing.url, or the value of the secret named by
// config.url_secret_ref. config.response decides success, retry, permanent failure and rate-limit
// deferral. Error texts never contain response contents, destination URLs or secrets.
import type { Config } from '../config.ts';
import { ApiError } from '../domain/errors.ts';
import { compileTemplate, renderTemplate, SECRET_ALIAS, TemplateError } from '../domain/remote-targets.ts';
import { templateLimits } from '../domain/templates.ts';
import { jsonEqual, mergeMembers, parsePointer } from '../domain/json-patch.ts';
import {
  HEADER_NAME,
  OutboundError,
  outboundRequest,
  parseOutboundUrl,
  TRANSPORT_HEADERS,
  type OutboundResponse,
} from '../outbound/http.ts';
import { closeConnections } from '../outbound/pools.ts';
import type { ConfigProblem, EventEnvelope, SendInput, SendResult, SinkDefinition, SinkTransport } from './types.ts';

export const DEFAULT_MAX_RESPONSE_BYTES = 65_536;
export const DEFAULT_MAX_REQUEST_BYTES = 1_000_000;
export const DEFAULT_RETRY_AFTER_MS = 60_000;
/** Longest Retry-After cooldown honoured (ours): a day. */
export const MAX_RETRY_AFTER_MS = 86_400_000;
const MAX_HEADERS = 64;
const MAX_HEADER_VALUE = 8192;
const MAX_BODY_TEMPLATE = 1_048_576;
/** Nesting bound used when a template is checked at save time (rendering uses the configured one). */
const SAVE_TIME_RECURSION_LIMIT = 64;

/** Headers the transport or the delivery protocol owns (besides any X-Svc-* name). */
const RESERVED_HEADERS: ReadonlySet<string> = new Set([...TRANSPORT_HEADERS, 'content-type', 'authorization', 'idempotency-key']);
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export const WEBHOOK_CONFIG_MEMBERS = [
  'headers',
  'timeout_ms',
  'max_response_bytes',
  'max_request_bytes',
  'body_template',
  'response',
  'url_secret_ref',
  'allowed_routing',
] as const;

interface ResponsePolicy {
  success_statuses?: number[];
  retry_statuses?: number[];
  rate_limit?: boolean;
  body?: { kind: 'text_equals'; value: string } | { kind: 'json_equals'; pointer?: string; value: unknown };
}

interface WebhookConfig {
  headers?: Record<string, string>;
  timeout_ms?: number;
  max_response_bytes?: number;
  max_request_bytes?: number;
  body_template?: string | null;
  response?: ResponsePolicy;
  url_secret_ref?: string | null;
}

function isInt(v: unknown, min: number): boolean {
  return typeof v === 'number' && Number.isInteger(v) && v >= min;
}

function validateConfig(raw: Record<string, unknown>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const bad = (path: string, message: string) => problems.push({ path: `config.${path}`, message });
  const c = raw as WebhookConfig;

  if (c.headers !== undefined) {
    if (!c.headers || typeof c.headers !== 'object' || Array.isArray(c.headers)) bad('headers', 'must be an object of strings');
    else {
      const names = Object.keys(c.headers);
      if (names.length > MAX_HEADERS) bad('headers', `at most ${MAX_HEADERS} headers`);
      const seen = new Set<string>();
      for (const name of names) {
        const lower = name.toLowerCase();
        const value = c.headers[name];
        if (!HEADER_NAME.test(name)) bad(`headers.${name}`, 'is not a valid header name');
        else if (RESERVED_HEADERS.has(lower) || lower.startsWith('x-svc-'))
          bad(`headers.${name}`, 'is controlled by the transport and cannot be set');
        if (seen.has(lower)) bad(`headers.${name}`, 'is given twice (header names are case-insensitive)');
        seen.add(lower);
        if (typeof value !== 'string') bad(`headers.${name}`, 'must be a string');
        else if (!HEADER_VALUE.test(value) || value.length > MAX_HEADER_VALUE) bad(`headers.${name}`, 'is not a valid header value');
      }
    }
  }
  for (const k of ['timeout_ms', 'max_response_bytes', 'max_request_bytes'] as const) {
    if (c[k] !== undefined && !isInt(c[k], 1)) bad(k, 'must be an integer of at least 1');
  }
  if (c.body_template !== undefined && c.body_template !== null) {
    if (typeof c.body_template !== 'string' || c.body_template === '') bad('body_template', 'must be a non-empty template');
    else if (c.body_template.length > MAX_BODY_TEMPLATE) bad('body_template', `must be at most ${MAX_BODY_TEMPLATE} characters`);
    else {
      try {
        compileTemplate(c.body_template, { fuel: Number.MAX_SAFE_INTEGER, recursionLimit: SAVE_TIME_RECURSION_LIMIT });
      } catch (err) {
        bad('body_template', err instanceof TemplateError ? err.message : 'does not compile');
      }
    }
  }
  if (c.url_secret_ref !== undefined && c.url_secret_ref !== null && !SECRET_ALIAS.test(String(c.url_secret_ref))) {
    bad('url_secret_ref', 'a secret alias has only letters, digits and underscores');
  }
  const r = c.response;
  if (r !== undefined) {
    if (!r || typeof r !== 'object' || Array.isArray(r)) bad('response', 'must be an object');
    else {
      for (const s of r.success_statuses ?? []) if (!isInt(s, 200) || s > 299) bad('response.success_statuses', 'holds 2xx statuses only');
      for (const s of r.retry_statuses ?? [])
        if (!isInt(s, 300) || s > 599) bad('response.retry_statuses', 'holds 3xx, 4xx and 5xx statuses only');
      if (r.body?.kind === 'json_equals' && r.body.pointer !== undefined) {
        try {
          parsePointer(r.body.pointer);
        } catch {
          bad('response.body.pointer', 'is not an RFC 6901 JSON pointer');
        }
      }
    }
  }
  return problems;
}

function validateRouting(routing: Record<string, unknown>, sinkConfig: Record<string, unknown>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const k of Object.keys(routing)) {
    if (k !== 'url') problems.push({ path: `routing.${k}`, message: 'is not a webhook routing member (webhook routing has only url)' });
  }
  const viaSecret = typeof sinkConfig.url_secret_ref === 'string' && sinkConfig.url_secret_ref !== '';
  if (viaSecret) {
    if (routing.url !== undefined) {
      problems.push({ path: 'routing.url', message: "must be omitted: the sink's config.url_secret_ref supplies the destination URL" });
    }
    return problems;
  }
  if (routing.url === undefined) {
    problems.push({ path: 'routing.url', message: 'is required for a webhook sink without config.url_secret_ref' });
  } else if (typeof routing.url !== 'string') {
    problems.push({ path: 'routing.url', message: 'must be a string' });
  } else {
    try {
      parseOutboundUrl(routing.url);
    } catch (err) {
      problems.push({
        path: 'routing.url',
        message: err instanceof OutboundError ? err.message.replace('the destination URL', 'the URL') : 'is not a valid URL',
      });
    }
  }
  return problems;
}

class RenderError extends Error {}

/** The request body text and the JSON value it carries. RenderError when the template cannot produce one. */
function renderBody(
  sink: SinkDefinition,
  envelope: EventEnvelope,
  purpose: 'event' | 'test',
  config: Config,
): { text: string; value: unknown } {
  const c = sink.config as WebhookConfig;
  const max = c.max_request_bytes ?? DEFAULT_MAX_REQUEST_BYTES;
  let text: string;
  let value: unknown;
  if (typeof c.body_template === 'string' && c.body_template !== '') {
    const plain = JSON.parse(JSON.stringify(envelope)) as Record<string, unknown>;
    const scope = mergeMembers(plain, { event: plain, test: purpose === 'test', test_marker: purpose === 'test' ? '[TEST] ' : '' });
    try {
      text = renderTemplate(c.body_template, scope, templateLimits(config));
    } catch (err) {
      throw new RenderError(err instanceof TemplateError ? err.message : 'the body template could not be rendered');
    }
    try {
      value = JSON.parse(text);
    } catch {
      throw new RenderError('the body template did not render valid JSON');
    }
  } else {
    text = JSON.stringify(envelope);
    value = JSON.parse(text);
  }
  const size = Buffer.byteLength(text, 'utf8');
  if (size > max) throw new RenderError(`the request body is ${size} bytes, more than max_request_bytes (${max})`);
  return { text, value };
}

function parseRetryAfter(header: string | undefined, now: number): number {
  if (header === undefined) return DEFAULT_RETRY_AFTER_MS;
  const v = header.trim();
  let ms: number;
  if (/^\d+$/.test(v)) ms = Number(v) * 1000;
  else {
    const at = Date.parse(v);
    if (Number.isNaN(at) || !/[A-Za-z]/.test(v)) return DEFAULT_RETRY_AFTER_MS;
    ms = Math.max(0, at - now);
  }
  return Number.isFinite(ms) ? Math.min(ms, MAX_RETRY_AFTER_MS) : DEFAULT_RETRY_AFTER_MS;
}

/** The outcome of a response under config.response. */
export function evaluateResponse(
  policy: ResponsePolicy | undefined,
  res: Pick<OutboundResponse, 'status' | 'headers' | 'body' | 'truncated'>,
  now = Date.now(),
): SendResult {
  const p = policy ?? {};
  const status = res.status;
  const success = status >= 200 && status < 300 && (!p.success_statuses?.length || p.success_statuses.includes(status));
  if (success) {
    const check = p.body;
    if (!check) return { outcome: 'succeeded' };
    if (res.truncated) return { outcome: 'retry', error: `HTTP ${status}: the acknowledgement body reached the capture limit` };
    const text = res.body.toString('utf8');
    if (check.kind === 'text_equals') {
      return text.trim() === check.value
        ? { outcome: 'succeeded' }
        : { outcome: 'dead', error: `HTTP ${status}: the acknowledgement text did not match` };
    }
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      return { outcome: 'dead', error: `HTTP ${status}: the acknowledgement body is not valid JSON` };
    }
    let at: unknown = doc;
    for (const seg of parsePointer(check.pointer ?? '')) {
      if (Array.isArray(at) && /^(0|[1-9]\d*)$/.test(seg) && Number(seg) < at.length) at = at[Number(seg)];
      else if (at !== null && typeof at === 'object' && !Array.isArray(at) && Object.prototype.hasOwnProperty.call(at, seg)) {
        at = (at as Record<string, unknown>)[seg];
      } else return { outcome: 'dead', error: `HTTP ${status}: the acknowledgement value is missing` };
    }
    return jsonEqual(at, check.value)
      ? { outcome: 'succeeded' }
      : { outcome: 'dead', error: `HTTP ${status}: the acknowledgement value did not match` };
  }
  if (status === 429 && p.rate_limit === true) {
    return { outcome: 'deferred', reason: 'provider_rate', retryAfterMs: parseRetryAfter(res.headers['retry-after'], now) };
  }
  const error = `the destination answered HTTP ${status}`;
  if (p.retry_statuses === undefined || p.retry_statuses.includes(status)) return { outcome: 'retry', error };
  return { outcome: 'dead', error: `${error} (not a retryable status)` };
}

async function send(input: SendInput): Promise<SendResult> {
  const { sink, envelope, purpose, config } = input;
  const c = sink.config as WebhookConfig;
  let body: string;
  try {
    body = renderBody(sink, envelope, purpose, config).text;
  } catch (err) {
    if (err instanceof RenderError) return { outcome: 'dead', error: err.message };
    throw err;
  }
  const viaSecret = typeof c.url_secret_ref === 'string' && c.url_secret_ref !== '';
  const url = viaSecret ? input.urlSecret : typeof input.routing.url === 'string' ? input.routing.url : null;
  if (url === null) {
    return {
      outcome: 'retry',
      error: viaSecret ? 'the destination URL secret is not available' : 'the subscription has no destination URL',
    };
  }
  if (sink.secret_ref !== null && input.secret === null) return { outcome: 'retry', error: 'the sink secret is not available' };

  // a copy by assignment: headers added to a spread's copy would each make a new hidden class (eslint.config.js)
  const headers: Record<string, string> = mergeMembers(c.headers);
  headers['Content-Type'] = 'application/json';
  headers['Idempotency-Key'] = purpose === 'test' ? `${envelope.event_id}-test-${input.deliveryId}` : envelope.event_id;
  headers['X-Svc-Event-Id'] = envelope.event_id;
  if (purpose === 'test') headers['X-Svc-Delivery-Purpose'] = 'test';
  if (input.secret !== null) headers.Authorization = `Bearer ${input.secret}`;

  let res: OutboundResponse;
  try {
    res = await outboundRequest({
      url,
      method: 'POST',
      headers,
      body,
      timeoutMs: Math.max(1, Math.min(input.timeoutMs, c.timeout_ms ?? input.timeoutMs)),
      maxResponseBytes: c.max_response_bytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      allowPrivate: config.SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS,
      caFile: config.SVC_OUTBOUND_CA_FILE,
      signal: input.signal,
      // the Idempotency-Key lets the receiver drop a second copy (deliveries are retried anyway)
      idempotent: true,
    });
  } catch (err) {
    // a refused or unusable destination stays refused: dead at once, as the broker transports do
    if (err instanceof OutboundError) {
      const permanent = err.code === 'blocked_destination' || err.code === 'invalid_url';
      return { outcome: permanent ? 'dead' : 'retry', error: err.message };
    }
    return { outcome: 'retry', error: 'the request failed' };
  }
  return evaluateResponse(c.response, res);
}

export const webhookTransport: SinkTransport = {
  kind: 'webhook',
  validateConfig: (config) => validateConfig(config),
  validateRouting,
  render(sink, _routing, envelope, purpose, config) {
    try {
      return Promise.resolve(renderBody(sink, envelope, purpose, config).value);
    } catch (err) {
      if (err instanceof RenderError) {
        return Promise.reject(
          new ApiError('bad_request', `the sink payload cannot be rendered: ${err.message}`, {
            details: [{ path: 'payload', message: err.message }],
          }),
        );
      }
      return Promise.reject(err as Error);
    }
  },
  send,
  close: () => closeConnections(),
};
