// Authentication and settings: token validation, login (a correct password is dominated by the
// Argon2id verification, expected to be large; a request refused by validation never reaches it)
// and a JSON Merge Patch of the caller's settings document.
import { ADMIN_PASSWORD, type Bench } from './setup.ts';
import { timeCase } from './harness.ts';

const AREA = 'identity';

export async function benchIdentity(b: Bench): Promise<void> {
  const token = b.adminToken;
  await timeCase(
    AREA,
    'validate token (auth + one UPDATE)',
    1,
    async () => void (await b.expect(200, 'GET', '/api/v0/auth/validate', { token })),
  );
  await timeCase(
    AREA,
    'login with the correct password',
    0.04,
    async () => void (await b.expect(200, 'POST', '/api/v0/auth/login', { body: { name: 'admin', password: ADMIN_PASSWORD } })),
    'Argon2id verification + token insert',
  );
  await timeCase(
    AREA,
    'login refused by validation (400)',
    1,
    async () => void (await b.expect(400, 'POST', '/api/v0/auth/login', { body: { name: 'x'.repeat(300), password: 'p' } })),
  );

  await b.expect(200, 'PUT', '/api/v1/iam/me/settings', {
    token,
    body: { ui: { theme: 'dark', columns: ['name', 'env', 'cpu'] }, saved_queries: { big: 'metrics.cpu>=8' }, counter: 0 },
  });
  let n = 0;
  await timeCase(AREA, 'settings merge patch (nested change)', 1, async () => {
    n++;
    await b.expect(200, 'PATCH', '/api/v1/iam/me/settings', {
      token,
      contentType: 'application/merge-patch+json',
      body: { counter: n, ui: { theme: n % 2 ? 'light' : 'dark' }, saved_queries: { [`q${n % 5}`]: `n=${n}` } },
    });
  });
}
