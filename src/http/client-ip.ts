import type { Context } from 'hono';
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { parseTrustedProxies } from '../domain/address-list.ts';

const parsed = new Map<string, BlockList>();

/**
 * An address list setting (SVC_TRUSTED_PROXIES, SVC_METRICS_ALLOW), parsed once per distinct value
 * (config loading has already refused a bad one).
 */
export function addressList(value: string): BlockList {
  let list = parsed.get(value);
  if (!list) parsed.set(value, (list = parseTrustedProxies(value)));
  return list;
}

/** Whether `ip` is in a list parsed by parseTrustedProxies (SVC_METRICS_ALLOW uses the same syntax). */
export function addressInList(list: BlockList, ip: string): boolean {
  return isTrusted(list, ip);
}

function isTrusted(list: BlockList, ip: string): boolean {
  const family = isIP(ip);
  if (family === 0) return false;
  try {
    return list.check(ip, family === 6 ? 'ipv6' : 'ipv4');
  } catch {
    return false;
  }
}

/**
 * The client address: the socket peer, or, when the peer is a trusted proxy, the right-most
 * X-Forwarded-For entry that is not a trusted proxy. An entry that is not an IP address ends the
 * walk at the trusted hop that passed it on (a malformed value must not become a fresh identity
 * for the login limiter).
 */
export function clientIp(c: Context, trustedProxies: string): string {
  return clientIpOf(c.env, c.req.raw.headers, trustedProxies);
}

/** clientIp of a request given its environment (@hono/node-server's { incoming }) and headers. */
export function clientIpOf(env: unknown, headers: Pick<Headers, 'get'>, trustedProxies: string): string {
  const incoming = (env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const peer = normalize(incoming?.socket?.remoteAddress ?? '127.0.0.1');
  if (!trustedProxies.trim()) return peer;
  const list = addressList(trustedProxies);
  if (!isTrusted(list, peer)) return peer;
  const chain = (headers.get('x-forwarded-for') ?? '')
    .split(',')
    .map((s) => normalize(s.trim()))
    .filter(Boolean);
  let last = peer;
  for (let i = chain.length - 1; i >= 0; i--) {
    const hop = chain[i]!;
    if (isIP(hop) === 0) return last;
    if (!isTrusted(list, hop)) return hop;
    last = hop;
  }
  return last;
}

/** Plain IPv4 for IPv4-mapped IPv6; a bracketed IPv6 or an IPv4 with a port (as some proxies write them) without the port. */
function normalize(ip: string): string {
  let s = ip;
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(s);
  if (bracketed) s = bracketed[1]!;
  else if (/^\d{1,3}(\.\d{1,3}){3}:\d+$/.test(s)) s = s.slice(0, s.lastIndexOf(':'));
  return s.toLowerCase().startsWith('::ffff:') && isIP(s.slice(7)) === 4 ? s.slice(7) : s;
}
