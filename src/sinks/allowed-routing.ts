// Which destinations the subscriptions of a sink may route to. A sink is an administrator's
// transport definition (its secret, headers, broker or mail server); a subscription's routing picks
// the destination inside it (webhook routing.url, redis_stream routing.stream, email recipients,
// cc and bcc; amqp has no routing members). The sink's `config.allowed_routing` lists what an
// administrator approved for everyone who may subscribe:
//   webhook       urls       URL prefixes: an https origin, optionally with a path prefix
//   redis_stream  streams    stream keys, `*` matching any run of characters
//   email         addresses  mailbox addresses, or `@domain` for every address of one domain
// Routing outside the list is approved only when an unscoped administrator set it on the
// subscription for this sink (or on a system subscription, which only they write). The API checks
// it when a subscription is written and the delivery worker again right before each send, so a
// subscription written earlier or a list shortened later sends nothing.
import addressparser from 'nodemailer/lib/addressparser';
import { parseOutboundUrl } from '../outbound/http.ts';
import type { ConfigProblem, SinkKind } from './types.ts';

/** The member of config.allowed_routing each kind takes (amqp routes nowhere but the sink's exchange). */
export const ALLOWED_ROUTING_MEMBER: Readonly<Record<SinkKind, 'urls' | 'streams' | 'addresses' | null>> = {
  webhook: 'urls',
  redis_stream: 'streams',
  email: 'addresses',
  amqp: null,
};

export const MAX_ALLOWED_ENTRIES = 100;
const MAX_ENTRY_LENGTH = 2048;

/** A webhook URL prefix entry: the origin and the path prefix ('/' = any path). */
function parsePrefix(entry: string): { origin: string; path: string } | null {
  try {
    const url = parseOutboundUrl(entry);
    if (url.search !== '' || url.hash !== '' || /[?#]/.test(entry)) return null;
    return { origin: url.origin, path: url.pathname === '' ? '/' : url.pathname };
  } catch {
    return null;
  }
}

const MAILBOX = /^[^\s@]+@[^\s@]+$/;
const DOMAIN = /^@[^\s@]+$/;

function entryProblem(member: 'urls' | 'streams' | 'addresses', entry: string): string | null {
  switch (member) {
    case 'urls':
      return parsePrefix(entry) ? null : 'must be an https URL prefix without user information, query or fragment';
    case 'streams':
      return Buffer.byteLength(entry) > 1024 ? 'must be at most 1,024 bytes' : null;
    case 'addresses':
      return MAILBOX.test(entry) || DOMAIN.test(entry) ? null : 'must be an address like ops@example.com or a domain like @example.com';
  }
}

/** Problems of a sink's `config.allowed_routing` for its kind. */
export function allowedRoutingProblems(kind: SinkKind, value: unknown): ConfigProblem[] {
  if (value === undefined) return [];
  const path = 'config.allowed_routing';
  const member = ALLOWED_ROUTING_MEMBER[kind];
  if (member === null) return [{ path, message: `an ${kind} sink has no routing members to allow` }];
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [{ path, message: 'must be an object' }];
  const problems: ConfigProblem[] = [];
  for (const [k, list] of Object.entries(value as Record<string, unknown>)) {
    if (k !== member) {
      problems.push({ path: `${path}.${k}`, message: `is not allowed_routing member of a ${kind} sink (it takes only ${member})` });
      continue;
    }
    if (!Array.isArray(list)) {
      problems.push({ path: `${path}.${k}`, message: 'must be an array of strings' });
      continue;
    }
    if (list.length > MAX_ALLOWED_ENTRIES) problems.push({ path: `${path}.${k}`, message: `at most ${MAX_ALLOWED_ENTRIES} entries` });
    list.forEach((entry: unknown, i) => {
      const p = `${path}.${k}.${i}`;
      if (typeof entry !== 'string' || entry.trim() === '' || entry.length > MAX_ENTRY_LENGTH) {
        problems.push({ path: p, message: `must be a non-empty string of at most ${MAX_ENTRY_LENGTH} characters` });
        return;
      }
      const why = entryProblem(member, entry);
      if (why) problems.push({ path: p, message: why });
    });
  }
  return problems;
}

function entries(sinkConfig: Record<string, unknown>, member: string): string[] {
  const allowed = sinkConfig.allowed_routing;
  if (!allowed || typeof allowed !== 'object' || Array.isArray(allowed)) return [];
  const list = (allowed as Record<string, unknown>)[member];
  return Array.isArray(list) ? list.filter((e): e is string => typeof e === 'string') : [];
}

/** Whether a webhook URL lies under one of the prefixes (same origin; path equal or below). */
export function urlAllowed(url: string, prefixes: readonly string[]): boolean {
  let target: URL;
  try {
    target = parseOutboundUrl(url);
  } catch {
    return false;
  }
  return prefixes.some((entry) => {
    const p = parsePrefix(entry);
    if (!p || p.origin !== target.origin) return false;
    if (p.path === '/' || target.pathname === p.path) return true;
    return target.pathname.startsWith(p.path.endsWith('/') ? p.path : `${p.path}/`);
  });
}

/** `*` matches any run of characters, everything else itself (iterative: no regex backtracking). */
function globMatch(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let mark = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] !== '*' && pattern[p] === text[t]) {
      p++;
      t++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      mark = t;
    } else if (star >= 0) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}

