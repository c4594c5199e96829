// What an outbound request may be, as pure rules: an absolute https URL without credentials, and
// header names a caller may set. The remote-target and sink rules check their templates with
// these; src/outbound/http.ts enforces them again on every request it sends.

/** An address a destination's host name resolved to (and, once screened, the one to connect to). */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type OutboundErrorCode =
  'invalid_url' | 'invalid_request' | 'blocked_destination' | 'dns_failure' | 'timeout' | 'tls_failure' | 'connection_failed' | 'aborted';

export class OutboundError extends Error {
  readonly code: OutboundErrorCode;
  constructor(code: OutboundErrorCode, message: string) {
    super(message);
    this.code = code;
    this.name = 'OutboundError';
  }
}

/** Headers the transport owns; callers may not set them. */
export const TRANSPORT_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
  'http2-settings',
]);

export function isTransportHeader(name: string): boolean {
  return TRANSPORT_HEADERS.has(name.toLowerCase());
}

export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Parses and checks an outbound URL: absolute https, a host, no user info. */
export function parseOutboundUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundError('invalid_url', 'the destination URL is not a valid absolute URL');
  }
  if (url.protocol !== 'https:') throw new OutboundError('invalid_url', 'the destination URL must use https');
  if (url.username !== '' || url.password !== '') {
    throw new OutboundError('invalid_url', 'the destination URL must not carry embedded credentials');
  }
  if (url.hostname === '') throw new OutboundError('invalid_url', 'the destination URL has no host');
  return url;
}
