// Message-broker sink (AMQP 0-9-1 over TLS). One connection and confirm channel per attempt: the
// destination is screened and pinned afresh each time and a rotated secret takes effect at once.
// Routing key `<entity_type>.<action>`, message id = event UUID, persistent when durable; the
// attempt succeeds only on a publisher confirm, and with `mandatory` a returned (unroutable)
// message is a failed attempt.
import amqplib, { type ChannelModel, type Message, type Options } from 'amqplib';
import type { ConfigProblem, SendInput, SendResult, SinkTransport } from './types.ts';
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

const RULES: UriRules = {
  scheme: 'amqps',
  plainScheme: 'amqp',
  defaultPort: 5671,
  path: 'vhost',
  query: ['heartbeat', 'frameMax', 'channelMax'],
};
const EXCHANGE_TYPES = ['direct', 'fanout', 'topic', 'headers'] as const;

const REPLY_NAMES: Record<number, string> = {
  311: 'CONTENT_TOO_LARGE',
  312: 'NO_ROUTE',
  320: 'CONNECTION_FORCED',
  402: 'INVALID_PATH',
  403: 'ACCESS_REFUSED',
  404: 'NOT_FOUND',
  405: 'RESOURCE_LOCKED',
  406: 'PRECONDITION_FAILED',
  501: 'FRAME_ERROR',
  502: 'SYNTAX_ERROR',
  503: 'COMMAND_INVALID',
  504: 'CHANNEL_ERROR',
  505: 'UNEXPECTED_FRAME',
  506: 'RESOURCE_ERROR',
  530: 'NOT_ALLOWED',
  540: 'NOT_IMPLEMENTED',
  541: 'INTERNAL_ERROR',
};
// A mismatching exchange declaration or an oversized message will not change by retrying.
const PERMANENT_REPLIES = new Set([311, 406]);

export function routingKey(envelope: { entity_type: string; action: string }): string {
  return `${envelope.entity_type}.${envelope.action}`;
}

function validateConfig(config: Record<string, unknown>, secretRef: string | null): ConfigProblem[] {
  const problems: ConfigProblem[] = [...uriProblems(config.uri, secretRef, RULES)];
  const exchange = config.exchange;
  if (typeof exchange !== 'string') {
    problems.push({ path: 'config.exchange', message: 'exchange is required (a string)' });
  } else if (Buffer.byteLength(exchange) > 255 || !/^[A-Za-z0-9_.:-]*$/.test(exchange)) {
    problems.push({
      path: 'config.exchange',
      message: 'exchange must be at most 255 bytes of letters, digits, hyphen, underscore, period or colon',
    });
  } else if (config.declare_exchange === true && (exchange === '' || exchange.startsWith('amq.'))) {
    problems.push({ path: 'config.exchange', message: 'declare_exchange needs a named exchange outside the reserved amq. prefix' });
  }
  if (config.exchange_type !== undefined && !EXCHANGE_TYPES.includes(config.exchange_type as never)) {
    problems.push({ path: 'config.exchange_type', message: `exchange_type must be one of ${EXCHANGE_TYPES.join(', ')}` });
  }
  checkBool(config, 'declare_exchange', problems);
  checkBool(config, 'durable', problems);
  checkBool(config, 'mandatory', problems);
  checkInt(config, 'max_payload_bytes', 1, MAX_PAYLOAD_CAP, problems);
  return problems;
}

function validateRouting(routing: Record<string, unknown>): ConfigProblem[] {
  return Object.keys(routing).map((key) => ({
    path: `routing.${key}`,
    message: `${key} is not a routing member for an amqp sink (the routing key is <entity_type>.<action>)`,
  }));
}

function replyFailure(err: unknown): SinkFailure | null {
  const e = err as { code?: unknown; message?: unknown };
  let code = typeof e?.code === 'number' ? e.code : NaN;
  if (Number.isNaN(code) && typeof e?.message === 'string') {
    // Handshake refusals carry the reply only in the message, e.g. "... 403 (ACCESS-REFUSED) ..."
    const m = /\b([2-5]\d\d) \([A-Z_-]+\)/.exec(e.message);
    if (m) code = Number(m[1]);
  }
  const name = REPLY_NAMES[code];
  if (!name) return null;
  return new SinkFailure(PERMANENT_REPLIES.has(code) ? 'dead' : 'retry', `the broker refused the message (${code} ${name})`);
}

