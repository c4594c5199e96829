// Content codings (src/http/compression.ts) as a client on a real socket sees them: the OpenAPI
// document, the API reference's assets and the metrics come in br or gzip when the request's
// Accept-Encoding allows, with Vary: Accept-Encoding, and decode to exactly the body sent to a
// client that asks for none; the API's JSON replies are never coded. node:http is the client here:
// it hands over the bytes as sent (fetch would decode them out of sight).
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { negotiateCoding } from '../src/http/compression.ts';
import { serveMetrics } from '../src/http/metrics-listener.ts';
import { checkResponse, decodeBody } from './contract-check.ts';
import { toHeaders } from './process-fixtures.ts';
import { listen, startTestApp, type Listening, type TestApp } from './helpers.ts';

let t: TestApp;
let server: Listening;

beforeAll(async () => {
  t = await startTestApp();
  server = await listen(t);
});
afterAll(async () => {
  await server?.close();
  await t?.close();
});

interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** The bytes as they came over the socket. */
  bytes: Buffer;
  /** The bytes decoded from their content-encoding. */
  decoded: Buffer;
}

function get(path: string, headers: Record<string, string> = {}, method = 'GET', port = server.port): Promise<RawResponse> {
  return new Promise((ok, fail) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', fail);
      res.on('end', () => {
        const bytes = Buffer.concat(chunks);
        ok({ status: res.statusCode!, headers: res.headers, bytes, decoded: decodeBody(bytes, res.headers['content-encoding']) });
      });
    });
    req.on('error', fail);
    req.end();
  });
}

/** The Headers of a raw response, for checkResponse. */
const headersOf = (raw: RawResponse) => toHeaders(raw.headers);

describe('negotiateCoding (RFC 9110 Accept-Encoding)', () => {
  it.each([
    [undefined, null],
    ['', null],
    ['identity', null],
    ['gzip', 'gzip'],
    ['x-gzip', 'gzip'],
    ['br', 'br'],
    ['gzip, deflate, br, zstd', 'br'], // a browser's: ties go to brotli
    ['gzip, deflate', 'gzip'], // undici's fetch
    ['gzip;q=1.0, br;q=0.5', 'gzip'],
    ['GZIP ; Q=0.8 , BR ; q=0.9', 'br'],
    ['br;q=0, gzip', 'gzip'],
    ['br;q=0, gzip;q=0', null],
    ['*', 'br'],
    ['*;q=0.5, br;q=0.1', 'gzip'],
    ['*;q=0', null],
    ['deflate, compress', null],
  ])('%j → %j', (header, coding) => {
    expect(negotiateCoding(header)).toBe(coding);
  });

  it('offers only what the caller offers, in its order', () => {
    expect(negotiateCoding('br, gzip', ['gzip'])).toBe('gzip');
    expect(negotiateCoding('br', ['gzip'])).toBeNull();
  });
});

describe('the OpenAPI document', () => {
  it.each(['br', 'gzip'])('comes in %s when asked, decoding to the document sent uncoded, and passes the contract', async (coding) => {
    const plain = await get('/api-doc/openapi.json');
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers.vary).toBe('accept-encoding');
    const coded = await get('/api-doc/openapi.json', { 'accept-encoding': coding });
    expect(coded.status).toBe(200);
    expect(coded.headers['content-encoding']).toBe(coding);
    expect(coded.headers.vary).toBe('accept-encoding');
    expect(coded.headers['content-type']).toBe('application/json');
    expect(Number(coded.headers['content-length'])).toBe(coded.bytes.length);
    // 1.4 MB as it is; a tenth of it coded
    expect(coded.bytes.length).toBeLessThan(plain.bytes.length / 8);
    expect(coded.decoded.equals(plain.bytes)).toBe(true);
    const checked = checkResponse('GET', '/api-doc/openapi.json', coded.status, headersOf(coded), coded.decoded.toString('utf8'));
    expect((checked.body as { openapi: string }).openapi).toBe('3.1.0');
  });

  it('a coding refused with q=0 is not sent', async () => {
    const refused = await get('/api-doc/openapi.json', { 'accept-encoding': 'br;q=0, gzip;q=0, *;q=0' });
    expect(refused.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(refused.bytes.toString('utf8'))).toMatchObject({ openapi: '3.1.0' });
  });
});

