import type { Context } from 'hono';
import type { IncomingMessage } from 'node:http';

/**
 * The client address: the socket peer, or, when the peer is a configured trusted proxy, the
 * right-most untrusted address of X-Forwarded-For.
 */
export function clientIp(c: Context, trustedProxies: string): string {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const peer = normalize(incoming?.socket?.remoteAddress ?? '127.0.0.1');
  const trusted = new Set(
    trustedProxies
      .split(',')
      .map((s) => normalize(s.trim()))
      .filter(Boolean),
  );
  if (!trusted.has(peer)) return peer;
  const chain = (c.req.header('x-forwarded-for') ?? '')
    .split(',')
    .map((s) => normalize(s.trim()))
    .filter(Boolean);
  for (let i = chain.length - 1; i >= 0; i--) {
    if (!trusted.has(chain[i]!)) return chain[i]!;
  }
  return peer;
}

function normalize(ip: string): string {
  return ip.startsWith('::ffff:') ? ip.slice(7) : ip;
}
