// Key-value stream sink (Redis XADD over TLS). A client is kept per destination and credentials
// (kept.ts), connected to the screened address with no reconnects or offline queue, so a lost
// connection fails the attempt (retried by the worker) instead of replaying the command later, and
// a failed attempt other than the server's own refusal drops its client.
import { Redis, type RedisOptions } from 'ioredis';
import { ConnectionKeeper, destinationKey, type Held } from './kept.ts';
import type { ConfigProblem, EventEnvelope, SendInput, SendResult, SinkTransport } from './types.ts';
import {
  checkBool,
  checkInt,
  checkPayloadSize,
  Deadline,
  MAX_PAYLOAD_CAP,
  prepareDestination,
  SinkFailure,
  toResult,
  uriProblems,
  type UriRules,
} from './uri.ts';

const RULES: UriRules = { scheme: 'rediss', plainScheme: 'redis', defaultPort: 6379, path: 'db', query: [] };
export const DEFAULT_IO_TIMEOUT_MS = 25_000;
const MAX_STREAM_KEY_BYTES = 1024;
const ROUTING_MEMBERS = new Set(['stream']);

/** The entry's fields, in order; `payload` is the whole envelope as JSON. */
export function streamFields(envelope: EventEnvelope, purpose: 'event' | 'test'): Record<string, string> {
  const str = (v: unknown) => (v === null || v === undefined ? '' : String(v));
  const fields: Record<string, string> = {
    event_id: envelope.event_id,
    entity_type: envelope.entity_type,
    entity_name: str(envelope.entity_name),
    action: envelope.action,
    actor_kind: str(envelope.actor_kind),
    payload: JSON.stringify(envelope),
  };
  if (purpose === 'test') fields.delivery_purpose = 'test';
  return fields;
}

function validateConfig(config: Record<string, unknown>, secretRef: string | null): ConfigProblem[] {
  const problems: ConfigProblem[] = [...uriProblems(config.uri, secretRef, RULES)];
  if (config.max_len !== undefined && config.max_len !== null) checkInt(config, 'max_len', 1, Number.MAX_SAFE_INTEGER, problems);
  checkBool(config, 'approximate_trim', problems);
  checkInt(config, 'max_payload_bytes', 1, MAX_PAYLOAD_CAP, problems);
  checkInt(config, 'io_timeout_ms', 1, 3_600_000, problems);
  return problems;
}

function validateRouting(routing: Record<string, unknown>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const key of Object.keys(routing)) {
    if (!ROUTING_MEMBERS.has(key))
      problems.push({ path: `routing.${key}`, message: `${key} is not a routing member for a redis_stream sink` });
  }
  const stream = routing.stream;
  if (typeof stream !== 'string' || stream === '') {
    problems.push({ path: 'routing.stream', message: 'stream is required (the stream key)' });
  } else if (Buffer.byteLength(stream) > MAX_STREAM_KEY_BYTES) {
    problems.push({ path: 'routing.stream', message: `stream must be at most ${MAX_STREAM_KEY_BYTES} bytes` });
  }
  return problems;
}

// A key of another type will not become a stream by retrying; other refusals (auth, OOM, limits) may pass.
const PERMANENT_REPLIES = new Set(['WRONGTYPE']);

function replyFailure(err: unknown): SinkFailure | null {
  if ((err as { name?: unknown })?.name !== 'ReplyError') return null;
  const code = /^([A-Z]{2,20})\b/.exec(String((err as Error).message))?.[1] ?? 'ERR';
  return new SinkFailure(PERMANENT_REPLIES.has(code) ? 'dead' : 'retry', `the redis server refused the entry (${code})`);
}

/** A kept client (kept.ts) and what its connection last reported. */
interface KeptClient {
  client: Redis;
  /**
   * ioredis reports the cause (refused connection, WRONGPASS) on 'error' and rejects the pending
   * call with a generic "Connection is closed."; the cause is what the result names
   */
  lastError: unknown;
}

