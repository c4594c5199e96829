// The web console (console/, served at /console) in a real browser: Playwright drives Debian's
// Chromium against the test app on a socket. Setup goes through the shipped SDK; the browser signs
// in, walks collections → class → a cursor-paged, sorted and filtered objects table → an object,
// sees a schema error inline and a stale edit's conflict. Screenshots go to artifacts/console/
// (not committed). API responses are checked against openapi.yaml; /console is not part of it.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type InventoryClient } from '../clients/typescript/index.ts';
import { checkResponse } from './contract-check.ts';
import { ADMIN_PASSWORD, startTestApp, uniq, type TestApp } from './helpers.ts';

const CHROMIUM = '/usr/bin/chromium';
const ROOT = join(import.meta.dirname, '..');
const ARTIFACTS = join(ROOT, 'artifacts', 'console');

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

let t: TestApp;
let baseUrl: string;
let closeServer: () => Promise<void>;
const violations: string[] = [];
let browser: Browser;
let page: Page;
let sdk: InventoryClient;
const pageErrors: string[] = [];
let collectionName: string;
let className: string;
let classId: number;

beforeAll(async () => {
  ensureChromium();
  // `make test` builds the console first (make console); a direct vitest run builds it when missing.
  if (!existsSync(join(ROOT, 'console', 'dist', 'index.html')))
    execFileSync('npx', ['vite', 'build', 'console', '--logLevel', 'warn'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(ARTIFACTS, { recursive: true });

  t = await startTestApp();
  const server = serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: async (req: Request) => {
      const res = await t.app.fetch(req);
      const path = new URL(req.url).pathname;
      if (path.startsWith('/api/')) {
        try {
          checkResponse(req.method, path, res.status, res.headers, await res.clone().text());
        } catch (e) {
          violations.push(String(e));
        }
      }
      return res;
    },
  });
  await new Promise<void>((ok) => server.once('listening', () => ok()));
  baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  closeServer = () => new Promise<void>((ok) => server.close(() => ok()));

  sdk = createClient({ baseUrl });
  await sdk.login('admin', ADMIN_PASSWORD);
  collectionName = uniq('console-col');
  className = uniq('Server');
  const col = await sdk.call('createCollection', { body: { name: collectionName, description: 'console test' } });
  const cls = await sdk.call('createClass', {
    body: {
      name: className,
      collection_id: col.id,
      validate_schema: true,
      json_schema: {
        type: 'object',
        properties: { rack: { type: 'string' }, units: { type: 'integer', minimum: 1 } },
        required: ['rack'],
      },
    },
  });
  classId = cls.id;
  for (let i = 1; i <= 30; i++) {
    const n = String(i).padStart(3, '0');
    await sdk.call('createObject', {
      params: { path: { class_id: classId } },
      body: { name: `host-${n}`, description: i % 2 ? 'odd' : 'even', json_data: { rack: `r${i % 3}`, units: 1 } },
    });
  }

  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(m.text());
  });
});

afterAll(async () => {
  await browser?.close();
  await closeServer?.();
  await t?.close();
});

const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