describe('the API reference assets', () => {
  const dist = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

  it.each(['swagger-ui-bundle.js', 'swagger-ui.css'])(
    '%s in br to a browser, the file itself to a client without Accept-Encoding',
    async (file) => {
      const onDisk = readFileSync(join(dist, file));
      const browser = await get(`/docs/assets/${file}`, { 'accept-encoding': 'gzip, deflate, br, zstd' });
      expect(browser.status).toBe(200);
      expect(browser.headers['content-encoding']).toBe('br');
      expect(browser.headers.vary).toBe('accept-encoding');
      expect(browser.headers['cache-control']).toBe('public, max-age=3600');
      expect(browser.headers['x-content-type-options']).toBe('nosniff');
      expect(browser.bytes.length).toBeLessThan(onDisk.length / 3);
      expect(browser.decoded.equals(onDisk)).toBe(true);
      const plain = await get(`/docs/assets/${file}`);
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(plain.bytes.equals(onDisk)).toBe(true);
    },
  );

  it('HEAD names the coding and the coded length, without the body', async () => {
    const coded = await get('/docs/assets/swagger-ui.css', { 'accept-encoding': 'gzip' });
    expect(Number(coded.headers['content-length'])).toBe(coded.bytes.length);
    const head = await get('/docs/assets/swagger-ui.css', { 'accept-encoding': 'gzip' }, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['content-encoding']).toBe('gzip');
    expect(head.bytes.length).toBe(0);
    expect(Number(head.headers['content-length'])).toBe(coded.bytes.length);
  });

  it('carries a weak ETag of the body, the same in every coding; If-None-Match naming it gets a 304 without the body', async () => {
    const br = await get('/docs/assets/swagger-ui.css', { 'accept-encoding': 'br' });
    const plain = await get('/docs/assets/swagger-ui.css');
    const etag = br.headers.etag!;
    expect(etag).toMatch(/^W\/"[A-Za-z0-9_-]{27}"$/);
    expect(plain.headers.etag).toBe(etag);
    for (const ifNoneMatch of [etag, etag.slice(2), `"other", ${etag}`, '*']) {
      const revalidated = await get('/docs/assets/swagger-ui.css', { 'accept-encoding': 'br', 'if-none-match': ifNoneMatch });
      expect(revalidated.status, ifNoneMatch).toBe(304);
      expect(revalidated.bytes.length).toBe(0);
      expect(revalidated.headers.etag).toBe(etag);
      expect(revalidated.headers.vary).toBe('accept-encoding');
      expect(revalidated.headers['cache-control']).toBe('public, max-age=3600');
    }
    const changed = await get('/docs/assets/swagger-ui.css', { 'accept-encoding': 'br', 'if-none-match': 'W/"another-version"' });
    expect(changed.status).toBe(200);
    expect(changed.decoded.equals(plain.bytes)).toBe(true);
    // another file has another tag
    expect((await get('/docs/assets/swagger-ui-bundle.js')).headers.etag).not.toBe(etag);
  });

  it('a body too small to gain (init.js) goes as it is, without Vary', async () => {
    const res = await get('/docs/assets/init.js', { 'accept-encoding': 'br' });
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers.vary).toBeUndefined();
    expect(res.bytes.toString('utf8')).toContain('SwaggerUIBundle');
  });
});

describe('the metrics and the API replies', () => {
  it('the metrics are gzipped for a scraper that accepts it (Prometheus sends gzip), and never in brotli', async () => {
    const scraped = await get('/metrics', { 'accept-encoding': 'gzip' });
    expect(scraped.status).toBe(200);
    expect(scraped.headers['content-encoding']).toBe('gzip');
    expect(scraped.headers.vary).toBe('accept-encoding');
    expect(scraped.decoded.toString('utf8')).toMatch(/^# HELP svc_/m);
    const brOnly = await get('/metrics', { 'accept-encoding': 'br' });
    expect(brOnly.headers['content-encoding']).toBeUndefined();
    expect(brOnly.bytes.toString('utf8')).toMatch(/^# HELP svc_/m);
  });

  it('the metrics-only listener (SVC_METRICS_BIND) gzips them alike', async () => {
    const listener = await serveMetrics({ config: t.deps.config, sql: t.deps.sql }, '127.0.0.1', 0);
    try {
      const port = (listener.address() as AddressInfo).port;
      const scraped = await get('/metrics', { 'accept-encoding': 'gzip' }, 'GET', port);
      expect(scraped.status).toBe(200);
      expect(scraped.headers['content-encoding']).toBe('gzip');
      expect(scraped.headers.vary).toBe('accept-encoding');
      expect(scraped.decoded.toString('utf8')).toMatch(/^svc_database_up 1$/m);
      const plain = await get('/metrics', {}, 'GET', port);
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(plain.bytes.toString('utf8')).toMatch(/^svc_database_up 1$/m);
    } finally {
      await new Promise<void>((ok) => listener.close(() => ok()));
    }
  });

  it('a JSON reply of the API is sent as it is, whatever the client accepts', async () => {
    const res = await get('/api/v1/collections?limit=100', { authorization: `Bearer ${t.adminToken}`, 'accept-encoding': 'gzip, br' });
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBeUndefined();
    checkResponse('GET', '/api/v1/collections', res.status, headersOf(res), res.bytes.toString('utf8'));
  });
});
