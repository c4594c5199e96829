// Rules shared by the broker transports (amqp, redis_stream, email): the connection URI (TLS
// scheme, no literal credentials, `{secret}` as the password), destination screening with a
// pinned address, TLS trust, payload limits, attempt deadlines, template context, and error
// texts that never carry URIs, secrets or payloads.
import { isIP } from 'node:net';
import type { SecureContext } from 'node:tls';
import type { Config } from '../config.ts';
import { SETTINGS } from '../config.ts';
import { OutboundError, resolveAndScreen, type ResolvedAddress } from '../outbound/http.ts';
import { MIN_TLS_VERSION, trustContext } from '../outbound/trust.ts';
import type { TemplateLimits } from '../domain/remote-targets.ts';
import { mergeMembers } from '../domain/json-patch.ts';
import type { ConfigProblem, EventEnvelope, SendResult } from './types.ts';

export const SECRET_PLACEHOLDER = '{secret}';
export const DEFAULT_MAX_PAYLOAD_BYTES = 1_000_000;
const MAX_URI_LENGTH = 2048;
// Stands in for `{secret}` while a URI is parsed; only URL-safe characters, so it stays verbatim.
const SENTINEL = 'svc-secret-placeholder-5e1f0c';

export interface UriRules {
  scheme: 'amqps' | 'rediss' | 'smtps';
  /** The plaintext scheme, named in the error when it is used instead. */
  plainScheme: string;
  defaultPort: number;
  /** What the path may hold: an AMQP virtual host, a Redis database number, or nothing. */
  path: 'vhost' | 'db' | 'none';
  /** Query parameters allowed (non-negative integer values). */
  query: readonly string[];
}

/** A permanent (`dead`) or transient (`retry`) failure of one attempt, with a public message. */
export class SinkFailure extends Error {
  readonly outcome: 'retry' | 'dead';
  constructor(outcome: 'retry' | 'dead', message: string) {
    super(message);
    this.outcome = outcome;
    this.name = 'SinkFailure';
  }
}

function countPlaceholders(raw: string): number {
  return raw.split(SECRET_PLACEHOLDER).length - 1;
}

/** Parses a URI (with the placeholder or an encoded secret already in place) under the rules. */
function parseUri(text: string, rules: UriRules, hasSecret: boolean): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new SinkFailure('dead', 'is not a valid URI');
  }
  if (url.protocol === `${rules.plainScheme}:`) {
    throw new SinkFailure('dead', `must use the TLS scheme ${rules.scheme}:// (${rules.plainScheme}:// is not accepted)`);
  }
  if (url.protocol !== `${rules.scheme}:`) throw new SinkFailure('dead', `must use the scheme ${rules.scheme}://`);
  if (url.hostname === '') throw new SinkFailure('dead', 'has no host');
  if (url.hash !== '') throw new SinkFailure('dead', 'must not have a fragment');
  if (hasSecret) {
    if (url.password === '') {
      throw new SinkFailure(
        'dead',
        `must carry ${SECRET_PLACEHOLDER} as the password, e.g. ${rules.scheme}://user:${SECRET_PLACEHOLDER}@host`,
      );
    }
  } else if (url.username !== '' || url.password !== '') {
    throw new SinkFailure('dead', `must not contain literal credentials; use secret_ref with ${SECRET_PLACEHOLDER} as the password`);
  }
  const path = url.pathname;
  if (rules.path === 'none' && path !== '' && path !== '/') throw new SinkFailure('dead', 'must not have a path');
  if (rules.path === 'db' && path !== '' && path !== '/' && !/^\/\d{1,5}$/.test(path)) {
    throw new SinkFailure('dead', 'path must be a database number, e.g. /0');
  }
  if (rules.path === 'vhost' && path.slice(1).includes('/')) {
    throw new SinkFailure('dead', 'path must be one virtual host segment (encode a slash as %2F)');
  }
  for (const [key, value] of url.searchParams) {
    if (!rules.query.includes(key)) {
      const allowed = rules.query.length ? `only ${rules.query.join(', ')} may be given` : 'no query parameters are accepted';
      throw new SinkFailure('dead', `has an unsupported query parameter (${allowed})`);
    }
    if (!/^\d{1,9}$/.test(value)) throw new SinkFailure('dead', `query parameter ${key} must be a non-negative integer`);
  }
  return url;
}

