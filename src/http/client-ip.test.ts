import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { clientIp } from './client-ip.ts';
import { parseTrustedProxies } from '../domain/address-list.ts';

/** The address clientIp picks for a request from `peer` with this X-Forwarded-For. */
async function pick(trusted: string, peer: string, xff?: string): Promise<string> {
  const app = new Hono();
  app.get('/', (c) => c.text(clientIp(c, trusted)));
  const req = new Request('http://x/', { headers: xff === undefined ? {} : { 'x-forwarded-for': xff } });
  const res = await app.fetch(req, { incoming: { socket: { remoteAddress: peer } } });
  return res.text();
}

describe('parseTrustedProxies', () => {
  it('accepts addresses and CIDR blocks of both families, with spaces and empty entries', () => {
    const list = parseTrustedProxies(' 10.0.0.0/8, 192.0.2.7 ,, 2001:db8::/32, ::1, 172.16.0.1/12 ');
    expect(list.check('10.255.1.2', 'ipv4')).toBe(true);
    expect(list.check('11.0.0.1', 'ipv4')).toBe(false);
    expect(list.check('192.0.2.7', 'ipv4')).toBe(true);
    expect(list.check('192.0.2.8', 'ipv4')).toBe(false);
    expect(list.check('2001:db8:ffff::1', 'ipv6')).toBe(true);
    expect(list.check('2001:db9::1', 'ipv6')).toBe(false);
    expect(list.check('::1', 'ipv6')).toBe(true);
    // host bits after the prefix are ignored, as the network is meant
    expect(list.check('172.31.255.255', 'ipv4')).toBe(true);
    expect(list.check('172.32.0.0', 'ipv4')).toBe(false);
  });

  it('an empty value trusts nothing', () => {
    expect(parseTrustedProxies('').check('127.0.0.1', 'ipv4')).toBe(false);
  });

  it.each([
    ['proxy.example.com', /not an IP address/],
    ['10.0.0.0/33', /0 to 32/],
    ['2001:db8::/129', /0 to 128/],
    ['10.0.0.0/', /0 to 32/],
    ['10.0.0.0/8/9', /0 to 32/],
    ['10.0.0.0/-1', /0 to 32/],
    ['10.0.0/8', /not an IP address/],
    ['fe80::1%eth0', /not an IP address/],
    ['10.0.0.1, nonsense', /"nonsense"/],
  ])('refuses %s', (value, message) => {
    expect(() => parseTrustedProxies(value)).toThrow(message);
  });
});

describe('clientIp', () => {
  it('without trusted proxies: the socket peer, X-Forwarded-For ignored', async () => {
    expect(await pick('', '203.0.113.9', '198.51.100.1')).toBe('203.0.113.9');
  });

  it('an untrusted peer is the client, whatever it forwards', async () => {
    expect(await pick('10.0.0.0/8', '203.0.113.9', '198.51.100.1')).toBe('203.0.113.9');
  });

  it('a peer in a trusted block: the right-most untrusted X-Forwarded-For entry', async () => {
    expect(await pick('10.0.0.0/8', '10.1.2.3', '198.51.100.1')).toBe('198.51.100.1');
    // a client-supplied left part cannot choose the address
    expect(await pick('10.0.0.0/8', '10.1.2.3', '1.1.1.1, 198.51.100.1, 10.9.9.9, 10.0.0.4')).toBe('198.51.100.1');
  });

  it('IPv6 blocks, and IPv4-mapped peers against IPv4 blocks', async () => {
    expect(await pick('2001:db8::/32', '2001:db8::10', '2001:db8:1::5, 2001:db9::7')).toBe('2001:db9::7');
    expect(await pick('2001:db8::/32', '2001:db8::10', '198.51.100.1, 2001:db8:1::5')).toBe('198.51.100.1');
    expect(await pick('127.0.0.0/8', '::ffff:127.0.0.1', '::ffff:198.51.100.4')).toBe('198.51.100.4');
    expect(await pick('::1/128', '::1', '2001:db8::1')).toBe('2001:db8::1');
  });

  it('every hop trusted: the left-most (furthest) address, not the proxy next to us', async () => {
    expect(await pick('10.0.0.0/8', '10.0.0.2', '10.5.5.5, 10.0.0.3')).toBe('10.5.5.5');
    expect(await pick('10.0.0.0/8', '10.0.0.2')).toBe('10.0.0.2');
  });

  it('ports and brackets some proxies write are dropped', async () => {
    expect(await pick('10.0.0.0/8', '10.0.0.2', '198.51.100.1:52311')).toBe('198.51.100.1');
    expect(await pick('10.0.0.0/8', '10.0.0.2', '[2001:db8::5]:443')).toBe('2001:db8::5');
  });

  it('a malformed entry ends the walk at the trusted hop that passed it on', async () => {
    expect(await pick('10.0.0.0/8', '10.0.0.2', 'unknown')).toBe('10.0.0.2');
    expect(await pick('10.0.0.0/8', '10.0.0.2', '198.51.100.1, garbage, 10.0.0.7')).toBe('10.0.0.7');
  });

  it('exact addresses keep working as before', async () => {
    expect(await pick('127.0.0.1', '127.0.0.1', '198.51.100.3')).toBe('198.51.100.3');
    expect(await pick('127.0.0.1', '127.0.0.2', '198.51.100.3')).toBe('127.0.0.2');
  });
});
