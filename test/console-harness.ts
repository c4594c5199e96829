// Shared set-up for the browser tests of the web console (console/, served at /console): a database of
// its own, the test app on a socket (every /api response checked against openapi.yaml), Debian's Chromium
// driven by playwright-core, an admin SDK client, and small helpers (sign-in, polls, screenshots into
// artifacts/console/, which is not committed).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { createClient, type InventoryClient } from '../clients/typescript/index.ts';
import { checkResponse, decodedText } from './contract-check.ts';
import { ADMIN_PASSWORD, startTestApp, type TestApp } from './helpers.ts';
import { createDatabase, type OwnDatabase } from './db-fixtures.ts';

export const CHROMIUM = '/usr/bin/chromium';
const ROOT = join(import.meta.dirname, '..');
export const ARTIFACTS = join(ROOT, 'artifacts', 'console');

/** Debian's Chromium: installed here when missing and running as root (CI's .ci/run installs it first). */
function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  if (process.getuid?.() !== 0)
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium) to run the console tests`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  try {
    execFileSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'chromium'], { env, stdio: 'inherit' });
  } catch {
    execFileSync('apt-get', ['update', '-q'], { env, stdio: 'inherit' });
    execFileSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'chromium'], { env, stdio: 'inherit' });
  }
}

export interface ConsoleSession {
  t: TestApp;
  baseUrl: string;
  browser: Browser;
  page: Page;
  /** An SDK client signed in as the bootstrap administrator. */
  sdk: InventoryClient;
  /** Contract violations of /api responses seen by the server. */
  violations: string[];
  /** Page errors and console errors seen by the browser. */
  pageErrors: string[];
  signInAs(name: string, password: string): Promise<void>;
  /** A screenshot of the whole page into artifacts/console/<name>.png. */
  shot(name: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts the console against a fresh database named after `dbPrefix`. The console loads the whole collection
 * tree, and the shared test database holds thousands of collections by the time a browser test runs.
 */
export async function startConsole(dbPrefix: string): Promise<ConsoleSession> {
  ensureChromium();
  // `make test` builds the console first (make console); a direct vitest run builds it when missing.
  if (!existsSync(join(ROOT, 'console', 'dist', 'index.html')))
    execFileSync('npx', ['vite', 'build', 'console', '--logLevel', 'warn'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(ARTIFACTS, { recursive: true });

  const violations: string[] = [];
  const pageErrors: string[] = [];
  let db: OwnDatabase | undefined;
  let t: TestApp | undefined;
  let closeServer: (() => Promise<void>) | undefined;
  let browser: Browser | undefined;
  const close = async () => {
    await browser?.close();
    await closeServer?.();
    await t?.close();
    await db?.drop();
  };
  try {
    db = await createDatabase(dbPrefix, { migrate: true });
    const app = await startTestApp({ SVC_DATABASE_URL: db.url });
    t = app;
    const server = serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: async (req: Request) => {
        const res = await app.app.fetch(req);
        const path = new URL(req.url).pathname;
        if (path.startsWith('/api/')) {
          try {
            checkResponse(req.method, path, res.status, res.headers, await decodedText(res.clone()));
          } catch (e) {
            violations.push(String(e));
          }
        }
        return res;
      },
    });
    await new Promise<void>((ok) => server.once('listening', () => ok()));
    closeServer = () => new Promise<void>((ok) => server.close(() => ok()));
    const baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

    const sdk = createClient({ baseUrl });
    await sdk.login('admin', ADMIN_PASSWORD);

    const b = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    browser = b;
    const page = await b.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('console', (m) => {
      // a failed load names its resource in the location: kept, so a failure says which request it was
      if (m.type() === 'error') pageErrors.push(`${m.text()} [${m.location().url}]`);
    });

    const signInAs = async (name: string, password: string) => {
      await page.goto(`${baseUrl}/console/`);
      await poll(() => page.getByLabel('Identity scope').locator('option').allTextContents()).toContain('local');
      await page.getByLabel('Name').fill(name);
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Collections' }).waitFor();
    };
    const shot = async (name: string) => {
      await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
    };
    return { t: app, baseUrl, browser: b, page, sdk, violations, pageErrors, signInAs, shot, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** expect.poll with room for a loaded machine (vitest's default waits only 1 s); a bound, not a timed assertion. */
export function poll<T>(fn: () => T | Promise<T>, options: { timeout: number } = { timeout: 10_000 }) {
  return expect.poll(fn, options);
}

/** Browser console lines for answers a flow provokes on purpose (shown as failed loads), by status. */
export function unexpectedPageErrors(pageErrors: string[], statuses: number[]): string[] {
  const expected = new RegExp(`^Failed to load resource: the server responded with a status of (${statuses.join('|')}) `);
  return pageErrors.filter((e) => !expected.test(e));
}