/** Problems of a `config.uri` value for a sink with or without a `secret_ref`. */
export function uriProblems(raw: unknown, secretRef: string | null, rules: UriRules): ConfigProblem[] {
  const bad = (message: string) => [{ path: 'config.uri', message: `uri ${message}` }];
  if (typeof raw !== 'string' || raw === '') return bad('is required');
  if (raw.length > MAX_URI_LENGTH) return bad(`must be at most ${MAX_URI_LENGTH} characters`);
  if (/[\s\x00-\x1f\x7f]/.test(raw)) return bad('must not contain whitespace or control characters');
  const n = countPlaceholders(raw);
  if (secretRef === null && n > 0) return bad(`contains ${SECRET_PLACEHOLDER} but the sink has no secret_ref`);
  if (secretRef !== null && n !== 1) return bad(`must contain ${SECRET_PLACEHOLDER} exactly once when the sink has a secret_ref`);
  try {
    const url = parseUri(raw.replace(SECRET_PLACEHOLDER, SENTINEL), rules, secretRef !== null);
    if (secretRef !== null && (url.password !== SENTINEL || url.username.includes(SENTINEL))) {
      return bad(`must carry ${SECRET_PLACEHOLDER} as the whole password, e.g. ${rules.scheme}://user:${SECRET_PLACEHOLDER}@host`);
    }
  } catch (err) {
    return bad((err as Error).message);
  }
  return [];
}

/** A screened destination: connect to `address`, verify the certificate for `servername`. */
export interface Destination {
  /** Host name as written (brackets removed from IPv6 literals). */
  hostname: string;
  address: ResolvedAddress;
  port: number;
  /** Decoded credentials ('' when absent). */
  username: string;
  password: string;
  /** Path without the leading slash, still percent-encoded. */
  path: string;
  query: URLSearchParams;
  tls: { servername?: string; secureContext?: SecureContext; rejectUnauthorized: true; minVersion: typeof MIN_TLS_VERSION };
}

/**
 * Substitutes the resolved secret (percent-encoded) for `{secret}`, parses the URI, resolves the
 * host, screens every address (private ones only with SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS) and
 * returns the pinned destination. Throws SinkFailure.
 */
