import { badRequest } from './errors.ts';

const HOUR_MS = 3600_000;

/**
 * The expiry of a token issued at `issued`: the requested `expires_at`, which must be later than
 * the issuance time and at most issued + maxHours, or issued + defaultHours when none is requested.
 */
export function resolveExpiry(requested: string | undefined | null, issued: Date, defaultHours: number, maxHours: number): Date {
  if (requested === undefined || requested === null) return new Date(issued.getTime() + defaultHours * HOUR_MS);
  const at = new Date(requested);
  if (Number.isNaN(at.getTime()))
    throw badRequest('expires_at must be an RFC 3339 timestamp', [{ path: 'expires_at', message: 'invalid timestamp' }]);
  checkExpiry(at, issued, maxHours);
  return at;
}

/** 400 unless issued < expiresAt <= issued + maxHours. */
export function checkExpiry(expiresAt: Date, issued: Date, maxHours: number): void {
  if (expiresAt.getTime() <= issued.getTime()) {
    throw badRequest('expires_at must be later than the issuance time', [{ path: 'expires_at', message: 'must be in the future' }]);
  }
  if (expiresAt.getTime() > issued.getTime() + maxHours * HOUR_MS) {
    throw badRequest(`expires_at may be at most ${maxHours} hours after issuance`, [
      { path: 'expires_at', message: `at most ${maxHours} hours after issuance` },
    ]);
  }
}
