import { createHmac, randomBytes } from 'node:crypto';

/** A new raw bearer token: 256 random bits, base64url. */
export function newRawToken(): string {
  return randomBytes(32).toString('base64url');
}

/** The stored form of a raw token: HMAC-SHA-256 under the token hash key. */
export function hashToken(key: Buffer, raw: string): Buffer {
  return createHmac('sha256', key).update(raw, 'utf8').digest();
}
