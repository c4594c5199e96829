// Message-broker sink (AMQP 0-9-1 over TLS). A connection and its confirm channel are kept per
// destination and credentials (kept.ts): the destination is screened and pinned afresh at each
// attempt, a new address or a rotated secret opens a new connection at once, and a failed attempt
// drops its connection.
// Routing key `<entity_type>.<action>`, message id = event UUID, persistent when durable; the
// attempt succeeds only on a publisher confirm, and with `mandatory` a returned (unroutable)
// message is a failed attempt.
import amqplib, { type ChannelModel, type ConfirmChannel, type Message, type Options } from 'amqplib';
import { ConnectionKeeper, destinationKey, type Held } from './kept.ts';
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

/** A kept connection with its confirm channel (kept.ts). */
interface Publisher {
  model: ChannelModel;
  ch: ConfirmChannel;
  /** Exchanges declared on this channel (name, type, durability). */
  declared: Set<string>;
  /** Messages the broker returned as unroutable, by message id, not yet seen by their sender. */
  returned: Map<string, number>;
  /** What closed the channel (a broker refusal such as 404 NOT_FOUND), when it was closed. */
  channelError: unknown;
}

async function openPublisher(connect: Options.Connect, socket: object): Promise<Publisher> {
  const model = await amqplib.connect(connect, socket);
  model.on('error', () => {}); // surfaced through the pending operation instead
  try {
    const ch = await model.createConfirmChannel();
    const p: Publisher = { model, ch, declared: new Set(), returned: new Map(), channelError: undefined };
    ch.on('error', (err: unknown) => {
      p.channelError = err;
    });
    ch.on('return', (msg: Message) => {
      const id = msg.properties.messageId as string | undefined;
      if (id) p.returned.set(id, (p.returned.get(id) ?? 0) + 1);
    });
    return p;
  } catch (err) {
    void closeQuietly(model);
    throw err;
  }
}

const publishers = new ConnectionKeeper<Publisher>(
  (p) => closeQuietly(p.model),
  (p, drop) => {
    p.model.on('close', drop);
    p.ch.on('close', drop);
  },
);

async function send(input: SendInput): Promise<SendResult> {
  const { sink, envelope } = input;
  const cfg = sink.config;
  const deadline = new Deadline(input.timeoutMs, input.signal);
  let held: Held<Publisher> | undefined;
  let broken = true;
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
    const key = destinationKey('amqp', dest, [
      connect.username,
      connect.password,
      connect.vhost,
      connect.heartbeat,
      connect.frameMax,
      connect.channelMax,
    ]);
    held = await publishers.take(
      key,
      () => openPublisher(connect, Object.assign({ timeout: input.timeoutMs, noDelay: true }, dest.tls)),
      (p) => deadline.run(p),
    );
    const p = held.conn;
    const exchange = cfg.exchange as string;
    const durable = cfg.durable !== false;
    if (cfg.declare_exchange === true) {
      const type = (cfg.exchange_type as string | undefined) ?? 'topic';
      const declared = JSON.stringify([exchange, type, durable]);
      if (!p.declared.has(declared)) {
        await deadline.run(p.ch.assertExchange(exchange, type, { durable }));
        p.declared.add(declared);
      }
    }
    const messageId = envelope.event_id;
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
          p.ch.publish(exchange, routingKey(envelope), body, options, (err: unknown) => (err ? fail(err) : ok()));
        }),
      );
    } catch (err) {
      if (p.channelError) throw p.channelError;
      if (err instanceof SinkFailure) throw err;
      throw new SinkFailure('retry', 'the broker did not confirm the message (nack or channel closed)');
    }
    // confirmed: the channel is fine, whatever became of the message
    broken = false;
    // the broker sends a message's return before its confirm
    const returned = p.returned.get(messageId) ?? 0;
    if (returned > 0) {
      if (returned === 1) p.returned.delete(messageId);
      else p.returned.set(messageId, returned - 1);
      throw new SinkFailure('retry', 'the broker returned the message as unroutable (mandatory is set)');
    }
    return { outcome: 'succeeded' };
  } catch (err) {
    if (err instanceof SinkFailure) return { outcome: err.outcome, error: err.message };
    const reply = replyFailure(err);
    if (reply) return { outcome: reply.outcome, error: reply.message };
    return toResult(err, 'broker');
  } finally {
    deadline.clear();
    held?.release(broken);
  }
}

/** Closes politely, and drops the socket when the broker does not answer within a second. */
function closeQuietly(conn: ChannelModel): Promise<void> {
  const socket = (conn.connection as { stream?: { destroy(): void } }).stream;
  const timer = setTimeout(() => socket?.destroy(), 1000);
  return conn
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
  close: () => publishers.closeAll(),
};