async function send(input: SendInput): Promise<SendResult> {
  const { sink, envelope } = input;
  const cfg = sink.config;
  const deadline = new Deadline(input.timeoutMs, input.signal);
  let conn: ChannelModel | undefined;
  let finished = false;
  try {
    const body = Buffer.from(JSON.stringify(envelope), 'utf8');
    checkPayloadSize(body.length, cfg);
    const problems = validateConfig(cfg, sink.secret_ref);
    if (problems.length) throw new SinkFailure('dead', `the sink configuration is invalid: ${problems[0]!.message}`);
    const dest = await prepareDestination(cfg.uri, sink.secret_ref, input.secret, RULES, input.config, deadline);
    const num = (k: string) => (dest.query.has(k) ? Number(dest.query.get(k)) : undefined);
    const connect: Options.Connect = {
      protocol: 'amqps',
      hostname: dest.address.address,
      port: dest.port,
      // undefined credentials let the library apply the protocol default (guest), as for a bare URI
      username: dest.username === '' && dest.password === '' ? undefined : dest.username,
      password: dest.username === '' && dest.password === '' ? undefined : dest.password,
      vhost: dest.path === '' ? '/' : dest.path,
      heartbeat: num('heartbeat'),
      frameMax: num('frameMax'),
      channelMax: num('channelMax'),
    };
    const connecting = amqplib.connect(connect, { timeout: input.timeoutMs, noDelay: true, ...dest.tls });
    // a connection that completes after the deadline is closed at once
    void connecting.then((c) => (finished ? closeQuietly(c) : undefined)).catch(() => {});
    conn = await deadline.run(connecting);
    conn.on('error', () => {}); // surfaced through the pending operation instead
    const ch = await deadline.run(conn.createConfirmChannel());
    let channelError: unknown;
    ch.on('error', (err: unknown) => {
      channelError = err;
    });
    const messageId = envelope.event_id;
    let returned = false;
    ch.on('return', (msg: Message) => {
      if (msg.properties.messageId === messageId) returned = true;
    });
    const exchange = cfg.exchange as string;
    const durable = cfg.durable !== false;
    if (cfg.declare_exchange === true) {
      await deadline.run(ch.assertExchange(exchange, (cfg.exchange_type as string | undefined) ?? 'topic', { durable }));
    }
    const headers: Record<string, string> = { 'x-svc-event-id': envelope.event_id };
    if (input.purpose === 'test') headers['x-svc-delivery-purpose'] = 'test';
    const occurred = Date.parse(String(envelope.occurred_at ?? ''));
    const options: Options.Publish = {
      messageId,
      contentType: 'application/json',
      contentEncoding: 'utf-8',
      persistent: durable,
      mandatory: cfg.mandatory === true,
      type: routingKey(envelope),
      appId: 'inventory-data-service',
      headers,
      ...(Number.isFinite(occurred) ? { timestamp: Math.floor(occurred / 1000) } : {}),
    };
    try {
      await deadline.run(
        new Promise<void>((ok, fail) => {
          ch.publish(exchange, routingKey(envelope), body, options, (err: unknown) => (err ? fail(err) : ok()));
        }),
      );
    } catch (err) {
      if (channelError) throw channelError;
      if (err instanceof SinkFailure) throw err;
      throw new SinkFailure('retry', 'the broker did not confirm the message (nack or channel closed)');
    }
    if (returned) throw new SinkFailure('retry', 'the broker returned the message as unroutable (mandatory is set)');
    return { outcome: 'succeeded' };
  } catch (err) {
    if (err instanceof SinkFailure) return { outcome: err.outcome, error: err.message };
    const reply = replyFailure(err);
    if (reply) return { outcome: reply.outcome, error: reply.message };
    return toResult(err, 'broker');
  } finally {
    finished = true;
    deadline.clear();
    if (conn) closeQuietly(conn);
  }
}

/** Closes politely, and drops the socket when the broker does not answer within a second. */
function closeQuietly(conn: ChannelModel): void {
  const socket = (conn.connection as { stream?: { destroy(): void } }).stream;
  const timer = setTimeout(() => socket?.destroy(), 1000);
  void conn
    .close()
    .catch(() => socket?.destroy())
    .finally(() => clearTimeout(timer));
}

export const amqpTransport: SinkTransport = {
  kind: 'amqp',
  validateConfig,
  validateRouting,
  render(_sink, _routing, envelope) {
    return Promise.resolve(envelope);
  },
  send,
};