describe('the web console', () => {
  it('is served at /console with a self-only CSP, typed assets and an SPA fallback', async () => {
    const index = await fetch(`${baseUrl}/console/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = index.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/unsafe-inline|https?:/);
    const html = await index.text();
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const js = await fetch(`${baseUrl}${script}`);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('x-content-type-options')).toBe('nosniff');
    const deep = await fetch(`${baseUrl}/console/classes/${classId}/objects/1`);
    expect(deep.status).toBe(200);
    expect(await deep.text()).toBe(html);
    expect((await fetch(`${baseUrl}/console/assets/missing.js`)).status).toBe(404);
    expect((await fetch(`${baseUrl}/console/..%2f..%2fpackage.json`)).headers.get('content-type')).toBe('text/html; charset=utf-8');
    const bare = await fetch(`${baseUrl}/console`, { redirect: 'manual' });
    expect(bare.status).toBe(301);
    expect(bare.headers.get('location')).toBe('/console/');
  });

  it('signs in with name, password and identity scope; the token is kept in sessionStorage only', async () => {
    await page.goto(`${baseUrl}/console/`);
    await expect.poll(() => page.getByLabel('Identity scope').locator('option').allTextContents()).toContain('local');
    await page.getByLabel('Name').fill('admin');
    await page.getByLabel('Password').fill('wrong-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    await shot('01-sign-in-refused');
    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Collections' }).waitFor();
    const stored = await page.evaluate(() => ({
      session: Object.keys(sessionStorage),
      local: Object.keys(localStorage),
      cookie: document.cookie,
    }));
    expect(stored.session).toEqual(['inventory-console-token']);
    expect(stored.local).toEqual([]);
    expect(stored.cookie).toBe('');
  });

  it('shows the collections tree with its classes and opens a class as a cursor-paged table', async () => {
    const tree = page.getByRole('navigation', { name: 'Collections and classes' });
    await tree.getByText(collectionName).waitFor();
    await shot('02-collections');
    await tree.getByRole('link', { name: className }).click();
    await page.getByRole('heading', { name: className }).waitFor();
    const rows = page.locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(25);
    await expect.poll(() => page.locator('#objects-status').textContent()).toBe('Objects 1–25 of 30');
    await shot('03-objects-page-1');
    await page.getByRole('button', { name: 'Next page' }).click();
    await expect.poll(() => page.locator('#objects-status').textContent()).toBe('Objects 26–30 of 30');
    expect(await rows.count()).toBe(5);
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await expect.poll(() => page.locator('#objects-status').textContent()).toBe('Objects 1–25 of 30');
  });

  it('sorts by a column and filters through the list query language', async () => {
    await page.getByRole('button', { name: 'Name' }).click();
    await page.getByRole('button', { name: 'Name' }).click(); // second click: descending
    await expect.poll(() => page.locator('tbody tr td:nth-child(2)').first().textContent()).toBe('host-030');
    expect(await page.getByRole('columnheader', { name: /Name/ }).getAttribute('aria-sort')).toBe('descending');
    // keyboard only: type the filter value and press Enter
    await page.getByLabel('Filter value').fill('host-01');
    await page.getByLabel('Filter value').press('Enter');
    await expect.poll(() => page.locator('#objects-status').textContent()).toBe('Objects 1–10 of 10');
    expect(await page.locator('tbody tr td:nth-child(2)').allTextContents()).toEqual(
      Array.from({ length: 10 }, (_, i) => `host-0${19 - i}`),
    );
    await page.getByLabel('Field').selectOption('description');
    await page.getByLabel('Match').selectOption('equals');
    await page.getByLabel('Filter value').fill('even');
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await expect.poll(() => page.locator('#objects-status').textContent()).toBe('Objects 1–15 of 15');
    await shot('04-objects-filtered');
  });

  it('shows an object with its schema; invalid data gets the schema error inline', async () => {
    await page.getByRole('link', { name: 'host-030' }).click();
    await page.getByRole('heading', { name: 'host-030' }).waitFor();
    expect(await page.getByRole('complementary', { name: 'Class schema' }).textContent()).toContain('"required"');
    const data = page.getByLabel('JSON data');
    expect(JSON.parse(await data.inputValue())).toEqual({ rack: 'r0', units: 1 });
    await data.fill('{"rack": 5, "units": 1}');
    await page.getByRole('button', { name: 'Save' }).click();
    const problem = page.locator('#obj-problem');
    await problem.waitFor();
    expect(await problem.getByRole('list', { name: 'Validation errors' }).textContent()).toContain('/rack');
    expect(await data.getAttribute('aria-invalid')).toBe('true');
    await shot('05-object-schema-error');
    await data.fill('{"rack": "r9", "units": 2');
    await page.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => problem.textContent()).toContain('not valid JSON');
    await data.fill('{"rack": "r9", "units": 2}');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
  });

  it('an edit with a stale revision shows the conflict and does not overwrite', async () => {
    const objectId = Number(/objects\/(\d+)$/.exec(page.url())![1]);
    // someone else changes the object after the page loaded it
    await sdk.call('updateObject', {
      params: { path: { class_id: classId, object_id: objectId } },
      body: { json_data: { rack: 'elsewhere', units: 4 } },
    });
    await page.getByLabel('JSON data').fill('{"rack": "mine", "units": 3}');
    await page.getByRole('button', { name: 'Save' }).click();
    const problem = page.locator('#obj-problem.conflict');
    await problem.waitFor();
    expect(await problem.textContent()).toContain('changed by someone else');
    await shot('06-object-conflict');
    const current = await sdk.call('getObject', { params: { path: { class_id: classId, object_id: objectId } } });
    expect(current.json_data).toEqual({ rack: 'elsewhere', units: 4 });
    await page.getByRole('button', { name: 'Reload latest version' }).click();
    await expect
      .poll(async () => JSON.parse(await page.getByLabel('JSON data').inputValue()) as unknown)
      .toEqual({ rack: 'elsewhere', units: 4 });
  });

  it('is usable on a narrow window, and a reload of a deep link keeps the session', async () => {
    await page.setViewportSize({ width: 390, height: 800 });
    await page.reload();
    await page.getByRole('heading', { name: 'host-030' }).waitFor();
    await page.getByRole('button', { name: 'Save' }).scrollIntoViewIfNeeded();
    expect(await page.getByRole('button', { name: 'Save' }).isVisible()).toBe(true);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await shot('07-object-narrow');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to the inventory' }).waitFor();
    expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual([]);
  });

  it('raised no page errors or CSP violations, and every API response matched the contract', () => {
    // the browser logs the answers the flow provokes (wrong password, schema error, stale edit) as failed loads
    const expected = /^Failed to load resource: the server responded with a status of (401|400|412) /;
    expect(pageErrors.filter((e) => !expected.test(e))).toEqual([]);
    expect(violations).toEqual([]);
  });
});
