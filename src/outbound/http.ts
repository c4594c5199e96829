// The one outbound HTTP client (remote calls now, webhook sinks later). Every request:
//   - must be an absolute https: URL without embedded credentials;
//   - resolves the host once and screens EVERY resolved address (private, loopback, link-local,
//     unique-local, CGNAT, metadata, unspecified, multicast, reserved, and the IPv4-mapped /
//     compatible / NAT64 / 6to4 forms of those); unless allowPrivate, one bad address refuses it;
//   - connects to the screened address only (pinned through the socket's `lookup`), while TLS SNI,
//     certificate verification and the Host header keep the hostname;
//   - never follows redirects (a 3xx is the final response);
//   - has one deadline covering DNS, connect, TLS, headers and body;
//   - reads the body only up to maxResponseBytes and drops the connection after that;
//   - reuses a kept-alive connection only for the same origin, screened address, trust and
//     deadline (pools.ts); a kept connection the peer closed as the request went out, before
//     any answer, is the one case in which a request is sent again (once, on a new connection),
//     and only a request that may arrive twice (an idempotent method, or marked so);
//   - reports response headers with sensitive values redacted.
// Extra trust anchors: SVC_OUTBOUND_CA_FILE (caFile) and NODE_EXTRA_CA_CERTS, added to Node's
// bundled roots (one TLS context per CA file, shared by the connections: trust.ts). Errors are
// OutboundError with a code and a message that never names the URL or contains response content.
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { lease, type Lease } from './pools.ts';
import { trustContext } from './trust.ts';
import { HEADER_NAME, isTransportHeader, OutboundError, parseOutboundUrl, type ResolvedAddress } from '../domain/outbound.ts';

export {
  HEADER_NAME,
  isTransportHeader,
  OutboundError,
  parseOutboundUrl,
  TRANSPORT_HEADERS,
  type OutboundErrorCode,
  type ResolvedAddress,
} from '../domain/outbound.ts';

export interface OutboundRequest {
  url: string;
  /** GET, POST, PUT, PATCH, DELETE or HEAD (any case); default GET. */
  method?: string;
  headers?: Record<string, string>;
  /** Sent exactly as given; null/undefined sends no body. */
  body?: string | Uint8Array | null;
  timeoutMs: number;
  maxResponseBytes: number;
  /**
   * The request may reach the peer twice (it carries an Idempotency-Key, say): a kept connection
   * the peer closed as it went out may then be retried on a new one, as GET, HEAD, PUT and DELETE
   * requests always may.
   */
  idempotent?: boolean;
  /** Admit private, loopback, link-local, unique-local and CGNAT destinations. */
  allowPrivate?: boolean;
  /** Extra CA certificates (PEM file), e.g. SVC_OUTBOUND_CA_FILE. */
  caFile?: string;
  signal?: AbortSignal;
  /** Name resolution (default: the system resolver, all addresses). */
  resolve?: (hostname: string) => Promise<ResolvedAddress[]>;
  /**
   * An address resolveAndScreen() already returned for this URL: no second resolution; the
   * address is screened again and pinned.
   */
  resolved?: ResolvedAddress;
}

export interface OutboundResponse {
  status: number;
  /** Lower-case names; repeated headers joined with ", "; sensitive values "[redacted]". */
  headers: Record<string, string>;
  /** At most maxResponseBytes. */
  body: Buffer;
  /** True when the peer sent more than maxResponseBytes (the rest was not read). */
  truncated: boolean;
  durationMs: number;
  /** The screened address the connection was pinned to. */
  address: string;
}

const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

const SENSITIVE_HEADERS = new Set([
  'set-cookie',
  'set-cookie2',
  'cookie',
  'authorization',
  'proxy-authorization',
  'www-authenticate',
  'proxy-authenticate',
  'authentication-info',
  'proxy-authentication-info',
  'x-api-key',
  'api-key',
  'x-auth-token',
  'x-access-token',
  'x-refresh-token',
  'x-csrf-token',
  'x-xsrf-token',
  'x-amz-security-token',
]);
const SENSITIVE_PATTERN = /(auth|token|secret|passw|cookie|session|credential|api-?key|signature)/i;

export function isSensitiveHeader(name: string): boolean {
  const n = name.toLowerCase();
  return SENSITIVE_HEADERS.has(n) || SENSITIVE_PATTERN.test(n);
}