/** Whether a stream key matches one of the patterns (`*` = any run of characters, the rest literal). */
export function streamAllowed(stream: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => globMatch(p, stream));
}

/** Whether a mailbox (display name allowed) is one of the addresses or in one of the @domains. */
export function addressAllowed(mailbox: string, allowed: readonly string[]): boolean {
  const parsed = addressparser(mailbox);
  if (parsed.length !== 1 || parsed[0]!.group !== undefined) return false;
  const address = parsed[0]!.address.toLowerCase();
  if (!MAILBOX.test(address)) return false;
  const domain = address.slice(address.lastIndexOf('@'));
  return allowed.some((a) => {
    const entry = a.toLowerCase();
    return entry.startsWith('@') ? entry === domain : entry === address;
  });
}

/**
 * The routing members of a subscription that the sink's `config.allowed_routing` does not cover
 * (empty: every destination the routing names is allowed). Messages name members, never values.
 */
export function unlistedRouting(kind: SinkKind, routing: Record<string, unknown>, sinkConfig: Record<string, unknown>): ConfigProblem[] {
  const member = ALLOWED_ROUTING_MEMBER[kind];
  const problems: ConfigProblem[] = [];
  const list = member ? entries(sinkConfig, member) : [];
  const why = (routingMember: string) =>
    list.length === 0
      ? `the sink lists no ${member ? `config.allowed_routing.${member}` : 'routing'}: only an unscoped administrator may choose ${routingMember} for it`
      : `is not covered by the sink's config.allowed_routing.${member!}`;
  for (const [key, value] of Object.entries(routing)) {
    if (kind === 'webhook' && key === 'url') {
      if (!(typeof value === 'string' && urlAllowed(value, list))) problems.push({ path: 'routing.url', message: why('routing.url') });
    } else if (kind === 'redis_stream' && key === 'stream') {
      if (!(typeof value === 'string' && streamAllowed(value, list))) {
        problems.push({ path: 'routing.stream', message: why('routing.stream') });
      }
    } else if (kind === 'email' && ['recipients', 'to', 'cc', 'bcc'].includes(key)) {
      const values = Array.isArray(value) ? value : [value];
      values.forEach((v, i) => {
        if (!(typeof v === 'string' && addressAllowed(v, list)))
          problems.push({ path: `routing.${key}.${i}`, message: why(`routing.${key}`) });
      });
    } else {
      // a member the kind does not route by is never approved (write-time validation rejects it)
      problems.push({ path: `routing.${key}`, message: `is not a routing member a ${kind} sink can allow` });
    }
  }
  return problems;
}
