// Event deliveries: the row as the database returns it and its wire view. Pure functions (no SQL).
import type { ResponseBody } from '../wire.ts';

export type DeliveryStatus = 'pending' | 'in_flight' | 'succeeded' | 'failed' | 'dead';
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'in_flight', 'succeeded', 'failed', 'dead'];

export interface EventDeliveryRow {
  [key: string]: unknown;
  id: number;
  event_id: string;
  subscription_id: number;
  sink_id: number;
  purpose: 'event' | 'test';
  status: DeliveryStatus;
  attempts: number;
  last_error: string | null;
  deferred_reason: 'configured_rate' | 'provider_rate' | null;
  next_attempt_at: Date;
  locked_until: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** components.schemas.EventDelivery (the claim token stays internal). */
export function eventDeliveryView(r: EventDeliveryRow): ResponseBody<'getEventDelivery', 200> {
  return {
    id: r.id,
    event_id: r.event_id,
    subscription_id: r.subscription_id,
    sink_id: r.sink_id,
    purpose: r.purpose,
    status: r.status,
    attempts: r.attempts,
    last_error: r.last_error,
    deferred_reason: r.deferred_reason,
    next_attempt_at: r.next_attempt_at,
    locked_until: r.locked_until,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}
