// The transport registry: which sink kinds this deployment can deliver to, and the checks every
// sink and subscription write goes through (members of another kind, the transport's own config
// and routing rules). A kind without a registered transport is "not available in this deployment".
import { ApiError, badRequest, conflict, notFound, type ErrorDetail } from '../domain/errors.ts';
import { validateSubscription, type SinkFields, type SubscriptionFields } from '../domain/event-subscriptions.ts';
import type { ConfigProblem, SinkKind, SinkTransport } from './types.ts';
import { WEBHOOK_CONFIG_MEMBERS, webhookTransport } from './webhook.ts';
import { amqpTransport } from './amqp.ts';
import { redisStreamTransport } from './redis-stream.ts';
import { emailTransport } from './email.ts';
import { allowedRoutingProblems, unlistedRouting } from './allowed-routing.ts';

export const SINK_KINDS: readonly SinkKind[] = ['webhook', 'amqp', 'redis_stream', 'email'];

/** The config members each kind owns (openapi.yaml EventSinkConfig). */
export const CONFIG_MEMBERS: Readonly<Record<SinkKind, readonly string[]>> = {
  webhook: WEBHOOK_CONFIG_MEMBERS,
  amqp: ['uri', 'exchange', 'exchange_type', 'declare_exchange', 'durable', 'mandatory', 'max_payload_bytes'],
  redis_stream: ['uri', 'max_len', 'approximate_trim', 'max_payload_bytes', 'io_timeout_ms', 'allowed_routing'],
  email: ['uri', 'from', 'reply_to', 'max_payload_bytes', 'subject_template', 'body_template', 'allowed_routing'],
};

const transports = new Map<SinkKind, SinkTransport>();

export function registerTransport(t: SinkTransport): void {
  transports.set(t.kind, t);
}

registerTransport(webhookTransport);
registerTransport(amqpTransport);
registerTransport(redisStreamTransport);
registerTransport(emailTransport);

export function transportFor(kind: SinkKind): SinkTransport | undefined {
  return transports.get(kind);
}

export function availableKinds(): SinkKind[] {
  return SINK_KINDS.filter((k) => transports.has(k));
}

function unavailable(kind: SinkKind): ErrorDetail {
  return {
    path: 'body.kind',
    message: `the ${kind} transport is not available in this deployment (available: ${availableKinds().join(', ')})`,
  };
}

const toDetail = (p: ConfigProblem): ErrorDetail => ({ path: `body.${p.path}`, message: p.message });

/** Checks a sink's kind, config and secret_ref together; 400 with every problem. */
export function validateSinkConfig(kind: SinkKind, config: Record<string, unknown>, secretRef: string | null): void {
  const t = transports.get(kind);
  if (!t) throw badRequest(`transport not available in this deployment: ${kind}`, [unavailable(kind)]);
  const details: ErrorDetail[] = [];
  const own = CONFIG_MEMBERS[kind];
  for (const k of Object.keys(config)) {
    if (!own.includes(k)) details.push({ path: `body.config.${k}`, message: `is not a ${kind} config member` });
  }
  if (details.length === 0) {
    details.push(...t.validateConfig(config, secretRef).map(toDetail));
    details.push(...allowedRoutingProblems(kind, config.allowed_routing).map(toDetail));
  }
  if (details.length) throw badRequest('the event sink configuration is invalid', details);
}

/** Problems of a subscription's routing for a sink (as 400 details; the kind's absence is one). */
export function routingProblems(kind: SinkKind, routing: Record<string, unknown>, sinkConfig: Record<string, unknown>): ErrorDetail[] {
  const t = transports.get(kind);
  if (!t) return [{ path: 'body.sink_id', message: `the sink's ${kind} transport is not available in this deployment` }];
  return t.validateRouting(routing, sinkConfig).map(toDetail);
}

const MAX_SINK_NAME = 255;

/** The sink API's rules for a sink's fields: a name of 1 to 255 non-blank characters, then kind, config and secret_ref. */
export function validateSink(f: SinkFields, namePath: string): void {
  if (f.name.trim() === '' || f.name.length > MAX_SINK_NAME) {
    throw badRequest('the event sink is invalid', [{ path: namePath, message: `must be 1 to ${MAX_SINK_NAME} characters and not blank` }]);
  }
  validateSinkConfig(f.kind, f.config, f.secret_ref);
}

/**
 * The sink API's rules for changing a sink: the kind stays while subscriptions use the sink (409),
 * the new fields are valid (400), and the new config fits the routing of every subscription (409).
 */
export function validateSinkChange(
  prev: SinkFields,
  next: SinkFields,
  routings: { id: number; routing: Record<string, unknown> }[],
  namePath: string,
): void {
  if (next.kind !== prev.kind && routings.length > 0) {
    throw conflict(`the sink kind cannot change while ${routings.length} subscription(s) use the sink`, 'sink_in_use');
  }
  validateSink(next, namePath);
  for (const s of routings) {
    const problems = routingProblems(next.kind, s.routing, next.config);
    if (problems.length) {
      throw new ApiError('conflict', `the new configuration does not fit the routing of subscription ${s.id}: ${problems[0]!.message}`, {
        reason: 'sink_in_use',
        details: problems.map((p) => ({ path: `subscription.${s.id}.${p.path.replace(/^body\./, '')}`, message: p.message })),
      });
    }
  }
}

/** The subscription API's rules: catalog, filter, and a routing that fits the sink, which must exist (404). */
export function validateSubscriptionForSink(
  f: SubscriptionFields,
  sink: { kind: SinkKind; config: Record<string, unknown> } | undefined,
): void {
  if (!sink) throw notFound('event sink');
  validateSubscription(f, routingProblems(sink.kind, f.routing, sink.config));
}

/**
 * Write-time half of the destination rule (src/sinks/allowed-routing.ts) for a principal who is
 * not an unscoped administrator: every destination the routing names must be listed in the
 * sink's config.allowed_routing, else 403 naming the routing members.
 */
export function requireListedRouting(
  sinkId: number,
  kind: SinkKind,
  routing: Record<string, unknown>,
  sinkConfig: Record<string, unknown>,
): void {
  const problems = unlistedRouting(kind, routing, sinkConfig);
  if (problems.length === 0) return;
  throw new ApiError(
    'forbidden',
    `the routing names destinations that event sink ${sinkId} does not allow: only an unscoped administrator may route its events ` +
      "outside the sink's config.allowed_routing",
    { reason: 'destination_not_allowed', details: problems.map(toDetail) },
  );
}

/** Releases pooled transport connections (shutdown). */
export async function closeTransports(): Promise<void> {
  await Promise.allSettled([...transports.values()].map((t) => t.close?.()));
}