/** Response headers as a plain map with sensitive values replaced by "[redacted]". */
export function redactHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) continue;
    const name = k.toLowerCase();
    out[name] = isSensitiveHeader(name) ? '[redacted]' : Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

// ---- URL and address screening ----------------------------------------------------------------

/** Why an address is refused; `always` categories are refused even when private targets are allowed. */
export interface AddressVerdict {
  category:
    | 'public'
    | 'private'
    | 'loopback'
    | 'link_local'
    | 'unique_local'
    | 'cgnat'
    | 'metadata'
    | 'unspecified'
    | 'multicast'
    | 'reserved'
    | 'invalid';
  /** Refused regardless of allowPrivate (unspecified, multicast, broadcast/reserved, cloud metadata, unparsable). */
  always: boolean;
}

const PUBLIC: AddressVerdict = { category: 'public', always: false };

function parseIPv4(s: string): number | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const v = Number(p);
    if (v > 255) return null;
    n = n * 256 + v;
  }
  return n;
}

function inV4(n: number, base: string, bits: number): boolean {
  const b = parseIPv4(base)!;
  const size = 2 ** (32 - bits);
  return Math.floor(n / size) === Math.floor(b / size);
}

// Cloud instance-metadata endpoints (AWS/GCP/Azure/OpenStack 169.254.169.254, AWS ECS
// 169.254.170.2, Alibaba 100.100.100.200, AWS IPv6 fd00:ec2::254): refused even when private
// targets are allowed, since no legitimate remote call needs the host's credentials service.
const METADATA_V4 = new Set(['169.254.169.254', '169.254.170.2', '100.100.100.200']);

function classifyV4(n: number): AddressVerdict {
  const dotted = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
  if (METADATA_V4.has(dotted)) return { category: 'metadata', always: true };
  if (inV4(n, '0.0.0.0', 8)) return { category: 'unspecified', always: true };
  if (inV4(n, '127.0.0.0', 8)) return { category: 'loopback', always: false };
  if (inV4(n, '10.0.0.0', 8) || inV4(n, '172.16.0.0', 12) || inV4(n, '192.168.0.0', 16)) return { category: 'private', always: false };
  if (inV4(n, '169.254.0.0', 16)) return { category: 'link_local', always: false };
  if (inV4(n, '100.64.0.0', 10)) return { category: 'cgnat', always: false };
  if (inV4(n, '224.0.0.0', 4)) return { category: 'multicast', always: true };
  if (inV4(n, '240.0.0.0', 4)) return { category: 'reserved', always: true }; // includes 255.255.255.255
  if (
    inV4(n, '192.0.0.0', 24) ||
    inV4(n, '192.0.2.0', 24) ||
    inV4(n, '198.18.0.0', 15) ||
    inV4(n, '198.51.100.0', 24) ||
    inV4(n, '203.0.113.0', 24)
  ) {
    return { category: 'reserved', always: false };
  }
  return PUBLIC;
}

