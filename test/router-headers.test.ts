// Which request headers the router reads to validate a request: only those of the operation's
// declared header parameters whose schema could refuse a value. Every operation declares
// X-Request-Id and X-Correlation-ID, whose invalid values are ignored, never refused (their schema
// is any string), and If-Match, Idempotency-Key and X-Svc-Credential-Approval are any string too:
// none of them is read to validate; X-Svc-Restore-Capability (required, at least one character) is.
import { beforeAll, describe, expect, it } from 'vitest';
import { ContractRouter, type RawRequest } from '../src/http/adapter.ts';
import { ApiError } from '../src/domain/errors.ts';

/** Request headers that note every name read. */
class ReadHeaders extends Headers {
  readonly read: string[] = [];
  override get(name: string): string | null {
    this.read.push(name.toLowerCase());
    return super.get(name);
  }
}

function request(method: string, path: string, headers: Record<string, string> = {}): RawRequest & { headers: ReadHeaders } {
  return { method, path, query: {}, headers: new ReadHeaders(headers), body: undefined, contentType: '' };
}

describe('request headers the router validates', () => {
  let router: ContractRouter;
  beforeAll(async () => {
    router = new ContractRouter();
    await router.init();
  });

  const validate = (raw: RawRequest) => router.validate(router.match(raw), raw);

  it('reads none whose schema every string satisfies, whatever they hold', () => {
    const free = { 'x-request-id': '\u00e9 not an id', 'x-correlation-id': '', 'if-match': 'W/"weak"', 'idempotency-key': ' ' };
    for (const raw of [
      request('get', '/healthz', free),
      request('get', '/api/v1/classes/7/8', free),
      request('delete', '/api/v1/classes/7/8', free),
      request('get', '/api/v1/collections', free),
    ]) {
      validate(raw);
      expect(raw.headers.read, `${raw.method} ${raw.path}`).toEqual([]);
    }
  });

  it('reads and validates one that can be refused: the restore capability, required and not empty', () => {
    const path = '/api/v1/restores/3/status';
    const ok = request('get', path, { 'x-svc-restore-capability': 'cap' });
    expect(validate(ok).params).toEqual({ restore_id: 3 });
    expect(ok.headers.read).toEqual(['x-svc-restore-capability']);
    for (const raw of [request('get', path), request('get', path, { 'x-svc-restore-capability': '' })]) {
      expect(() => validate(raw)).toThrow(expect.objectContaining({ constructor: ApiError, kind: 'bad_request' }));
    }
  });
});