export async function prepareDestination(
  rawUri: unknown,
  secretRef: string | null,
  secret: string | null,
  rules: UriRules,
  config: Config,
  deadline: Deadline,
): Promise<Destination> {
  const problems = uriProblems(rawUri, secretRef, rules);
  if (problems.length) throw new SinkFailure('dead', `the sink configuration is invalid: ${problems[0]!.message}`);
  if (secretRef !== null && (secret === null || secret === '')) throw new SinkFailure('dead', 'the sink secret could not be resolved');
  const text = secretRef !== null ? (rawUri as string).replace(SECRET_PLACEHOLDER, encodeURIComponent(secret!)) : (rawUri as string);
  const url = parseUri(text, rules, secretRef !== null);
  let username: string;
  let password: string;
  try {
    username = decodeURIComponent(url.username);
    password = decodeURIComponent(url.password);
  } catch {
    throw new SinkFailure('dead', 'the sink configuration is invalid: uri user name is not valid percent-encoding');
  }
  let address: ResolvedAddress;
  try {
    address = await deadline.run(resolveAndScreen(url, { allowPrivate: config.SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS }));
  } catch (err) {
    if (err instanceof OutboundError) throw new SinkFailure(err.code === 'blocked_destination' ? 'dead' : 'retry', err.message);
    throw err;
  }
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  let trusted: SecureContext | undefined;
  try {
    trusted = trustContext(config.SVC_OUTBOUND_CA_FILE);
  } catch {
    throw new SinkFailure('retry', 'the trusted CA file could not be read');
  }
  // TLS options for the socket: built by assignment (eslint.config.js); their order does not matter
  const tls: Destination['tls'] = { rejectUnauthorized: true, minVersion: MIN_TLS_VERSION };
  if (!isIP(hostname)) tls.servername = hostname;
  if (trusted) tls.secureContext = trusted;
  return {
    hostname,
    address,
    port: url.port === '' ? rules.defaultPort : Number(url.port),
    username,
    password,
    path: url.pathname.replace(/^\//, ''),
    query: url.searchParams,
    tls,
  };
}

// ---- attempt deadline -----------------------------------------------------------------------

/** One deadline for a whole attempt (DNS, connect, TLS, protocol, acknowledgement). */
export class Deadline {
  private readonly expiry: Promise<never>;
  private timer: NodeJS.Timeout | undefined;
  private onAbort: (() => void) | undefined;
  private readonly signal: AbortSignal;

  constructor(ms: number, signal: AbortSignal) {
    this.signal = signal;
    this.expiry = new Promise<never>((_, fail) => {
      this.timer = setTimeout(() => fail(new SinkFailure('retry', 'the destination did not respond within the timeout')), ms);
      this.onAbort = () => fail(new SinkFailure('retry', 'the attempt was aborted'));
      if (signal.aborted) this.onAbort();
      else signal.addEventListener('abort', this.onAbort, { once: true });
    });
    this.expiry.catch(() => {});
  }

  /** Resolves with `p`, or rejects with a retryable SinkFailure when the deadline passes first. */
  run<T>(p: Promise<T>): Promise<T> {
    p.catch(() => {}); // a late rejection after the deadline is not an unhandled one
    return Promise.race([p, this.expiry]);
  }

  clear(): void {
    clearTimeout(this.timer);
    if (this.onAbort) this.signal.removeEventListener('abort', this.onAbort);
  }
}

// ---- payloads and templates -----------------------------------------------------------------

export function maxPayloadBytes(config: Record<string, unknown>): number {
  const v = config.max_payload_bytes;
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 ? v : DEFAULT_MAX_PAYLOAD_BYTES;
}

export function checkPayloadSize(bytes: number, config: Record<string, unknown>): void {
  const limit = maxPayloadBytes(config);
  if (bytes > limit) throw new SinkFailure('dead', `the payload is ${bytes} bytes, above max_payload_bytes (${limit})`);
}

/** Template context: the envelope fields at top level, the whole envelope as `event`, and the test marker. */
export function templateContext(envelope: EventEnvelope, purpose: 'event' | 'test'): Record<string, unknown> {
  return mergeMembers(envelope, { event: envelope, test: purpose === 'test', test_marker: purpose === 'test' ? '[TEST] ' : '' });
}

/** Limits for checking template syntax when a sink is saved (the configured ones apply when rendering). */
export const DEFAULT_TEMPLATE_LIMITS: TemplateLimits = {
  fuel: Number(SETTINGS.SVC_EXPORT_TEMPLATE_FUEL.default),
  recursionLimit: Number(SETTINGS.SVC_EXPORT_TEMPLATE_RECURSION_LIMIT.default),
};

// ---- config member checks -------------------------------------------------------------------

export function checkInt(config: Record<string, unknown>, key: string, min: number, max: number, problems: ConfigProblem[]): void {
  const v = config[key];
  if (v === undefined) return;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    problems.push({ path: `config.${key}`, message: `${key} must be an integer from ${min} to ${max}` });
  }
}

export function checkBool(config: Record<string, unknown>, key: string, problems: ConfigProblem[]): void {
  const v = config[key];
  if (v !== undefined && typeof v !== 'boolean') problems.push({ path: `config.${key}`, message: `${key} must be a boolean` });
}

/** max_payload_bytes: 1 byte .. 64 MiB. */
export const MAX_PAYLOAD_CAP = 64 * 1024 * 1024;

// ---- error texts ----------------------------------------------------------------------------

const TLS_CODES = /^(CERT_|ERR_TLS_|ERR_SSL_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO_|HOSTNAME_MISMATCH|ERR_OSSL)/;

/** A connection-level error as a retryable result whose text names only the error code. */
export function connectionFailure(err: unknown, peer: string): SinkFailure {
  if (err instanceof SinkFailure) return err;
  const code = String((err as { code?: unknown })?.code ?? '');
  const safe = /^[A-Z0-9_]{1,40}$/.test(code) ? code : '';
  if (TLS_CODES.test(safe)) return new SinkFailure('retry', `the TLS connection to the ${peer} failed (${safe})`);
  if (safe === 'ETIMEDOUT') return new SinkFailure('retry', `the ${peer} did not respond within the timeout`);
  return new SinkFailure('retry', `the connection to the ${peer} failed${safe ? ` (${safe})` : ''}`);
}

export function toResult(err: unknown, peer: string): SendResult {
  const f = connectionFailure(err, peer);
  return { outcome: f.outcome, error: f.message };
}