/** 8 groups of 16 bits, or null. Accepts embedded IPv4 in the last 32 bits and a zone id. */
function parseIPv6(s: string): number[] | null {
  const addr = s.replace(/%.*$/, '');
  if (!/^[0-9a-fA-F:.]+$/.test(addr)) return null;
  let text = addr;
  if (text.includes('.')) {
    // a trailing dotted IPv4 part becomes two hex groups: ::ffff:127.0.0.1 → ::ffff:7f00:1
    const lastColon = text.lastIndexOf(':');
    const v4 = parseIPv4(text.slice(lastColon + 1));
    if (v4 === null) return null;
    text = `${text.slice(0, lastColon + 1)}${Math.floor(v4 / 65536).toString(16)}:${(v4 % 65536).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const parse = (h: string) => (h === '' ? [] : h.split(':').map((g) => (/^[0-9a-fA-F]{1,4}$/.test(g) ? parseInt(g, 16) : NaN)));
  const head = parse(halves[0]!);
  const rest = halves.length === 2 ? parse(halves[1]!) : [];
  if ([...head, ...rest].some((g) => Number.isNaN(g))) return null;
  const total = head.length + rest.length;
  let groups: number[];
  if (halves.length === 2) {
    if (total > 7) return null;
    groups = [...head, ...new Array<number>(8 - total).fill(0), ...rest];
  } else {
    groups = head;
  }
  return groups.length === 8 ? groups : null;
}

function classifyV6(g: number[]): AddressVerdict {
  const v4 = (hi: number, lo: number) => classifyV4(hi * 65536 + lo);
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 8)) return { category: 'unspecified', always: true };
  if (zero(0, 7) && g[7] === 1) return { category: 'loopback', always: false };
  // ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), ::ffff:0:a.b.c.d (translated), 64:ff9b::/96 (NAT64)
  if (zero(0, 5) && g[5] === 0xffff) return v4(g[6]!, g[7]!);
  if (zero(0, 6)) return v4(g[6]!, g[7]!);
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return { category: 'reserved', always: false }; // local-use NAT64
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!); // 6to4 embeds an IPv4 address
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && zero(2, 7) && g[7] === 0x254) return { category: 'metadata', always: true };
  if ((g[0]! & 0xfe00) === 0xfc00) return { category: 'unique_local', always: false };
  if ((g[0]! & 0xffc0) === 0xfe80) return { category: 'link_local', always: false };
  if ((g[0]! & 0xffc0) === 0xfec0) return { category: 'private', always: false }; // deprecated site-local
  if ((g[0]! & 0xff00) === 0xff00) return { category: 'multicast', always: true };
  if (g[0] === 0x2001 && g[1] === 0x0db8) return { category: 'reserved', always: false }; // documentation
  if (g[0] === 0x0100 && zero(1, 4)) return { category: 'reserved', always: false }; // discard-only
  if (g[0] === 0x2001 && g[1]! < 0x0200) return { category: 'reserved', always: false }; // IETF protocol assignments incl. Teredo
  if ((g[0]! & 0xe000) !== 0x2000) return { category: 'reserved', always: false }; // outside global unicast 2000::/3
  return PUBLIC;
}

/** Classifies one IP address (IPv4, IPv6 with any embedded IPv4 form). */
export function classifyAddress(address: string): AddressVerdict {
  const a = address.replace(/^\[|\]$/g, '');
  const family = isIP(a.replace(/%.*$/, ''));
  if (family === 4) return classifyV4(parseIPv4(a)!);
  if (family === 6) {
    const g = parseIPv6(a);
    return g ? classifyV6(g) : { category: 'invalid', always: true };
  }
  return { category: 'invalid', always: true };
}

/** Whether an address may be contacted. */
export function isAddressAllowed(address: string, allowPrivate: boolean): boolean {
  const v = classifyAddress(address);
  if (v.category === 'public') return true;
  return allowPrivate && !v.always;
}

async function systemResolve(hostname: string): Promise<ResolvedAddress[]> {
  const rows = await dnsLookup(hostname, { all: true, verbatim: true });
  return rows.map((r) => ({ address: r.address, family: r.family === 6 ? 6 : 4 }));
}

/**
 * Resolves the URL's host and screens every address. Returns the address to pin (the first one).
 * An IP-literal host is screened as it is.
 */
export async function resolveAndScreen(
  url: URL,
  opts: { allowPrivate?: boolean; resolve?: (hostname: string) => Promise<ResolvedAddress[]> } = {},
): Promise<ResolvedAddress> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: ResolvedAddress[];
  const literal = isIP(host);
  if (literal) {
    addresses = [{ address: host, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await (opts.resolve ?? systemResolve)(host);
    } catch {
      throw new OutboundError('dns_failure', 'the destination host name could not be resolved');
    }
    if (addresses.length === 0) throw new OutboundError('dns_failure', 'the destination host name has no addresses');
  }
  for (const a of addresses) {
    if (!isAddressAllowed(a.address, opts.allowPrivate ?? false)) {
      const { category } = classifyAddress(a.address);
      throw new OutboundError('blocked_destination', `the destination resolves to a refused address (${category.replace('_', '-')})`);
    }
  }
  return addresses[0]!;
}

// ---- the request ----------------------------------------------------------------------------

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD']);
/** Methods a peer must treat as idempotent (RFC 9110, 9.2.2). */
const IDEMPOTENT = new Set(['GET', 'PUT', 'DELETE', 'HEAD']);

function checkHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  const seen = new Set<string>();
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name)) throw new OutboundError('invalid_request', 'a request header name is not a valid token');
    if (isTransportHeader(lower)) throw new OutboundError('invalid_request', `the request header ${lower} is controlled by the transport`);
    if (seen.has(lower)) throw new OutboundError('invalid_request', `the request header ${lower} is given twice`);
    if (!HEADER_VALUE.test(value))
      throw new OutboundError('invalid_request', `the value of request header ${lower} contains invalid characters`);
    seen.add(lower);
    out[name] = value;
  }
  return out;
}

const TLS_CODES = /^(CERT_|ERR_TLS_|ERR_SSL_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO_|HOSTNAME_MISMATCH|ERR_OSSL)/;

function classifyError(err: unknown, timedOut: boolean, aborted: boolean): OutboundError {
  if (err instanceof OutboundError) return err;
  if (timedOut) return new OutboundError('timeout', 'the destination did not respond within the timeout');
  if (aborted) return new OutboundError('aborted', 'the request was aborted');
  const e = err as { code?: string; cause?: { code?: string } };
  const code = e?.code ?? '';
  const causeCode = e?.cause?.code ?? '';
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new OutboundError('timeout', 'the destination did not respond within the timeout');
  }
  if (TLS_CODES.test(code) || TLS_CODES.test(causeCode)) {
    return new OutboundError('tls_failure', `the TLS connection to the destination failed (${code || causeCode})`);
  }
  const safe = /^[A-Z0-9_]{1,40}$/.test(code) ? ` (${code})` : '';
  return new OutboundError('connection_failed', `the connection to the destination failed${safe}`);
}

const CLOSED_BY_PEER = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/** The connection was closed or reset by the peer (before any response, when request() rejects). */
function closedByPeer(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } };
  return CLOSED_BY_PEER.has(e?.code ?? '') || CLOSED_BY_PEER.has(e?.cause?.code ?? '');
}

/** Sends one request under the rules at the top of this file. */
export async function outboundRequest(req: OutboundRequest): Promise<OutboundResponse> {
  const started = performance.now();
  const method = (req.method ?? 'GET').toUpperCase();
  if (!METHODS.has(method)) throw new OutboundError('invalid_request', `unsupported method ${method}`);
  if (!(req.timeoutMs > 0) || !(req.maxResponseBytes >= 0)) throw new OutboundError('invalid_request', 'timeout and byte cap are required');
  const url = parseOutboundUrl(req.url);
  const headers = checkHeaders(req.headers ?? {});

  const ctl = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort();
  }, req.timeoutMs);
  const onAbort = () => ctl.abort();
  req.signal?.addEventListener('abort', onAbort, { once: true });
  if (req.signal?.aborted) ctl.abort();

  let connection: Lease | undefined;
  try {
    const given = req.resolved;
    if (given && !isAddressAllowed(given.address, req.allowPrivate ?? false)) {
      throw new OutboundError(
        'blocked_destination',
        `the destination resolves to a refused address (${classifyAddress(given.address).category.replace('_', '-')})`,
      );
    }
    const pinned =
      given ??
      (await Promise.race([
        resolveAndScreen(url, { allowPrivate: req.allowPrivate, resolve: req.resolve }),
        new Promise<never>((_, fail) => ctl.signal.addEventListener('abort', () => fail(new Error('aborted')), { once: true })),
      ]));
    const trust = trustContext(req.caFile);
    const send = (c: Lease) =>
      c.client.request({
        path: `${url.pathname}${url.search}`,
        method: method as 'GET',
        headers,
        body: req.body ?? undefined,
        signal: ctl.signal,
      });
    connection = lease(url.origin, pinned, trust, req.timeoutMs);
    let res: Awaited<ReturnType<typeof send>>;
    try {
      res = await send(connection);
    } catch (err) {
      // a kept connection the peer closed as this request went out (its idle timeout, most likely):
      // nothing was answered, so a request that may arrive twice goes once more, on a new connection
      if (!connection.reused || !(req.idempotent || IDEMPOTENT.has(method)) || ctl.signal.aborted || !closedByPeer(err)) throw err;
      connection.release();
      connection = lease(url.origin, pinned, trust, req.timeoutMs, true);
      res = await send(connection);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    for await (const chunk of res.body) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      const room = req.maxResponseBytes - size;
      if (buf.length > room) {
        if (room > 0) chunks.push(buf.subarray(0, room));
        size += Math.max(room, 0);
        truncated = true;
        break;
      }
      chunks.push(buf);
      size += buf.length;
    }
    if (truncated) res.body.destroy();
    return {
      status: res.statusCode,
      headers: redactHeaders(res.headers),
      body: Buffer.concat(chunks, size),
      truncated,
      durationMs: Math.round(performance.now() - started),
      address: pinned.address,
    };
  } catch (err) {
    throw classifyError(err, timedOut, ctl.signal.aborted);
  } finally {
    clearTimeout(timer);
    req.signal?.removeEventListener('abort', onAbort);
    connection?.release();
  }
}
