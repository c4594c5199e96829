// Who may read /metrics (the API's and the SVC_METRICS_BIND listener's, http/metrics-listener.ts).
//   SVC_METRICS_TOKEN  set: the request needs `Authorization: Bearer <that value>` (else 401);
//   SVC_METRICS_ALLOW  set: the client address (as the login limiter sees it, SVC_TRUSTED_PROXIES
//                      applied) must be in this list of addresses and CIDR blocks (else 403).
// Both unset (the default): /metrics is open, as it always was.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Config } from '../config.ts';
import { forbidden, unauthorized } from '../domain/errors.ts';
import { addressInList, addressList } from './client-ip.ts';

const BEARER = /^Bearer\s+(\S+)\s*$/;

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** Throws 401 or 403 unless this request may read the metrics. */
export function checkMetricsAccess(
  config: Pick<Config, 'SVC_METRICS_TOKEN' | 'SVC_METRICS_ALLOW'>,
  authorization: string | undefined,
  ip: string,
): void {
  const allow = config.SVC_METRICS_ALLOW.trim();
  if (allow) {
    if (!addressInList(addressList(allow), ip)) throw forbidden('this address may not read the metrics (SVC_METRICS_ALLOW)');
  }
  const expected = config.SVC_METRICS_TOKEN;
  if (expected) {
    const presented = authorization ? BEARER.exec(authorization)?.[1] : undefined;
    if (presented === undefined || !timingSafeEqual(digest(presented), digest(expected))) throw unauthorized();
  }
}
