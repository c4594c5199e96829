// The one small interface every event-sink transport implements (webhook, amqp, redis_stream,
// email). The delivery worker owns claiming, fencing, backoff and bookkeeping; a transport only
// validates its own config/routing members, renders the payload, and performs one send attempt.
import type { Config } from '../config.ts';
import type { EventEnvelope, SinkDefinition, SinkKind } from '../domain/event-subscriptions.ts';

export type { EventEnvelope, SinkDefinition, SinkKind } from '../domain/event-subscriptions.ts';

/** A problem with a config or routing member: becomes a 400 with details. */
export interface ConfigProblem {
  path: string;
  message: string;
}

export interface SendInput {
  sink: SinkDefinition;
  /** The subscription's routing object (already validated for this kind). */
  routing: Record<string, unknown>;
  envelope: EventEnvelope;
  purpose: 'event' | 'test';
  deliveryId: number;
  /**
   * Resolved secret value for `sink.secret_ref` (and, for webhooks, the URL for
   * `config.url_secret_ref` in `urlSecret`); null when the sink names none. Never logged.
   */
  secret: string | null;
  urlSecret: string | null;
  /** SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS, possibly lowered by the sink's own config. */
  timeoutMs: number;
  signal: AbortSignal;
  config: Config;
}

/**
 * The result of one attempt. Error texts are public (stored in `last_error`): they never contain
 * response contents, destination URLs or secrets.
 */
export type SendResult =
  | { outcome: 'succeeded' }
  /** Transport failure or failed acknowledgement: retried with backoff until the attempt limit. */
  | { outcome: 'retry'; error: string }
  /** Permanent failure per the response rules: dead at once. */
  | { outcome: 'dead'; error: string }
  /** Provider rate limit (HTTP 429 with rate_limit): back to pending, no attempt consumed. */
  | { outcome: 'deferred'; reason: 'provider_rate'; retryAfterMs: number };

export interface SinkTransport {
  kind: SinkKind;
  /** Problems of this kind's `config` members (other kinds' members are rejected by the caller). */
  validateConfig(config: Record<string, unknown>, secretRef: string | null): ConfigProblem[];
  /** Problems of a subscription's `routing` for a sink of this kind. */
  validateRouting(routing: Record<string, unknown>, sinkConfig: Record<string, unknown>): ConfigProblem[];
  /**
   * The payload a send would carry, without any secret lookup or network call (sink preview).
   * Throws ApiError 400 when the sink's templates cannot render this event.
   */
  render(
    sink: SinkDefinition,
    routing: Record<string, unknown>,
    envelope: EventEnvelope,
    purpose: 'event' | 'test',
    config: Config,
  ): Promise<unknown>;
  /** One delivery attempt. Must not throw for transport problems: return retry/dead instead. */
  send(input: SendInput): Promise<SendResult>;
  /** Releases pooled connections (broker channels, redis clients, SMTP pools) at shutdown. */
  close?(): Promise<void>;
}
