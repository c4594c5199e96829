// Address lists of the settings (SVC_TRUSTED_PROXIES, SVC_METRICS_ALLOW): parsed once by config.ts
// at start-up and by the transport that matches client addresses against them.
import { BlockList, isIP } from 'node:net';

/**
 * The trusted proxies of SVC_TRUSTED_PROXIES: comma-separated IPv4/IPv6 addresses and CIDR blocks
 * (`10.0.0.0/8`, `2001:db8::/32`). Node's own BlockList does the matching; it also matches
 * IPv4-mapped IPv6 peers (`::ffff:10.1.2.3`) against IPv4 blocks. Throws naming the first bad entry.
 */
export function parseTrustedProxies(value: string): BlockList {
  const list = new BlockList();
  for (const raw of value.split(',')) {
    const entry = raw.trim();
    if (!entry) continue;
    const slash = entry.indexOf('/');
    const address = slash < 0 ? entry : entry.slice(0, slash);
    const family = isIP(address);
    if (family === 0 || address.includes('%')) throw new Error(`"${entry}" is not an IP address or CIDR block`);
    const type = family === 6 ? 'ipv6' : 'ipv4';
    if (slash < 0) {
      list.addAddress(address, type);
      continue;
    }
    const bits = entry.slice(slash + 1);
    const max = family === 6 ? 128 : 32;
    if (!/^\d{1,3}$/.test(bits) || Number(bits) > max) throw new Error(`"${entry}": the prefix length must be 0 to ${max}`);
    list.addSubnet(address, Number(bits), type);
  }
  return list;
}