async function openClient(options: RedisOptions): Promise<KeptClient> {
  const k: KeptClient = { client: new Redis(options), lastError: undefined };
  k.client.on('error', (err: unknown) => {
    k.lastError ??= err;
  });
  try {
    await k.client.connect();
  } catch (err) {
    k.client.disconnect();
    throw k.lastError ?? err;
  }
  return k;
}

const clients = new ConnectionKeeper<KeptClient>(
  (k) => k.client.disconnect(),
  (k, drop) => {
    k.client.on('close', drop);
    k.client.on('end', drop);
  },
);

async function send(input: SendInput): Promise<SendResult> {
  const { sink, envelope, routing } = input;
  const cfg = sink.config;
  const ioTimeout = typeof cfg.io_timeout_ms === 'number' ? cfg.io_timeout_ms : DEFAULT_IO_TIMEOUT_MS;
  const timeoutMs = Math.min(ioTimeout, input.timeoutMs);
  const deadline = new Deadline(timeoutMs, input.signal);
  let held: Held<KeptClient> | undefined;
  let broken = true;
  try {
    const problems = [...validateConfig(cfg, sink.secret_ref), ...validateRouting(routing)];
    if (problems.length) throw new SinkFailure('dead', `the sink configuration is invalid: ${problems[0]!.message}`);
    const fields = streamFields(envelope, input.purpose);
    checkPayloadSize(Buffer.byteLength(fields.payload!), cfg);
    const dest = await prepareDestination(cfg.uri, sink.secret_ref, input.secret, RULES, input.config, deadline);
    const options: RedisOptions = {
      host: dest.address.address,
      port: dest.port,
      family: dest.address.family,
      username: dest.username || undefined,
      password: dest.password || undefined,
      db: dest.path === '' ? 0 : Number(dest.path),
      tls: dest.tls,
      lazyConnect: true,
      connectTimeout: timeoutMs,
      commandTimeout: timeoutMs,
      socketTimeout: timeoutMs,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      reconnectOnError: () => false,
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      enableReadyCheck: false,
      enableAutoPipelining: false,
    };
    const key = destinationKey('redis', dest, [options.username, options.password, options.db, timeoutMs]);
    held = await clients.take(
      key,
      () => openClient(options),
      (p) => deadline.run(p),
    );
    const trim = typeof cfg.max_len === 'number' ? ['MAXLEN', ...(cfg.approximate_trim === false ? [] : ['~']), String(cfg.max_len)] : [];
    const args = [...trim, '*', ...Object.entries(fields).flat()];
    let id: unknown;
    try {
      id = await deadline.run(held.conn.client.xadd(routing.stream as string, ...args));
    } catch (err) {
      // the server answered: the connection is fine
      if (replyFailure(err)) broken = false;
      throw err;
    }
    broken = false;
    if (typeof id !== 'string' || id === '') throw new SinkFailure('retry', 'the redis server did not return an entry id');
    return { outcome: 'succeeded' };
  } catch (thrown) {
    const generic = !(thrown instanceof SinkFailure) && /Connection is closed/.test(String((thrown as Error)?.message));
    const cause = held?.conn.lastError;
    const err = generic && cause ? cause : thrown;
    if (err instanceof SinkFailure) return { outcome: err.outcome, error: err.message };
    const reply = replyFailure(err);
    if (reply) return { outcome: reply.outcome, error: reply.message };
    const message = String((err as Error)?.message ?? '');
    if (/timed? ?out/i.test(message)) return { outcome: 'retry', error: 'the redis server did not respond within the timeout' };
    return toResult(err, 'redis server');
  } finally {
    deadline.clear();
    held?.release(broken);
  }
}

export const redisStreamTransport: SinkTransport = {
  kind: 'redis_stream',
  validateConfig,
  validateRouting,
  render(_sink, _routing, envelope, purpose) {
    return Promise.resolve(streamFields(envelope, purpose));
  },
  send,
  close: () => clients.closeAll(),
};
